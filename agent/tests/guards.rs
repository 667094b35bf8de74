//! Guards in a session: a user's guard is asked before each decision, after the
//! budgets, and its intervention is recorded in place of the decision; the rate
//! limit spaces model calls across sessions.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::Arc;
use std::time::Duration;

use agent::engine::ModelRateLimit;
use agent::event::EventKind;
use agent::guard::{Checkpoint, Guard, GuardContext, Verdict};
use agent::prelude::*;
use async_trait::async_trait;
use serde_json::{Value, json};

/// Ends a run before any call of `tool` is dispatched.
struct ForbidTool(&'static str);

#[async_trait]
impl Guard for ForbidTool {
    async fn check(&self, checkpoint: Checkpoint<'_>, _ctx: &GuardContext<'_>) -> Verdict {
        match checkpoint {
            Checkpoint::Dispatch(calls) if calls.iter().any(|c| c.tool_name == self.0) => {
                Verdict::Intervene(EventKind::Failed {
                    exit_reason: ExitReason::InternalError,
                    budget: None,
                    error: Some(format!("`{}` is forbidden here", self.0)),
                })
            }
            _ => Verdict::Proceed,
        }
    }
}

fn calculation() -> Value {
    json!({"type": "tool_call", "tool_name": "calculator",
           "arguments": {"left": 12, "operation": "multiply", "right": 7}})
}

fn engine(
    script: Vec<Value>,
    budgets: Budgets,
    guard: Arc<dyn Guard>,
) -> (Engine, Arc<MemoryStore>) {
    let mut tools = ToolRegistry::new();
    tools.register_typed::<Calculator>().unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::builder(
        Arc::new(ScriptedModel::from_values(script).unwrap()),
        Arc::new(ReAct::new()),
    )
    .tools(tools.into_toolbox())
    .store(store.clone())
    .budgets(budgets)
    .guard(guard)
    .build();
    (engine, store)
}

#[tokio::test]
async fn a_user_guard_intervenes_instead_of_the_dispatch() {
    let (engine, store) = engine(
        vec![calculation(), json!({"type": "finish", "answer": "84"})],
        Budgets::default(),
        Arc::new(ForbidTool("calculator")),
    );
    let result = engine.run("t", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::InternalError);
    assert_eq!(
        result.error.as_deref(),
        Some("`calculator` is forbidden here")
    );
    let log = store.load(&result.session_id).await.unwrap();
    assert!(
        !log.iter()
            .any(|e| matches!(e.kind, EventKind::ActionDispatched { .. })),
        "nothing was dispatched"
    );
}

#[tokio::test]
async fn budgets_are_asked_before_a_user_guard() {
    let (engine, _) = engine(
        vec![calculation(), json!({"type": "finish", "answer": "84"})],
        Budgets {
            max_tool_calls: Some(0),
            ..Budgets::default()
        },
        Arc::new(ForbidTool("calculator")),
    );
    let result = engine.run("t", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::BudgetExceeded);
}

#[tokio::test(start_paused = true)]
async fn the_rate_limit_spaces_model_calls_of_concurrent_sessions() {
    let (engine, _) = engine(
        vec![calculation(), json!({"type": "finish", "answer": "84"})],
        Budgets::default(),
        Arc::new(ModelRateLimit::per_minute(60)),
    );
    let engine = Arc::new(engine);
    let started = tokio::time::Instant::now();
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let engine = Arc::clone(&engine);
            tokio::spawn(async move { engine.run("t", json!({})).await.unwrap() })
        })
        .collect();
    for run in runs {
        assert_eq!(run.await.unwrap().exit_reason, ExitReason::Finished);
    }
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "four model calls at one a second: {:?}",
        started.elapsed()
    );
}
