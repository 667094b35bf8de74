//! The OpenAI and Anthropic adapters against a local server speaking their wire
//! formats: the exact request JSON (golden files), response parsing, and faults —
//! 429 with Retry-After, 500, a body cut mid-JSON, a response slower than the
//! timeout, malformed arguments, 4xx — with no internet and no key.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::history::HistoryItem;
use agent_core::layer::{CircuitState, Layer, LayerObserver, RetryNotice};
use agent_core::model::{Model, ModelContext, ModelError, ModelRequest, ModelResponse};
use agent_core::types::{Action, Observation, ToolCall, ToolSpec};
use agent_layers::{Retry, RetryPolicy};
use agent_providers::{
    Anthropic, JsonText, OUTPUT_TOOL, OpenAi, ProviderConfig, chat_request, messages_request,
    parse_messages_response,
};
use agent_testkit::{FakeProvider, Reply};
use serde_json::{Value, json};

const KEY: &str = "sk-test-SECRET-0123456789";

fn calculator_spec() -> ToolSpec {
    ToolSpec {
        name: "calculator".into(),
        description: "Computes left <operation> right.".into(),
        input_schema: json!({"type": "object", "properties": {"left": {"type": "number"}}, "required": ["left"], "additionalProperties": false}),
        output_description: None,
        error_description: None,
        idempotent: true,
        needs_approval: false,
    }
}

fn request(history: Vec<HistoryItem>) -> ModelRequest {
    ModelRequest {
        instructions: "You are an agent.".into(),
        task: "What is 12 times 7?".into(),
        history: Arc::new(history),
        tools: Arc::new(vec![calculator_spec()]),
        max_output_tokens: Some(256),
        output_schema: None,
    }
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        tool_name: name.into(),
        arguments,
    }
}

/// The history of each golden case.
fn cases() -> Vec<(&'static str, Vec<HistoryItem>)> {
    let a = call(
        "call_a",
        "calculator",
        json!({"left": 12, "operation": "multiply", "right": 7}),
    );
    let b = call("call_b", "weather", json!({"city": "Oslo"}));
    vec![
        ("first_call", vec![]),
        (
            "parallel_calls_and_unknown_tool",
            vec![
                HistoryItem::ToolCalls {
                    calls: vec![a.clone(), b.clone()],
                    text: Some("Let me compute.".into()),
                },
                HistoryItem::Observation {
                    observation: Observation::success(&a, "84"),
                },
                HistoryItem::Observation {
                    observation: Observation::error(
                        &b,
                        "unknown tool `weather`: available tools are calculator",
                    ),
                },
            ],
        ),
        (
            "rejected_output_then_feedback",
            vec![
                HistoryItem::Feedback {
                    message: "the output is not valid JSON".into(),
                },
                HistoryItem::ToolCalls {
                    calls: vec![a.clone()],
                    text: None,
                },
                HistoryItem::Observation {
                    observation: Observation::success(&a, "84"),
                },
                HistoryItem::Feedback {
                    message: "the tests failed: 1 failure".into(),
                },
            ],
        ),
    ]
}

fn golden(name: &str, actual: &Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(actual).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing golden file {}; run with UPDATE_GOLDEN=1",
            path.display()
        )
    });
    assert_eq!(
        text,
        expected,
        "request JSON differs from {}",
        path.display()
    );
}

#[test]
fn openai_requests_match_the_golden_files() {
    for (name, history) in cases() {
        golden(
            &format!("openai_{name}"),
            &chat_request("gpt-test", &request(history)),
        );
    }
}

fn product_schema() -> Value {
    json!({"type": "object", "properties": {"product": {"type": "integer"}}, "required": ["product"]})
}

