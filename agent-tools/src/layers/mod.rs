//! Resilience layers for tools, composable in the tower style: each wraps a tool
//! and is itself a tool. [`Timeout`] bounds each attempt, [`Retry`] retries
//! retryable failures of idempotent tools with backoff and jitter, and
//! [`CircuitBreaker`] fails fast after repeated failures. [`ToolStack`] puts them
//! together in the usual order: breaker ∘ retry ∘ timeout ∘ tool.

mod breaker;
mod retry;
mod timeout;

use std::sync::Arc;
use std::time::Duration;

use agent_core::Tool;

pub use breaker::{BreakerPolicy, CircuitBreaker};
pub use retry::{Retry, ToolRetryPolicy};
pub use timeout::Timeout;

/// Builds a layered tool.
pub struct ToolStack {
    tool: Arc<dyn Tool>,
    timeout: Option<Duration>,
    retry: Option<ToolRetryPolicy>,
    breaker: Option<BreakerPolicy>,
}

impl ToolStack {
    /// Starts from `tool`.
    pub fn new(tool: Arc<dyn Tool>) -> Self {
        Self {
            tool,
            timeout: None,
            retry: None,
            breaker: None,
        }
    }

    /// Bounds every attempt.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// Retries retryable failures (only if the tool is idempotent).
    pub fn retry(mut self, policy: ToolRetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// Fails fast after repeated failures.
    pub fn circuit_breaker(mut self, policy: BreakerPolicy) -> Self {
        self.breaker = Some(policy);
        self
    }

    /// The layered tool.
    pub fn build(self) -> Arc<dyn Tool> {
        let mut tool = self.tool;
        if let Some(limit) = self.timeout {
            tool = Arc::new(Timeout::new(tool, limit));
        }
        if let Some(policy) = self.retry {
            tool = Arc::new(Retry::new(tool, policy));
        }
        if let Some(policy) = self.breaker {
            tool = Arc::new(CircuitBreaker::new(tool, policy));
        }
        tool
    }
}
