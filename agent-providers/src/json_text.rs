//! The JSON-text adapter (`json:<inner spec>`) for models without native tool
//! calling: the tool specs and the action wire format go into the system prompt,
//! the inner model is called without tools, and its text answer is parsed
//! strictly as one wire-format action (a fenced ```json block is accepted).

use agent_core::history::HistoryItem;
use agent_core::model::{
    Model, ModelContext, ModelError, ModelIdentity, ModelRequest, ModelResponse,
};
use agent_core::types::Action;
use async_trait::async_trait;
use serde_json::json;
use std::sync::Arc;

use crate::wire::{WIRE_FORMAT_HINT, parse_actions};

/// Wraps a model so that it speaks the wire format in plain text.
#[derive(Debug, Clone)]
pub struct JsonText<M> {
    inner: M,
}

impl<M> JsonText<M> {
    /// Wraps `inner`.
    pub fn new(inner: M) -> Self {
        Self { inner }
    }
}

/// What a text model is told about ending: small models otherwise call the same
/// tool again after seeing its result.
const ANSWER_RULE: &str = "A tool result arrives as a user message starting with `Result of`. \
Once the results you have answer the task, reply {\"type\":\"finish\",\"answer\":TEXT} with the \
answer in words, using those results. Never repeat a call whose result you already have.";

/// The request the inner model sees: tools described in text, history as text.
pub fn text_request(request: &ModelRequest) -> ModelRequest {
    let tools: Vec<_> = request
        .tools
        .iter()
        .map(|tool| json!({"name": tool.name, "description": tool.description, "arguments_schema": tool.input_schema}))
        .collect();
    let instructions = format!(
        "{}\n\nYou have these tools (JSON):\n{}\n\nEach reply must be exactly one JSON object and nothing else; {WIRE_FORMAT_HINT}.\n{ANSWER_RULE}",
        request.instructions,
        serde_json::Value::Array(tools)
    );
    let arguments_of = |call_id: &str| {
        request.history.iter().find_map(|item| match item {
            HistoryItem::ToolCalls { calls, .. } => calls
                .iter()
                .find(|call| call.id == call_id)
                .map(|call| call.arguments.to_string()),
            _ => None,
        })
    };
    let mut history: Vec<HistoryItem> = request
        .history
        .iter()
        .map(|item| match item {
            HistoryItem::ToolCalls { calls, .. } => {
                let action = match calls.as_slice() {
                    [call] => json!({"type": "tool_call", "tool_name": call.tool_name, "arguments": call.arguments}),
                    calls => json!({"type": "tool_calls", "calls": calls.iter().map(|call| json!({
                        "tool_name": call.tool_name, "arguments": call.arguments,
                    })).collect::<Vec<_>>()}),
                };
                HistoryItem::AssistantText { text: action.to_string() }
            }
            HistoryItem::Observation { observation } => HistoryItem::Feedback {
                message: format!(
                    "{} of `{}` {}: {}",
                    if observation.is_error { "Error" } else { "Result" },
                    observation.tool_name,
                    arguments_of(&observation.call_id).unwrap_or_default(),
                    observation.content
                ),
            },
            other => other.clone(),
        })
        .collect();
    if matches!(
        request.history.last(),
        Some(HistoryItem::Observation { .. })
    ) && let Some(HistoryItem::Feedback { message }) = history.last_mut()
    {
        message.push_str(&format!(
            "\n\nThe task: {}\nIf the results so far answer it, reply now with {{\"type\":\"finish\",\"answer\":TEXT}}; otherwise make the next call the task needs (a call already made will not be run again).",
            request.task
        ));
    }
    ModelRequest {
        instructions,
        history: Arc::new(history),
        tools: Arc::new(Vec::new()),
        ..request.clone()
    }
}

/// The JSON text inside `text`: the whole text, or its first fenced block.
fn unfence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(start) = trimmed.find("```") else {
        return trimmed;
    };
    let after = &trimmed[start + 3..];
    let body = after.strip_prefix("json").unwrap_or(after);
    match body.find("```") {
        Some(end) => body[..end].trim(),
        None => trimmed,
    }
}

/// The actions in a text answer: the whole text, or its first fenced block,
/// parsed strictly as the wire format.
pub(crate) fn parse_text_actions(text: &str, step: u32) -> Result<Vec<Action>, String> {
    parse_actions(unfence(text), step)
}

/// The actions of a response to a [`text_request`]: its text parsed strictly as the
/// wire format, or invalid output quoting it.
pub(crate) fn actions_from_text(
    response: ModelResponse,
    step: u32,
) -> Result<ModelResponse, ModelError> {
    let text = match response.actions.as_slice() {
        [Action::Finish(finish)] => finish.answer.clone(),
        _ => return Ok(response),
    };
    match parse_text_actions(&text, step) {
        Ok(actions) => Ok(ModelResponse {
            actions,
            usage: response.usage,
            text: None,
            model: response.model,
        }),
        Err(message) => Err(ModelError::InvalidOutput {
            raw: text,
            message,
            usage: response.usage,
        }),
    }
}

#[async_trait]
impl<M: Model> Model for JsonText<M> {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        let response = self.inner.complete(&text_request(request), ctx).await?;
        actions_from_text(response, ctx.step)
    }

    fn identity(&self) -> ModelIdentity {
        self.inner.identity()
    }

    fn token_counter(&self) -> Option<std::sync::Arc<dyn agent_core::context::TokenCounter>> {
        self.inner.token_counter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_block_is_unwrapped() {
        assert_eq!(unfence("```json\n{\"a\":1}\n```"), "{\"a\":1}");
        assert_eq!(unfence("Here:\n```\n{\"a\":1}\n```\nthanks"), "{\"a\":1}");
        assert_eq!(unfence(" {\"a\":1} "), "{\"a\":1}");
    }
}
