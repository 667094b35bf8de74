//! `CircuitBreaker`: after N consecutive failures the service is open for a
//! cool-down and calls fail fast with `circuit open`; then one trial call goes
//! through (half-open): success closes the circuit, failure opens it again. Every
//! transition is reported (a `circuit_changed` event for tools). A tool's invalid
//! arguments and a model's invalid output are the model's mistakes, not the
//! service's, and do not count.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::layer::{CircuitState, Layer, LayerObserver};
use agent_core::model::{
    Model, ModelContext, ModelError, ModelIdentity, ModelRequest, ModelResponse,
};
use agent_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use agent_core::types::ToolSpec;
use async_trait::async_trait;
use serde_json::Value;

/// When a breaker opens and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Consecutive failures that open the circuit (default 5).
    pub failure_threshold: u32,
    /// How long the circuit stays open (default 30 s).
    pub cool_down: Duration,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        Self {
            failure_threshold: 5,
            cool_down: Duration::from_secs(30),
        }
    }
}

/// The layer: a breaker with `policy` around each service it wraps (each gets its
/// own circuit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CircuitBreaker {
    policy: BreakerPolicy,
    label: Option<String>,
}

impl CircuitBreaker {
    /// A breaker with `policy`.
    pub fn new(policy: BreakerPolicy) -> Self {
        Self {
            policy,
            label: None,
        }
    }

    /// Names the wrapped model in messages and reports (a tool is named by its
    /// spec; a model is `model` unless named).
    pub fn named(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }
}

impl Layer<dyn Tool> for CircuitBreaker {
    fn layer(&self, inner: Arc<dyn Tool>) -> Arc<dyn Tool> {
        let label = self
            .label
            .clone()
            .unwrap_or_else(|| inner.spec().name.clone());
        Arc::new(BreakerService::new(inner, self.policy, label))
    }
}

impl Layer<dyn Model> for CircuitBreaker {
    fn layer(&self, inner: Arc<dyn Model>) -> Arc<dyn Model> {
        let label = self.label.clone().unwrap_or_else(|| "model".into());
        Arc::new(BreakerService::new(inner, self.policy, label))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Circuit {
    Closed { failures: u32 },
    Open { until: Instant },
    HalfOpen { trial_running: bool },
}

impl Circuit {
    fn state(self) -> CircuitState {
        match self {
            Self::Closed { .. } => CircuitState::Closed,
            Self::Open { .. } => CircuitState::Open,
            Self::HalfOpen { .. } => CircuitState::HalfOpen,
        }
    }
}

/// A tool or model behind a circuit breaker shared by all its calls.
pub struct BreakerService<S: ?Sized> {
    inner: Arc<S>,
    policy: BreakerPolicy,
    label: String,
    circuit: Mutex<Circuit>,
}

impl<S: ?Sized> BreakerService<S> {
    /// Wraps `inner`, closed; `label` names it in messages and reports.
    pub fn new(inner: Arc<S>, policy: BreakerPolicy, label: impl Into<String>) -> Self {
        Self {
            inner,
            policy,
            label: label.into(),
            circuit: Mutex::new(Circuit::Closed { failures: 0 }),
        }
    }

    /// The current state.
    pub fn state(&self) -> CircuitState {
        self.circuit
            .lock()
            .map_or(CircuitState::Closed, |circuit| circuit.state())
    }

    /// Moves to `next`, reporting a change of state.
    fn set(&self, circuit: &mut Circuit, next: Circuit, observer: &dyn LayerObserver) {
        let changed = circuit.state() != next.state();
        *circuit = next;
        if changed {
            observer.circuit_changed(&self.label, next.state());
        }
    }

    /// Whether a call may go through now; fails fast, with the reason, while open.
    fn admit(&self, observer: &dyn LayerObserver) -> Result<(), String> {
        let mut circuit = self
            .circuit
            .lock()
            .map_err(|_| "circuit breaker lock poisoned".to_owned())?;
        match *circuit {
            Circuit::Closed { .. } => Ok(()),
            Circuit::Open { until } if Instant::now() < until => Err(format!(
                "circuit open: `{}` failed {} times in a row; it is tried again in {:.1}s",
                self.label,
                self.policy.failure_threshold,
                until
                    .saturating_duration_since(Instant::now())
                    .as_secs_f64()
            )),
            Circuit::Open { .. } => {
                self.set(
                    &mut circuit,
                    Circuit::HalfOpen {
                        trial_running: true,
                    },
                    observer,
                );
                Ok(())
            }
            Circuit::HalfOpen {
                trial_running: true,
            } => Err(format!(
                "circuit open: a trial call of `{}` is running; try again shortly",
                self.label
            )),
            Circuit::HalfOpen {
                trial_running: false,
            } => {
                *circuit = Circuit::HalfOpen {
                    trial_running: true,
                };
                Ok(())
            }
        }
    }

    /// Counts the outcome of an admitted call.
    fn settle(&self, failed: bool, observer: &dyn LayerObserver) {
        let Ok(mut circuit) = self.circuit.lock() else {
            return;
        };
        let open = Circuit::Open {
            until: Instant::now() + self.policy.cool_down,
        };
        let next = match (*circuit, failed) {
            (_, false) => Circuit::Closed { failures: 0 },
            (Circuit::Closed { failures }, true)
                if failures + 1 >= self.policy.failure_threshold =>
            {
                open
            }
            (Circuit::Closed { failures }, true) => Circuit::Closed {
                failures: failures + 1,
            },
            (Circuit::HalfOpen { .. } | Circuit::Open { .. }, true) => open,
        };
        self.set(&mut circuit, next, observer);
    }
}

#[async_trait]
impl Tool for BreakerService<dyn Tool> {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let observer = ctx.observer.as_ref();
        self.admit(observer).map_err(ToolError::failed)?;
        let outcome = self.inner.call(arguments, ctx).await;
        let failed = matches!(
            &outcome,
            Err(ToolError::Failed { .. } | ToolError::Internal(_))
        );
        self.settle(failed, observer);
        outcome
    }
}

#[async_trait]
impl Model for BreakerService<dyn Model> {
    fn identity(&self) -> ModelIdentity {
        self.inner.identity()
    }

    fn token_counter(&self) -> Option<std::sync::Arc<dyn agent_core::context::TokenCounter>> {
        self.inner.token_counter()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        let observer = ctx.observer.as_ref();
        self.admit(observer)
            .map_err(|message| ModelError::Fatal { message })?;
        let outcome = self.inner.complete(request, ctx).await;
        let failed = matches!(
            &outcome,
            Err(ModelError::Transient { .. } | ModelError::Fatal { .. })
        );
        self.settle(failed, observer);
        outcome
    }
}
