//! `--fallback-model` as a user runs it: a primary provider that refuses every
//! connection, a scripted fallback that answers; the run finishes with the
//! fallback's answer, the switch is a `model_fallback` trace line, and the
//! fallback is recorded with the other flags; `usage.by_model` counts the
//! calls under the model that answered them.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use common::*;
use serde_json::Value;

#[test]
fn a_dead_primary_with_a_live_fallback_finishes_with_84() {
    let scratch = scratch("fallback");
    let script = scratch.script("calc.json", calculator_script());
    let mut command = scratch.command();
    let output = command
        .env_remove("OPENAI_API_KEY")
        .args([
            "run",
            "What is 12 times 7?",
            "--model",
            "openai:m@http://127.0.0.1:9/v1",
            "--fallback-model",
            &format!("scripted:{}", script.display()),
            "--tools",
            "calculator",
            "--trace",
            "trace.jsonl",
            "--json",
        ])
        .output()
        .unwrap();
    let result = json_stdout(&output);
    assert_eq!(result["exit_reason"], "finished", "{result}");
    assert!(
        result["answer"].as_str().unwrap().contains("84"),
        "{result}"
    );
    let lines = trace_lines(&scratch.path("trace.jsonl"));
    let fallbacks: Vec<&Value> = lines
        .iter()
        .filter(|line| line["event_type"] == "model_fallback")
        .collect();
    assert_eq!(fallbacks.len(), 2, "each step falls back: {lines:?}");
    assert_eq!(fallbacks[0]["from"], "openai:m@http://127.0.0.1:9/v1");
    assert!(
        fallbacks[0]["to"]
            .as_str()
            .unwrap()
            .starts_with("scripted:")
    );
    assert!(
        fallbacks[0]["reason"]
            .as_str()
            .unwrap()
            .contains("cannot connect"),
        "{}",
        fallbacks[0]
    );
    let by_model = result["usage"]["by_model"].as_object().unwrap();
    assert_eq!(
        by_model.len(),
        1,
        "only the fallback answered: {by_model:?}"
    );
    let (spec, counted) = by_model.iter().next().unwrap();
    assert!(spec.starts_with("scripted:"), "{spec}");
    assert_eq!(counted["model_calls"], 2);
    let id = result["session_id"].as_str().unwrap();
    let shown = json_stdout(&scratch.run(&["show", id, "--json"]));
    let recorded = &shown["events"][0]["kind"]["config"]["fallback_models"];
    assert!(
        recorded[0].as_str().unwrap().starts_with("scripted:/"),
        "{recorded}"
    );
}
