//! Fork and replay from the command line.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use agent::event::EventKind;
use agent::types::Action;
use common::*;
use serde_json::{Value, json};

fn calculator_session(scratch: &Scratch, extra: &[&str]) -> String {
    let output = run_calculator(scratch, extra);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    json_stdout(&output)["session_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn tool_calls(events: &[agent::event::Event]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ModelResponded { actions, .. } => Some(actions.clone()),
            _ => None,
        })
        .flatten()
        .filter_map(|action| match action {
            Action::ToolCall(call) => Some((call.tool_name, call.arguments)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_fork_resumed_with_another_model_is_independent_of_its_parent() {
    let scratch = scratch("fork");
    let parent = calculator_session(&scratch, &["--trace", "parent.jsonl"]);
    let parent_log = load_log(&scratch.dir, &parent).await;
    let parent_trace = std::fs::read_to_string(scratch.path("parent.jsonl")).unwrap();

    let inside = json_stdout(&scratch.run(&["fork", &parent, "--at", "4", "--json"]));
    assert_eq!(inside["parent"], parent.as_str());
    assert_eq!(
        inside["at"], 1,
        "seq 4 is inside step 1's action: back to its start"
    );
    let keys: Vec<&String> = inside.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["session_id", "parent", "at"]);

    let fork = json_stdout(&scratch.run(&["fork", &parent, "--at", "5", "--json"]));
    assert_eq!(fork["at"], 5);
    let fork_id = fork["session_id"].as_str().unwrap();
    let other = scratch.script(
        "other.json",
        json!([
            {"type": "finish", "answer": "unused"},
            {"type": "finish", "answer": "a different ending"}
        ]),
    );
    let resumed = scratch.run(&[
        "resume",
        fork_id,
        "--model",
        &format!("scripted:{}", other.display()),
        "--json",
    ]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let result = json_stdout(&resumed);
    assert_eq!(result["answer"], "a different ending");
    assert_eq!(result["session_id"], fork_id);
    assert_eq!(result["steps_used"], 2);

    assert_eq!(
        load_log(&scratch.dir, &parent).await,
        parent_log,
        "the parent is untouched"
    );
    assert_eq!(
        std::fs::read_to_string(scratch.path("parent.jsonl")).unwrap(),
        parent_trace,
        "a fork writes its parent's trace only when --trace is given again"
    );
    let listed = json_stdout(&scratch.run(&["sessions", "--json"]));
    assert_eq!(listed.as_array().unwrap().len(), 3);

    let fork = json_stdout(&scratch.run(&["fork", &parent, "--at", "5", "--json"]));
    let fork_id = fork["session_id"].as_str().unwrap();
    let traced = scratch.run(&[
        "resume",
        fork_id,
        "--model",
        &format!("scripted:{}", other.display()),
        "--trace",
        "fork.jsonl",
        "--json",
    ]);
    assert_eq!(traced.status.code(), Some(0));
    let types = event_types(&trace_lines(&scratch.path("fork.jsonl")));
    assert_eq!(types, ["run_resumed", "model_action", "run_finished"]);

    for at in ["0", "99"] {
        let bad = scratch.run(&["fork", &parent, "--at", at]);
        assert_eq!(bad.status.code(), Some(2), "--at {at}");
    }
}

#[tokio::test]
async fn a_replay_reproduces_the_answer_and_the_tool_calls() {
    let scratch = scratch("replay");
    let original = calculator_session(&scratch, &[]);
    let replay = scratch.run(&[
        "run",
        "What is 12 times 7?",
        "--model",
        &format!("replay:{original}"),
        "--tools",
        "calculator",
        "--json",
    ]);
    assert_eq!(replay.status.code(), Some(0), "{}", stderr(&replay));
    let result = json_stdout(&replay);
    assert_eq!(result["answer"], "12 times 7 is 84, which is above 80.");
    let replayed = result["session_id"].as_str().unwrap();
    let original_log = load_log(&scratch.dir, &original).await;
    let replay_log = load_log(&scratch.dir, replayed).await;
    assert_eq!(tool_calls(&replay_log), tool_calls(&original_log));
    let observations = |log: &[agent::event::Event]| -> Vec<String> {
        log.iter()
            .filter_map(|e| match &e.kind {
                EventKind::ActionCompleted { observation } => Some(observation.content.clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(observations(&replay_log), observations(&original_log));
}

#[test]
fn a_diverging_replay_stops_with_provider_error_naming_the_step() {
    let scratch = scratch("diverge");
    let original = calculator_session(&scratch, &[]);
    let model = format!("replay:{original}");
    let no_tool = scratch.run(&["run", "t", "--model", &model, "--json"]);
    assert_eq!(no_tool.status.code(), Some(7));
    let error = json_stdout(&no_tool)["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains("step 1") && error.contains("calculator"),
        "{error}"
    );

    let script = scratch.script("short.json", json!([
        {"type": "tool_call", "tool_name": "calculator", "arguments": {"left": 1, "operation": "add", "right": 1}}
    ]));
    let short = scratch.run(&[
        "run",
        "t",
        "--model",
        &format!("scripted:{}", script.display()),
        "--tools",
        "calculator",
        "--max-steps",
        "1",
        "--json",
    ]);
    let short_id = json_stdout(&short)["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let ran_out = scratch.run(&[
        "run",
        "t",
        "--model",
        &format!("replay:{short_id}"),
        "--tools",
        "calculator",
        "--json",
    ]);
    assert_eq!(ran_out.status.code(), Some(7));
    let result = json_stdout(&ran_out);
    assert_eq!(result["exit_reason"], "provider_error");
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("diverged at step 2"),
        "{result}"
    );

    let unknown = scratch.run(&["run", "t", "--model", "replay:nope", "--json"]);
    assert_eq!(unknown.status.code(), Some(2));
}

#[tokio::test]
async fn the_cli_explains_that_a_dag_session_resumes_in_code() {
    use std::sync::Arc;

    use agent::prelude::*;

    let scratch = scratch("dag-cli");
    let db = scratch.path("wf.db");
    let dag = DagBuilder::new("tiny")
        .node(
            "only",
            Node::function("fail", |_| async { Err::<Value, _>("down".to_owned()) }),
        )
        .output("only")
        .build()
        .unwrap();
    let engine = Engine::builder(
        Arc::new(ScriptedModel::from_values(vec![]).unwrap()),
        Arc::new(dag),
    )
    .store(Arc::new(SqliteStore::open(&db).unwrap()))
    .build();
    let id = "not-ended";
    let started = agent::event::Event::new(
        id,
        1,
        EventKind::SessionStarted {
            task: "t".into(),
            strategy: "dag:tiny".into(),
            config: json!({}),
        },
    );
    engine
        .store()
        .append(agent::store::Append::creating(&[started], agent::store::Durability::Full).unwrap())
        .await
        .unwrap();
    let store = format!("sqlite://{}", db.display());
    let output = scratch.run(&["resume", id, "--store", &store]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("DAG workflow"),
        "{}",
        stderr(&output)
    );
    let shown = scratch.run(&["show", id, "--store", &store, "--json"]);
    assert_eq!(json_stdout(&shown)["status"], "running");
}
