//! `agent run` against OpenAI-compatible and Anthropic servers on loopback: the
//! calculator task finishes, a 429 is retried, usage is summed, budgets and
//! provider failures end the run with their exit codes. No internet, no key.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::process::Output;

use agent_testkit::{FakeProvider, Reply};
use common::*;
use serde_json::{Value, json};

const TASK: &str = "What is 12 times 7, and is it above 80?";

fn openai_call(id: &str, name: &str, args: &str) -> Reply {
    Reply::json(&json!({
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": args}}]}}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 9}
    }))
}

fn openai_text(text: &str) -> Reply {
    Reply::json(&json!({
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 5}
    }))
}

fn anthropic(blocks: Value, input: u64, output: u64) -> Reply {
    Reply::json(
        &json!({"type": "message", "role": "assistant", "content": blocks,
        "usage": {"input_tokens": input, "output_tokens": output}}),
    )
}

fn run(scratch: &Scratch, model: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = scratch.command();
    command
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .args([
            "run",
            TASK,
            "--model",
            model,
            "--tools",
            "calculator",
            "--trace",
            "trace.jsonl",
            "--json",
        ])
        .args(extra);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

const MULTIPLY: &str = r#"{"left": 12, "operation": "multiply", "right": 7}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_compatible_server_finishes_after_a_retried_429_with_summed_usage() {
    let server = FakeProvider::start(vec![
        openai_call("call_1", "calculator", MULTIPLY),
        Reply::status(429, r#"{"error":{"message":"slow down"}}"#).header("Retry-After", "1"),
        openai_text("12 times 7 is 84, which is above 80."),
    ])
    .await
    .unwrap();
    let scratch = scratch("openai");
    let output = run(&scratch, &format!("openai:m@{}/v1", server.url()), &[], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stderr(&output), "");
    let result = json_stdout(&output);
    assert_eq!(result["exit_reason"], "finished");
    assert_eq!(result["answer"], "12 times 7 is 84, which is above 80.");
    let spec = format!("openai:m@{}/v1", server.url());
    assert_eq!(
        result["usage"],
        json!({"input_tokens": 90, "output_tokens": 14, "model_calls": 2, "tool_calls": 1,
               "by_model": {spec: {"input_tokens": 90, "output_tokens": 14, "model_calls": 2}}})
    );
    assert_eq!(result["steps_used"], 2, "a retry is not a step");
    let lines = trace_lines(&scratch.path("trace.jsonl"));
    assert_eq!(
        event_types(&lines),
        [
            "run_started",
            "model_action",
            "observation",
            "retry",
            "model_action",
            "run_finished"
        ]
    );
    let retry = &lines[3];
    assert_eq!(retry["target"], "model");
    assert_eq!(retry["attempt"], 1);
    assert_eq!(retry["delay_ms"], 1000);
    assert!(retry["error"].as_str().unwrap().contains("429"));
    assert_eq!(lines[1]["input_tokens"], 40);
    let second = &server.received()[2].body["messages"];
    assert_eq!(second[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], "call_1");
    assert_eq!(second[3]["content"], "84");
}

/// Regression: every `retry` line carried the moment the call returned, not the
/// moment of its retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_retry_line_carries_the_moment_of_its_retry() {
    let busy =
        || Reply::status(429, r#"{"error":{"message":"slow down"}}"#).header("Retry-After", "1");
    let server = FakeProvider::start(vec![busy(), busy(), openai_text("done")])
        .await
        .unwrap();
    let scratch = scratch("retry-times");
    let output = run(&scratch, &format!("openai:m@{}/v1", server.url()), &[], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let lines = trace_lines(&scratch.path("trace.jsonl"));
    let at = |kind: &str| -> Vec<u64> {
        lines
            .iter()
            .filter(|line| line["event_type"] == kind)
            .map(|line| line["at_ms"].as_u64().unwrap())
            .collect()
    };
    let retries = at("retry");
    let answered = at("model_action");
    assert_eq!(retries.len(), 2, "{lines:?}");
    assert!(
        retries[1] >= retries[0] + 900,
        "the second retry came a Retry-After after the first: {retries:?}"
    );
    assert!(
        answered[0] >= retries[1] + 900,
        "the answer came a Retry-After after the second retry: {retries:?} {answered:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_server_finishes_after_a_retried_429_with_summed_usage() {
    let server = FakeProvider::start(vec![
        anthropic(
            json!([{"type": "tool_use", "id": "toolu_1", "name": "calculator",
                          "input": {"left": 12, "operation": "multiply", "right": 7}}]),
            30,
            7,
        ),
        Reply::status(429, r#"{"type":"error"}"#).header("Retry-After", "1"),
        anthropic(json!([{"type": "text", "text": "84, above 80."}]), 45, 4),
    ])
    .await
    .unwrap();
    let scratch = scratch("anthropic");
    let output = run(
        &scratch,
        &format!("anthropic:claude@{}", server.url()),
        &[],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result = json_stdout(&output);
    assert_eq!(result["answer"], "84, above 80.");
    assert_eq!(result["usage"]["input_tokens"], 75);
    assert_eq!(result["usage"]["output_tokens"], 11);
    let received = server.received();
    let messages = &received[2].body["messages"];
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "toolu_1");
    assert_eq!(received[0].header("anthropic-version"), Some("2023-06-01"));
    assert!(event_types(&trace_lines(&scratch.path("trace.jsonl"))).contains(&"retry".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hallucinated_tools_and_malformed_arguments_do_not_end_the_run() {
    let server = FakeProvider::start(vec![
        openai_call("c1", "teleport", r#"{"to": "Mars"}"#),
        openai_call("c2", "calculator", r#"{"left": 12, "left": 7}"#),
        openai_call("c3", "calculator", r#"{"left": 12,"#),
        openai_text("done"),
    ])
    .await
    .unwrap();
    let scratch = scratch("messy");
    let output = run(&scratch, &format!("openai:m@{}/v1", server.url()), &[], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let lines = trace_lines(&scratch.path("trace.jsonl"));
    assert_eq!(
        event_types(&lines),
        [
            "run_started",
            "model_action",
            "observation",
            "model_feedback",
            "model_feedback",
            "model_action",
            "run_finished"
        ]
    );
    assert_eq!(lines[2]["is_error"], true);
    let last = &server.received()[3].body["messages"];
    let roles: Vec<&str> = last
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "user", "user"],
        "rejected output is left out"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_failures_exit_7_naming_the_status_and_never_the_key() {
    let key = "sk-live-VERYSECRET-42";
    let server = FakeProvider::start(vec![Reply::status(
        401,
        format!(r#"{{"error":{{"message":"Incorrect API key provided: {key}"}}}}"#),
    )])
    .await
    .unwrap();
    let scratch = scratch("fatal");
    let output = run(
        &scratch,
        &format!("openai:m@{}/v1", server.url()),
        &[],
        &[("OPENAI_API_KEY", key)],
    );
    assert_eq!(output.status.code(), Some(7), "{}", stderr(&output));
    let result = json_stdout(&output);
    assert_eq!(result["exit_reason"], "provider_error");
    let error = result["error"].as_str().unwrap();
    assert!(error.contains("401"), "{error}");
    let everything = format!(
        "{}{}{}",
        stdout(&output),
        stderr(&output),
        std::fs::read_to_string(scratch.path("trace.jsonl")).unwrap()
    );
    assert!(!everything.contains(key), "the key leaked: {everything}");
    assert!(
        !std::fs::read(scratch.path(".agent/agent.db"))
            .unwrap()
            .windows(key.len())
            .any(|w| w == key.as_bytes())
    );

    let server = FakeProvider::start(vec![
        Reply::status(500, "{}"),
        Reply::status(502, "{}"),
        Reply::status(503, "{}"),
        Reply::status(500, "{}"),
    ])
    .await
    .unwrap();
    let output = run(&scratch, &format!("anthropic:c@{}", server.url()), &[], &[]);
    assert_eq!(output.status.code(), Some(7));
    assert!(
        json_stdout(&output)["error"]
            .as_str()
            .unwrap()
            .contains("gave up after 3 retries")
    );

    let missing = run(&scratch, "openai:gpt-4o", &[], &[]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("OPENAI_API_KEY"),
        "{}",
        stderr(&missing)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_and_model_call_budgets_end_the_run_with_exit_5() {
    let replies = || {
        vec![
            openai_call("c1", "calculator", MULTIPLY),
            openai_call("c2", "calculator", MULTIPLY),
            openai_text("done"),
        ]
    };
    let scratch = scratch("budgets");
    let server = FakeProvider::start(replies()).await.unwrap();
    let output = run(
        &scratch,
        &format!("openai:m@{}/v1", server.url()),
        &["--max-tokens", "60"],
        &[],
    );
    assert_eq!(output.status.code(), Some(5));
    let result = json_stdout(&output);
    assert_eq!(result["budget"], "tokens");
    assert_eq!(result["usage"]["tool_calls"], 1);

    let server = FakeProvider::start(replies()).await.unwrap();
    let output = run(
        &scratch,
        &format!("openai:m@{}/v1", server.url()),
        &["--max-model-calls", "1"],
        &[],
    );
    assert_eq!(output.status.code(), Some(5));
    assert_eq!(json_stdout(&output)["budget"], "model_calls");
    let received = server.received();
    assert_eq!(received.len(), 2, "one step, then the last answer");
    assert!(
        received[1].body.get("tools").is_none(),
        "the last answer offers no tools"
    );

    let server = FakeProvider::start(vec![openai_text("x")]).await.unwrap();
    let output = run(
        &scratch,
        &format!("openai:m@{}/v1", server.url()),
        &["--max-output-tokens", "77"],
        &[],
    );
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(server.received()[0].body["max_tokens"], 77);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_text_adapter_drives_a_model_without_tool_calling() {
    let server = FakeProvider::start(vec![
        openai_text(&format!("```json\n{{\"type\":\"tool_call\",\"tool_name\":\"calculator\",\"arguments\":{MULTIPLY}}}\n```")),
        openai_text(r#"{"type":"finish","answer":"84"}"#),
    ])
    .await
    .unwrap();
    let scratch = scratch("json-text");
    let output = run(
        &scratch,
        &format!("json:openai:m@{}/v1", server.url()),
        &[],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(json_stdout(&output)["answer"], "84");
    let received = server.received();
    assert!(received[0].body.get("tools").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_parse_its_models_tool_call_gets_the_step_as_json_text() {
    let rejected = r#"{"error":{"code":500,"type":"server_error","message":"Failed to parse tool call arguments as JSON: parse error at line 1, column 27"}}"#;
    let server = FakeProvider::start(vec![
        Reply::status(500, rejected),
        openai_text(&format!(
            r#"{{"type":"tool_call","tool_name":"calculator","arguments":{MULTIPLY}}}"#
        )),
        openai_text("12 times 7 is 84, which is above 80."),
    ])
    .await
    .unwrap();
    let scratch = scratch("openai-text-fallback");
    let output = run(&scratch, &format!("openai:m@{}/v1", server.url()), &[], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let result = json_stdout(&output);
    assert_eq!(result["exit_reason"], "finished");
    assert_eq!(result["usage"]["tool_calls"], 1);
    let lines = trace_lines(&scratch.path("trace.jsonl"));
    assert_eq!(
        event_types(&lines),
        [
            "run_started",
            "retry",
            "model_action",
            "observation",
            "model_action",
            "run_finished"
        ]
    );
    assert!(
        lines[1]["error"].as_str().unwrap().contains("JSON text"),
        "{}",
        lines[1]
    );
    let received = server.received();
    assert!(received[1].body.get("tools").is_none());
    assert!(
        received[2].body.get("tools").is_some(),
        "the next step asks natively again"
    );
}

/// The agent's instructions reach each provider's wire as its system prompt,
/// ahead of the strategy's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instructions_reach_the_system_prompt_of_each_provider() {
    let instructions = "You are ACME's support agent. Be brief.";
    let openai = FakeProvider::start(vec![openai_text("84")]).await.unwrap();
    let first = scratch("instructions-openai");
    std::fs::write(first.path("instructions.md"), instructions).unwrap();
    let output = run(
        &first,
        &format!("openai:m@{}/v1", openai.url()),
        &["--instructions", "@instructions.md"],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let system = &openai.received()[0].body["messages"][0];
    assert_eq!(system["role"], "system");
    let text = system["content"].as_str().unwrap();
    assert!(text.starts_with(instructions), "{text}");
    assert!(text.contains("When you know the answer"), "{text}");

    // The same from an agents file's definition.
    let from_file = FakeProvider::start(vec![openai_text("84")]).await.unwrap();
    let third = scratch("instructions-file");
    std::fs::write(
        third.path("agents.toml"),
        format!(
            "[agents.support]\ninstructions = \"{instructions}\"\nmodel = \"openai:m@{}/v1\"\n",
            from_file.url()
        ),
    )
    .unwrap();
    let output = third
        .command()
        .env_remove("OPENAI_API_KEY")
        .args(["run", TASK, "--agent", "support", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let system = from_file.received()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.starts_with(instructions), "{system}");

    let anthropic_server = FakeProvider::start(vec![anthropic(
        json!([{"type": "text", "text": "84"}]),
        10,
        2,
    )])
    .await
    .unwrap();
    let second = scratch("instructions-anthropic");
    std::fs::write(
        second.path("agents.toml"),
        format!(
            "[agents.support]\ninstructions = \"{instructions}\"\nmodel = \"anthropic:m@{}\"\n",
            anthropic_server.url()
        ),
    )
    .unwrap();
    let output = second
        .command()
        .env_remove("ANTHROPIC_API_KEY")
        .args(["run", TASK, "--agent", "support", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let system = anthropic_server.received()[0].body["system"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.starts_with(instructions), "{system}");
}
