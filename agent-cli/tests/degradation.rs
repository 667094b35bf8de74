//! Graceful degradation as a user runs it: a step limit that still answers
//! (`partial`, exit code unchanged), `--on-limit stop`, repeated invalid output
//! that degrades to plain text (`degraded`), `--reflect-every` reflection lines,
//! and `--output-schema` refusing a wrong answer and accepting the corrected one
//! as `output`.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use common::*;
use serde_json::{Value, json};

fn calc() -> Value {
    json!({"type": "tool_call", "tool_name": "calculator",
           "arguments": {"left": 12, "operation": "multiply", "right": 7}})
}

fn finish(answer: &str) -> Value {
    json!({"type": "finish", "answer": answer})
}

/// Runs `agent run` with `script` and `extra` flags, `--json` and a trace;
/// the exit code, the RunResult and the trace lines.
fn run(scratch: &Scratch, script: Value, extra: &[&str]) -> (Option<i32>, Value, Vec<Value>) {
    let script = scratch.script("script.json", script);
    let trace = scratch.path("trace.jsonl");
    let _ = std::fs::remove_file(&trace);
    let model = format!("scripted:{}", script.display());
    let mut args = vec![
        "run",
        "What is 12 times 7?",
        "--model",
        &model,
        "--tools",
        "calculator",
        "--trace",
        "trace.jsonl",
        "--json",
    ];
    args.extend_from_slice(extra);
    let output = scratch.run(&args);
    assert_eq!(stderr(&output), "", "--json keeps stderr empty");
    (
        output.status.code(),
        json_stdout(&output),
        trace_lines(&trace),
    )
}

#[test]
fn a_looping_script_at_its_step_limit_exits_3_with_a_partial_answer() {
    let scratch = scratch("partial");
    let script = json!([
        calc(),
        calc(),
        finish("From the results so far: 12 times 7 is 84.")
    ]);
    let (code, result, lines) = run(&scratch, script.clone(), &["--max-steps", "2"]);
    assert_eq!(code, Some(3), "{result}");
    assert_eq!(result["exit_reason"], "max_steps_exceeded");
    assert_eq!(result["partial"], true);
    assert_eq!(
        result["answer"],
        "From the results so far: 12 times 7 is 84."
    );
    assert_eq!(result["steps_used"], 2);
    assert_eq!(result["usage"]["model_calls"], 3);
    assert!(result.get("degraded").is_none(), "{result}");
    let types = event_types(&lines);
    assert_eq!(
        types[types.len() - 2..],
        ["last_answer", "run_finished"],
        "{types:?}"
    );
    let last = &lines[lines.len() - 2];
    assert_eq!(last["kind"], "partial");

    let id = result["session_id"].as_str().unwrap();
    let shown = scratch.run(&["show", id]);
    assert!(stdout(&shown).contains("partial answer: From the results so far"));
    let again = scratch.run(&["resume", id, "--json"]);
    assert_eq!(again.status.code(), Some(3));
    assert_eq!(
        json_stdout(&again),
        result,
        "the stored result is printed again"
    );

    let (code, result, _) = run(
        &scratch,
        script,
        &["--max-steps", "2", "--on-limit", "stop"],
    );
    assert_eq!(code, Some(3));
    assert_eq!(result["answer"], Value::Null);
    assert!(result.get("partial").is_none(), "{result}");
}

#[test]
fn three_invalid_outputs_degrade_to_a_plain_text_answer_with_exit_4() {
    let scratch = scratch("degraded");
    let script = json!([
        "not json",
        "{\"type\": \"dance\"}",
        "nope",
        "The answer is 84."
    ]);
    let (code, result, _) = run(&scratch, script.clone(), &[]);
    assert_eq!(code, Some(4), "{result}");
    assert_eq!(result["exit_reason"], "invalid_model_output");
    assert_eq!(result["degraded"], true);
    assert_eq!(result["answer"], "The answer is 84.");
    assert_eq!(result["steps_used"], 3);

    let (code, result, _) = run(
        &scratch,
        script,
        &["--max-invalid", "0", "--max-steps", "3"],
    );
    assert_eq!(code, Some(4), "the step limit ends it instead: {result}");
    assert_eq!(result["steps_used"], 3);
}

#[test]
fn reflect_every_two_steps_writes_reflection_lines() {
    let scratch = scratch("reflect");
    let script = json!([calc(), calc(), calc(), calc(), finish("84")]);
    let (code, result, lines) = run(&scratch, script, &["--reflect-every", "2"]);
    assert_eq!(code, Some(0), "{result}");
    let reflections: Vec<&Value> = lines
        .iter()
        .filter(|line| line["event_type"] == "reflection")
        .collect();
    let steps: Vec<&Value> = reflections.iter().map(|line| &line["step"]).collect();
    assert_eq!(steps, [&json!(2), &json!(4)], "{lines:?}");
    let id = result["session_id"].as_str().unwrap();
    let shown = stdout(&scratch.run(&["show", id]));
    assert!(shown.contains("after step 2: Going in circles"), "{shown}");
}

#[test]
fn an_answer_that_breaks_the_output_schema_is_fed_back_and_the_corrected_one_is_output() {
    let scratch = scratch("schema");
    let schema = scratch.script(
        "product.schema.json",
        json!({"type": "object", "properties": {"product": {"type": "integer"}},
               "required": ["product"], "additionalProperties": false}),
    );
    let schema = schema.to_str().unwrap();
    let script = json!([finish(r#"{"product": "84"}"#), finish(r#"{"product": 84}"#)]);
    let (code, result, lines) = run(&scratch, script, &["--output-schema", schema]);
    assert_eq!(code, Some(0), "{result}");
    assert_eq!(result["output"], json!({"product": 84}));
    assert_eq!(result["answer"], r#"{"product": 84}"#);
    assert_eq!(result["steps_used"], 2);
    assert!(
        event_types(&lines)
            .iter()
            .filter(|t| *t == "model_action")
            .count()
            == 2,
        "{lines:?}"
    );
    let id = result["session_id"].as_str().unwrap();
    let shown = stdout(&scratch.run(&["show", id]));
    assert!(
        shown.contains("does not satisfy the output schema: field `product`"),
        "{shown}"
    );

    let any_script = scratch.script("x.json", json!([finish("84")]));
    let any_model = format!("scripted:{}", any_script.display());
    let missing = scratch.run(&[
        "run",
        "t",
        "--model",
        &any_model,
        "--output-schema",
        "nope.json",
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("cannot read the schema file"),
        "{}",
        stderr(&missing)
    );
    let broken = scratch.script("broken.json", json!({"type": "no-such-type"}));
    let broken = scratch.run(&[
        "run",
        "t",
        "--model",
        &any_model,
        "--output-schema",
        broken.to_str().unwrap(),
    ]);
    assert_eq!(broken.status.code(), Some(2));
    assert!(
        stderr(&broken).contains("not a usable JSON Schema"),
        "{}",
        stderr(&broken)
    );
}
