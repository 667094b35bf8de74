//! The `ExecutionStrategy` trait: given the state, decide the next effect. A
//! strategy does no I/O; the engine performs what it decides.

use serde_json::Value;

use crate::history::HistoryItem;
use crate::result::ExitReason;
use crate::state::SessionState;
use crate::types::ToolCall;

/// What the model is asked in a `CallModel` decision; the engine adds the task,
/// the tool specs and the limits.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    /// System instructions.
    pub instructions: String,
    /// The history to send.
    pub history: Vec<HistoryItem>,
}

/// The next effect a strategy asks the engine to perform.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Ask the model for the next step.
    CallModel(ModelCall),
    /// Run these calls (of the current turn), concurrently.
    Dispatch(Vec<ToolCall>),
    /// Pause until a human decides on these calls of the current turn.
    AwaitApproval(Vec<ToolCall>),
    /// Record state the strategy owns (a plan, a step's result).
    Record {
        /// What it records, such as `plan_created`.
        name: String,
        /// The record.
        data: Value,
    },
    /// Refuse the model's response (a plan where none fits, an invalid plan); the
    /// model gets `reason` as feedback and is asked again.
    Refuse {
        /// What was wrong.
        reason: String,
    },
    /// Accept the proposed finish and end the run with this answer.
    Finish {
        /// The answer.
        answer: String,
    },
    /// End the run without an answer.
    Fail {
        /// Why.
        exit_reason: ExitReason,
        /// What went wrong.
        error: String,
    },
}

/// A strategy could not decide; the run ends with `internal_error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("strategy `{strategy}` cannot decide: {message}")]
pub struct StrategyError {
    /// The strategy's name.
    pub strategy: String,
    /// What is wrong.
    pub message: String,
}

/// Decides a session's next effect from its state alone.
pub trait ExecutionStrategy: Send + Sync {
    /// The name recorded in `SessionStarted`; a session is only resumed by an
    /// engine whose strategy has the same name.
    fn name(&self) -> &str;

    /// The next effect. Never called on an ended session.
    fn next(&self, state: &SessionState) -> Result<Decision, StrategyError>;
}
