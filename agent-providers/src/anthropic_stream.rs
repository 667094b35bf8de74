//! Messages streaming (`"stream": true`): `message_start` carries the model and
//! the input tokens; each content block opens with `content_block_start`, grows
//! by `content_block_delta`s (`text_delta` text, `input_json_delta` fragments of
//! a tool call's input) and closes; `message_delta` carries the output tokens;
//! `message_stop` ends it; an `error` event reports a failure. The fold rebuilds
//! the body a non-streaming call would have returned — as text, with each tool
//! input exactly as sent, so the strict reading still refuses repeated keys.

use agent_core::model::ModelError;
use serde_json::{Value, json};

use crate::http::StreamFold;

/// One content block as its pieces arrive.
#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: String,
    },
    Other(Value),
}

/// A Messages response being streamed.
#[derive(Debug, Default)]
pub struct MessagesFold {
    model: Option<String>,
    blocks: Vec<Block>,
    input_tokens: u64,
    output_tokens: u64,
    stop_reason: Option<String>,
}

impl MessagesFold {
    fn block_at(&mut self, event: &Value) -> Option<&mut Block> {
        let index = usize::try_from(event.get("index")?.as_u64()?).ok()?;
        self.blocks.get_mut(index)
    }

    fn start_block(&mut self, event: &Value) {
        let block = &event["content_block"];
        let started = match block["type"].as_str() {
            Some("text") => Block::Text(block["text"].as_str().unwrap_or_default().to_owned()),
            Some("tool_use") => Block::ToolUse {
                id: block["id"].as_str().unwrap_or_default().to_owned(),
                name: block["name"].as_str().unwrap_or_default().to_owned(),
                input: String::new(),
            },
            _ => Block::Other(block.clone()),
        };
        let index = event
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|index| usize::try_from(index).ok())
            .unwrap_or(self.blocks.len());
        while self.blocks.len() < index {
            self.blocks.push(Block::Other(Value::Null));
        }
        match self.blocks.get_mut(index) {
            Some(slot) => *slot = started,
            None => self.blocks.push(started),
        }
    }

    fn grow_block(&mut self, event: &Value, show: &mut (dyn FnMut(&str) + Send)) {
        let delta = &event["delta"];
        match (self.block_at(event), delta["type"].as_str()) {
            (Some(Block::Text(text)), Some("text_delta")) => {
                let piece = delta["text"].as_str().unwrap_or_default();
                text.push_str(piece);
                show(piece);
            }
            (Some(Block::ToolUse { input, .. }), Some("input_json_delta")) => {
                input.push_str(delta["partial_json"].as_str().unwrap_or_default());
            }
            _ => {}
        }
    }
}

impl StreamFold for MessagesFold {
    fn take(
        &mut self,
        event: &str,
        data: &str,
        show: &mut (dyn FnMut(&str) + Send),
    ) -> Result<bool, ModelError> {
        if data.trim().is_empty() {
            return Ok(false);
        }
        let parsed: Value = serde_json::from_str(data).map_err(|err| ModelError::Fatal {
            message: format!("a streamed `{event}` event is not JSON ({err})"),
        })?;
        let data = &parsed;
        let kind = data["type"].as_str().unwrap_or(event);
        match kind {
            "message_start" => {
                let message = &data["message"];
                self.model = message["model"].as_str().map(str::to_owned);
                self.input_tokens = message
                    .pointer("/usage/input_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                self.output_tokens = message
                    .pointer("/usage/output_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
            }
            "content_block_start" => self.start_block(data),
            "content_block_delta" => self.grow_block(data, show),
            "message_delta" => {
                if let Some(tokens) = data.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    self.output_tokens = tokens;
                }
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
            }
            "message_stop" => return Ok(true),
            "error" => {
                let kind = data.pointer("/error/type").and_then(Value::as_str);
                let message = format!("the server failed while streaming: {}", data["error"]);
                return Err(match kind {
                    Some("invalid_request_error" | "authentication_error" | "permission_error") => {
                        ModelError::Fatal { message }
                    }
                    _ => ModelError::Transient {
                        message,
                        retry_after: None,
                    },
                });
            }
            _ => {}
        }
        Ok(false)
    }

    fn finish(self) -> Result<(Value, String), ModelError> {
        let mut content = Vec::with_capacity(self.blocks.len());
        for block in self.blocks {
            content.push(match block {
                Block::Text(text) => json!({"type": "text", "text": text}).to_string(),
                Block::ToolUse { id, name, input } => {
                    let input = if input.trim().is_empty() {
                        "{}".to_owned()
                    } else {
                        input
                    };
                    if let Err(err) = serde_json::from_str::<Value>(&input) {
                        return Err(ModelError::InvalidOutput {
                            message: format!(
                                "the input of the call to `{name}` is not valid JSON ({err}); send one JSON object"
                            ),
                            raw: input,
                            usage: agent_core::types::Usage {
                                input_tokens: self.input_tokens,
                                output_tokens: self.output_tokens,
                            },
                        });
                    }
                    format!(
                        r#"{{"type":"tool_use","id":{},"name":{},"input":{input}}}"#,
                        json!(id),
                        json!(name)
                    )
                }
                Block::Other(Value::Null) => continue,
                Block::Other(block) => block.to_string(),
            });
        }
        let text = format!(
            r#"{{"type":"message","role":"assistant","model":{},"stop_reason":{},"usage":{},"content":[{}]}}"#,
            json!(self.model),
            json!(self.stop_reason),
            json!({"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}),
            content.join(",")
        );
        let body = serde_json::from_str(&text).map_err(|err| ModelError::Internal {
            message: format!("the streamed response could not be put together ({err})"),
        })?;
        Ok((body, text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(events: &[(&str, &str)]) -> Result<((Value, String), String), ModelError> {
        let mut fold = MessagesFold::default();
        let mut shown = String::new();
        for (event, data) in events {
            if fold.take(event, data, &mut |text| shown.push_str(text))? {
                break;
            }
        }
        Ok((fold.finish()?, shown))
    }

    #[test]
    fn text_and_tool_input_are_assembled() {
        let ((body, text), shown) = fold(&[
            ("message_start", r#"{"type":"message_start","message":{"model":"claude","usage":{"input_tokens":9,"output_tokens":1}}}"#),
            ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}}"#),
            ("ping", r#"{"type":"ping"}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"compute."}}"#),
            ("content_block_start", r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"calculator","input":{}}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"expression\": "}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"12*7\"}"}}"#),
            ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20}}"#),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ])
        .unwrap();
        assert_eq!(shown, "Let me compute.");
        assert_eq!(body["content"][0]["text"], "Let me compute.");
        assert_eq!(body["content"][1]["input"]["expression"], "12*7");
        assert_eq!(body["usage"]["output_tokens"], 20);
        assert!(text.contains(r#""input":{"expression": "12*7"}"#), "{text}");
    }

    #[test]
    fn a_broken_tool_input_is_invalid_output() {
        let err = fold(&[
            ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"calculator","input":{}}}"#),
            ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"expression\": "}}"#),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ])
        .unwrap_err();
        assert!(matches!(err, ModelError::InvalidOutput { .. }), "{err:?}");
    }

    #[test]
    fn an_overloaded_error_event_is_transient() {
        let err = fold(&[(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )])
        .unwrap_err();
        assert!(matches!(err, ModelError::Transient { .. }), "{err:?}");
    }
}
