//! Fuzz targets: one function per parser that reads outside input, taking any
//! bytes. Each must return without panicking, whatever the bytes; where a parser
//! promises more (a password never repeated, ids of a known shape), the target
//! asserts it, so a broken promise is a crash a fuzzer finds. The same functions
//! run as stable property tests (`tests/targets.rs`) and under `cargo fuzz`
//! (`fuzz/`, nightly).

use agent_core::types::Action;
use agent_providers::{ChatCompletions, Messages, WireFormat};
use serde_json::Value;

/// A password that must never come back out of the store-URL parser.
pub const CANARY_PASSWORD: &str = "canary-pw-7f3a";

/// The action wire format a model answers in (strict JSON, one action).
pub fn wire_format(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(actions) = agent_providers::wire::parse_actions(&text, 3) {
        assert!(!actions.is_empty(), "a parsed response has an action");
        for action in &actions {
            if let Action::ToolCall(call) = action {
                assert!(call.id.starts_with("call_3_"), "call id {}", call.id);
            }
        }
    }
    let _ = agent_core::strict_json::from_str(&text);
}

/// An OpenAI Chat Completions response body.
pub fn openai_response(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let _ = ChatCompletions::parse(&body, &text);
}

/// An Anthropic Messages response body.
pub fn anthropic_response(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let _ = Messages::parse(&body, &text);
}

/// `agent trace show` over a file's bytes: every line is shown or reported.
pub fn trace_reader(data: &[u8]) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let report = agent_trace::show(data, &mut out, &mut err);
    let Ok(report) = report else {
        return;
    };
    let lines = data.split(|&byte| byte == b'\n').count();
    assert!(report.shown + report.malformed <= lines);
}

/// `--store` URLs: parsing never fails loudly, and neither an error nor the
/// URL as shown to people ever repeats a password.
pub fn store_url(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for url in [
        text.to_string(),
        format!("postgres://user:{CANARY_PASSWORD}@{text}"),
        format!("postgresql://{text}:{CANARY_PASSWORD}@host/db"),
    ] {
        let shown = agent_store::shown_url(&url);
        let parsed = agent_store::StoreUrl::parse(&url);
        let said = match &parsed {
            Ok(parsed) => parsed.display(),
            Err(err) => err.to_string(),
        };
        if !text.contains(CANARY_PASSWORD) {
            assert!(!shown.contains(CANARY_PASSWORD), "shown: {shown}");
            assert!(!said.contains(CANARY_PASSWORD), "said: {said}");
        }
    }
}

/// The result of an MCP `tools/call`, as a server sends it.
pub fn mcp_result(data: &[u8]) {
    if let Ok(result) = serde_json::from_slice::<rmcp::model::CallToolResult>(data) {
        let _ = agent_tools::mcp_output_of(&result);
    }
}

/// A scripted model's script file.
pub fn script(data: &[u8]) {
    let _ = agent_providers::ScriptedModel::from_json_str(&String::from_utf8_lossy(data));
}
