//! Resilience layers for the agent runtime, one shape for tools and models.
//!
//! Each layer is a [`Layer`](agent_core::layer::Layer) for both `dyn Tool` and
//! `dyn Model`, so the same value wraps either, and a
//! [`Stack`](agent_core::layer::Stack) composes them with a user's own layers in the
//! order they are written (the first outermost):
//!
//! - [`Timeout`] bounds each attempt;
//! - [`Retry`] retries what is worth retrying — a tool's retryable failures (only
//!   for idempotent tools), a model's transient errors (honouring `Retry-After`) —
//!   with exponential backoff and jitter, reporting each retry;
//! - [`FallbackModel`] (models only) asks the next model when one fails for good;
//! - [`CircuitBreaker`] fails fast after repeated failures, then lets one trial
//!   through, reporting each change of state.
//!
//! The usual order for a tool is breaker, then retry, then timeout:
//!
//! ```
//! use std::time::Duration;
//! use agent_core::layer::Stack;
//! use agent_core::tool::Tool;
//! use agent_layers::{BreakerPolicy, CircuitBreaker, Retry, RetryPolicy, Timeout};
//!
//! let stack = Stack::<dyn Tool>::new()
//!     .layer(CircuitBreaker::new(BreakerPolicy::default()))
//!     .layer(Retry::new(RetryPolicy::for_tools()))
//!     .layer(Timeout::new(Duration::from_secs(30)));
//! # let _ = stack;
//! ```

mod breaker;
mod fallback;
mod retry;
mod timeout;

use std::sync::Arc;

pub use breaker::{BreakerPolicy, BreakerService, CircuitBreaker};
pub use fallback::FallbackModel;
pub use retry::{Retry, RetryPolicy, RetryService};
pub use timeout::{Timeout, TimeoutService};

/// A tool or model wrapped by the layer `C`, which it keeps as its settings.
pub struct Layered<S: ?Sized, C> {
    inner: Arc<S>,
    layer: C,
}

impl<S: ?Sized, C> Layered<S, C> {
    /// `inner` behind `layer`.
    pub fn new(inner: Arc<S>, layer: C) -> Self {
        Self { inner, layer }
    }
}

/// Makes a layer type that [`Layered`] serves a layer of tools and of models.
macro_rules! wraps_tools_and_models {
    ($layer:ty) => {
        impl agent_core::layer::Layer<dyn agent_core::tool::Tool> for $layer {
            fn layer(
                &self,
                inner: std::sync::Arc<dyn agent_core::tool::Tool>,
            ) -> std::sync::Arc<dyn agent_core::tool::Tool> {
                std::sync::Arc::new($crate::Layered::new(inner, self.clone()))
            }
        }

        impl agent_core::layer::Layer<dyn agent_core::model::Model> for $layer {
            fn layer(
                &self,
                inner: std::sync::Arc<dyn agent_core::model::Model>,
            ) -> std::sync::Arc<dyn agent_core::model::Model> {
                std::sync::Arc::new($crate::Layered::new(inner, self.clone()))
            }
        }
    };
}

pub(crate) use wraps_tools_and_models;
