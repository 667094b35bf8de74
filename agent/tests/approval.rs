//! `#[tool(needs_approval)]` is a property of the tool: a derived tool with the
//! flag waits for a human under ReAct, Plan-and-Execute, Human-in-the-Loop with
//! any policy, and as a workflow's tool node — and runs only once approved,
//! never when denied, and without a pause only where the session's recorded
//! configuration waives it by name.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent::event::EventKind;
use agent::prelude::*;
use agent::strategies::{ApprovalPolicy, Hitl};
use agent::strategy::ExecutionStrategy;
use serde::Deserialize;
use serde_json::{Value, json};

/// How many times `deploy` really ran, per test.
static DEPLOYS: AtomicUsize = AtomicUsize::new(0);

/// Deploys a service.
#[derive(Deserialize, schemars::JsonSchema, Tool)]
#[tool(needs_approval)]
struct Deploy {
    /// The service.
    service: String,
}

impl Deploy {
    async fn run(self, _ctx: &ToolContext) -> Result<String, ToolError> {
        DEPLOYS.fetch_add(1, Ordering::SeqCst);
        Ok(format!("deployed {}", self.service))
    }
}

/// Serialises the tests: they count runs of one tool.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn deploy_call() -> Value {
    json!({"type": "tool_call", "tool_name": "deploy", "arguments": {"service": "web"}})
}

fn finish() -> Value {
    json!({"type": "finish", "answer": "done"})
}

fn engine(
    strategy: Arc<dyn ExecutionStrategy>,
    script: Vec<Value>,
    store: Arc<MemoryStore>,
) -> Engine {
    let mut tools = ToolRegistry::new();
    tools.register_typed::<Deploy>().unwrap();
    Engine::builder(
        Arc::new(ScriptedModel::from_values(script).unwrap()),
        strategy,
    )
    .tools(tools.into_toolbox())
    .store(store)
    .build()
}

