//! The resilience layers around a controllable fake model: transient failures,
//! `Retry-After`, retries running out, a breaker and a timeout.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::layer::{CircuitState, Layer, LayerObserver, RetryNotice, Stack};
use agent_core::model::{Model, ModelContext, ModelError, ModelRequest, ModelResponse};
use agent_core::types::{Action, Finish, Usage};
use agent_layers::{BreakerPolicy, CircuitBreaker, Retry, RetryPolicy, Timeout};
use async_trait::async_trait;

struct Flaky {
    failures: usize,
    calls: AtomicUsize,
    retry_after: Option<Duration>,
    hang: bool,
}

impl Flaky {
    fn new(failures: usize, retry_after: Option<Duration>) -> Arc<Self> {
        Arc::new(Self {
            failures,
            calls: AtomicUsize::new(0),
            retry_after,
            hang: false,
        })
    }
}

#[async_trait]
impl Model for Flaky {
    async fn complete(
        &self,
        _: &ModelRequest,
        _: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        if self.hang {
            std::future::pending::<()>().await;
        }
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
                model: None,
            })
        }
    }
}

#[derive(Default)]
struct Notes {
    retries: Mutex<Vec<RetryNotice>>,
    circuit: Mutex<Vec<(String, CircuitState)>>,
}

impl LayerObserver for Notes {
    fn retrying(&self, notice: RetryNotice) {
        self.retries.lock().unwrap().push(notice);
    }
    fn circuit_changed(&self, target: &str, state: CircuitState) {
        self.circuit
            .lock()
            .unwrap()
            .push((target.to_owned(), state));
    }
}

fn request() -> ModelRequest {
    ModelRequest {
        instructions: String::new(),
        task: String::new(),
        history: Arc::default(),
        tools: Arc::new(Vec::new()),
        max_output_tokens: None,
        output_schema: None,
    }
}

fn ctx(notes: &Arc<Notes>) -> ModelContext {
    let mut ctx = ModelContext::new("s", 1);
    ctx.observer = notes.clone();
    ctx
}

fn fast() -> RetryPolicy {
    RetryPolicy {
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        ..RetryPolicy::for_models()
    }
}

#[tokio::test]
async fn transient_failures_are_retried_and_reported() {
    let flaky = Flaky::new(2, None);
    let model = Retry::new(fast()).layer(flaky.clone() as Arc<dyn Model>);
    let notes = Arc::new(Notes::default());
    assert!(model.complete(&request(), &ctx(&notes)).await.is_ok());
    let retries = notes.retries.lock().unwrap();
    assert_eq!(
        retries.iter().map(|n| n.attempt).collect::<Vec<_>>(),
        [1, 2]
    );
    assert!(retries[0].error.contains("HTTP 503"));
}

#[tokio::test]
async fn retry_after_is_honoured_up_to_the_cap_and_exhaustion_is_fatal() {
    let policy = RetryPolicy {
        max_retry_after: Duration::from_millis(20),
        ..fast()
    };
    let flaky = Flaky::new(10, Some(Duration::from_secs(600)));
    let model = Retry::new(policy).layer(flaky.clone() as Arc<dyn Model>);
    let notes = Arc::new(Notes::default());
    let err = model.complete(&request(), &ctx(&notes)).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Fatal { message } if message.contains("gave up after 3 retries")),
        "{err}"
    );
    let retries = notes.retries.lock().unwrap();
    assert_eq!(retries.len(), 3);
    assert!(retries.iter().all(|n| n.delay == Duration::from_millis(20)));
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn a_breaker_outside_retry_opens_after_repeated_failures_and_fails_fast() {
    let flaky = Flaky::new(usize::MAX, None);
    let model = Stack::<dyn Model>::new()
        .layer(
            CircuitBreaker::new(BreakerPolicy {
                failure_threshold: 2,
                cool_down: Duration::from_secs(60),
            })
            .named("openai:m"),
        )
        .layer(Retry::new(RetryPolicy {
            max_retries: 1,
            ..fast()
        }))
        .wrap(flaky.clone());
    let notes = Arc::new(Notes::default());
    for _ in 0..2 {
        assert!(model.complete(&request(), &ctx(&notes)).await.is_err());
    }
    let calls = flaky.calls.load(Ordering::SeqCst);
    let err = model.complete(&request(), &ctx(&notes)).await.unwrap_err();
    assert!(
        err.to_string().contains("circuit open: `openai:m`"),
        "{err}"
    );
    assert_eq!(flaky.calls.load(Ordering::SeqCst), calls, "fails fast");
    assert_eq!(
        *notes.circuit.lock().unwrap(),
        [("openai:m".to_owned(), CircuitState::Open)]
    );
}

#[tokio::test]
async fn a_timeout_turns_a_hanging_model_into_a_transient_error() {
    let hanging = Arc::new(Flaky {
        hang: true,
        ..Arc::into_inner(Flaky::new(0, None)).unwrap()
    });
    let model = Timeout::new(Duration::from_millis(20)).layer(hanging as Arc<dyn Model>);
    let err = model
        .complete(&request(), &ctx(&Arc::default()))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Transient { .. }), "{err}");
}
