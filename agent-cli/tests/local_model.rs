//! The `local` provider with the real default model (Qwen2.5-Coder-0.5B-Instruct,
//! Q4_K_M) run in-process by llama.cpp: `AGENT_TEST_LOCAL_MODEL` names the GGUF
//! file (`scripts/test.sh` pulls it with `agent model pull`). Skipped without it
//! on a developer's machine, a failure in CI.
//!
//! Generation is greedy, so each task's outcome is the same on every run.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// One generation at a time: two at once on a small CPU only make both slower.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The model file, or `None` (and a skip) outside CI.
fn model_file() -> Option<PathBuf> {
    match std::env::var_os("AGENT_TEST_LOCAL_MODEL") {
        Some(path) => Some(PathBuf::from(path)),
        None => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must set AGENT_TEST_LOCAL_MODEL to the default model's GGUF file"
            );
            eprintln!("skipped: AGENT_TEST_LOCAL_MODEL is not set");
            None
        }
    }
}

/// A scratch directory whose `.agent/models` holds the model as the default one.
fn with_default_model(name: &str, model: &std::path::Path) -> Scratch {
    let scratch = scratch(name);
    let models = scratch.path(".agent/models");
    std::fs::create_dir_all(&models).unwrap();
    std::os::unix::fs::symlink(
        model,
        models.join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
    )
    .unwrap();
    scratch
}

fn run_json(scratch: &Scratch, args: &[&str]) -> (std::process::Output, Value) {
    let output = scratch.run(args);
    let result = json_stdout(&output);
    (output, result)
}

/// The `model_action` trace lines, in order.
fn model_actions(trace: &[Value]) -> Vec<&Value> {
    trace
        .iter()
        .filter(|line| line["event_type"] == "model_action")
        .collect()
}

