//! The OpenAI Chat Completions adapter (non-streaming), which also drives any
//! OpenAI-compatible server: llama.cpp's `llama-server`, vLLM, Ollama.
//!
//! History mapping: a turn's tool calls are one assistant message with
//! `tool_calls`; each observation a `tool` message with the same `tool_call_id`;
//! feedback a user message. A rejected response never appears.

use agent_core::{
    Action, Finish, HistoryItem, Model, ModelError, ModelRequest, ModelResponse, ToolCall, Usage,
    strict_json,
};
use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Value, json};

use crate::http::{HttpClient, ProviderConfig};

/// Base URL when neither the spec nor `OPENAI_BASE_URL` gives one.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// An OpenAI-compatible chat model.
#[derive(Debug, Clone)]
pub struct OpenAi {
    config: ProviderConfig,
    http: HttpClient,
}

impl OpenAi {
    /// A model for `config`.
    pub fn new(config: ProviderConfig) -> Result<Self, String> {
        let http = HttpClient::new(config.timeout)?;
        Ok(Self { config, http })
    }
}

/// The exact Chat Completions request body for `request`.
pub fn chat_request(model: &str, request: &ModelRequest) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": request.instructions}),
        json!({"role": "user", "content": request.task}),
    ];
    for item in &request.history {
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
            HistoryItem::Feedback { message } => json!({"role": "user", "content": message}),
        });
    }
    let mut body = json!({"model": model, "messages": messages});
    if let Some(max) = request.max_output_tokens {
        body["max_tokens"] = json!(max);
    }
    if !request.tools.is_empty() {
        body["tools"] = json!(
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
        );
        body["tool_choice"] = json!("auto");
        body["parallel_tool_calls"] = json!(true);
    }
    body
}

/// Our actions from a Chat Completions response body.
pub fn parse_chat_response(body: &Value) -> Result<ModelResponse, ModelError> {
    let usage = Usage {
        input_tokens: body["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: body["usage"]["completion_tokens"].as_u64().unwrap_or(0),
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
            }),
            None => Err(invalid(
                "the response has neither tool calls nor text; call a tool or answer".into(),
            )),
        };
    }
    let mut actions = Vec::with_capacity(calls.len());
    for call in &calls {
        let name = call["function"]["name"].as_str().unwrap_or_default();
        if name.trim().is_empty() {
            return Err(invalid("a tool call has no function name".into()));
        }
        let arguments_text = call["function"]["arguments"].as_str().unwrap_or("{}");
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
    })
}

#[async_trait]
impl Model for OpenAi {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.config.api_key {
            let value =
                HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| ModelError::Fatal {
                    message: "OPENAI_API_KEY holds characters that cannot be sent in a header"
                        .into(),
                })?;
            headers.insert(AUTHORIZATION, value);
        }
        let url = format!("{}/chat/completions", self.config.base_url);
        let body = chat_request(&self.config.model, request);
        let (response, _) = self
            .http
            .post_json(&url, headers, &body, self.config.api_key.as_deref())
            .await?;
        parse_chat_response(&response)
    }
}
