//! Human-in-the-Loop and Plan-and-Execute from the command line.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::process::Stdio;

use agent::event::EventKind;
use common::*;
use serde_json::{Value, json};

fn write_script(scratch: &Scratch) -> String {
    let script = scratch.script("w.json", json!([
        {"type": "tool_call", "tool_name": "write_file", "arguments": {"path": "out.txt", "content": "hello"}},
        {"type": "finish", "answer": "written"}
    ]));
    format!("scripted:{}", script.display())
}

fn run_pending(scratch: &Scratch, model: &str) -> String {
    let output = scratch.run(&[
        "run",
        "write the file",
        "--model",
        model,
        "--tools",
        "write_file",
        "--approve-tools",
        "write_file",
        "--trace",
        "t.jsonl",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(10), "{}", stderr(&output));
    assert_eq!(stderr(&output), "");
    let result = json_stdout(&output);
    assert_eq!(result["exit_reason"], "awaiting_approval");
    assert_eq!(result["pending"][0]["tool_name"], "write_file");
    assert_eq!(result["pending"][0]["id"], "call_1_1");
    assert!(
        !scratch.path("out.txt").exists(),
        "nothing is written before approval"
    );
    result["session_id"].as_str().unwrap().to_owned()
}

#[test]
fn approve_then_resume_writes_the_file() {
    let scratch = scratch("approve");
    let id = run_pending(&scratch, &write_script(&scratch));
    let listed =
        json_stdout(&scratch.run(&["sessions", "--status", "awaiting_approval", "--json"]));
    assert_eq!(listed[0]["session_id"], id.as_str());
    let again = scratch.run(&["resume", &id, "--json"]);
    assert_eq!(again.status.code(), Some(10), "still waiting");

    let approved = scratch.run(&["approve", &id, "--json"]);
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    assert_eq!(
        json_stdout(&approved),
        json!({"session_id": id, "decided": ["call_1_1"]})
    );
    for twice in [
        vec!["approve", id.as_str()],
        vec!["deny", id.as_str(), "--reason", "x"],
    ] {
        let output = scratch.run(&twice);
        assert_eq!(output.status.code(), Some(2), "{twice:?}");
        assert!(
            stderr(&output).contains("no call waiting"),
            "{}",
            stderr(&output)
        );
    }
    let resumed = scratch.run(&["resume", &id, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(json_stdout(&resumed)["answer"], "written");
    assert_eq!(
        std::fs::read_to_string(scratch.path("out.txt")).unwrap(),
        "hello"
    );
    let types = event_types(&trace_lines(&scratch.path("t.jsonl")));
    assert!(
        types.contains(&"approval_requested".to_owned())
            && types.contains(&"approval_decided".to_owned()),
        "{types:?}"
    );

    let finished = scratch.run(&["approve", &id]);
    assert_eq!(
        finished.status.code(),
        Some(2),
        "a finished session has nothing pending"
    );
}

#[test]
fn deny_then_resume_finishes_without_the_file_and_tells_the_model() {
    let scratch = scratch("deny");
    let id = run_pending(&scratch, &write_script(&scratch));
    let missing_reason = scratch.run(&["deny", &id]);
    assert_eq!(
        missing_reason.status.code(),
        Some(2),
        "--reason is required"
    );
    let wrong_call = scratch.run(&["deny", &id, "--call", "call_9_9", "--reason", "no"]);
    assert_eq!(wrong_call.status.code(), Some(2));
    assert!(
        stderr(&wrong_call).contains("call_9_9"),
        "{}",
        stderr(&wrong_call)
    );
    let denied = scratch.run(&[
        "deny",
        &id,
        "--call",
        "call_1_1",
        "--reason",
        "not in production",
        "--json",
    ]);
    assert_eq!(json_stdout(&denied)["decided"], json!(["call_1_1"]));
    let resumed = scratch.run(&["resume", &id, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert!(!scratch.path("out.txt").exists());
    let shown = json_stdout(&scratch.run(&["show", &id, "--json"]));
    let denial = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"]["type"] == "approval_decided")
        .unwrap();
    assert_eq!(denial["kind"]["decision"]["decision"], "denied");
    let lines = trace_lines(&scratch.path("t.jsonl"));
    let observation = lines
        .iter()
        .find(|l| l["event_type"] == "observation")
        .unwrap();
    assert_eq!(observation["is_error"], true);
}

#[test]
fn approving_with_edited_arguments_checks_them_against_the_schema() {
    let scratch = scratch("edit");
    let id = run_pending(&scratch, &write_script(&scratch));
    let bad = scratch.run(&["approve", &id, "--args", r#"{"path": "out.txt"}"#]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("missing required field `content`"),
        "{}",
        stderr(&bad)
    );
    let not_json = scratch.run(&["approve", &id, "--args", "{oops"]);
    assert_eq!(not_json.status.code(), Some(2));
    let edited = scratch.run(&[
        "approve",
        &id,
        "--args",
        r#"{"path": "out.txt", "content": "edited by a human"}"#,
    ]);
    assert_eq!(edited.status.code(), Some(0), "{}", stderr(&edited));
    let resumed = scratch.run(&["resume", &id, "--json"]);
    assert_eq!(resumed.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(scratch.path("out.txt")).unwrap(),
        "edited by a human"
    );
}

#[test]
fn the_recorded_policy_holds_on_resume_and_one_call_can_be_decided_at_a_time() {
    let scratch = scratch("policy");
    let script = scratch.script("two.json", json!([
        {"type": "tool_calls", "calls": [
            {"tool_name": "write_file", "arguments": {"path": "a.txt", "content": "a"}},
            {"tool_name": "write_file", "arguments": {"path": "b.txt", "content": "b"}}]},
        {"type": "tool_call", "tool_name": "write_file", "arguments": {"path": "c.txt", "content": "c"}},
        {"type": "finish", "answer": "done"}
    ]));
    let model = format!("scripted:{}", script.display());
    let first = scratch.run(&[
        "run",
        "t",
        "--model",
        &model,
        "--tools",
        "write_file",
        "--approve-tools",
        "write_file",
        "--json",
    ]);
    assert_eq!(first.status.code(), Some(10));
    let result = json_stdout(&first);
    let id = result["session_id"].as_str().unwrap().to_owned();
    assert_eq!(result["pending"].as_array().unwrap().len(), 2);
    scratch.run(&["approve", &id, "--call", "call_1_1"]);
    let status = json_stdout(&scratch.run(&["sessions", "--json"]));
    assert_eq!(
        status[0]["status"], "awaiting_approval",
        "one call still waits"
    );
    let still = scratch.run(&["resume", &id, "--json"]);
    assert_eq!(still.status.code(), Some(10));
    assert_eq!(json_stdout(&still)["pending"][0]["id"], "call_1_2");
    scratch.run(&["deny", &id, "--call", "call_1_2", "--reason", "only a"]);

    let resumed = scratch.run(&["resume", &id, "--tools", "write_file", "--json"]);
    assert_eq!(
        resumed.status.code(),
        Some(10),
        "the policy recorded at start still applies: {}",
        stderr(&resumed)
    );
    assert_eq!(json_stdout(&resumed)["pending"][0]["id"], "call_2_1");
    assert!(
        scratch.path("a.txt").exists()
            && !scratch.path("b.txt").exists()
            && !scratch.path("c.txt").exists()
    );
}

#[tokio::test]
async fn plan_execute_resumed_after_a_kill_in_step_two_does_not_rerun_step_one() {
    let scratch = scratch("plan");
    let script = scratch.script("plan.json", json!([
        {"type": "plan", "steps": [{"goal": "note the start", "tool": "append_line"}, {"goal": "wait", "tool": "sleep"}]},
        {"type": "tool_call", "tool_name": "append_line", "arguments": {"path": "log.txt", "line": "step one"}},
        {"type": "finish", "answer": "noted"},
        {"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": 2}},
        {"type": "finish", "answer": "waited"},
        {"type": "finish", "answer": "noted the start and waited"}
    ]));
    let mut child = scratch
        .command()
        .args([
            "run",
            "two steps",
            "--model",
            &format!("scripted:{}", script.display()),
            "--tools",
            "append_line,sleep",
            "--strategy",
            "plan-execute",
            "--json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (id, _) = wait_for_log(&scratch.dir, "the sleep of step 2", |events| {
        last_is_dispatch_of(events, "sleep")
    })
    .await;
    kill_hard(&mut child);
    let resumed = scratch.run(&["resume", &id, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(
        json_stdout(&resumed)["answer"],
        "noted the start and waited"
    );
    assert_eq!(
        std::fs::read_to_string(scratch.path("log.txt")).unwrap(),
        "step one\n",
        "step 1 ran once"
    );
    let log = load_log(&scratch.dir, &id).await;
    let records: Vec<(String, Value)> = log
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Strategy { name, data, .. } => Some((name.clone(), data.clone())),
            _ => None,
        })
        .collect();
    let names: Vec<&str> = records.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["plan_created", "step_completed", "step_completed"]);
    assert_eq!(records[1].1["result"], "noted");
}

#[test]
fn an_invalid_plan_becomes_feedback() {
    let scratch = scratch("bad-plan");
    let script = scratch.script(
        "plan.json",
        json!([
            {"type": "plan", "steps": []},
            "not even JSON",
            {"type": "plan", "steps": [{"goal": "answer"}]},
            {"type": "finish", "answer": "42"},
            {"type": "finish", "answer": "the answer is 42"}
        ]),
    );
    let output = scratch.run(&[
        "run",
        "t",
        "--model",
        &format!("scripted:{}", script.display()),
        "--strategy",
        "plan-execute",
        "--trace",
        "t.jsonl",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(json_stdout(&output)["answer"], "the answer is 42");
    let types = event_types(&trace_lines(&scratch.path("t.jsonl")));
    assert_eq!(
        types.iter().filter(|t| *t == "model_feedback").count(),
        2,
        "{types:?}"
    );
}
