//! Conversations from the command line: `agent run`, then `agent send` answers
//! in the same session as turn 2; `agent show` lists both turns; the trace has a
//! `user_message` line; flags given to `send` are recorded; refusals exit 2 and
//! write nothing.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use agent::event::EventKind;
use common::*;
use serde_json::{Value, json};

fn chat_script() -> Value {
    json!([
        {"type": "tool_call", "tool_name": "calculator",
         "arguments": {"left": 12, "operation": "multiply", "right": 7}},
        {"type": "finish", "answer": "12 times 7 is 84."},
        {"type": "tool_call", "tool_name": "calculator",
         "arguments": {"left": 84, "operation": "multiply", "right": 2}},
        {"type": "finish", "answer": "Doubled, that is 168."},
        {"type": "finish", "answer": "168 minus 100 is 68."}
    ])
}

/// Runs the first turn; its session id.
fn first_turn(scratch: &Scratch, extra: &[&str]) -> String {
    let script = scratch.script("chat.json", chat_script());
    let model = format!("scripted:{}", script.display());
    let mut args = vec![
        "run",
        "What is 12 times 7?",
        "--model",
        &model,
        "--tools",
        "calculator",
        "--json",
    ];
    args.extend_from_slice(extra);
    let output = scratch.run(&args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result = json_stdout(&output);
    assert_eq!(result["turn"], 1);
    result["session_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn send_answers_in_the_same_session_and_show_lists_both_turns() {
    let scratch = scratch("send");
    let session_id = first_turn(&scratch, &["--trace", "chat.jsonl"]);

    let output = scratch.run(&["send", &session_id, "And doubled?", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stderr(&output), "", "--json keeps stderr empty");
    let result = json_stdout(&output);
    assert_eq!(result["session_id"], session_id.as_str());
    assert_eq!(result["exit_reason"], "finished");
    assert_eq!(result["answer"], "Doubled, that is 168.");
    assert_eq!(result["turn"], 2);
    assert_eq!(result["steps_used"], 4, "steps are the session's");
    assert_eq!(result["usage"]["tool_calls"], 2);

    let shown = scratch.run(&["show", &session_id]);
    assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
    let text = stdout(&shown);
    assert!(text.contains("turns: 2"), "{text}");
    assert!(
        text.contains("1. What is 12 times 7? -> 12 times 7 is 84."),
        "{text}"
    );
    assert!(
        text.contains("2. And doubled? -> Doubled, that is 168."),
        "{text}"
    );
    assert!(text.contains("user_message"), "{text}");

    let lines = trace_lines(&scratch.path("chat.jsonl"));
    let types = event_types(&lines);
    let message = types.iter().position(|t| t == "user_message").unwrap();
    assert_eq!(types.first().map(String::as_str), Some("run_started"));
    assert_eq!(
        types[message - 1],
        "run_finished",
        "turn 1 ends before the message"
    );
    assert_eq!(types.last().map(String::as_str), Some("run_finished"));
    assert_eq!(lines[message]["turn"], 2);
    assert!(
        lines[message]["input_summary"]
            .as_str()
            .unwrap()
            .starts_with("chars=12;sha256="),
        "{}",
        lines[message]
    );

    let events = load_log(&scratch.dir, &session_id).await;
    assert!(events.iter().any(|event| matches!(
        &event.kind,
        EventKind::UserMessage { text, turn: 2, config: None } if text == "And doubled?"
    )));
}

#[tokio::test]
async fn flags_given_to_send_are_recorded_and_budgets_count_per_turn() {
    let scratch = scratch("send-flags");
    let session_id = first_turn(&scratch, &["--max-steps", "2"]);
    let output = scratch.run(&["send", &session_id, "And doubled?", "--json"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "turn 2 gets its own two steps: {}",
        stderr(&output)
    );
    let output = scratch.run(&[
        "send",
        &session_id,
        "And minus 100?",
        "--max-steps",
        "3",
        "--session-budget",
        "--on-limit",
        "stop",
        "--json",
    ]);
    let result = json_stdout(&output);
    assert_eq!(output.status.code(), Some(3), "{result}");
    assert_eq!(result["exit_reason"], "max_steps_exceeded");
    assert_eq!(result["turn"], 3);
    let events = load_log(&scratch.dir, &session_id).await;
    let recorded = events
        .iter()
        .find_map(|event| match &event.kind {
            EventKind::UserMessage {
                turn: 3,
                config: Some(config),
                ..
            } => Some(config.clone()),
            _ => None,
        })
        .expect("turn 3 records the flags it was given");
    assert_eq!(recorded["max_steps"], 3);
    assert_eq!(recorded["session_budget"], true);
}

#[test]
fn a_refused_follow_up_exits_2_and_writes_nothing() {
    let scratch = scratch("send-refused");
    let output = scratch.run(&["send", "no-such-session", "hi"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));

    let script = scratch.script(
        "approve.json",
        json!([{"type": "tool_call", "tool_name": "calculator",
                "arguments": {"left": 1, "operation": "add", "right": 1}}]),
    );
    let model = format!("scripted:{}", script.display());
    let waiting = scratch.run(&[
        "run",
        "add",
        "--model",
        &model,
        "--tools",
        "calculator",
        "--approve-tools",
        "calculator",
        "--json",
    ]);
    assert_eq!(waiting.status.code(), Some(10), "{}", stderr(&waiting));
    let session_id = json_stdout(&waiting)["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let before = stdout(&scratch.run(&["show", &session_id, "--json"]));
    let output = scratch.run(&["send", &session_id, "hurry up", "--json"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "", "no RunResult");
    let message = stderr(&output);
    assert!(
        message.contains("cannot take a follow-up message") && message.contains("agent approve"),
        "{message}"
    );
    assert_eq!(
        stdout(&scratch.run(&["show", &session_id, "--json"])),
        before
    );

    let output = scratch.run(&["send", &session_id, "", "--json"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("the message is empty"));
}

/// Starts `agent run` with a one-second sleep and waits for the sleep; its
/// session id and the running process.
async fn running_sleep(scratch: &Scratch, extra: &[&str]) -> (String, std::process::Child) {
    let script = scratch.script(
        "slow.json",
        json!([
            {"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": 1.0}},
            {"type": "finish", "answer": "slept, and read your message"}
        ]),
    );
    let model = format!("scripted:{}", script.display());
    let mut args = vec![
        "run",
        "sleep a second",
        "--model",
        &model,
        "--tools",
        "sleep",
        "--trace",
        "slow.jsonl",
        "--json",
    ];
    args.extend_from_slice(extra);
    let child = scratch
        .command()
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (id, _) = wait_for_log(&scratch.dir, "the sleep", |events| {
        last_is_dispatch_of(events, "sleep")
    })
    .await;
    (id, child)
}

#[tokio::test]
async fn a_message_to_a_running_session_is_queued_and_delivered_after_its_step() {
    let scratch = scratch("send-running");
    let (id, child) = running_sleep(&scratch, &[]).await;
    let sent = scratch.run(&["send", &id, "and say hi", "--json"]);
    assert_eq!(sent.status.code(), Some(0), "{}", stderr(&sent));
    assert_eq!(
        json_stdout(&sent),
        json!({"session_id": id, "status": "running", "message": "queued"})
    );
    let driven = child.wait_with_output().unwrap();
    assert_eq!(driven.status.code(), Some(0));
    let result: Value = serde_json::from_slice(&driven.stdout).unwrap();
    assert_eq!(result["answer"], "slept, and read your message");
    assert_eq!(result["turn"], 1, "a message while running joins the turn");
    let events = load_log(&scratch.dir, &id).await;
    let names: Vec<&str> = events.iter().map(|event| event.kind.name()).collect();
    let queued = names.iter().position(|n| *n == "message_queued").unwrap();
    let completed = names.iter().position(|n| *n == "action_completed").unwrap();
    let delivered = names
        .iter()
        .position(|n| *n == "messages_delivered")
        .unwrap();
    assert!(queued < completed && completed < delivered, "{names:?}");
    let lines = trace_lines(&scratch.path("slow.jsonl"));
    let messages = lines
        .iter()
        .filter(|line| line["event_type"] == "user_message" && line["while_running"] == true)
        .count();
    assert_eq!(messages, 1, "one trace line per message: {lines:?}");
}

#[tokio::test]
async fn a_session_whose_policy_is_reject_refuses_messages_while_it_runs() {
    let scratch = scratch("send-reject");
    let (id, child) = running_sleep(&scratch, &["--on-message", "reject"]).await;
    let sent = scratch.run(&["send", &id, "and say hi", "--json"]);
    assert_eq!(sent.status.code(), Some(2));
    assert_eq!(stdout(&sent), "");
    let message = stderr(&sent);
    assert!(
        message.contains("--on-message policy is reject"),
        "{message}"
    );
    let driven = child.wait_with_output().unwrap();
    assert_eq!(driven.status.code(), Some(0));
    let events = load_log(&scratch.dir, &id).await;
    assert!(
        !events
            .iter()
            .any(|event| matches!(event.kind, EventKind::MessageQueued { .. }))
    );
    let bad = scratch.run(&[
        "run",
        "x",
        "--model",
        "scripted:slow.json",
        "--on-message",
        "shout",
    ]);
    assert_eq!(bad.status.code(), Some(2));
}
