//! `Retry`: retries failures marked retryable, only for idempotent tools, with
//! exponential backoff and jitter. Each retry is reported to the call's observer
//! (the engine records an `ActionAttemptFailed` event, a `retry` trace line).

use std::sync::Arc;
use std::time::Duration;

use agent_core::{AttemptFailure, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};
use serde_json::Value;

/// How a tool is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolRetryPolicy {
    /// Retries after the first attempt (default 3).
    pub max_retries: usize,
    /// First delay (default 200 ms), doubling each retry, with jitter.
    pub min_delay: Duration,
    /// Longest delay (default 10 s).
    pub max_delay: Duration,
}

impl Default for ToolRetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            min_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(10),
        }
    }
}

/// Retries the inner tool.
pub struct Retry {
    inner: Arc<dyn Tool>,
    policy: ToolRetryPolicy,
}

impl Retry {
    /// Wraps `inner`. A tool that is not idempotent is never retried.
    pub fn new(inner: Arc<dyn Tool>, policy: ToolRetryPolicy) -> Self {
        Self { inner, policy }
    }
}

#[async_trait]
impl Tool for Retry {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if !self.inner.spec().idempotent {
            return self.inner.call(arguments, ctx).await;
        }
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.policy.min_delay)
            .with_max_delay(self.policy.max_delay)
            .with_max_times(self.policy.max_retries)
            .with_jitter();
        let attempt = std::sync::atomic::AtomicU32::new(1);
        (|| {
            let mut attempt_ctx = ctx.clone();
            attempt_ctx.attempt = attempt.load(std::sync::atomic::Ordering::Relaxed);
            let arguments = arguments.clone();
            async move { self.inner.call(arguments, &attempt_ctx).await }
        })
        .retry(backoff)
        .when(|err| {
            matches!(
                err,
                ToolError::Failed {
                    retryable: true,
                    ..
                }
            )
        })
        .notify(|err, delay| {
            let failed = attempt.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            ctx.observer.attempt_failed(AttemptFailure {
                attempt: failed,
                error: err.to_string(),
                retryable: true,
                delay,
            });
        })
        .await
    }
}
