//! Streaming from the OpenAI and Anthropic adapters against a local server that
//! sends server-sent events one at a time: text reported as it arrives, the
//! response folded back to what a whole response would have said, tool-call
//! arguments assembled from fragments, a stream dropped mid-way retried from
//! the start, and a server that ignores the request to stream.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::delta::{DeltaSink, ModelDelta};
use agent_core::layer::{CircuitState, Layer, LayerObserver, RetryNotice};
use agent_core::model::{Model, ModelContext, ModelRequest};
use agent_core::types::{Action, ToolSpec};
use agent_layers::{Retry, RetryPolicy};
use agent_providers::{Anthropic, OpenAi, ProviderConfig};
use agent_testkit::{FakeProvider, Reply};
use serde_json::{Value, json};
use tokio::sync::Notify;

#[derive(Default)]
struct Watched(Mutex<Vec<ModelDelta>>);

impl Watched {
    fn deltas(&self) -> Vec<ModelDelta> {
        self.0.lock().unwrap().clone()
    }

    fn text(&self) -> String {
        self.deltas()
            .into_iter()
            .filter_map(|delta| match delta {
                ModelDelta::Text(text) => Some(text),
                ModelDelta::Started => None,
            })
            .collect()
    }
}

impl DeltaSink for Watched {
    fn delta(&self, session_id: &str, step: u32, delta: ModelDelta) {
        assert_eq!((session_id, step), ("s", 1));
        self.0.lock().unwrap().push(delta);
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

fn request() -> ModelRequest {
    ModelRequest {
        instructions: "You are an agent.".into(),
        task: "What is 12 times 7?".into(),
        history: Arc::default(),
        tools: Arc::new(vec![ToolSpec {
            name: "calculator".into(),
            description: "Computes an expression.".into(),
            input_schema: json!({"type": "object", "properties": {"expression": {"type": "string"}}}),
            output_description: None,
            error_description: None,
            idempotent: true,
            needs_approval: false,
        }]),
        max_output_tokens: Some(256),
        output_schema: None,
    }
}

fn config(server: &FakeProvider, base: &str) -> ProviderConfig {
    ProviderConfig {
        model: "m".into(),
        base_url: format!("{}{base}", server.url()),
        api_key: None,
        timeout: Duration::from_secs(10),
    }
}

fn retried(model: impl Model + 'static) -> Arc<dyn Model> {
    Retry::new(RetryPolicy {
        min_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        ..RetryPolicy::for_models()
    })
    .layer(Arc::new(model) as Arc<dyn Model>)
}

fn watched_ctx(watched: &Arc<Watched>, notes: &Arc<Notes>) -> ModelContext {
    let mut ctx = ModelContext::new("s", 1).with_deltas(watched.clone());
    ctx.observer = notes.clone();
    ctx
}

/// Chat Completions chunks carrying `texts`, then usage (and `[DONE]` when `done`).
fn openai_chunks(texts: &[&str], done: bool) -> Vec<(Option<&'static str>, String)> {
    let mut events: Vec<(Option<&str>, String)> = texts
        .iter()
        .map(|text| {
            (
                None,
                json!({"model": "m-1", "choices": [{"index": 0, "delta": {"content": text}}]})
                    .to_string(),
            )
        })
        .collect();
    if done {
        events.push((
            None,
            json!({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 4}})
                .to_string(),
        ));
        events.push((None, "[DONE]".into()));
    }
    events
}

fn answer(response: &agent_core::model::ModelResponse) -> &str {
    match response.actions.as_slice() {
        [Action::Finish(finish)] => &finish.answer,
        other => panic!("not one finish: {other:?}"),
    }
}

#[tokio::test]
async fn openai_text_is_shown_as_it_arrives_and_the_response_is_the_joined_chunks() {
    let gate = Arc::new(Notify::new());
    let server = FakeProvider::start(vec![
        Reply::stream(openai_chunks(&["12 times 7 ", "is ", "84."], true))
            .hold_before(2, Arc::clone(&gate)),
    ])
    .await
    .unwrap();
    let model = retried(OpenAi::new(config(&server, "/v1")).unwrap());
    let watched = Arc::new(Watched::default());
    let ctx = watched_ctx(&watched, &Arc::default());
    let call = tokio::spawn(async move { model.complete(&request(), &ctx).await });
    // The first two pieces are shown while the server still holds the rest.
    for _ in 0..200 {
        if watched.text() == "12 times 7 is " {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(watched.text(), "12 times 7 is ");
    assert!(!call.is_finished());
    gate.notify_one();
    let response = call.await.unwrap().unwrap();
    assert_eq!(answer(&response), "12 times 7 is 84.");
    assert_eq!(answer(&response), watched.text());
    assert_eq!(watched.deltas()[0], ModelDelta::Started);
    assert_eq!(response.usage.input_tokens, 11);
    assert_eq!(response.usage.output_tokens, 4);
    assert_eq!(response.model.as_deref(), Some("m-1"));
    let sent = &server.received()[0].body;
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn openai_tool_call_arguments_are_assembled_from_streamed_fragments() {
    let pieces = [
        json!({"choices": [{"delta": {"role": "assistant", "content": "Computing."}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "calculator", "arguments": ""}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"expr"}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "ession\": \"12*7\"}"}}]}, "finish_reason": "tool_calls"}]}),
    ];
    let mut events: Vec<(Option<&str>, String)> = pieces
        .iter()
        .map(|piece| (None, piece.to_string()))
        .collect();
    events.push((None, "[DONE]".into()));
    let server = FakeProvider::start(vec![Reply::stream(events).paced(Duration::from_millis(5))])
        .await
        .unwrap();
    let model = retried(OpenAi::new(config(&server, "/v1")).unwrap());
    let watched = Arc::new(Watched::default());
    let response = model
        .complete(&request(), &watched_ctx(&watched, &Arc::default()))
        .await
        .unwrap();
    let [Action::ToolCall(call)] = response.actions.as_slice() else {
        panic!("{:?}", response.actions);
    };
    assert_eq!(call.id, "call_1");
    assert_eq!(call.tool_name, "calculator");
    assert_eq!(call.arguments, json!({"expression": "12*7"}));
    assert_eq!(response.text.as_deref(), Some("Computing."));
    assert_eq!(watched.text(), "Computing.");
}

