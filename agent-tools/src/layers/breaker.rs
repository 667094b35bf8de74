//! `CircuitBreaker`: after N consecutive failures the tool is open for a cool-down
//! and calls fail fast with `circuit open`; then one trial call goes through
//! (half-open): success closes the circuit, failure opens it again. Every
//! transition is reported (a `CircuitChanged` event). Invalid arguments are the
//! model's mistake, not the tool's, and do not count.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_core::{CircuitState, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
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

/// Guards the inner tool with a circuit breaker shared by all its calls.
pub struct CircuitBreaker {
    inner: Arc<dyn Tool>,
    policy: BreakerPolicy,
    circuit: Mutex<Circuit>,
}

impl CircuitBreaker {
    /// Wraps `inner`, closed.
    pub fn new(inner: Arc<dyn Tool>, policy: BreakerPolicy) -> Self {
        Self {
            inner,
            policy,
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
    fn set(&self, circuit: &mut Circuit, next: Circuit, ctx: &ToolContext) {
        let changed = circuit.state() != next.state();
        *circuit = next;
        if changed {
            ctx.observer
                .circuit_changed(&self.inner.spec().name, next.state());
        }
    }

    /// Whether a call may go through now; fails fast while open.
    fn admit(&self, ctx: &ToolContext) -> Result<(), ToolError> {
        let mut circuit = self
            .circuit
            .lock()
            .map_err(|_| ToolError::Internal("circuit breaker lock poisoned".into()))?;
        match *circuit {
            Circuit::Closed { .. } => Ok(()),
            Circuit::Open { until } if Instant::now() < until => Err(self.open_error(until)),
            Circuit::Open { .. } => {
                self.set(
                    &mut circuit,
                    Circuit::HalfOpen {
                        trial_running: true,
                    },
                    ctx,
                );
                Ok(())
            }
            Circuit::HalfOpen {
                trial_running: true,
            } => Err(ToolError::failed(format!(
                "circuit open: a trial call of `{}` is running; try again shortly",
                self.inner.spec().name
            ))),
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

    fn open_error(&self, until: Instant) -> ToolError {
        ToolError::failed(format!(
            "circuit open: `{}` failed {} times in a row; it is tried again in {:.1}s",
            self.inner.spec().name,
            self.policy.failure_threshold,
            until
                .saturating_duration_since(Instant::now())
                .as_secs_f64()
        ))
    }

    fn settle(&self, failed: bool, ctx: &ToolContext) {
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
        self.set(&mut circuit, next, ctx);
    }
}

#[async_trait]
impl Tool for CircuitBreaker {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.admit(ctx)?;
        let outcome = self.inner.call(arguments, ctx).await;
        match &outcome {
            Ok(_) | Err(ToolError::InvalidArguments(_)) => self.settle(false, ctx),
            Err(ToolError::Failed { .. } | ToolError::Internal(_)) => self.settle(true, ctx),
        }
        outcome
    }
}
