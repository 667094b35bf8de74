//! The OpenAI Chat Completions adapter, whole or streamed, which also drives any
//! OpenAI-compatible server: llama.cpp's `llama-server`, vLLM, Ollama.
//!
//! History mapping: a turn's tool calls are one assistant message with
//! `tool_calls`; each observation a `tool` message with the same `tool_call_id`;
//! feedback a user message. A rejected response never appears.

use std::sync::Arc;

use agent_core::context::TokenCounter;
use agent_core::history::HistoryItem;
use agent_core::model::{ModelError, ModelRequest, ModelResponse};
use agent_core::strict_json;
use agent_core::types::{Action, Finish, ToolCall, Usage};
use reqwest::header::{AUTHORIZATION, HeaderName};
use serde_json::{Map, Value, json};

use crate::chat::{HttpChatModel, WireFormat, count};
use crate::openai_stream::ChatCompletionsFold;

/// Base URL when neither the spec nor `OPENAI_BASE_URL` gives one.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The Chat Completions wire format.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChatCompletions;

/// An OpenAI-compatible chat model.
pub type OpenAi = HttpChatModel<ChatCompletions>;

impl WireFormat for ChatCompletions {
    const PROVIDER: &'static str = "openai";
    const KEY_VARIABLE: &'static str = "OPENAI_API_KEY";
    const PATH: &'static str = "/chat/completions";
    const TEXT_FALLBACK: bool = true;

    fn key_header(key: &str) -> (HeaderName, String) {
        (AUTHORIZATION, format!("Bearer {key}"))
    }

    fn body(model: &str, request: &ModelRequest) -> Value {
        chat_request(model, request)
    }

    fn parse(body: &Value, _text: &str) -> Result<ModelResponse, ModelError> {
        parse_chat_response(body)
    }

    type Fold = ChatCompletionsFold;

    fn ask_to_stream(body: &mut Value) {
        if let Some(fields) = body.as_object_mut() {
            fields.insert("stream".into(), json!(true));
            fields.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }

    fn token_counter(model: &str) -> Option<Arc<dyn TokenCounter>> {
        Tiktoken::for_model(model).map(|counter| Arc::new(counter) as Arc<dyn TokenCounter>)
    }
}

/// An OpenAI model's own tokenizer (`tiktoken`'s vocabularies, built into the
/// binary), for models whose name says which one they use.
#[derive(Clone)]
pub struct Tiktoken {
    bpe: &'static tiktoken_rs::CoreBPE,
    name: String,
}

impl Tiktoken {
    /// The tokenizer of `model` (`gpt-4o`, `o3-mini`, …), if the name is known.
    pub fn for_model(model: &str) -> Option<Self> {
        let tokenizer = tiktoken_rs::tokenizer::get_tokenizer(model)?;
        let bpe = tiktoken_rs::bpe_for_tokenizer(tokenizer).ok()?;
        Some(Self {
            bpe,
            name: format!("{tokenizer:?}"),
        })
    }
}

impl std::fmt::Debug for Tiktoken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tiktoken")
            .field("name", &self.name)
            .finish()
    }
}

impl TokenCounter for Tiktoken {
    fn name(&self) -> &str {
        &self.name
    }

    fn count(&self, text: &str) -> u64 {
        u64::try_from(self.bpe.count_ordinary(text)).unwrap_or(u64::MAX)
    }
}

