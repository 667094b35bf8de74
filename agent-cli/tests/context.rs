//! `--context` as a user runs it: a long scripted session under `summarise`
//! keeps every request under its window and `agent show` lists the summaries; a
//! summary cut off by kill -9 is asked again on resume and the session folds to
//! the history an uninterrupted run has; a replay of a compacted session sees
//! the same history. The crash and replay tests talk to an OpenAI-compatible
//! server on loopback, so requests are counted with the real tokenizer.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agent::event::{Event, EventKind};
use agent::history::HistoryItem;
use agent::state::SessionState;
use agent_testkit::{FakeProvider, Received, Reply};
use common::*;
use serde_json::{Value, json};

/// Steps of the loopback conversation before its finish.
const SERVER_STEPS: usize = 40;

fn long_script(steps: usize) -> Value {
    let mut script: Vec<Value> = (0..steps)
        .map(|n| {
            json!({"type": "tool_call", "tool_name": "calculator",
                   "arguments": {"left": n, "operation": "multiply", "right": 7}})
        })
        .collect();
    script.push(json!({"type": "finish", "answer": "every product computed"}));
    Value::Array(script)
}

fn events_of(scratch: &Scratch, session_id: &str) -> Vec<Event> {
    let shown = json_stdout(&scratch.run(&["show", session_id, "--json"]));
    serde_json::from_value(shown["events"].clone()).unwrap()
}

fn history_of(session_id: &str, events: &[Event]) -> Vec<HistoryItem> {
    SessionState::from_events(session_id, events)
        .unwrap()
        .history()
        .to_vec()
}

fn compactions(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|event| matches!(event.kind, EventKind::ContextCompacted { .. }))
        .count()
}

#[test]
fn summarise_keeps_every_request_of_a_300_step_session_under_the_window() {
    let scratch = scratch("context-summarise");
    let script = scratch.script("long.json", long_script(300));
    let output = scratch.run(&[
        "run",
        "Multiply each number by 7.",
        "--model",
        &format!("scripted:{}", script.display()),
        "--tools",
        "calculator",
        "--max-steps",
        "400",
        "--context",
        "summarise:2000",
        "--trace",
        "trace.jsonl",
        "--json",
    ]);
    let result = json_stdout(&output);
    assert_eq!(result["exit_reason"], "finished", "{}", stderr(&output));
    assert_eq!(result["steps_used"], 301);
    let id = result["session_id"].as_str().unwrap();
    let events = events_of(&scratch, id);
    let mut requests = 0;
    for event in &events {
        if let EventKind::ModelRequested { context_tokens, .. } = &event.kind {
            let tokens = context_tokens.expect("a policy records the tokens of each request");
            assert!(tokens <= 2000, "seq {}: {tokens} tokens sent", event.seq);
            requests += 1;
        }
    }
    assert_eq!(requests, 301);
    let compacted = compactions(&events);
    assert!(compacted >= 5, "{compacted} compactions");
    assert_eq!(
        result["usage"]["model_calls"],
        301 + compacted,
        "each summary is a model call"
    );
    let shown = stdout(&scratch.run(&["show", id]));
    assert!(
        shown.contains(&format!("context: summarise:2000, {compacted} compactions")),
        "{shown}"
    );
    assert_eq!(
        shown
            .lines()
            .filter(|line| line.contains("context_compacted"))
            .count(),
        compacted,
        "{shown}"
    );
    let lines = trace_lines(&scratch.path("trace.jsonl"));
    let traced: Vec<&Value> = lines
        .iter()
        .filter(|line| line["event_type"] == "context_compacted")
        .collect();
    assert_eq!(traced.len(), compacted);
    assert!(
        traced[0]["tokens_before"].as_u64().unwrap() > traced[0]["tokens_after"].as_u64().unwrap()
    );
    assert!(traced[0]["summary"].as_str().unwrap().starts_with("chars="));
}

