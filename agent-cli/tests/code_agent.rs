//! The code-agent tools, the completion gate and MCP servers from the command line.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::process::Stdio;

use common::*;
use serde_json::json;

#[test]
fn reading_outside_the_workspace_is_an_error_observation_and_the_run_finishes() {
    let scratch = scratch("passwd");
    let script = scratch.script("s.json", json!([
        {"type": "tool_call", "tool_name": "read_file", "arguments": {"path": "../../etc/passwd"}},
        {"type": "finish", "answer": "I may not read that"}
    ]));
    let output = scratch.run(&[
        "run",
        "Show me the passwords",
        "--model",
        &format!("scripted:{}", script.display()),
        "--tools",
        "read_file",
        "--trace",
        "t.jsonl",
        "--trace-content",
        "full",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(json_stdout(&output)["exit_reason"], "finished");
    let lines = trace_lines(&scratch.path("t.jsonl"));
    assert_eq!(lines[2]["event_type"], "observation");
    assert_eq!(lines[2]["is_error"], true);
    let text = lines[2]["output"].as_str().unwrap();
    assert!(text.contains("refused"), "{text}");
    assert!(
        !std::fs::read_to_string(scratch.path("t.jsonl"))
            .unwrap()
            .contains("root:")
    );
}

#[test]
fn a_finish_is_refused_until_the_completion_check_passes() {
    let scratch = scratch("gate");
    let script = scratch.script("s.json", json!([
        {"type": "finish", "answer": "done already"},
        {"type": "tool_call", "tool_name": "write_file", "arguments": {"path": "done.txt", "content": "ok"}},
        {"type": "finish", "answer": "done now"}
    ]));
    let output = scratch.run(&[
        "run",
        "make done.txt",
        "--model",
        &format!("scripted:{}", script.display()),
        "--tools",
        "write_file",
        "--finish-when",
        "test -f done.txt",
        "--trace",
        "t.jsonl",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result = json_stdout(&output);
    assert_eq!(result["answer"], "done now");
    assert_eq!(result["steps_used"], 3);
    let lines = trace_lines(&scratch.path("t.jsonl"));
    assert_eq!(
        event_types(&lines),
        [
            "run_started",
            "model_action",
            "model_feedback",
            "model_action",
            "observation",
            "model_action",
            "run_finished"
        ]
    );
    assert!(
        lines[2]["error"]
            .as_str()
            .unwrap()
            .contains("`test -f done.txt` failed with exit code 1")
    );

    let never = scratch.script(
        "never.json",
        json!([{"type": "finish", "answer": "a"}, {"type": "finish", "answer": "b"}]),
    );
    let output = scratch.run(&[
        "run",
        "t",
        "--model",
        &format!("scripted:{}", never.display()),
        "--finish-when",
        "false",
        "--max-steps",
        "2",
        "--json",
    ]);
    assert_eq!(
        output.status.code(),
        Some(3),
        "a gate that never passes runs out of steps"
    );
}

#[test]
fn run_command_obeys_allow_cmd() {
    let scratch = scratch("allow");
    let script = scratch.script("s.json", json!([
        {"type": "tool_call", "tool_name": "run_command", "arguments": {"program": "rm", "args": ["-rf", "x"]}},
        {"type": "tool_call", "tool_name": "run_command", "arguments": {"program": "echo", "args": ["hi"]}},
        {"type": "finish", "answer": "ok"}
    ]));
    let output = scratch.run(&[
        "run",
        "t",
        "--model",
        &format!("scripted:{}", script.display()),
        "--tools",
        "run_command",
        "--allow-cmd",
        "echo",
        "--trace",
        "t.jsonl",
        "--trace-content",
        "full",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let observations: Vec<serde_json::Value> = trace_lines(&scratch.path("t.jsonl"))
        .into_iter()
        .filter(|l| l["event_type"] == "observation")
        .collect();
    assert_eq!(observations[0]["is_error"], true);
    assert!(
        observations[0]["output"]
            .as_str()
            .unwrap()
            .contains("not allowed")
    );
    assert!(
        observations[1]["output"]
            .as_str()
            .unwrap()
            .contains("\"stdout\":\"hi\\n\"")
    );
}

#[test]
fn mcp_tools_are_offered_under_their_own_names_and_clashes_and_hangs_are_clear_errors() {
    let scratch = scratch("mcp");
    let script = scratch.script(
        "s.json",
        json!([
            {"type": "tool_call", "tool_name": "echo", "arguments": {"message": "through MCP"}},
            {"type": "finish", "answer": "echoed"}
        ]),
    );
    let model = format!("scripted:{}", script.display());
    let output = scratch.run(&[
        "run",
        "t",
        "--model",
        &model,
        "--mcp",
        "mcp-server-everything stdio",
        "--trace",
        "t.jsonl",
        "--trace-content",
        "full",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stderr(&output), "", "server logs stay off our stderr");
    let lines = trace_lines(&scratch.path("t.jsonl"));
    assert!(
        lines[2]["output"].as_str().unwrap().contains("through MCP"),
        "{}",
        lines[2]
    );

    let clash = scratch.run(&[
        "run",
        "t",
        "--model",
        &model,
        "--mcp",
        "mcp-server-everything stdio",
        "--mcp",
        "mcp-server-everything stdio",
        "--json",
    ]);
    assert_eq!(clash.status.code(), Some(2));
    assert!(
        stderr(&clash).contains("already registered"),
        "{}",
        stderr(&clash)
    );

    let hang = format!(
        "node {}/../agent-tools/tests/fixtures/fake_mcp.mjs hang-on-start",
        env!("CARGO_MANIFEST_DIR")
    );
    let started = std::time::Instant::now();
    let hung = scratch.run(&[
        "run",
        "t",
        "--model",
        &model,
        "--mcp",
        &hang,
        "--mcp-timeout",
        "1",
        "--json",
    ]);
    assert_eq!(hung.status.code(), Some(2));
    assert!(
        stderr(&hung).contains("no MCP handshake within 1s"),
        "{}",
        stderr(&hung)
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[tokio::test]
async fn mcp_servers_are_restarted_on_resume() {
    let scratch = scratch("mcp-resume");
    let script = scratch.script(
        "s.json",
        json!([
            {"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": 2}},
            {"type": "tool_call", "tool_name": "echo", "arguments": {"message": "after the crash"}},
            {"type": "finish", "answer": "done"}
        ]),
    );
    let mut child = scratch
        .command()
        .args([
            "run",
            "t",
            "--model",
            &format!("scripted:{}", script.display()),
            "--tools",
            "sleep",
            "--mcp",
            "mcp-server-everything stdio",
            "--trace",
            "t.jsonl",
            "--trace-content",
            "full",
            "--json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (id, _) = wait_for_log(&scratch.dir, "the sleep", |events| {
        last_is_dispatch_of(events, "sleep")
    })
    .await;
    kill_hard(&mut child);
    let resumed = scratch.run(&["resume", &id, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    let echoed = trace_lines(&scratch.path("t.jsonl")).into_iter().any(|l| {
        l["event_type"] == "observation"
            && l["output"]
                .as_str()
                .unwrap_or("")
                .contains("after the crash")
    });
    assert!(echoed, "the resumed run called the restarted server");
}