#[tokio::test]
async fn a_stream_dropped_mid_way_is_retried_from_the_start() {
    let server = FakeProvider::start(vec![
        Reply::stream(openai_chunks(&["12 times ", "7"], false)),
        Reply::stream(openai_chunks(&["12 times ", "7 is 84."], true)),
    ])
    .await
    .unwrap();
    let model = retried(OpenAi::new(config(&server, "/v1")).unwrap());
    let watched = Arc::new(Watched::default());
    let notes = Arc::new(Notes::default());
    let response = model
        .complete(&request(), &watched_ctx(&watched, &notes))
        .await
        .unwrap();
    assert_eq!(answer(&response), "12 times 7 is 84.");
    let retries = notes.0.lock().unwrap().clone();
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert!(
        retries[0].error.contains("cut short"),
        "{}",
        retries[0].error
    );
    assert_eq!(
        watched.deltas(),
        vec![
            ModelDelta::Started,
            ModelDelta::Text("12 times ".into()),
            ModelDelta::Text("7".into()),
            ModelDelta::Started,
            ModelDelta::Text("12 times ".into()),
            ModelDelta::Text("7 is 84.".into()),
        ]
    );
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn anthropic_streams_text_and_assembles_tool_input() {
    let events = vec![
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"model": "claude-1", "usage": {"input_tokens": 21, "output_tokens": 1}}}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me "}}),
        ),
        (Some("ping"), json!({"type": "ping"})),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "compute."}}),
        ),
        (
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "calculator", "input": {}}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"expression\": \"12"}}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "*7\"}"}}),
        ),
        (
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            Some("message_delta"),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 17}}),
        ),
        (Some("message_stop"), json!({"type": "message_stop"})),
    ];
    let server = FakeProvider::start(vec![
        Reply::stream(
            events
                .into_iter()
                .map(|(name, data)| (name, data.to_string())),
        )
        .paced(Duration::from_millis(5)),
    ])
    .await
    .unwrap();
    let model = retried(Anthropic::new(config(&server, "")).unwrap());
    let watched = Arc::new(Watched::default());
    let response = model
        .complete(&request(), &watched_ctx(&watched, &Arc::default()))
        .await
        .unwrap();
    let [Action::ToolCall(call)] = response.actions.as_slice() else {
        panic!("{:?}", response.actions);
    };
    assert_eq!(call.id, "toolu_1");
    assert_eq!(call.arguments, json!({"expression": "12*7"}));
    assert_eq!(response.text.as_deref(), Some("Let me compute."));
    assert_eq!(watched.text(), "Let me compute.");
    assert_eq!(
        (response.usage.input_tokens, response.usage.output_tokens),
        (21, 17)
    );
    assert_eq!(response.model.as_deref(), Some("claude-1"));
    assert_eq!(server.received()[0].body["stream"], true);
}

#[tokio::test]
async fn an_anthropic_stream_without_message_stop_is_retried() {
    let start = (
        Some("message_start"),
        json!({"type": "message_start", "message": {"model": "c", "usage": {"input_tokens": 2}}})
            .to_string(),
    );
    let text = |piece: &str| {
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})
                .to_string(),
        )
    };
    let block = (
        Some("content_block_start"),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
            .to_string(),
    );
    let stop = (
        Some("message_stop"),
        json!({"type": "message_stop"}).to_string(),
    );
    let server = FakeProvider::start(vec![
        Reply::stream(vec![start.clone(), block.clone(), text("Eighty")]),
        Reply::stream(vec![start, block, text("Eighty-four."), stop]),
    ])
    .await
    .unwrap();
    let model = retried(Anthropic::new(config(&server, "")).unwrap());
    let watched = Arc::new(Watched::default());
    let notes = Arc::new(Notes::default());
    let response = model
        .complete(&request(), &watched_ctx(&watched, &notes))
        .await
        .unwrap();
    assert_eq!(answer(&response), "Eighty-four.");
    assert_eq!(notes.0.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_server_that_ignores_the_request_to_stream_is_read_whole() {
    let body: Value = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "84"}}],
                             "usage": {"prompt_tokens": 3, "completion_tokens": 1}});
    let server = FakeProvider::start(vec![Reply::json(&body)]).await.unwrap();
    let model = retried(OpenAi::new(config(&server, "/v1")).unwrap());
    let watched = Arc::new(Watched::default());
    let response = model
        .complete(&request(), &watched_ctx(&watched, &Arc::default()))
        .await
        .unwrap();
    assert_eq!(answer(&response), "84");
    assert_eq!(watched.deltas(), vec![ModelDelta::Started]);
}

#[tokio::test]
async fn a_call_nobody_watches_is_not_streamed() {
    let body =
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "84"}}]});
    let server = FakeProvider::start(vec![Reply::json(&body)]).await.unwrap();
    let model = retried(OpenAi::new(config(&server, "/v1")).unwrap());
    model
        .complete(&request(), &ModelContext::new("s", 1))
        .await
        .unwrap();
    let sent = &server.received()[0].body;
    assert!(sent.get("stream").is_none(), "{sent}");
    assert!(sent.get("stream_options").is_none(), "{sent}");
}
