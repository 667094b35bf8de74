//! The immutable data types every crate shares: tasks, tool calls, actions,
//! observations, feedback, usage and tool specs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One request from the model to run a tool.
///
/// `id` is unique within its session; the engine replaces a missing or repeated id
/// from a provider with one of its own, so every call has exactly one result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Identifier, unique within the session.
    pub id: String,
    /// Name of the tool the model asked for (it may not exist).
    pub tool_name: String,
    /// The arguments exactly as the model wrote them.
    pub arguments: Value,
}

/// The model's request to end the run with an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finish {
    /// The final answer.
    pub answer: String,
}

/// One step of a plan written by a planning model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    /// What the step must achieve.
    pub goal: String,
    /// The tool the planner expects the step to use, if it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// Something a model proposes. The runtime decides whether and how it happens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Action {
    /// Run a tool.
    ToolCall(ToolCall),
    /// End the run with an answer.
    Finish(Finish),
    /// A plan of steps (for planning strategies).
    Plan {
        /// The steps, in order.
        steps: Vec<PlanStep>,
    },
}

/// The result of one tool call, as the model will see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The call this answers.
    pub call_id: String,
    /// The tool that was called.
    pub tool_name: String,
    /// The tool's output, or the error message when `is_error` is set.
    pub content: String,
    /// Whether the call failed in an expected way (bad arguments, unknown tool, a tool error).
    pub is_error: bool,
}

impl Observation {
    /// An error observation for `call`.
    pub fn error(call: &ToolCall, message: impl Into<String>) -> Self {
        Self {
            call_id: call.id.clone(),
            tool_name: call.tool_name.clone(),
            content: message.into(),
            is_error: true,
        }
    }

    /// A successful observation for `call`.
    pub fn success(call: &ToolCall, content: impl Into<String>) -> Self {
        Self {
            call_id: call.id.clone(),
            tool_name: call.tool_name.clone(),
            content: content.into(),
            is_error: false,
        }
    }
}

/// Tokens one model call consumed, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

/// What a model is told about a tool, and what the runtime knows of its behaviour.
///
/// The model only ever sees specs, never handlers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Unique tool name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments; arguments are validated against it before the handler runs.
    pub input_schema: Value,
    /// What a successful output holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_description: Option<String>,
    /// What errors the tool reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_description: Option<String>,
    /// Whether running the call twice has the same effect as once; only idempotent
    /// calls are retried or re-run after a crash.
    pub idempotent: bool,
    /// Whether a human must approve each call before it runs.
    pub needs_approval: bool,
}
