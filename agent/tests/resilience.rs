//! Tool layers inside a session: every retry becomes a `retry` trace line and every
//! breaker transition an event, without any special case in the engine.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agent::event::EventKind;
use agent::layer::{CircuitState, Stack};
use agent::layers::{BreakerPolicy, CircuitBreaker, Retry, RetryPolicy};
use agent::prelude::*;
use agent::types::ToolSpec;
use async_trait::async_trait;
use serde_json::{Value, json};

/// Fails retryably on its first two calls.
struct Flaky {
    spec: ToolSpec,
    calls: AtomicU32,
}

#[async_trait]
impl Tool for Flaky {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) < 2 {
            Err(ToolError::Failed {
                message: "service unavailable".into(),
                retryable: true,
            })
        } else {
            Ok("fine".into())
        }
    }
}

#[tokio::test]
async fn retries_are_trace_lines_and_breaker_transitions_are_events() {
    let flaky = Arc::new(Flaky {
        spec: ToolSpec {
            name: "flaky".into(),
            description: "fails twice".into(),
            input_schema: json!({"type": "object"}),
            output_description: None,
            error_description: None,
            idempotent: true,
            needs_approval: false,
        },
        calls: AtomicU32::new(0),
    });
    let tool = Stack::<dyn Tool>::new()
        .layer(CircuitBreaker::new(BreakerPolicy {
            failure_threshold: 1,
            cool_down: Duration::ZERO,
        }))
        .layer(Retry::new(RetryPolicy {
            max_retries: 1,
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            ..RetryPolicy::for_tools()
        }))
        .wrap(flaky);
    let mut tools = ToolRegistry::new();
    tools.register_shared(tool).unwrap();
    let call = json!({"type": "tool_call", "tool_name": "flaky", "arguments": {}});
    let model = ScriptedModel::from_values(vec![
        call.clone(),
        call,
        json!({"type": "finish", "answer": "ok"}),
    ])
    .unwrap();
    let trace_path = std::env::temp_dir().join(format!("resilience-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&trace_path);
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::builder(Arc::new(model), Arc::new(ReAct::new()))
        .tools(tools.into_toolbox())
        .store(store.clone())
        .sink(Arc::new(
            JsonlTrace::open(&trace_path, ContentMode::Summary).unwrap(),
        ))
        .build();
    let result = engine.run("task", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);

    let log = store.load(&result.session_id).await.unwrap();
    let circuit: Vec<CircuitState> = log
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::CircuitChanged { state, .. } => Some(*state),
            _ => None,
        })
        .collect();
    assert_eq!(
        circuit,
        [
            CircuitState::Open,
            CircuitState::HalfOpen,
            CircuitState::Closed
        ]
    );

    let lines: Vec<Value> = std::fs::read_to_string(&trace_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let retries: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event_type"] == "retry")
        .collect();
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0]["target"], "flaky");
    assert_eq!(retries[0]["attempt"], 1);
    assert_eq!(retries[0]["error"], "service unavailable");
    let observations: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event_type"] == "observation")
        .collect();
    assert_eq!(
        observations[0]["is_error"], true,
        "both attempts of the first call failed"
    );
    assert_eq!(
        observations[1]["is_error"], false,
        "the half-open trial succeeded"
    );
    std::fs::remove_file(&trace_path).unwrap();
}