#[test]
fn a_bad_context_policy_is_refused_with_the_forms_that_work() {
    let scratch = scratch("context-bad");
    let script = scratch.script("s.json", calculator_script());
    let output = scratch.run(&[
        "run",
        CALCULATOR_TASK,
        "--model",
        &format!("scripted:{}", script.display()),
        "--context",
        "window:ten",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(
        said.contains("window:ten") && said.contains("summarise:TOKENS"),
        "{said}"
    );
}

/// A loopback OpenAI-compatible server: step requests get calculator calls in
/// order, then a finish; summary requests (they offer no tools) get a summary,
/// the first one only after a minute when `slow_first_summary` is set.
async fn server(slow_first_summary: bool) -> FakeProvider {
    let steps = AtomicUsize::new(0);
    let slow = AtomicBool::new(slow_first_summary);
    FakeProvider::answering(move |request: &Received| {
        if request.body.get("tools").is_none() {
            let delay = if slow.swap(false, Ordering::SeqCst) {
                Duration::from_secs(60)
            } else {
                Duration::ZERO
            };
            return text("Summary: every product so far was computed.").delayed(delay);
        }
        let step = steps.fetch_add(1, Ordering::SeqCst);
        if step >= SERVER_STEPS {
            return text("every product computed");
        }
        let arguments = json!({"left": step, "operation": "multiply", "right": 7}).to_string();
        Reply::json(&json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": format!("call_{step}"), "type": "function",
                                "function": {"name": "calculator", "arguments": arguments}}]}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10}
        }))
    })
    .await
    .unwrap()
}

fn text(content: &str) -> Reply {
    Reply::json(&json!({
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 300, "completion_tokens": 20}
    }))
}

fn run_against(scratch: &Scratch, server: &FakeProvider) -> std::process::Command {
    let mut command = scratch.command();
    command.env_remove("OPENAI_API_KEY").args([
        "run",
        "Multiply each number by 7.",
        "--model",
        &format!("openai:gpt-4o@{}/v1", server.url()),
        "--tools",
        "calculator",
        "--max-steps",
        "100",
        "--context",
        "summarise:800",
        "--json",
    ]);
    command
}

fn spawn(mut command: std::process::Command) -> Child {
    command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summary_cut_off_by_kill_9_is_asked_again_and_the_history_is_the_same() {
    let clean_scratch = scratch("context-clean");
    let clean_server = server(false).await;
    let clean = run_against(&clean_scratch, &clean_server).output().unwrap();
    let clean_result = json_stdout(&clean);
    assert_eq!(
        clean_result["exit_reason"],
        "finished",
        "{}",
        stderr(&clean)
    );
    let clean_id = clean_result["session_id"].as_str().unwrap();
    let clean_events = events_of(&clean_scratch, clean_id);
    assert!(
        compactions(&clean_events) >= 2,
        "the window is small enough to summarise"
    );

    let crash_scratch = scratch("context-crash");
    let crash_server = server(true).await;
    let mut child = spawn(run_against(&crash_scratch, &crash_server));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !crash_server
        .received()
        .iter()
        .any(|request| request.body.get("tools").is_none())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no summary was asked for"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    kill_hard(&mut child);
    let (id, before) = wait_for_log(&crash_scratch.dir, "the session's log", |_| true).await;
    assert_eq!(
        compactions(&before),
        0,
        "nothing of the cut-off summary is recorded"
    );

    let resumed = crash_scratch.run(&["resume", &id, "--json"]);
    let result = json_stdout(&resumed);
    assert_eq!(result["exit_reason"], "finished", "{}", stderr(&resumed));
    let after = events_of(&crash_scratch, &id);
    assert_eq!(compactions(&after), compactions(&clean_events));
    assert_eq!(history_of(&id, &after), history_of(clean_id, &clean_events));
    let summaries_asked = crash_server
        .received()
        .iter()
        .filter(|request| request.body.get("tools").is_none())
        .count();
    assert_eq!(
        summaries_asked,
        compactions(&after) + 1,
        "the cut-off summary was asked again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_of_a_compacted_session_sees_the_same_history() {
    let scratch = scratch("context-replay");
    let provider = server(false).await;
    let original = run_against(&scratch, &provider).output().unwrap();
    let source = json_stdout(&original);
    assert_eq!(source["exit_reason"], "finished", "{source}");
    let source_id = source["session_id"].as_str().unwrap();
    let replay = scratch.run(&[
        "run",
        "Multiply each number by 7.",
        "--model",
        &format!("replay:{source_id}"),
        "--tools",
        "calculator",
        "--max-steps",
        "100",
        "--context",
        "summarise:800",
        "--json",
    ]);
    let replayed = json_stdout(&replay);
    assert_eq!(replayed["exit_reason"], "finished", "{}", stderr(&replay));
    assert_eq!(replayed["answer"], source["answer"]);
    let replay_id = replayed["session_id"].as_str().unwrap();
    let source_events = events_of(&scratch, source_id);
    let replay_events = events_of(&scratch, replay_id);
    assert!(compactions(&source_events) >= 2);
    assert_eq!(compactions(&replay_events), compactions(&source_events));
    assert_eq!(
        history_of(replay_id, &replay_events),
        history_of(source_id, &source_events)
    );
}
