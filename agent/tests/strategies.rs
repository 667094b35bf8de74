//! Plan-and-Execute replanning, Human-in-the-Loop predicates, and resumes that
//! would drop a strategy.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::Arc;

use agent::engine::EngineError;
use agent::event::EventKind;
use agent::prelude::*;
use agent::types::ToolCall;
use serde_json::{Value, json};

fn engine(
    script: Vec<Value>,
    strategy: Arc<dyn agent::strategy::ExecutionStrategy>,
    store: Arc<MemoryStore>,
) -> Engine {
    let mut tools = ToolRegistry::new();
    tools.register_typed::<Calculator>().unwrap();
    Engine::builder(
        Arc::new(ScriptedModel::from_values(script).unwrap()),
        strategy,
    )
    .tools(tools.into_toolbox())
    .store(store)
    .build()
}

fn add(left: i64) -> Value {
    json!({"type": "tool_call", "tool_name": "calculator", "arguments": {"left": left, "operation": "add", "right": 1}})
}

#[tokio::test]
async fn a_step_that_runs_out_of_steps_triggers_one_replan_that_keeps_completed_steps() {
    let store = Arc::new(MemoryStore::new());
    let script = vec![
        json!({"type": "plan", "steps": [{"goal": "first"}, {"goal": "second"}]}),
        json!({"type": "finish", "answer": "first done"}),
        add(1),
        add(2),
        json!({"type": "plan", "steps": [{"goal": "second, simpler"}]}),
        json!({"type": "finish", "answer": "second done"}),
        json!({"type": "finish", "answer": "all done"}),
    ];
    let strategy = Arc::new(PlanExecute::new().steps_per_plan_step(2));
    let result = engine(script, strategy, store.clone())
        .run("t", json!({}))
        .await
        .unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished, "{result:?}");
    assert_eq!(result.answer.as_deref(), Some("all done"));
    let records: Vec<(String, Value)> = store
        .load(&result.session_id)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Strategy { name, data, .. } => Some((name, data)),
            _ => None,
        })
        .collect();
    let names: Vec<&str> = records.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "plan_created",
            "step_completed",
            "step_failed",
            "plan_created",
            "step_completed"
        ]
    );
    assert_eq!(records[3].1["kept"], 1, "the completed first step is kept");
}

#[tokio::test]
async fn a_step_that_fails_again_after_the_replan_ends_the_run() {
    let store = Arc::new(MemoryStore::new());
    let script = vec![
        json!({"type": "plan", "steps": [{"goal": "only"}]}),
        add(1),
        json!({"type": "plan", "steps": [{"goal": "only, again"}]}),
        add(2),
    ];
    let strategy = Arc::new(PlanExecute::new().steps_per_plan_step(1));
    let result = engine(script, strategy, store)
        .run("t", json!({}))
        .await
        .unwrap();
    assert_eq!(result.exit_reason, ExitReason::MaxStepsExceeded);
    assert!(result.error.unwrap().contains("even after replanning"));
}

#[tokio::test]
async fn a_predicate_decides_which_calls_need_approval() {
    let store = Arc::new(MemoryStore::new());
    let policy = ApprovalPolicy::new().predicate("large numbers", |call: &ToolCall| {
        call.arguments["left"]
            .as_i64()
            .is_some_and(|left| left > 100)
    });
    let script = vec![add(5), add(500), json!({"type": "finish", "answer": "ok"})];
    let engine = engine(
        script,
        Arc::new(Hitl::new(ReAct::new(), policy)),
        store.clone(),
    );
    let paused = engine.run("t", json!({})).await.unwrap();
    assert_eq!(paused.exit_reason, ExitReason::AwaitingApproval);
    assert_eq!(paused.pending.len(), 1);
    assert_eq!(paused.pending[0].arguments["left"], 500);
    assert_eq!(
        paused.usage.tool_calls, 1,
        "the small call ran without a human"
    );
    let err = engine
        .approve(&paused.session_id, Some("nope"), None, "test")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not waiting"), "{err}");
    engine
        .deny(&paused.session_id, None, "too large", "test")
        .await
        .unwrap();
    let finished = engine.resume(&paused.session_id).await.unwrap();
    assert_eq!(finished.exit_reason, ExitReason::Finished);
}

#[tokio::test]
async fn resuming_with_another_strategy_is_refused() {
    let store = Arc::new(MemoryStore::new());
    let policy = ApprovalPolicy::new().tools(["calculator"]);
    let script = vec![add(1), json!({"type": "finish", "answer": "ok"})];
    let hitl = engine(
        script.clone(),
        Arc::new(Hitl::new(ReAct::new(), policy)),
        store.clone(),
    );
    let paused = hitl.run("t", json!({})).await.unwrap();
    hitl.approve(&paused.session_id, None, None, "test")
        .await
        .unwrap();
    let plain = engine(script, Arc::new(ReAct::new()), store);
    let err = plain.resume(&paused.session_id).await.unwrap_err();
    assert!(matches!(err, EngineError::StrategyMismatch { .. }), "{err}");
    assert!(err.to_string().contains("hitl+react"), "{err}");
}
