//! `Retrying`: a layer around any model that retries transient failures with
//! exponential backoff and jitter, honouring `Retry-After` up to a cap, and tells
//! the engine about each retry. Retries are not steps. When retries run out the
//! failure becomes fatal (`provider_error`).

use std::time::Duration;

use agent_core::{
    IgnoreRetries, Model, ModelError, ModelRequest, ModelResponse, RetryNotice, RetryObserver,
};
use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};

/// How a model layer retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (default 3).
    pub max_retries: usize,
    /// First backoff delay (default 500 ms); it doubles each retry, with jitter.
    pub min_delay: Duration,
    /// Longest backoff delay (default 30 s).
    pub max_delay: Duration,
    /// Longest `Retry-After` honoured (default 30 s).
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(30),
        }
    }
}

/// A model whose transient failures are retried.
#[derive(Debug, Clone)]
pub struct Retrying<M> {
    inner: M,
    policy: RetryPolicy,
}

impl<M> Retrying<M> {
    /// Wraps `inner` with `policy`.
    pub fn new(inner: M, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }
}

#[async_trait]
impl<M: Model> Model for Retrying<M> {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.complete_observed(request, &IgnoreRetries).await
    }

    async fn complete_observed(
        &self,
        request: &ModelRequest,
        observer: &dyn RetryObserver,
    ) -> Result<ModelResponse, ModelError> {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.policy.min_delay)
            .with_max_delay(self.policy.max_delay)
            .with_max_times(self.policy.max_retries)
            .with_jitter();
        let cap = self.policy.max_retry_after;
        let mut attempt = 0u32;
        let outcome = (|| self.inner.complete_observed(request, observer))
            .retry(backoff)
            .when(|err| matches!(err, ModelError::Transient { .. }))
            .adjust(|err, delay| match (err, delay) {
                (
                    ModelError::Transient {
                        retry_after: Some(after),
                        ..
                    },
                    Some(_),
                ) => Some((*after).min(cap)),
                (_, delay) => delay,
            })
            .notify(|err, delay| {
                attempt += 1;
                observer.retrying(RetryNotice {
                    attempt,
                    error: err.to_string(),
                    delay,
                });
            })
            .await;
        match outcome {
            Err(ModelError::Transient { message, .. }) => Err(ModelError::Fatal {
                message: format!(
                    "gave up after {} retries: {message}",
                    self.policy.max_retries
                ),
            }),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use agent_core::{Action, Finish, Usage};

    use super::*;

    struct Flaky {
        failures: usize,
        calls: AtomicUsize,
        retry_after: Option<Duration>,
    }

    #[async_trait]
    impl Model for Flaky {
        async fn complete(&self, _: &ModelRequest) -> Result<ModelResponse, ModelError> {
            if self.calls.fetch_add(1, Ordering::SeqCst) < self.failures {
                Err(ModelError::Transient {
                    message: "HTTP 503".into(),
                    retry_after: self.retry_after,
                })
            } else {
                Ok(ModelResponse {
                    actions: vec![Action::Finish(Finish {
                        answer: "ok".into(),
                    })],
                    usage: Usage::default(),
                    text: None,
                })
            }
        }
    }

    #[derive(Default)]
    struct Notes(Mutex<Vec<RetryNotice>>);

    impl RetryObserver for Notes {
        fn retrying(&self, notice: RetryNotice) {
            self.0.lock().unwrap().push(notice);
        }
    }

    fn request() -> ModelRequest {
        ModelRequest {
            instructions: String::new(),
            task: String::new(),
            history: Vec::new(),
            tools: Arc::new(Vec::new()),
            step: 1,
            max_output_tokens: None,
        }
    }

    fn fast() -> RetryPolicy {
        RetryPolicy {
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            ..RetryPolicy::default()
        }
    }

    #[tokio::test]
    async fn transient_failures_are_retried_and_reported() {
        let model = Retrying::new(
            Flaky {
                failures: 2,
                calls: AtomicUsize::new(0),
                retry_after: None,
            },
            fast(),
        );
        let notes = Notes::default();
        assert!(model.complete_observed(&request(), &notes).await.is_ok());
        let notes = notes.0.into_inner().unwrap();
        assert_eq!(notes.iter().map(|n| n.attempt).collect::<Vec<_>>(), [1, 2]);
        assert!(notes[0].error.contains("HTTP 503"));
    }

    #[tokio::test]
    async fn retry_after_is_honoured_up_to_the_cap_and_exhaustion_is_fatal() {
        let policy = RetryPolicy {
            max_retry_after: Duration::from_millis(20),
            ..fast()
        };
        let model = Retrying::new(
            Flaky {
                failures: 10,
                calls: AtomicUsize::new(0),
                retry_after: Some(Duration::from_secs(600)),
            },
            policy,
        );
        let notes = Notes::default();
        let err = model
            .complete_observed(&request(), &notes)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ModelError::Fatal { message } if message.contains("gave up after 3 retries")),
            "{err}"
        );
        let notes = notes.0.into_inner().unwrap();
        assert_eq!(notes.len(), 3);
        assert!(notes.iter().all(|n| n.delay == Duration::from_millis(20)));
        assert_eq!(model.inner.calls.load(Ordering::SeqCst), 4);
    }
}
