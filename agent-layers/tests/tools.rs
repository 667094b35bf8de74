//! The resilience layers around a controllable fake tool: it fails N times, hangs
//! or panics on demand.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::layer::{CircuitState, Layer, LayerObserver, RetryNotice, Stack};
use agent_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use agent_core::types::ToolSpec;
use agent_layers::{BreakerPolicy, BreakerService, Retry, RetryPolicy, Timeout};
use async_trait::async_trait;
use serde_json::{Value, json};

/// What the fake does on each call.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Fails (retryably or not) for the first N calls, then succeeds.
    FailFirst { times: u32, retryable: bool },
    /// Never returns.
    Hang,
    /// Panics.
    Panic,
}

struct Fake {
    spec: ToolSpec,
    behaviour: Mutex<Behaviour>,
    calls: AtomicU32,
    attempts_seen: Mutex<Vec<u32>>,
}

impl Fake {
    fn new(idempotent: bool, behaviour: Behaviour) -> Arc<Self> {
        Arc::new(Self {
            spec: ToolSpec {
                name: "fake".into(),
                description: "a controllable fake".into(),
                input_schema: json!({"type": "object"}),
                output_description: None,
                error_description: None,
                idempotent,
                needs_approval: false,
            },
            behaviour: Mutex::new(behaviour),
            calls: AtomicU32::new(0),
            attempts_seen: Mutex::new(Vec::new()),
        })
    }

    fn set(&self, behaviour: Behaviour) {
        *self.behaviour.lock().unwrap() = behaviour;
        self.calls.store(0, Ordering::SeqCst);
    }
}

#[async_trait]
impl Tool for Fake {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.attempts_seen.lock().unwrap().push(ctx.attempt);
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let behaviour = *self.behaviour.lock().unwrap();
        match behaviour {
            Behaviour::FailFirst { times, retryable } if n < times => Err(ToolError::Failed {
                message: format!("failure {}", n + 1),
                retryable,
            }),
            Behaviour::FailFirst { .. } => Ok("ok".into()),
            Behaviour::Hang => std::future::pending().await,
            Behaviour::Panic => panic!("the fake panicked"),
        }
    }
}

#[derive(Default)]
struct Reports {
    failures: Mutex<Vec<RetryNotice>>,
    circuit: Mutex<Vec<CircuitState>>,
}

impl LayerObserver for Reports {
    fn retrying(&self, notice: RetryNotice) {
        self.failures.lock().unwrap().push(notice);
    }
    fn circuit_changed(&self, _tool: &str, state: CircuitState) {
        self.circuit.lock().unwrap().push(state);
    }
}

fn ctx(reports: &Arc<Reports>) -> ToolContext {
    let mut ctx = ToolContext::new("s", "c", Arc::from(Path::new(".")));
    ctx.observer = reports.clone();
    ctx
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        ..RetryPolicy::for_tools()
    }
}

fn retried(fake: &Arc<Fake>, policy: RetryPolicy) -> Arc<dyn Tool> {
    Retry::new(policy).layer(fake.clone())
}

#[tokio::test]
async fn timeout_fails_a_hanging_call_with_the_limit_in_the_message() {
    let fake: Arc<dyn Tool> = Fake::new(true, Behaviour::Hang);
    let tool = Timeout::new(Duration::from_millis(50)).layer(fake);
    let err = tool
        .call(json!({}), &ctx(&Arc::default()))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::Failed {
            message: "timed out after 0.05s".into(),
            retryable: true
        }
    );
}

#[tokio::test]
async fn retry_retries_retryable_failures_of_idempotent_tools_and_reports_each() {
    let fake = Fake::new(
        true,
        Behaviour::FailFirst {
            times: 2,
            retryable: true,
        },
    );
    let reports = Arc::new(Reports::default());
    let tool = retried(&fake, fast_retry());
    assert_eq!(
        tool.call(json!({}), &ctx(&reports)).await.unwrap().content,
        "ok"
    );
    assert_eq!(
        *fake.attempts_seen.lock().unwrap(),
        [1, 2, 3],
        "each attempt knows its number"
    );
    let failures = reports.failures.lock().unwrap();
    assert_eq!(
        failures.iter().map(|f| f.attempt).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(failures[0].error, "failure 1");
}

#[tokio::test]
async fn retry_leaves_non_retryable_failures_and_non_idempotent_tools_alone() {
    let fake = Fake::new(
        true,
        Behaviour::FailFirst {
            times: 1,
            retryable: false,
        },
    );
    let tool = retried(&fake, fast_retry());
    assert!(tool.call(json!({}), &ctx(&Arc::default())).await.is_err());
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);

    let fake = Fake::new(
        false,
        Behaviour::FailFirst {
            times: 1,
            retryable: true,
        },
    );
    let tool = retried(&fake, fast_retry());
    assert!(tool.call(json!({}), &ctx(&Arc::default())).await.is_err());
    assert_eq!(
        fake.calls.load(Ordering::SeqCst),
        1,
        "a non-idempotent tool is never retried"
    );
}

