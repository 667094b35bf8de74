//! What a model sees of the past: tool calls, their observations and feedback, in
//! session order. Providers map these items onto their own message formats.

use serde::{Deserialize, Serialize};

use crate::types::{Observation, ToolCall};

/// One item of the history sent to a model.
///
/// Invariant kept by `SessionState`: every `ToolCalls` item is followed by exactly
/// one `Observation` per call, in the order the calls were proposed, before any other
/// item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HistoryItem {
    /// One model turn that proposed these calls (parallel calls stay together).
    ToolCalls {
        /// The calls, in the model's order.
        calls: Vec<ToolCall>,
        /// Free text the model wrote alongside, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// The result of one call.
    Observation {
        /// The result.
        observation: Observation,
    },
    /// Text the model wrote (used by adapters that turn tool calls into text for
    /// models without native tool calling).
    AssistantText {
        /// The text, sent as an assistant message.
        text: String,
    },
    /// What the runtime told the model about output it could not use.
    Feedback {
        /// The message, sent as a user message.
        message: String,
    },
    /// A message a person added after an answer (a follow-up turn). Sent as a
    /// user message.
    UserMessage {
        /// The message.
        text: String,
    },
    /// Earlier turns in brief: a summary a context policy put in their place, or
    /// a note that older turns are not shown. Sent as a user message.
    Summary {
        /// The summary.
        text: String,
    },
}

/// How the runtime's answer to a repeated call begins: a call identical to an
/// earlier one (same tool, same arguments) of an idempotent tool whose result
/// is already in the history is not run again, and the model gets this
/// instead, quoting the earlier result.
pub const NOT_RUN_AGAIN: &str = "Not run again: ";

/// Whether `observation` is the runtime's answer to a repeated call rather
/// than a tool's result, so a provider can steer the next step (the local
/// model then only admits `finish`).
pub fn is_repeated_call_answer(observation: &Observation) -> bool {
    observation.is_error && observation.content.starts_with(NOT_RUN_AGAIN)
}
