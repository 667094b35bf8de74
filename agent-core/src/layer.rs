//! Layers: cross-cutting behaviour (timeouts, retries, circuit breakers, a user's
//! own) wrapped around a tool or a model, in the tower style. A [`Layer`] turns
//! one shared service into another of the same kind; a [`Stack`] applies layers in
//! the order they were written, the first one outermost. Layers report what they
//! do through a [`LayerObserver`], which the engine turns into events.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Wraps a service (`dyn Tool`, `dyn Model`) in another of the same kind.
pub trait Layer<S: ?Sized>: Send + Sync {
    /// The wrapped service.
    fn layer(&self, inner: Arc<S>) -> Arc<S>;
}

/// A closure from service to service is a layer.
impl<S: ?Sized, F> Layer<S> for F
where
    F: Fn(Arc<S>) -> Arc<S> + Send + Sync,
{
    fn layer(&self, inner: Arc<S>) -> Arc<S> {
        self(inner)
    }
}

/// Layers in the order they were added: the first added is the outermost, the
/// one a call meets first (tower's `ServiceBuilder` order).
pub struct Stack<S: ?Sized> {
    layers: Vec<Arc<dyn Layer<S>>>,
}

impl<S: ?Sized> Default for Stack<S> {
    fn default() -> Self {
        Self { layers: Vec::new() }
    }
}

impl<S: ?Sized> Clone for Stack<S> {
    fn clone(&self) -> Self {
        Self {
            layers: self.layers.clone(),
        }
    }
}

impl<S: ?Sized> std::fmt::Debug for Stack<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("layers", &self.layers.len())
            .finish()
    }
}

impl<S: ?Sized + 'static> Stack<S> {
    /// A stack without layers; it wraps a service in nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `layer` inside the layers added before it.
    pub fn layer(mut self, layer: impl Layer<S> + 'static) -> Self {
        self.layers.push(Arc::new(layer));
        self
    }

    /// Adds a shared layer inside the layers added before it.
    pub fn layer_shared(mut self, layer: Arc<dyn Layer<S>>) -> Self {
        self.layers.push(layer);
        self
    }

    /// Whether the stack has no layers.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// `inner` wrapped in every layer, the first added outermost.
    pub fn wrap(&self, inner: Arc<S>) -> Arc<S> {
        self.layers
            .iter()
            .rev()
            .fold(inner, |service, layer| layer.layer(service))
    }
}

/// The state of a circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CircuitState {
    /// Calls go through.
    Closed,
    /// Calls fail fast until the cool-down ends.
    Open,
    /// One trial call goes through.
    HalfOpen,
}

/// One retry a layer is about to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryNotice {
    /// The attempt that failed, 1 for the first.
    pub attempt: u32,
    /// What failed, never containing a key.
    pub error: String,
    /// How long the layer waits before trying again.
    pub delay: Duration,
}

/// Receives what layers do while serving one call; the engine records each
/// report as an event (`model_retried`, `action_attempt_failed`,
/// `circuit_changed`).
pub trait LayerObserver: Send + Sync {
    /// A layer is about to wait and try again.
    fn retrying(&self, notice: RetryNotice);
    /// A circuit breaker around `target` (a tool's name) changed state.
    fn circuit_changed(&self, target: &str, state: CircuitState);
    /// A fallback layer gives the call to model `to` because `from` failed for
    /// good (`reason`). Ignored unless an observer records it.
    fn fell_back(&self, from: &str, to: &str, reason: &str) {
        let _ = (from, to, reason);
    }
}

/// An observer that ignores every report.
#[derive(Debug, Clone, Copy, Default)]
pub struct IgnoreReports;

impl LayerObserver for IgnoreReports {
    fn retrying(&self, _notice: RetryNotice) {}
    fn circuit_changed(&self, _target: &str, _state: CircuitState) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    trait Named: Send + Sync {
        fn name(&self) -> String;
    }

    struct Base;

    impl Named for Base {
        fn name(&self) -> String {
            "base".into()
        }
    }

    struct Around(&'static str, Arc<dyn Named>);

    impl Named for Around {
        fn name(&self) -> String {
            format!("{}({})", self.0, self.1.name())
        }
    }

    fn around(label: &'static str) -> impl Fn(Arc<dyn Named>) -> Arc<dyn Named> + Send + Sync {
        move |inner| Arc::new(Around(label, inner)) as Arc<dyn Named>
    }

    #[test]
    fn the_first_layer_written_is_the_outermost() {
        let stack = Stack::<dyn Named>::new()
            .layer(around("outer"))
            .layer(around("inner"));
        assert_eq!(stack.wrap(Arc::new(Base)).name(), "outer(inner(base))");
        assert_eq!(
            Stack::<dyn Named>::new().wrap(Arc::new(Base)).name(),
            "base"
        );
    }
}
