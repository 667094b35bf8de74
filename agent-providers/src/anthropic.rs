//! The Anthropic Messages adapter: `POST {base}/v1/messages` with `x-api-key` and
//! `anthropic-version: 2023-06-01`, a system prompt, `tool_use` / `tool_result`
//! blocks and `max_tokens` always sent. Roles must alternate, so the tool results
//! and feedback of one turn are merged into one user message.

use agent_core::history::HistoryItem;
use agent_core::model::{ModelError, ModelRequest, ModelResponse};
use agent_core::strict_json;
use agent_core::types::{Action, Finish, ToolCall, Usage};
use reqwest::header::HeaderName;
use serde_json::{Value, json};

use crate::anthropic_stream::MessagesFold;
use crate::chat::{HttpChatModel, WireFormat, count};

/// Base URL when neither the spec nor `ANTHROPIC_BASE_URL` gives one.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The API version header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` when the request sets no cap (the API requires one).
const DEFAULT_MAX_TOKENS: u32 = 1024;

/// The Messages wire format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Messages;

/// An Anthropic model.
pub type Anthropic = HttpChatModel<Messages>;

impl WireFormat for Messages {
    const PROVIDER: &'static str = "anthropic";
    const KEY_VARIABLE: &'static str = "ANTHROPIC_API_KEY";
    const PATH: &'static str = "/v1/messages";
    const HEADERS: &'static [(&'static str, &'static str)] =
        &[("anthropic-version", ANTHROPIC_VERSION)];

    fn key_header(key: &str) -> (HeaderName, String) {
        (HeaderName::from_static("x-api-key"), key.to_owned())
    }

    fn body(model: &str, request: &ModelRequest) -> Value {
        messages_request(model, request)
    }

    fn parse(body: &Value, text: &str) -> Result<ModelResponse, ModelError> {
        let strict = strict_json::from_str(text).ok();
        parse_messages_response(body, strict.as_ref())
    }

    type Fold = MessagesFold;
}

/// The tool a Messages request offers for the final answer when the session
/// has an output schema: its input is the answer, as JSON. The name is
/// reserved: a call to it is always read as the finish.
pub const OUTPUT_TOOL: &str = "agent_final_answer";

/// Appends `block` to the last message if it has `role`, else starts a message.
fn push_block(messages: &mut Vec<Value>, role: &str, block: Value) {
    if let Some(last) = messages.last_mut()
        && last["role"] == role
        && let Some(content) = last["content"].as_array_mut()
    {
        content.push(block);
        return;
    }
    messages.push(json!({"role": role, "content": [block]}));
}

/// The exact Messages request body for `request`.
pub fn messages_request(model: &str, request: &ModelRequest) -> Value {
    let mut messages = Vec::new();
    push_block(
        &mut messages,
        "user",
        json!({"type": "text", "text": request.task}),
    );
    for item in request.history.iter() {
        match item {
            HistoryItem::ToolCalls { calls, text } => {
                if let Some(text) = text {
                    push_block(
                        &mut messages,
                        "assistant",
                        json!({"type": "text", "text": text}),
                    );
                }
                for call in calls {
                    push_block(
                        &mut messages,
                        "assistant",
                        json!({"type": "tool_use", "id": call.id, "name": call.tool_name, "input": call.arguments}),
                    );
                }
            }
            HistoryItem::Observation { observation } => push_block(
                &mut messages,
                "user",
                json!({
                    "type": "tool_result",
                    "tool_use_id": observation.call_id,
                    "content": observation.content,
                    "is_error": observation.is_error,
                }),
            ),
            HistoryItem::AssistantText { text } => {
                push_block(
                    &mut messages,
                    "assistant",
                    json!({"type": "text", "text": text}),
                );
            }
            HistoryItem::Feedback { message: text } | HistoryItem::UserMessage { text } => {
                push_block(&mut messages, "user", json!({"type": "text", "text": text}));
            }
            HistoryItem::Summary { text } => {
                push_block(
                    &mut messages,
                    "user",
                    json!({"type": "text", "text": crate::summary_message(text)}),
                );
            }
        }
    }
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        "system": request.instructions,
        "messages": messages,
    });
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.input_schema,
            })
        })
        .collect();
    if let Some(schema) = request
        .output_schema
        .as_ref()
        .filter(|schema| schema["type"] == "object")
        .filter(|_| !request.tools.iter().any(|tool| tool.name == OUTPUT_TOOL))
    {
        tools.push(json!({
            "name": OUTPUT_TOOL,
            "description": "Finish: give the final answer, whose fields this schema describes.",
            "input_schema": schema,
        }));
    }
    if !tools.is_empty()
        && let Some(fields) = body.as_object_mut()
    {
        fields.insert("tools".into(), json!(tools));
    }
    body
}

/// Our actions from a Messages response body (`strict` is the body parsed with
/// duplicate keys refused, `None` when it had some).
pub fn parse_messages_response(
    body: &Value,
    strict: Option<&Value>,
) -> Result<ModelResponse, ModelError> {
    let usage = Usage {
        input_tokens: count(body, "/usage/input_tokens"),
        output_tokens: count(body, "/usage/output_tokens"),
    };
    let content = body["content"]
        .as_array()
        .ok_or_else(|| ModelError::Fatal {
            message: "the response has no `content` array".into(),
        })?;
    let raw = body["content"].to_string();
    let invalid = |message: String| ModelError::InvalidOutput {
        raw: raw.clone(),
        message,
        usage,
    };
    let Some(strict) = strict else {
        return Err(invalid(
            "a tool call repeats a key in its input; send each key once".into(),
        ));
    };
    let mut texts = Vec::new();
    let mut actions = Vec::new();
    for (index, block) in content.iter().enumerate() {
        match block["type"].as_str() {
            Some("text") => {
                if let Some(text) = block["text"]
                    .as_str()
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                {
                    texts.push(text.to_owned());
                }
            }
            Some("tool_use") => {
                let name = block["name"].as_str().unwrap_or_default();
                if name.trim().is_empty() {
                    return Err(invalid("a tool_use block has no name".into()));
                }
                let input = strict
                    .pointer(&format!("/content/{index}/input"))
                    .cloned()
                    .unwrap_or_default();
                if !input.is_object() {
                    return Err(invalid(format!(
                        "the input of the call to `{name}` must be a JSON object"
                    )));
                }
                if name == OUTPUT_TOOL {
                    actions.push(Action::Finish(Finish {
                        answer: input.to_string(),
                    }));
                    continue;
                }
                actions.push(Action::ToolCall(ToolCall {
                    id: block["id"].as_str().unwrap_or_default().to_owned(),
                    tool_name: name.to_owned(),
                    arguments: input,
                }));
            }
            _ => {}
        }
    }
    let text = (!texts.is_empty()).then(|| texts.join("\n"));
    if actions.is_empty() {
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
    Ok(ModelResponse {
        actions,
        usage,
        text,
        model: None,
    })
}
