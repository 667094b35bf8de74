//! `agent run` as a user runs it: exit codes, `--json` output and the trace file.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::io::Read;
use std::process::Stdio;

use common::*;
use serde_json::{Value, json};

const TASK: &str = CALCULATOR_TASK;

#[test]
fn the_calculator_task_finishes_with_the_contract_trace() {
    let scratch = scratch("calc");
    let trace = scratch.path("trace.jsonl");
    let output = run_calculator(&scratch, &["--trace", trace.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stderr(&output), "", "--json keeps stderr empty");
    let result = json_stdout(&output);
    assert_eq!(result["exit_reason"], "finished");
    assert_eq!(result["answer"], "12 times 7 is 84, which is above 80.");
    assert_eq!(result["steps_used"], 2);
    let mut usage = result["usage"].clone();
    let by_model = usage.as_object_mut().unwrap().remove("by_model").unwrap();
    assert_eq!(
        usage,
        json!({"input_tokens": 0, "output_tokens": 0, "model_calls": 2, "tool_calls": 1})
    );
    let (spec, counted) = by_model.as_object().unwrap().iter().next().unwrap();
    assert!(
        spec.starts_with("scripted:") && spec.ends_with("calc.json"),
        "{spec}"
    );
    assert_eq!(
        counted,
        &json!({"input_tokens": 0, "output_tokens": 0, "model_calls": 2})
    );
    assert_eq!(result["budget"], Value::Null);
    assert_eq!(result["error"], Value::Null);
    let session_id = result["session_id"].as_str().unwrap();

    let lines = trace_lines(&trace);
    assert_eq!(
        event_types(&lines),
        [
            "run_started",
            "model_action",
            "observation",
            "model_action",
            "run_finished"
        ]
    );
    for line in &lines {
        assert_eq!(line["run_id"], session_id);
        assert!(line["step"].is_u64(), "{line}");
        assert!(
            line.as_object().unwrap().values().all(|v| !v.is_object()),
            "flat: {line}"
        );
    }
    let steps: Vec<u64> = lines.iter().map(|l| l["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, [0, 1, 1, 2, 2]);
    assert!(
        lines[0]["input_summary"]
            .as_str()
            .unwrap()
            .starts_with("chars=39;sha256=")
    );
    assert_eq!(lines[1]["action_type"], "tool_call");
    assert_eq!(lines[1]["tool_name"], "calculator");
    assert_eq!(
        lines[1]["argument_keys"],
        json!(["left", "operation", "right"])
    );
    assert_eq!(lines[2]["tool_name"], "calculator");
    assert_eq!(lines[2]["call_id"], "call_1_1");
    assert_eq!(lines[2]["is_error"], false);
    assert_eq!(
        lines[2]["output"],
        agent::trace::summarize("84"),
        "the observation is 84, summarised"
    );
    assert_eq!(lines[3]["action_type"], "finish");
    assert!(
        lines[3]["output"]
            .as_str()
            .unwrap()
            .starts_with("chars=36;sha256=")
    );
    assert_eq!(lines[4]["exit_reason"], "finished");
    assert_eq!(lines[4]["steps_used"], 2);
}

#[test]
fn without_json_the_run_is_told_for_people() {
    let scratch = scratch("human");
    let script = scratch.script("calc.json", calculator_script());
    let output = scratch.run(&[
        "run",
        TASK,
        "--model",
        &format!("scripted:{}", script.display()),
        "--tools",
        "calculator",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    assert!(text.contains("-> calculator"), "{text}");
    assert!(text.contains("<- 84"), "{text}");
    assert!(
        text.contains("answer: 12 times 7 is 84, which is above 80."),
        "{text}"
    );
}

#[test]
fn a_secret_in_the_task_never_reaches_a_summary_trace() {
    let scratch = scratch("secret");
    let secret = "sk-TOPSECRET-4242";
    let script = scratch.script(
        "echo.json",
        json!([{"type": "finish", "answer": format!("the key was {secret}")}]),
    );
    let task = format!("Remember the key {secret} and repeat it");
    for (mode, expect_secret) in [("summary", false), ("full", true)] {
        let trace = scratch.path(&format!("{mode}.jsonl"));
        let output = scratch.run(&[
            "run",
            &task,
            "--model",
            &format!("scripted:{}", script.display()),
            "--trace",
            trace.to_str().unwrap(),
            "--trace-content",
            mode,
            "--json",
        ]);
        assert_eq!(output.status.code(), Some(0));
        let text = std::fs::read_to_string(&trace).unwrap();
        assert_eq!(text.contains(secret), expect_secret, "{mode}: {text}");
    }
}

#[test]
fn argument_values_stay_out_of_a_summary_trace() {
    let scratch = scratch("args");
    let script = scratch.script(
        "calc.json",
        json!([
            {"type": "tool_call", "tool_name": "calculator",
             "arguments": {"left": 987654321, "operation": "add", "right": 1}},
            {"type": "finish", "answer": "ok"}
        ]),
    );
    let trace = scratch.path("trace.jsonl");
    let output = scratch.run(&[
        "run",
        "add",
        "--model",
        &format!("scripted:{}", script.display()),
        "--tools",
        "calculator",
        "--trace",
        trace.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(!text.contains("987654321"), "{text}");
    assert!(!text.contains("987654322"), "{text}");
}

fn run_script(
    scratch: &Scratch,
    script: Value,
    extra: &[&str],
) -> (Option<i32>, Value, Vec<Value>) {
    let script = scratch.script("script.json", script);
    let trace = scratch.path("trace.jsonl");
    let _ = std::fs::remove_file(&trace);
    let mut args = vec![
        "run".to_owned(),
        "task".to_owned(),
        "--model".to_owned(),
        format!("scripted:{}", script.display()),
        "--tools".to_owned(),
        "calculator".to_owned(),
        "--trace".to_owned(),
        trace.display().to_string(),
        "--json".to_owned(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = scratch.run(&args);
    (
        output.status.code(),
        json_stdout(&output),
        trace_lines(&trace),
    )
}

#[test]
fn exit_codes_follow_the_contract() {
    let scratch = scratch("codes");
    let (code, result, _) = run_script(
        &scratch,
        json!([{"type": "tool_call", "tool_name": "calculator",
                "arguments": {"left": 1, "operation": "add", "right": 1}}]),
        &["--max-steps", "1"],
    );
    assert_eq!(
        (code, result["exit_reason"].as_str()),
        (Some(3), Some("max_steps_exceeded"))
    );

    let (code, result, lines) = run_script(
        &scratch,
        json!(["not json", "still not"]),
        &["--max-steps", "2"],
    );
    assert_eq!(
        (code, result["exit_reason"].as_str()),
        (Some(4), Some("invalid_model_output"))
    );
    assert_eq!(
        event_types(&lines),
        [
            "run_started",
            "model_feedback",
            "model_feedback",
            "last_answer",
            "run_finished"
        ],
        "the script has no plain-text answer left, so the last answer is recorded empty"
    );

    let (code, result, _) = run_script(
        &scratch,
        json!([{"type": "tool_call", "tool_name": "calculator",
                "arguments": {"left": 1, "operation": "add", "right": 1}},
               {"type": "tool_call", "tool_name": "calculator",
                "arguments": {"left": 1, "operation": "add", "right": 1}}]),
        &["--max-tool-calls", "1"],
    );
    assert_eq!(
        (code, result["budget"].as_str()),
        (Some(5), Some("tool_calls"))
    );
}

#[test]
fn an_unknown_tool_is_an_error_observation_and_the_run_finishes() {
    let scratch = scratch("unknown");
    let (code, result, lines) = run_script(
        &scratch,
        json!([{"type": "tool_call", "tool_name": "teleport", "arguments": {}},
               {"type": "finish", "answer": "could not"}]),
        &[],
    );
    assert_eq!(code, Some(0));
    assert_eq!(result["exit_reason"], "finished");
    assert_eq!(lines[2]["event_type"], "observation");
    assert_eq!(lines[2]["is_error"], true);
    assert_eq!(lines[2]["tool_name"], "teleport");
}

#[test]
fn an_internal_error_is_traced_before_the_run_finishes_and_exits_1() {
    let scratch = scratch("internal");
    let (code, result, lines) = run_script(
        &scratch,
        json!([{"type": "tool_call", "tool_name": "calculator",
                "arguments": {"left": 1, "operation": "add", "right": 1}}]),
        &[],
    );
    assert_eq!(code, Some(1));
    assert_eq!(result["exit_reason"], "internal_error");
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("ran out of responses")
    );
    let types = event_types(&lines);
    assert_eq!(
        &types[types.len() - 2..],
        ["internal_error", "run_finished"]
    );
    assert_eq!(lines.last().unwrap()["exit_reason"], "internal_error");
}

#[test]
fn usage_errors_exit_2_and_name_the_flag_or_file() {
    let scratch = scratch("usage");
    let script = scratch.script("calc.json", calculator_script());
    let model = format!("scripted:{}", script.display());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["run", "t", "--model", "scripted:missing.json", "--json"],
            "missing.json",
        ),
        (vec!["run", "t", "--model", "gpt:x", "--json"], "--model"),
        (
            vec![
                "run",
                "t",
                "--model",
                &model,
                "--tools",
                "calculator,warp",
                "--json",
            ],
            "warp",
        ),
        (
            vec![
                "run",
                "t",
                "--model",
                &model,
                "--max-steps",
                "zero",
                "--json",
            ],
            "--max-steps",
        ),
        (
            vec!["run", "t", "--model", &model, "--timeout", "-1", "--json"],
            "--timeout",
        ),
        (
            vec![
                "run",
                "t",
                "--model",
                &model,
                "--workspace",
                "no/such/dir",
                "--json",
            ],
            "--workspace",
        ),
        (
            vec![
                "run",
                "t",
                "--model",
                &model,
                "--trace",
                "no/such/dir/t.jsonl",
                "--json",
            ],
            "--trace",
        ),
        (
            vec![
                "run",
                "t",
                "--model",
                &model,
                "--trace-content",
                "all",
                "--json",
            ],
            "--trace-content",
        ),
        (vec!["run", "t", "--json"], "--model"),
        (vec!["run", "t", "--model", &model, "--bogus"], "--bogus"),
    ];
    for (args, needle) in cases {
        let output = scratch.run(&args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(stdout(&output), "", "{args:?}");
        assert!(
            stderr(&output).contains(needle),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    let bad_script = scratch.script("bad.json", json!({"type": "finish"}));
    let output = scratch.run(&[
        "run",
        "t",
        "--model",
        &format!("scripted:{}", bad_script.display()),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("expected a JSON array"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn trace_show_reports_a_broken_line_and_shows_the_rest() {
    let scratch = scratch("show");
    let trace = scratch.path("trace.jsonl");
    let run = run_calculator(&scratch, &["--trace", trace.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(0));
    let mut lines: Vec<String> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines.insert(2, "{\"step\": 1, \"event_type\": ".into());
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let before = std::fs::read(&trace).unwrap();

    let output = scratch.run(&["trace", "show", trace.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0));
    let shown: Vec<String> = stdout(&output).lines().map(str::to_owned).collect();
    let starts: Vec<String> = shown
        .iter()
        .map(|line| {
            line.split_whitespace()
                .take(2)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        starts,
        [
            "0 run_started",
            "1 model_action",
            "1 observation",
            "2 model_action",
            "2 run_finished"
        ]
    );
    assert!(
        stderr(&output).contains("line 3: malformed trace line"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        std::fs::read(&trace).unwrap(),
        before,
        "trace show never writes"
    );

    let missing = scratch.run(&["trace", "show", "nope.jsonl"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("nope.jsonl"));
}

#[test]
fn trace_show_into_a_closed_pipe_ends_quietly() {
    let scratch = scratch("pipe");
    let line = r#"{"run_id":"r","step":1,"event_type":"observation","output":"x"}"#;
    let trace = scratch.path("big.jsonl");
    std::fs::write(&trace, format!("{line}\n").repeat(200_000)).unwrap();
    let mut child = scratch
        .command()
        .args(["trace", "show", trace.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_exact(&mut first)
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let err = String::from_utf8(output.stderr).unwrap();
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(output.status.code(), Some(0), "{err}");
}