#[test]
fn an_output_schema_is_an_openai_response_format() {
    let mut with_schema = request(Vec::new());
    with_schema.output_schema = Some(Arc::new(product_schema()));
    let body = chat_request("gpt-test", &with_schema);
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(
        body["response_format"]["json_schema"]["schema"],
        product_schema()
    );
    assert!(
        chat_request("gpt-test", &request(Vec::new()))
            .get("response_format")
            .is_none()
    );
}

#[test]
fn an_output_schema_is_an_anthropic_tool_whose_call_is_the_finish() {
    let mut with_schema = request(Vec::new());
    with_schema.output_schema = Some(Arc::new(product_schema()));
    let body = messages_request("claude-test", &with_schema);
    let tools = body["tools"].as_array().unwrap();
    let output = tools
        .iter()
        .find(|tool| tool["name"] == OUTPUT_TOOL)
        .unwrap();
    assert_eq!(output["input_schema"], product_schema());
    assert_eq!(tools.len(), 2, "the calculator and the answer");
    let response = json!({"content": [
        {"type": "tool_use", "id": "t1", "name": OUTPUT_TOOL, "input": {"product": 84}}
    ], "usage": {"input_tokens": 5, "output_tokens": 3}});
    let parsed = parse_messages_response(&response, Some(&response)).unwrap();
    let [Action::Finish(finish)] = parsed.actions.as_slice() else {
        panic!("expected a finish, got {:?}", parsed.actions);
    };
    assert_eq!(
        serde_json::from_str::<Value>(&finish.answer).unwrap(),
        json!({"product": 84})
    );
}

#[test]
fn anthropic_requests_match_the_golden_files_and_alternate_roles() {
    for (name, history) in cases() {
        let body = messages_request("claude-test", &request(history));
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert!(
            roles.windows(2).all(|pair| pair[0] != pair[1]),
            "{name}: {roles:?}"
        );
        assert_eq!(roles[0], "user");
        golden(&format!("anthropic_{name}"), &body);
    }
}

#[derive(Default)]
struct Notes(Mutex<Vec<RetryNotice>>);

impl LayerObserver for Notes {
    fn retrying(&self, notice: RetryNotice) {
        self.0.lock().unwrap().push(notice);
    }
    fn circuit_changed(&self, _target: &str, _state: CircuitState) {}
}

/// Asks `model` for step 1, reporting retries to `notes`.
async fn ask(
    model: &dyn Model,
    request: &ModelRequest,
    notes: &Arc<Notes>,
) -> Result<ModelResponse, ModelError> {
    let mut ctx = ModelContext::new("s", 1);
    ctx.observer = notes.clone();
    model.complete(request, &ctx).await
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        min_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        ..RetryPolicy::for_models()
    }
}

fn openai(server: &FakeProvider, timeout: Duration) -> Arc<dyn Model> {
    let model = OpenAi::new(ProviderConfig {
        model: "gpt-test".into(),
        base_url: format!("{}/v1", server.url()),
        api_key: Some(KEY.into()),
        timeout,
    })
    .unwrap();
    Retry::new(policy()).layer(Arc::new(model) as Arc<dyn Model>)
}

fn anthropic(server: &FakeProvider, timeout: Duration) -> Arc<dyn Model> {
    let model = Anthropic::new(ProviderConfig {
        model: "claude-test".into(),
        base_url: server.url(),
        api_key: Some(KEY.into()),
        timeout,
    })
    .unwrap();
    Retry::new(policy()).layer(Arc::new(model) as Arc<dyn Model>)
}

fn openai_calls(calls: &[(&str, &str, &str)]) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": calls.iter().map(|(id, name, args)| json!({
                "id": id, "type": "function", "function": {"name": name, "arguments": args}
            })).collect::<Vec<_>>()
        }}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}
    })
}

fn openai_text(text: &str) -> Value {
    json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
           "usage": {"prompt_tokens": 50, "completion_tokens": 5}})
}

fn anthropic_blocks(blocks: Value) -> String {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "content": blocks,
           "stop_reason": "tool_use", "usage": {"input_tokens": 30, "output_tokens": 7}})
    .to_string()
}

