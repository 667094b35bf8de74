//! DAG workflows: build-time checks, concurrency of ready nodes, conditional
//! branches, fan-out and join, error branches, and the changed-graph refusal.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::Arc;
use std::time::Duration;

use agent::engine::EngineError;
use agent::event::{Event, EventKind};
use agent::prelude::*;
use agent::store::Durability;
use agent::strategies::DagError;
use serde_json::{Value, json};

fn value(v: Value) -> Node {
    Node::function("constant", move |_| {
        let v = v.clone();
        async move { Ok(v) }
    })
}

#[test]
fn a_cycle_is_refused_naming_its_nodes() {
    let err = DagBuilder::new("cyclic")
        .node("start", value(json!(1)))
        .node("a", value(json!(1)))
        .node("b", value(json!(1)))
        .node("c", value(json!(1)))
        .edge("start", "a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", "a")
        .output("c")
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        DagError::Cycle(vec!["a".into(), "b".into(), "c".into()])
    );
    assert_eq!(
        err.to_string(),
        "the graph has a cycle through `a`, `b`, `c`"
    );
}

#[test]
fn missing_references_unreachable_nodes_and_undeclared_inputs_are_refused() {
    let missing_edge = DagBuilder::new("g")
        .node("a", value(json!(1)))
        .edge("a", "ghost")
        .output("a")
        .build();
    assert!(
        matches!(missing_edge, Err(DagError::MissingNode { ref missing, .. }) if missing == "ghost")
    );
    let missing_template = DagBuilder::new("g")
        .node("a", Node::model("use {{nothing}}"))
        .output("a")
        .build();
    assert!(
        matches!(missing_template, Err(DagError::MissingNode { ref missing, .. }) if missing == "nothing")
    );
    let unreachable = DagBuilder::new("g")
        .node("a", value(json!(1)))
        .node("island", value(json!(2)))
        .output("a")
        .build();
    assert_eq!(
        unreachable.err(),
        Some(DagError::Unreachable("island".into(), "a".into()))
    );
    let undeclared = DagBuilder::new("g")
        .node("a", value(json!(1)))
        .node("b", Node::model("{{c}}"))
        .node("c", value(json!(3)))
        .edge("a", "b")
        .edge("b", "c")
        .output("c")
        .build();
    assert!(
        matches!(undeclared, Err(DagError::NotAPredecessor { .. })),
        "{undeclared:?}",
        undeclared = undeclared.err()
    );
    assert_eq!(
        DagBuilder::new("g")
            .node("a", value(json!(1)))
            .build()
            .err(),
        Some(DagError::NoOutput)
    );
}

fn engine(dag: agent::strategies::Dag, script: Vec<Value>, store: Arc<MemoryStore>) -> Engine {
    let mut tools = ToolRegistry::new();
    tools.register_typed::<Calculator>().unwrap();
    Engine::builder(
        Arc::new(ScriptedModel::from_values(script).unwrap()),
        Arc::new(dag),
    )
    .tools(tools.into_toolbox())
    .store(store)
    .build()
}

