//! Every fuzz target as a stable property test: arbitrary bytes, and for the
//! JSON readers arbitrary JSON built from the words those parsers look for, so
//! that cases reach past the first check. `AGENT_FUZZ_CASES` sets the cases per
//! target (default 2 000; `.ci/run` uses 100 000). Every crash a fuzzer finds
//! is kept in `regressions()` below.

#![allow(clippy::panic)]

use agent_fuzz::{
    anthropic_response, mcp_result, openai_response, script, store_url, trace_reader, wire_format,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value};

fn cases() -> u32 {
    std::env::var("AGENT_FUZZ_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(2_000)
}

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    })
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..512)
}

/// Keys the response, wire-format, trace and MCP parsers look up.
const WORDS: &[&str] = &[
    "type",
    "tool_call",
    "tool_calls",
    "calls",
    "finish",
    "plan",
    "steps",
    "goal",
    "tool",
    "tool_name",
    "arguments",
    "answer",
    "choices",
    "message",
    "content",
    "function",
    "name",
    "id",
    "usage",
    "prompt_tokens",
    "completion_tokens",
    "input_tokens",
    "output_tokens",
    "text",
    "tool_use",
    "input",
    "stop_reason",
    "role",
    "finish_reason",
    "isError",
    "structuredContent",
    "step",
    "event_type",
    "run_id",
    "image",
    "resource",
    "data",
    "mimeType",
];

fn word() -> impl Strategy<Value = String> {
    prop::sample::select(WORDS).prop_map(str::to_owned)
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        word().prop_map(Value::String),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((word(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A JSON value as text, sometimes with a repeated key or cut short.
fn json_text() -> impl Strategy<Value = Vec<u8>> {
    (json(), 0u8..8, any::<prop::sample::Index>()).prop_map(|(value, twist, cut)| {
        let text = value.to_string();
        match twist {
            0 => text.replacen('{', "{\"type\":\"x\",", 1).into_bytes(),
            1 => {
                let end = cut.index(text.len() + 1);
                text.as_bytes().get(..end).unwrap_or_default().to_vec()
            }
            _ => text.into_bytes(),
        }
    })
}

fn run(target: fn(&[u8]), input: impl Strategy<Value = Vec<u8>>) {
    runner()
        .run(&input, |data| {
            target(&data);
            Ok(())
        })
        .unwrap_or_else(|err| panic!("{err}"));
}

#[test]
fn wire_format_takes_any_bytes() {
    run(wire_format, bytes());
    run(wire_format, json_text());
}

#[test]
fn openai_responses_take_any_bytes() {
    run(openai_response, bytes());
    run(openai_response, json_text());
}

#[test]
fn anthropic_responses_take_any_bytes() {
    run(anthropic_response, bytes());
    run(anthropic_response, json_text());
}

#[test]
fn the_trace_reader_takes_any_bytes() {
    run(trace_reader, bytes());
    let lines = prop::collection::vec(json_text(), 0..6).prop_map(|lines| lines.join(&b'\n'));
    run(trace_reader, lines);
}

#[test]
fn store_urls_take_any_text_and_never_repeat_a_password() {
    run(store_url, bytes());
    run(
        store_url,
        "[a-z0-9:@/?#%.\\[\\]=&-]{0,40}".prop_map(String::into_bytes),
    );
}

#[test]
fn mcp_results_take_any_bytes() {
    run(mcp_result, bytes());
    run(mcp_result, json_text());
}

#[test]
fn scripts_take_any_bytes() {
    run(script, bytes());
    run(script, json_text());
}

/// A target and one input.
type Case = (fn(&[u8]), &'static [u8]);

/// Inputs that once crashed a target, or nearly did.
#[test]
fn regressions() {
    let cases: &[Case] = &[
        (wire_format, b"{\"type\":\"tool_calls\",\"calls\":[]}"),
        (
            wire_format,
            b"{\"type\":\"finish\",\"answer\":\"a\",\"answer\":\"b\"}",
        ),
        (
            openai_response,
            b"{\"choices\":[{\"message\":{\"tool_calls\":[{}]}}]}",
        ),
        (
            anthropic_response,
            b"{\"content\":[{\"type\":\"tool_use\"}]}",
        ),
        (trace_reader, b"\xff\xfe\n{\"step\":1}\n"),
        (store_url, b"postgres://u:p@/"),
        // Found by this suite: a second `@` put the password in the shown database name.
        (store_url, b"u:p@/"),
        (store_url, b"?@/"),
        (mcp_result, b"{\"content\":[],\"isError\":true}"),
    ];
    for (target, data) in cases {
        target(data);
    }
}