#[tokio::test]
async fn retry_gives_up_after_its_budget_with_the_last_error() {
    let fake = Fake::new(
        true,
        Behaviour::FailFirst {
            times: 10,
            retryable: true,
        },
    );
    let tool = retried(&fake, fast_retry());
    let err = tool
        .call(json!({}), &ctx(&Arc::default()))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "failure 4");
    assert_eq!(fake.calls.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn a_timeout_inside_retry_is_retried() {
    let fake = Fake::new(true, Behaviour::Hang);
    let reports = Arc::new(Reports::default());
    let tool = Stack::<dyn Tool>::new()
        .layer(Retry::new(RetryPolicy {
            max_retries: 2,
            ..fast_retry()
        }))
        .layer(Timeout::new(Duration::from_millis(20)))
        .wrap(fake.clone());
    let err = tool.call(json!({}), &ctx(&reports)).await.unwrap_err();
    assert!(err.to_string().contains("timed out"), "{err}");
    assert_eq!(fake.calls.load(Ordering::SeqCst), 3);
    assert_eq!(reports.failures.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn the_breaker_opens_fails_fast_half_opens_and_closes() {
    let fake = Fake::new(
        true,
        Behaviour::FailFirst {
            times: 100,
            retryable: false,
        },
    );
    let reports = Arc::new(Reports::default());
    let breaker = BreakerService::<dyn Tool>::new(
        fake.clone(),
        BreakerPolicy {
            failure_threshold: 3,
            cool_down: Duration::from_millis(100),
        },
        "fake",
    );
    let ctx = ctx(&reports);
    for _ in 0..3 {
        assert!(breaker.call(json!({}), &ctx).await.is_err());
    }
    assert_eq!(breaker.state(), CircuitState::Open);
    let err = breaker.call(json!({}), &ctx).await.unwrap_err();
    assert!(err.to_string().starts_with("circuit open"), "{err}");
    assert_eq!(
        fake.calls.load(Ordering::SeqCst),
        3,
        "an open circuit fails fast"
    );

    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(
        breaker.call(json!({}), &ctx).await.is_err(),
        "the trial call fails"
    );
    assert_eq!(
        breaker.state(),
        CircuitState::Open,
        "a failed trial opens it again"
    );
    assert_eq!(fake.calls.load(Ordering::SeqCst), 4);

    tokio::time::sleep(Duration::from_millis(120)).await;
    fake.set(Behaviour::FailFirst {
        times: 0,
        retryable: false,
    });
    assert_eq!(breaker.call(json!({}), &ctx).await.unwrap().content, "ok");
    assert_eq!(breaker.state(), CircuitState::Closed);
    assert_eq!(
        *reports.circuit.lock().unwrap(),
        [
            CircuitState::Open,
            CircuitState::HalfOpen,
            CircuitState::Open,
            CircuitState::HalfOpen,
            CircuitState::Closed
        ]
    );
}

#[tokio::test]
async fn invalid_arguments_do_not_open_the_breaker() {
    struct Picky(ToolSpec);
    #[async_trait]
    impl Tool for Picky {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
        async fn call(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
            Err(ToolError::InvalidArguments("field `x` is missing".into()))
        }
    }
    let breaker = BreakerService::<dyn Tool>::new(
        Arc::new(Picky(Fake::new(true, Behaviour::Hang).spec.clone())),
        BreakerPolicy {
            failure_threshold: 1,
            cool_down: Duration::from_secs(60),
        },
        "picky",
    );
    for _ in 0..3 {
        assert!(matches!(
            breaker.call(json!({}), &ctx(&Arc::default())).await,
            Err(ToolError::InvalidArguments(_))
        ));
    }
    assert_eq!(breaker.state(), CircuitState::Closed);
}

#[tokio::test]
async fn a_panicking_tool_panics_through_the_layers_for_the_engine_to_record() {
    let tool = Stack::<dyn Tool>::new()
        .layer(Retry::new(fast_retry()))
        .layer(Timeout::new(Duration::from_secs(1)))
        .wrap(Fake::new(true, Behaviour::Panic));
    let handle = tokio::spawn(async move { tool.call(json!({}), &ctx(&Arc::default())).await });
    let err = handle.await.unwrap_err();
    assert!(err.is_panic());
}