/// The exact Chat Completions request body for `request`.
pub fn chat_request(model: &str, request: &ModelRequest) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": request.instructions}),
        json!({"role": "user", "content": request.task}),
    ];
    for item in request.history.iter() {
        messages.push(match item {
            HistoryItem::ToolCalls { calls, text } => json!({
                "role": "assistant",
                "content": text,
                "tool_calls": calls.iter().map(|call| json!({
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.tool_name, "arguments": call.arguments.to_string()},
                })).collect::<Vec<_>>(),
            }),
            HistoryItem::Observation { observation } => json!({
                "role": "tool",
                "tool_call_id": observation.call_id,
                "content": if observation.is_error {
                    format!("error: {}", observation.content)
                } else {
                    observation.content.clone()
                },
            }),
            HistoryItem::AssistantText { text } => json!({"role": "assistant", "content": text}),
            HistoryItem::Feedback { message: text } | HistoryItem::UserMessage { text } => {
                json!({"role": "user", "content": text})
            }
            HistoryItem::Summary { text } => {
                json!({"role": "user", "content": crate::summary_message(text)})
            }
        });
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), json!(messages));
    if let Some(max) = request.max_output_tokens {
        body.insert("max_tokens".into(), json!(max));
    }
    if !request.tools.is_empty() {
        body.insert(
            "tools".into(),
            json!(
                request
                    .tools
                    .iter()
                    .map(|tool| json!({
                        "type": "function",
                        "function": {
                            "name": tool.name,
                            "description": tool.description,
                            "parameters": tool.input_schema,
                        },
                    }))
                    .collect::<Vec<_>>()
            ),
        );
        body.insert("tool_choice".into(), json!("auto"));
        body.insert("parallel_tool_calls".into(), json!(true));
    }
    if let Some(schema) = &request.output_schema {
        body.insert(
            "response_format".into(),
            json!({
                "type": "json_schema",
                "json_schema": {"name": "final_answer", "schema": schema, "strict": false},
            }),
        );
    }
    Value::Object(body)
}

/// Our actions from a Chat Completions response body.
pub fn parse_chat_response(body: &Value) -> Result<ModelResponse, ModelError> {
    let usage = Usage {
        input_tokens: count(body, "/usage/prompt_tokens"),
        output_tokens: count(body, "/usage/completion_tokens"),
    };
    let message = body
        .get("choices")
        .and_then(|choices| choices.get(0))
        .and_then(|choice| choice.get("message"))
        .ok_or_else(|| ModelError::Fatal {
            message: "the response has no `choices[0].message`".into(),
        })?;
    let raw = message.to_string();
    let invalid = |message: String| ModelError::InvalidOutput {
        raw: raw.clone(),
        message,
        usage,
    };
    let text = message
        .get("content")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_owned);
    let calls = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if calls.is_empty() {
        return match text {
            Some(answer) => Ok(ModelResponse {
                actions: vec![Action::Finish(Finish { answer })],
                usage,
                text: None,
                model: None,
            }),
            None => Err(invalid(
                "the response has neither tool calls nor text; call a tool or answer".into(),
            )),
        };
    }
    let mut actions = Vec::with_capacity(calls.len());
    for call in &calls {
        let name = text_at(call, "/function/name").unwrap_or_default();
        if name.trim().is_empty() {
            return Err(invalid("a tool call has no function name".into()));
        }
        let arguments_text = text_at(call, "/function/arguments").unwrap_or("{}");
        let arguments = if arguments_text.trim().is_empty() {
            json!({})
        } else {
            strict_json::from_str(arguments_text).map_err(|err| {
                invalid(format!(
                    "the arguments of the call to `{name}` are not valid JSON ({err}); send one JSON object with each key once"
                ))
            })?
        };
        if !arguments.is_object() {
            return Err(invalid(format!(
                "the arguments of the call to `{name}` must be a JSON object"
            )));
        }
        actions.push(Action::ToolCall(ToolCall {
            id: call["id"].as_str().unwrap_or_default().to_owned(),
            tool_name: name.to_owned(),
            arguments,
        }));
    }
    Ok(ModelResponse {
        actions,
        usage,
        text,
        model: None,
    })
}

/// The text at `pointer` in a response, if there is one.
fn text_at<'a>(body: &'a Value, pointer: &str) -> Option<&'a str> {
    body.pointer(pointer).and_then(Value::as_str)
}