fn completed_nodes(log: &[Event]) -> Vec<String> {
    log.iter()
        .filter_map(|event| match &event.kind {
            EventKind::Strategy { name, data, .. } if name == "node_completed" => {
                Some(data["node"].as_str().unwrap().to_owned())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn ready_nodes_run_concurrently() {
    let barrier = Arc::new(tokio::sync::Barrier::new(3));
    let waiting = |barrier: Arc<tokio::sync::Barrier>| {
        Node::function("meet", move |_| {
            let barrier = barrier.clone();
            async move {
                barrier.wait().await;
                Ok(json!("met"))
            }
        })
    };
    let dag = DagBuilder::new("concurrent")
        .fan_out("meet", None, 0..3, |_| waiting(barrier.clone()))
        .join("done", "meet", value(json!("all met")))
        .output("done")
        .build()
        .unwrap();
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        engine(dag, vec![], Arc::new(MemoryStore::new())).run("meet", json!({})),
    )
    .await
    .expect("the three nodes must overlap in time: each waits for the others")
    .unwrap();
    assert_eq!(result.answer.as_deref(), Some("all met"));
}

#[tokio::test]
async fn a_branch_runs_only_the_path_its_condition_picks() {
    let build = |n: i64| {
        DagBuilder::new("branching")
            .node("number", value(json!(n)))
            .node(
                "is_big",
                Node::branch("number > 10", |o| o["number"].as_i64().unwrap_or(0) > 10),
            )
            .node(
                "big",
                Node::tool(
                    "calculator",
                    json!({"left": "{{number}}", "operation": "multiply", "right": 2}),
                ),
            )
            .node(
                "small",
                Node::tool(
                    "calculator",
                    json!({"left": "{{number}}", "operation": "add", "right": 100}),
                ),
            )
            .node(
                "report",
                Node::function("report", |o| async move {
                    Ok(json!(format!(
                        "big={} small={}",
                        o.contains_key("big"),
                        o.contains_key("small")
                    )))
                }),
            )
            .edge("number", "is_big")
            .edge_when("is_big", "big", "is_big", |o| o["is_big"] == json!(true))
            .edge_when("is_big", "small", "is_small", |o| {
                o["is_big"] == json!(false)
            })
            .edge("big", "report")
            .edge("small", "report")
            .output("report")
            .build()
            .unwrap()
    };
    let store = Arc::new(MemoryStore::new());
    let result = engine(build(50), vec![], store.clone())
        .run("t", json!({}))
        .await
        .unwrap();
    assert_eq!(result.answer.as_deref(), Some("big=true small=false"));
    let log = store.load(&result.session_id).await.unwrap();
    let done = completed_nodes(&log);
    assert!(
        done.contains(&"big".to_owned()) && !done.contains(&"small".to_owned()),
        "{done:?}"
    );
    let result = engine(build(3), vec![], store.clone())
        .run("t", json!({}))
        .await
        .unwrap();
    assert_eq!(result.answer.as_deref(), Some("big=false small=true"));
}

fn research(question_count: usize) -> agent::strategies::Dag {
    DagBuilder::new("research")
        .fan_out(
            "ask",
            None,
            (0..question_count).map(|i| format!("question {i}")),
            |q| Node::model(format!("Answer briefly: {q} about {{{{task}}}}")),
        )
        .join(
            "summary",
            "ask",
            Node::model("Summarise these answers:\n{{ask.*}}"),
        )
        .output("summary")
        .build()
        .unwrap()
}

fn research_script() -> Vec<Value> {
    vec![
        json!({"type": "finish", "answer": "first"}),
        json!({"type": "finish", "answer": "second"}),
        json!({"type": "finish", "answer": "third"}),
        json!({"type": "finish", "answer": "summary of three"}),
    ]
}

#[tokio::test]
async fn fan_out_then_join_with_a_model() {
    let store = Arc::new(MemoryStore::new());
    let result = engine(research(3), research_script(), store.clone())
        .run("rust", json!({}))
        .await
        .unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    assert_eq!(result.answer.as_deref(), Some("summary of three"));
    assert_eq!(result.usage.model_calls, 4);
    assert_eq!(result.steps_used, 4);
    let log = store.load(&result.session_id).await.unwrap();
    let done = completed_nodes(&log);
    assert_eq!(done.last().unwrap(), "summary");
    let outputs: Vec<Value> = log
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Strategy { name, data, .. } if name == "node_completed" => {
                Some(data.clone())
            }
            _ => None,
        })
        .collect();
    let by_node =
        |node: &str| outputs.iter().find(|o| o["node"] == node).unwrap()["output"].clone();
    assert_eq!(
        by_node("ask.0"),
        "first",
        "each model node gets its own scripted response"
    );
    assert_eq!(by_node("ask.2"), "third");
}

#[tokio::test]
async fn a_failed_node_takes_its_error_branch_or_fails_the_run() {
    let failing = || {
        Node::function("fail", |_| async {
            Err::<Value, _>("the service is down".to_owned())
        })
    };
    let handled = DagBuilder::new("handled")
        .node("fetch", failing())
        .node("fallback", value(json!("cached answer")))
        .on_error("fetch", "fallback")
        .output("fallback")
        .build()
        .unwrap();
    let result = engine(handled, vec![], Arc::new(MemoryStore::new()))
        .run("t", json!({}))
        .await
        .unwrap();
    assert_eq!(result.answer.as_deref(), Some("cached answer"));
    let unhandled = DagBuilder::new("unhandled")
        .node("fetch", failing())
        .output("fetch")
        .build()
        .unwrap();
    let result = engine(unhandled, vec![], Arc::new(MemoryStore::new()))
        .run("t", json!({}))
        .await
        .unwrap();
    assert_eq!(result.exit_reason, ExitReason::InternalError);
    assert!(result.error.unwrap().contains("the service is down"));
}

#[tokio::test]
async fn resuming_with_a_changed_graph_is_refused_and_the_same_graph_continues() {
    let store = Arc::new(MemoryStore::new());
    let original = research(3);
    let log = vec![
        Event::new(
            "wf",
            1,
            EventKind::SessionStarted {
                task: "rust".into(),
                strategy: "dag:research".into(),
                config: json!({}),
            },
        ),
        Event::new(
            "wf",
            2,
            EventKind::Strategy {
                strategy: "dag:research".into(),
                name: "dag_started".into(),
                data: json!({"hash": original.hash()}),
                usage: None,
            },
        ),
        Event::new(
            "wf",
            3,
            EventKind::Strategy {
                strategy: "dag:research".into(),
                name: "node_completed".into(),
                data: json!({"node": "ask.0", "output": "first"}),
                usage: Some(agent::types::Usage::default()),
            },
        ),
    ];
    store
        .append(agent::store::Append::creating(&log, Durability::Full).unwrap())
        .await
        .unwrap();

    let changed = engine(research(4), research_script(), store.clone());
    let err = changed.resume("wf").await.unwrap_err();
    assert!(matches!(err, EngineError::ResumeRefused { .. }), "{err}");
    assert!(err.to_string().contains("graph changed"), "{err}");
    assert_eq!(
        store.load("wf").await.unwrap().len(),
        3,
        "nothing was written"
    );

    let result = engine(original, research_script(), store.clone())
        .resume("wf")
        .await
        .unwrap();
    assert_eq!(result.answer.as_deref(), Some("summary of three"));
    let log = store.load("wf").await.unwrap();
    let done = completed_nodes(&log);
    assert_eq!(
        done.iter().filter(|n| *n == "ask.0").count(),
        1,
        "a completed node never runs again"
    );
}