#[tokio::test]
async fn openai_parses_parallel_calls_usage_and_sends_the_key_as_bearer() {
    let server = FakeProvider::start(vec![Reply::json(&openai_calls(&[
        (
            "call_x",
            "calculator",
            r#"{"left": 12, "operation": "multiply", "right": 7}"#,
        ),
        ("call_y", "weather", r#"{"city": "Oslo"}"#),
    ]))])
    .await
    .unwrap();
    let response = ask(
        openai(&server, Duration::from_secs(5)).as_ref(),
        &request(vec![]),
        &Arc::default(),
    )
    .await
    .unwrap();
    assert_eq!(response.usage.input_tokens, 40);
    assert_eq!(response.usage.output_tokens, 9);
    let names: Vec<&str> = response
        .actions
        .iter()
        .map(|a| match a {
            Action::ToolCall(c) => c.tool_name.as_str(),
            _ => "not a tool call",
        })
        .collect();
    assert_eq!(names, ["calculator", "weather"]);
    let received = server.received();
    assert_eq!(received[0].request_line, "POST /v1/chat/completions");
    assert_eq!(
        received[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(received[0].body["max_tokens"], 256);
}

#[tokio::test]
async fn openai_retries_429_with_retry_after_500_a_cut_body_and_a_timeout() {
    let body = openai_text("84").to_string();
    let server = FakeProvider::start(vec![
        Reply::status(429, r#"{"error":{"message":"rate limited"}}"#).header("Retry-After", "1"),
        Reply::status(500, r#"{"error":"boom"}"#),
        Reply::status(200, body.clone()).cut(body.len() / 2),
        Reply::status(200, body.clone()).delayed(Duration::from_secs(3)),
        Reply::status(200, body),
    ])
    .await
    .unwrap();
    let model = Retry::new(RetryPolicy {
        max_retries: 4,
        ..policy()
    })
    .layer(Arc::new(
        OpenAi::new(ProviderConfig {
            model: "m".into(),
            base_url: server.url(),
            api_key: None,
            timeout: Duration::from_millis(1500),
        })
        .unwrap(),
    ) as Arc<dyn Model>);
    let notes = Arc::new(Notes::default());
    let response = ask(model.as_ref(), &request(vec![]), &notes).await.unwrap();
    assert!(matches!(&response.actions[..], [Action::Finish(f)] if f.answer == "84"));
    let notes = notes.0.lock().unwrap();
    assert_eq!(notes.len(), 4, "{notes:?}");
    assert_eq!(
        notes[0].delay,
        Duration::from_secs(1),
        "Retry-After is honoured"
    );
    assert!(notes[0].error.contains("429"), "{}", notes[0].error);
    assert!(notes[1].error.contains("500"), "{}", notes[1].error);
    assert!(notes[2].error.contains("cut short"), "{}", notes[2].error);
    assert!(notes[3].error.contains("within 1.5s"), "{}", notes[3].error);
    assert!(
        server.received()[0].header("authorization").is_none(),
        "no key, no header"
    );
}

#[tokio::test]
async fn malformed_or_repeated_arguments_are_invalid_output_and_4xx_is_fatal_without_the_key() {
    let server = FakeProvider::start(vec![
        Reply::json(&openai_calls(&[("c", "calculator", r#"{"left": 1,"#)])),
        Reply::json(&openai_calls(&[(
            "c",
            "calculator",
            r#"{"left": 1, "left": 2}"#,
        )])),
        Reply::status(
            401,
            format!(r#"{{"error":"Incorrect API key provided: {KEY}"}}"#),
        ),
        Reply::status(404, r#"{"error":"model not found"}"#),
    ])
    .await
    .unwrap();
    let model = openai(&server, Duration::from_secs(5));
    let err = ask(model.as_ref(), &request(vec![]), &Arc::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::InvalidOutput { message, .. } if message.contains("not valid JSON")),
        "{err}"
    );
    let err = ask(model.as_ref(), &request(vec![]), &Arc::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::InvalidOutput { message, .. } if message.contains("duplicate key `left`")),
        "{err}"
    );
    let err = ask(model.as_ref(), &request(vec![]), &Arc::default())
        .await
        .unwrap_err();
    let ModelError::Fatal { message } = &err else {
        panic!("401 is fatal: {err}")
    };
    assert!(message.contains("401"), "{message}");
    assert!(!message.contains(KEY), "the key never appears: {message}");
    let err = ask(model.as_ref(), &request(vec![]), &Arc::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::Fatal { message } if message.contains("404")),
        "{err}"
    );
    assert_eq!(server.received().len(), 4, "4xx is not retried");
}

#[tokio::test]
async fn anthropic_parses_tool_use_and_text_and_sends_its_headers() {
    let server = FakeProvider::start(vec![
        Reply::status(200, anthropic_blocks(json!([
            {"type": "text", "text": "I will compute."},
            {"type": "tool_use", "id": "toolu_1", "name": "calculator", "input": {"left": 12, "operation": "multiply", "right": 7}},
            {"type": "tool_use", "id": "toolu_2", "name": "calculator", "input": {"left": 1, "operation": "add", "right": 1}}
        ]))),
        Reply::status(200, anthropic_blocks(json!([{"type": "text", "text": "84"}]))),
        Reply::status(200, r#"{"content":[{"type":"tool_use","id":"t","name":"calculator","input":{"left":1,"left":2}}],"usage":{"input_tokens":1,"output_tokens":1}}"#),
    ])
    .await
    .unwrap();
    let model = anthropic(&server, Duration::from_secs(5));
    let response = ask(model.as_ref(), &request(vec![]), &Arc::default())
        .await
        .unwrap();
    assert_eq!(response.actions.len(), 2);
    assert_eq!(response.text.as_deref(), Some("I will compute."));
    assert_eq!(response.usage.input_tokens, 30);
    let finish = ask(model.as_ref(), &request(vec![]), &Arc::default())
        .await
        .unwrap();
    assert!(matches!(&finish.actions[..], [Action::Finish(f)] if f.answer == "84"));
    let err = ask(model.as_ref(), &request(vec![]), &Arc::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::InvalidOutput { .. }), "{err}");
    let received = server.received();
    assert_eq!(received[0].request_line, "POST /v1/messages");
    assert_eq!(received[0].header("x-api-key"), Some(KEY));
    assert_eq!(received[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(received[0].body["max_tokens"], 256);
    assert_eq!(received[0].body["system"], "You are an agent.");
}

#[tokio::test]
async fn anthropic_retries_and_gives_up_with_a_fatal_error() {
    let server = FakeProvider::start(vec![
        Reply::status(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error"}}"#,
        ),
        Reply::status(500, "{}"),
        Reply::status(503, "{}"),
        Reply::status(502, "{}"),
    ])
    .await
    .unwrap();
    let notes = Arc::new(Notes::default());
    let err = ask(
        anthropic(&server, Duration::from_secs(5)).as_ref(),
        &request(vec![]),
        &notes,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ModelError::Fatal { message } if message.contains("gave up after 3 retries") && message.contains("502")),
        "{err}"
    );
    assert_eq!(notes.0.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn the_json_text_adapter_prompts_with_the_wire_format_and_parses_fenced_text() {
    let server = FakeProvider::start(vec![
        Reply::json(&openai_text("```json\n{\"type\":\"tool_call\",\"tool_name\":\"calculator\",\"arguments\":{\"left\":12}}\n```")),
        Reply::json(&openai_text("I think it is 84")),
    ])
    .await
    .unwrap();
    let model: Arc<dyn Model> = Arc::new(JsonText::new(openai(&server, Duration::from_secs(5))));
    let a = call("call_1_1", "calculator", json!({"left": 12}));
    let response = ask(model.as_ref(), &request(vec![]), &Arc::default())
        .await
        .unwrap();
    assert!(matches!(&response.actions[..], [Action::ToolCall(c)] if c.tool_name == "calculator"));
    let history = vec![
        HistoryItem::ToolCalls {
            calls: vec![a.clone()],
            text: None,
        },
        HistoryItem::Observation {
            observation: Observation::success(&a, "84"),
        },
    ];
    let err = ask(model.as_ref(), &request(history), &Arc::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, ModelError::InvalidOutput { .. }),
        "plain prose is rejected"
    );
    let received = server.received();
    let first = &received[0].body;
    assert!(first.get("tools").is_none(), "no native tools");
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("\"type\":\"tool_call\"") && system.contains("calculator"),
        "{system}"
    );
    let second = &received[1].body["messages"];
    assert_eq!(second[2]["role"], "assistant");
    assert!(second[2]["content"].as_str().unwrap().contains("tool_call"));
    assert_eq!(second[3]["role"], "user");
    assert!(second[3]["content"].as_str().unwrap().contains("84"));
}

#[tokio::test]
async fn a_server_rejecting_its_models_tool_call_gets_the_step_again_as_json_text() {
    let rejected = json!({"error": {"code": 500, "type": "server_error",
        "message": "Failed to parse tool call arguments as JSON: parse error at line 1, column 27"}});
    let server = FakeProvider::start(vec![
        Reply::status(500, rejected.to_string()),
        Reply::json(&openai_text(
            "{\"type\":\"tool_call\",\"tool_name\":\"calculator\",\"arguments\":{\"left\":12}}",
        )),
        Reply::status(500, rejected.to_string()),
        Reply::json(&openai_text("it is probably 84")),
    ])
    .await
    .unwrap();
    let model = openai(&server, Duration::from_secs(5));
    let notes = Arc::new(Notes::default());
    let response = ask(model.as_ref(), &request(vec![]), &notes).await.unwrap();
    assert!(
        matches!(&response.actions[..], [Action::ToolCall(c)] if c.tool_name == "calculator" && c.arguments == json!({"left": 12})),
        "{response:?}"
    );
    {
        let notes = notes.0.lock().unwrap();
        assert_eq!(notes.len(), 1, "one switch, no transient retries");
        assert!(notes[0].error.contains("JSON text"), "{:?}", notes[0]);
        assert!(notes[0].error.contains("500"), "{:?}", notes[0]);
    }
    let received = server.received();
    assert_eq!(received.len(), 2);
    assert!(received[0].body.get("tools").is_some());
    assert!(
        received[1].body.get("tools").is_none(),
        "the fallback sends no native tools"
    );
    let system = received[1].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("calculator") && system.contains("\"type\":\"tool_call\""),
        "{system}"
    );

    let err = ask(model.as_ref(), &request(vec![]), &notes)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ModelError::InvalidOutput { raw, .. } if raw.contains("84")),
        "prose from the fallback is invalid output the engine feeds back: {err:?}"
    );
    assert_eq!(server.received().len(), 4);
}

#[tokio::test]
async fn other_server_errors_are_still_retried_and_not_asked_as_text() {
    let server = FakeProvider::start(vec![
        Reply::status(
            500,
            r#"{"error":{"message":"Failed to parse tools: type must be string"}}"#,
        ),
        Reply::json(&openai_calls(&[("c1", "calculator", "{\"left\":1}")])),
    ])
    .await
    .unwrap();
    let model = openai(&server, Duration::from_secs(5));
    let notes = Arc::new(Notes::default());
    let response = ask(model.as_ref(), &request(vec![]), &notes).await.unwrap();
    assert_eq!(response.actions.len(), 1);
    assert_eq!(notes.0.lock().unwrap().len(), 1, "one transient retry");
    assert!(server.received()[1].body.get("tools").is_some());
}