#[test]
fn the_calculator_task_is_answered_with_a_valid_first_call() {
    let Some(model) = model_file() else { return };
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = with_default_model("local-calc", &model);
    let trace = scratch.path("trace.jsonl");
    let (output, result) = run_json(
        &scratch,
        &[
            "run",
            "What is 12 times 7?",
            "--model",
            "local",
            "--tools",
            "calculator",
            "--json",
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{result}\n{}",
        stderr(&output)
    );
    assert_eq!(result["exit_reason"], "finished", "{result}");
    assert!(
        result["answer"].as_str().unwrap().contains("84"),
        "{result}"
    );
    let usage = &result["usage"];
    assert!(usage["input_tokens"].as_u64().unwrap() > 100, "{usage}");
    assert!(usage["output_tokens"].as_u64().unwrap() > 5, "{usage}");

    let lines = trace_lines(&trace);
    let actions = model_actions(&lines);
    assert_eq!(actions[0]["step"], 1);
    assert_eq!(actions[0]["action_type"], "tool_call", "{lines:?}");
    assert_eq!(actions[0]["tool_name"], "calculator");
    assert!(actions[0]["input_tokens"].as_u64().unwrap() > 0);
    let observation = lines
        .iter()
        .find(|line| line["event_type"] == "observation")
        .expect("the calculator ran");
    assert_eq!(observation["is_error"], false, "valid on the first try");
    assert!(
        !lines
            .iter()
            .any(|line| line["event_type"] == "model_output_rejected"),
        "the grammar admits only valid actions: {lines:?}"
    );
}

/// `--stream` with the local model shows the finish's answer — decoded, not
/// its JSON — as the tokens are generated, and the stored answer is that text.
#[test]
fn a_streamed_local_run_shows_the_answer_as_it_is_generated() {
    let Some(model) = model_file() else { return };
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = with_default_model("local-stream", &model);
    let output = scratch.run(&[
        "run",
        "What is 12 times 7?",
        "--model",
        "local",
        "--tools",
        "calculator",
        "--stream",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}{}", stderr(&output));
    let streamed: Vec<&str> = text.lines().filter(|line| line.contains(" ~> ")).collect();
    assert_eq!(
        streamed.len(),
        1,
        "only the finish has words to show: {text}"
    );
    assert!(streamed[0].contains("84"), "{text}");
    assert!(
        !streamed[0].contains("\"type\""),
        "the answer, not its JSON: {text}"
    );
    assert!(text.contains("finish (its text is above)"), "{text}");
}

#[test]
fn a_file_is_read_and_its_content_answers_the_task() {
    let Some(model) = model_file() else { return };
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = scratch("local-read");
    std::fs::write(
        scratch.path("notes.txt"),
        "Meeting notes.\nThe launch code is 4711.\n",
    )
    .unwrap();
    let spec = format!("local:{}", model.display());
    let (output, result) = run_json(
        &scratch,
        &[
            "run",
            "What is the launch code written in notes.txt?",
            "--model",
            &spec,
            "--tools",
            "read_file",
            "--json",
        ],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{result}\n{}",
        stderr(&output)
    );
    assert!(
        result["answer"].as_str().unwrap().contains("4711"),
        "{result}"
    );
}

#[test]
fn plan_and_execute_plans_calls_and_composes_the_answer() {
    let Some(model) = model_file() else { return };
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = scratch("local-plan-execute");
    let spec = format!("local:{}", model.display());
    let trace = scratch.path("trace.jsonl");
    let (output, result) = run_json(
        &scratch,
        &[
            "run",
            "What is 12 times 7?",
            "--model",
            &spec,
            "--tools",
            "calculator",
            "--strategy",
            "plan-execute",
            "--json",
            "--trace",
            trace.to_str().unwrap(),
        ],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{result}\n{}",
        stderr(&output)
    );
    assert!(
        result["answer"].as_str().unwrap().contains("84"),
        "{result}"
    );
    let lines = trace_lines(&trace);
    let actions = model_actions(&lines);
    assert_eq!(actions[0]["action_type"], "plan", "a plan first: {lines:?}");
    let steps: Vec<&Value> = lines
        .iter()
        .filter(|line| line["event_type"] == "step_completed")
        .collect();
    assert!(!steps.is_empty(), "a plan step was carried out: {lines:?}");
    assert!(
        lines.iter().any(|line| line["event_type"] == "observation"
            && line["tool_name"] == "calculator"
            && line["is_error"] == false),
        "{lines:?}"
    );
}

#[test]
fn every_built_in_tool_schema_makes_a_grammar_llama_cpp_accepts() {
    let Some(model) = model_file() else { return };
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = scratch("local-all-tools");
    std::fs::write(scratch.path("a.txt"), "alpha\n").unwrap();
    let spec = format!("local:{}", model.display());
    let (output, result) = run_json(
        &scratch,
        &[
            "run",
            "List the files in the current directory.",
            "--model",
            &spec,
            "--tools",
            "append_line,calculator,edit_file,list_dir,read_file,run_command,search,sleep,write_file",
            "--allow-cmd",
            "ls",
            "--max-steps",
            "3",
            "--json",
        ],
    );
    assert_ne!(
        result["exit_reason"],
        "internal_error",
        "{result}\n{}",
        stderr(&output)
    );
    assert_ne!(result["exit_reason"], "invalid_model_output", "{result}");
    assert_ne!(result["exit_reason"], "provider_error", "{result}");
}

#[test]
fn the_wall_time_budget_stops_a_generation_in_flight() {
    let Some(model) = model_file() else { return };
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let scratch = scratch("local-timeout");
    let spec = format!("local:{}?grammar=off", model.display());
    let started = Instant::now();
    let mut child = scratch
        .command()
        .args([
            "run",
            "Write a very long story about a lighthouse keeper, at least 3000 words.",
            "--model",
            &spec,
            "--max-output-tokens",
            "3000",
            "--timeout",
            "3",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // 3000 tokens take minutes on two cores; a stopped generation ends in seconds.
    let limit = Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            panic!("the generation went on past the wall-time budget");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().unwrap();
    let result = json_stdout(&output);
    assert_eq!(
        output.status.code(),
        Some(5),
        "{result}\n{}",
        stderr(&output)
    );
    assert_eq!(result["exit_reason"], "budget_exceeded");
    assert_eq!(result["budget"], "wall_time");
}

#[test]
fn a_missing_model_file_names_agent_model_pull() {
    let scratch = scratch("local-missing");
    let output = scratch.run(&[
        "run",
        "What is 1 plus 1?",
        "--model",
        "local",
        "--tools",
        "calculator",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(message.contains("agent model pull"), "{message}");
    assert!(
        message.contains(".agent/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
        "{message}"
    );
    let not_gguf = scratch.path("fake.gguf");
    std::fs::write(&not_gguf, "not a model").unwrap();
    let output = scratch.run(&[
        "run",
        "x",
        "--model",
        &format!("local:{}", not_gguf.display()),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("is not a GGUF model file"),
        "{}",
        stderr(&output)
    );
    let output = scratch.run(&["run", "x", "--model", "local?threads=zero"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("`threads` takes a positive number"),
        "{}",
        stderr(&output)
    );
    let output = scratch.run(&[
        "run",
        "x",
        "--model",
        "scripted:s.json",
        "--temperature",
        "0.5",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("apply only to local models"),
        "{}",
        stderr(&output)
    );
}
