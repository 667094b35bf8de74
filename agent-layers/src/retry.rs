//! `Retry`: failures worth retrying are retried with exponential backoff and
//! jitter, each retry reported to the call's observer (the engine records a
//! `model_retried` or `action_attempt_failed` event: a `retry` trace line).
//!
//! - A tool is retried only if it is idempotent, and only on failures it marks
//!   retryable.
//! - A model is retried on transient errors (429, 5xx, timeouts, connection
//!   errors, bodies cut short), waiting what `Retry-After` asks up to a cap; when
//!   the retries run out the error becomes fatal (`provider_error`).

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agent_core::layer::{LayerObserver, RetryNotice};
use agent_core::model::{
    Model, ModelContext, ModelError, ModelIdentity, ModelRequest, ModelResponse,
};
use agent_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use agent_core::types::ToolSpec;
use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};
use serde_json::Value;

use crate::{Layered, wraps_tools_and_models};

/// How often and how patiently to retry; one policy type for tools and models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: usize,
    /// First backoff delay; it doubles each retry, with jitter.
    pub min_delay: Duration,
    /// Longest backoff delay.
    pub max_delay: Duration,
    /// Longest wait a `Retry-After` may ask for (models only).
    pub max_retry_after: Duration,
}

impl RetryPolicy {
    /// Tools: 3 retries, 200 ms doubling up to 10 s.
    pub const fn for_tools() -> Self {
        Self {
            max_retries: 3,
            min_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(10),
            max_retry_after: Duration::from_secs(30),
        }
    }

    /// Model providers: 3 retries, 500 ms doubling up to 30 s, `Retry-After`
    /// honoured up to 30 s.
    pub const fn for_models() -> Self {
        Self {
            max_retries: 3,
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(30),
        }
    }
}

impl Default for RetryPolicy {
    /// [`RetryPolicy::for_models`].
    fn default() -> Self {
        Self::for_models()
    }
}

/// The layer: retries with `policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    policy: RetryPolicy,
}

impl Retry {
    /// Retries with `policy`.
    pub fn new(policy: RetryPolicy) -> Self {
        Self { policy }
    }
}

/// A tool or model whose failures worth retrying are retried.
pub type RetryService<S> = Layered<S, Retry>;

wraps_tools_and_models!(Retry);

/// Runs `attempt(n)` for n = 1, 2, … while `retry_after` says the error is worth
/// another try (`Some`, with the wait the error asks for, if any), reporting
/// each retry to `observer`.
async fn retrying<T, E, F, Fut>(
    policy: &RetryPolicy,
    observer: &dyn LayerObserver,
    attempt: F,
    retry_after: impl Fn(&E) -> Option<Option<Duration>>,
) -> Result<T, E>
where
    F: Fn(u32) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let backoff = ExponentialBuilder::default()
        .with_min_delay(policy.min_delay)
        .with_max_delay(policy.max_delay)
        .with_max_times(policy.max_retries)
        .with_jitter();
    let number = AtomicU32::new(1);
    let cap = policy.max_retry_after;
    (|| attempt(number.load(Ordering::Relaxed)))
        .retry(backoff)
        .when(|err| retry_after(err).is_some())
        .adjust(|err, delay| match (retry_after(err), delay) {
            (Some(Some(after)), Some(_)) => Some(after.min(cap)),
            (_, delay) => delay,
        })
        .notify(|err, delay| {
            observer.retrying(RetryNotice {
                attempt: number.fetch_add(1, Ordering::Relaxed),
                error: err.to_string(),
                delay,
            });
        })
        .await
}

#[async_trait]
impl Tool for RetryService<dyn Tool> {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if !self.inner.spec().idempotent {
            return self.inner.call(arguments, ctx).await;
        }
        let attempt = |number| {
            let mut ctx = ctx.clone();
            ctx.attempt = number;
            let arguments = arguments.clone();
            async move { self.inner.call(arguments, &ctx).await }
        };
        retrying(&self.layer.policy, ctx.observer.as_ref(), attempt, |err| {
            matches!(
                err,
                ToolError::Failed {
                    retryable: true,
                    ..
                }
            )
            .then_some(None)
        })
        .await
    }
}

#[async_trait]
impl Model for RetryService<dyn Model> {
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
        let attempt = |_| self.inner.complete(request, ctx);
        let outcome = retrying(
            &self.layer.policy,
            ctx.observer.as_ref(),
            attempt,
            |err| match err {
                ModelError::Transient { retry_after, .. } => Some(*retry_after),
                _ => None,
            },
        )
        .await;
        match outcome {
            Err(ModelError::Transient { message, .. }) => Err(ModelError::Fatal {
                message: format!(
                    "gave up after {} retries: {message}",
                    self.layer.policy.max_retries
                ),
            }),
            other => other,
        }
    }
}