/// Runs `task` with `config`, expects a pause before `deploy` ran, approves,
/// resumes, and expects exactly one run of it.
async fn pauses_then_runs_once_approved(strategy: Arc<dyn ExecutionStrategy>, script: Vec<Value>) {
    let store = Arc::new(MemoryStore::new());
    let engine = engine(strategy, script, store.clone());
    DEPLOYS.store(0, Ordering::SeqCst);
    let paused = engine.run("deploy web", json!({})).await.unwrap();
    assert_eq!(
        paused.exit_reason,
        ExitReason::AwaitingApproval,
        "{paused:?}"
    );
    assert_eq!(paused.pending.len(), 1, "{paused:?}");
    assert_eq!(paused.pending[0].tool_name, "deploy");
    assert_eq!(DEPLOYS.load(Ordering::SeqCst), 0, "it ran before approval");
    let decided = engine
        .approve(&paused.session_id, None, None, "tester")
        .await
        .unwrap();
    assert_eq!(decided.len(), 1);
    let done = engine.resume(&paused.session_id).await.unwrap();
    assert_eq!(done.exit_reason, ExitReason::Finished, "{done:?}");
    assert_eq!(DEPLOYS.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_flagged_tool_pauses_under_react() {
    let _serial = SERIAL.lock().await;
    pauses_then_runs_once_approved(Arc::new(ReAct::new()), vec![deploy_call(), finish()]).await;
}

#[tokio::test]
async fn a_flagged_tool_pauses_under_plan_and_execute() {
    let _serial = SERIAL.lock().await;
    let script = vec![
        json!({"type": "plan", "steps": [{"goal": "deploy"}]}),
        deploy_call(),
        json!({"type": "finish", "answer": "deployed"}),
        finish(),
    ];
    pauses_then_runs_once_approved(Arc::new(PlanExecute::new()), script).await;
}

#[tokio::test]
async fn a_flagged_tool_pauses_under_hitl_with_a_policy_that_names_nothing() {
    let _serial = SERIAL.lock().await;
    for policy in [
        ApprovalPolicy::new(),
        ApprovalPolicy::new().tools(["calculator"]),
        ApprovalPolicy::new().predicate("never", |_| false),
    ] {
        pauses_then_runs_once_approved(
            Arc::new(Hitl::new(ReAct::new(), policy)),
            vec![deploy_call(), finish()],
        )
        .await;
    }
}

#[tokio::test]
async fn a_denied_call_never_runs_and_the_model_hears_why() {
    let _serial = SERIAL.lock().await;
    let store = Arc::new(MemoryStore::new());
    let engine = engine(
        Arc::new(ReAct::new()),
        vec![deploy_call(), finish()],
        store.clone(),
    );
    DEPLOYS.store(0, Ordering::SeqCst);
    let paused = engine.run("deploy web", json!({})).await.unwrap();
    engine
        .deny(&paused.session_id, None, "not on a Friday", "tester")
        .await
        .unwrap();
    let done = engine.resume(&paused.session_id).await.unwrap();
    assert_eq!(done.exit_reason, ExitReason::Finished);
    assert_eq!(DEPLOYS.load(Ordering::SeqCst), 0);
    let log = store.load(&paused.session_id).await.unwrap();
    assert!(
        !log.iter()
            .any(|event| matches!(event.kind, EventKind::ActionDispatched { .. })),
        "a denied call was dispatched"
    );
    let state = agent::engine::load_state(store.as_ref(), &paused.session_id)
        .await
        .unwrap();
    let told = state.history().iter().any(|item| {
        matches!(item, agent::history::HistoryItem::Observation { observation }
            if observation.is_error && observation.content.contains("not on a Friday"))
    });
    assert!(told, "{:?}", state.history());
}

#[tokio::test]
async fn a_session_whose_recorded_config_waives_the_tool_runs_it_without_a_pause() {
    let _serial = SERIAL.lock().await;
    let store = Arc::new(MemoryStore::new());
    let engine = engine(
        Arc::new(ReAct::new()),
        vec![deploy_call(), finish()],
        store.clone(),
    );
    DEPLOYS.store(0, Ordering::SeqCst);
    let other = engine
        .run("deploy web", json!({"waive_approval": ["calculator"]}))
        .await
        .unwrap();
    assert_eq!(other.exit_reason, ExitReason::AwaitingApproval);
    let engine = self::engine(
        Arc::new(ReAct::new()),
        vec![deploy_call(), finish()],
        store.clone(),
    );
    let waived = engine
        .run("deploy web", json!({"waive_approval": ["deploy"]}))
        .await
        .unwrap();
    assert_eq!(waived.exit_reason, ExitReason::Finished, "{waived:?}");
    assert_eq!(DEPLOYS.load(Ordering::SeqCst), 1);
}

fn deploy_workflow() -> agent::strategies::Dag {
    DagBuilder::new("release")
        .node(
            "build",
            Node::function("build", |_| async { Ok(json!("v2")) }),
        )
        .node(
            "deploy",
            Node::tool("deploy", json!({"service": "web {{build}}"})),
        )
        .edge("build", "deploy")
        .output("deploy")
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_workflow_tool_node_waits_for_approval_and_runs_with_edited_arguments() {
    let _serial = SERIAL.lock().await;
    let store = Arc::new(MemoryStore::new());
    let engine = engine(Arc::new(deploy_workflow()), vec![], store.clone());
    DEPLOYS.store(0, Ordering::SeqCst);
    let paused = engine.run("release", json!({})).await.unwrap();
    assert_eq!(
        paused.exit_reason,
        ExitReason::AwaitingApproval,
        "{paused:?}"
    );
    assert_eq!(paused.pending[0].id, "node:deploy");
    assert_eq!(paused.pending[0].arguments, json!({"service": "web v2"}));
    assert_eq!(DEPLOYS.load(Ordering::SeqCst), 0);
    engine
        .approve(
            &paused.session_id,
            Some("node:deploy"),
            Some(json!({"service": "api v2"})),
            "tester",
        )
        .await
        .unwrap();
    let done = engine.resume(&paused.session_id).await.unwrap();
    assert_eq!(done.exit_reason, ExitReason::Finished, "{done:?}");
    assert_eq!(done.answer.as_deref(), Some("deployed api v2"));
    assert_eq!(DEPLOYS.load(Ordering::SeqCst), 1);
    // A resume of the finished session runs nothing again.
    engine.resume(&paused.session_id).await.unwrap();
    assert_eq!(DEPLOYS.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_denied_workflow_tool_node_fails_into_its_error_branch() {
    let _serial = SERIAL.lock().await;
    let dag = DagBuilder::new("guarded release")
        .node("deploy", Node::tool("deploy", json!({"service": "web"})))
        .node(
            "skipped",
            Node::function("skipped", |_| async { Ok(json!("not deployed")) }),
        )
        .on_error("deploy", "skipped")
        .output("skipped")
        .build()
        .unwrap();
    let store = Arc::new(MemoryStore::new());
    let engine = engine(Arc::new(dag), vec![], store.clone());
    DEPLOYS.store(0, Ordering::SeqCst);
    let paused = engine.run("release", json!({})).await.unwrap();
    assert_eq!(paused.exit_reason, ExitReason::AwaitingApproval);
    engine
        .deny(&paused.session_id, None, "freeze", "tester")
        .await
        .unwrap();
    let done = engine.resume(&paused.session_id).await.unwrap();
    assert_eq!(done.answer.as_deref(), Some("not deployed"), "{done:?}");
    assert_eq!(DEPLOYS.load(Ordering::SeqCst), 0);
}
