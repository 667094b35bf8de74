//! Chat Completions streaming (`"stream": true`): each `data:` chunk carries a
//! `delta` of `choices[0]` — text in `content`, tool calls as pieces keyed by
//! `index` whose `function.arguments` arrive in fragments — then usage in a
//! last chunk without choices (`stream_options.include_usage`), then `[DONE]`.
//! The fold rebuilds the body a non-streaming call would have returned.

use agent_core::model::ModelError;
use serde_json::{Map, Value, json};

use crate::http::StreamFold;

/// One tool call as its pieces arrive.
#[derive(Debug, Default)]
struct CallPieces {
    id: String,
    name: String,
    arguments: String,
}

/// A Chat Completions response being streamed.
#[derive(Debug, Default)]
pub struct ChatCompletionsFold {
    model: Option<String>,
    content: String,
    calls: Vec<CallPieces>,
    usage: Option<Value>,
    finish_reason: Option<String>,
}

impl ChatCompletionsFold {
    fn chunk(&mut self, chunk: &Value, show: &mut (dyn FnMut(&str) + Send)) {
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            self.model = Some(model.to_owned());
        }
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk.pointer("/choices/0") else {
            return;
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            return;
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.content.push_str(text);
            show(text);
        }
        for piece in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = piece
                .get("index")
                .and_then(Value::as_u64)
                .and_then(|index| usize::try_from(index).ok())
                .unwrap_or(self.calls.len().saturating_sub(1));
            if self.calls.len() <= index {
                self.calls.resize_with(index + 1, CallPieces::default);
            }
            let Some(call) = self.calls.get_mut(index) else {
                continue;
            };
            if let Some(id) = piece.get("id").and_then(Value::as_str) {
                id.clone_into(&mut call.id);
            }
            if let Some(name) = piece.pointer("/function/name").and_then(Value::as_str) {
                call.name.push_str(name);
            }
            if let Some(arguments) = piece.pointer("/function/arguments").and_then(Value::as_str) {
                call.arguments.push_str(arguments);
            }
        }
    }
}

impl StreamFold for ChatCompletionsFold {
    fn take(
        &mut self,
        _event: &str,
        data: &str,
        show: &mut (dyn FnMut(&str) + Send),
    ) -> Result<bool, ModelError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|err| ModelError::Fatal {
            message: format!("a streamed chunk is not JSON ({err})"),
        })?;
        if let Some(error) = chunk.get("error") {
            return Err(ModelError::Transient {
                message: format!("the server failed while streaming: {error}"),
                retry_after: None,
            });
        }
        self.chunk(&chunk, show);
        Ok(false)
    }

    fn finish(self) -> Result<(Value, String), ModelError> {
        let mut message = Map::new();
        message.insert("role".into(), json!("assistant"));
        message.insert(
            "content".into(),
            if self.content.is_empty() {
                Value::Null
            } else {
                json!(self.content)
            },
        );
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .calls
                .into_iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    })
                })
                .collect();
            message.insert("tool_calls".into(), json!(calls));
        }
        let body = json!({
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
            "usage": self.usage,
        });
        let text = body.to_string();
        Ok((body, text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(chunks: &[&str]) -> (Value, String) {
        let mut fold = ChatCompletionsFold::default();
        let mut shown = String::new();
        for chunk in chunks {
            if fold
                .take("", chunk, &mut |text| shown.push_str(text))
                .unwrap()
            {
                break;
            }
        }
        (fold.finish().unwrap().0, shown)
    }

    #[test]
    fn text_pieces_are_shown_and_joined() {
        let (body, shown) = fold(&[
            r#"{"model":"m","choices":[{"delta":{"role":"assistant","content":"12 times "}}]}"#,
            r#"{"choices":[{"delta":{"content":"7 is 84."},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}"#,
            "[DONE]",
        ]);
        assert_eq!(shown, "12 times 7 is 84.");
        assert_eq!(
            body["choices"][0]["message"]["content"],
            "12 times 7 is 84."
        );
        assert_eq!(body["usage"]["completion_tokens"], 3);
        assert_eq!(body["model"], "m");
    }

    #[test]
    fn tool_call_arguments_are_assembled_from_fragments() {
        let (body, shown) = fold(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"calculator","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"expression\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"echo","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"12*7\"}"}}]}}]}"#,
            "[DONE]",
        ]);
        assert_eq!(shown, "");
        let calls = &body["choices"][0]["message"]["tool_calls"];
        assert_eq!(calls[0]["id"], "c1");
        assert_eq!(
            calls[0]["function"]["arguments"],
            r#"{"expression":"12*7"}"#
        );
        assert_eq!(calls[1]["function"]["name"], "echo");
        assert!(body["choices"][0]["message"]["content"].is_null());
    }

    #[test]
    fn an_error_chunk_is_transient() {
        let mut fold = ChatCompletionsFold::default();
        let err = fold
            .take("", r#"{"error":{"message":"overloaded"}}"#, &mut |_| {})
            .unwrap_err();
        assert!(matches!(err, ModelError::Transient { .. }), "{err:?}");
    }
}
