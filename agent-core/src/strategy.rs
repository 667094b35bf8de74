//! The `ExecutionStrategy` trait: given the state, decide the next effect. A
//! strategy does no I/O; the engine performs what it decides.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::history::HistoryItem;
use crate::model::Model;
use crate::result::ExitReason;
use crate::state::SessionState;
use crate::tool::Toolbox;
use crate::types::ToolCall;
use crate::types::Usage;

/// What the model is asked in a `CallModel` decision; the engine adds the task,
/// the tool specs and the limits.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    /// System instructions.
    pub instructions: String,
    /// The history to send (shared, not copied: usually
    /// [`SessionState::shared_history`]).
    pub history: Arc<Vec<HistoryItem>>,
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
    /// Run these pieces of strategy-owned work concurrently, at most `limit` at a
    /// time (a workflow's ready nodes). Each result is recorded as a strategy
    /// event the moment it arrives; the engine asks again after each one, so
    /// newly ready work starts while other work runs.
    RunWork {
        /// The work; an item whose key is already running is not started twice.
        work: Vec<Work>,
        /// Most items in flight at once.
        limit: usize,
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

/// What strategy work may use: the engine's model and tools.
#[derive(Clone)]
pub struct WorkContext {
    /// The session.
    pub session_id: String,
    /// The session's task.
    pub task: String,
    /// The engine's model.
    pub model: Arc<dyn Model>,
    /// The engine's tools.
    pub tools: Toolbox,
    /// The workspace root.
    pub workspace: Arc<Path>,
    /// Per-request output cap for model calls.
    pub max_output_tokens: Option<u32>,
    /// Arguments a human gave when approving this work's tool call (see
    /// [`StrategyWork::tool_call`]); the work calls its tool with them.
    pub approved_arguments: Option<Value>,
    /// The agent's instructions, for the model calls the work makes (ahead of
    /// its own).
    pub instructions: Option<Arc<str>>,
}

/// The strategy event a piece of work leaves.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkRecord {
    /// Its name, such as `node_completed`.
    pub name: String,
    /// Its data.
    pub data: Value,
    /// Tokens of the model call it made, if it made one (it then counts as a step).
    pub usage: Option<Usage>,
}

/// Asynchronous work a strategy asks the engine to run (a workflow node).
#[async_trait]
pub trait StrategyWork: Send + Sync {
    /// Does the work; the result is recorded as a strategy event.
    async fn perform(&self, ctx: &WorkContext) -> WorkRecord;

    /// The tool call this work makes, if it calls a tool (a workflow's tool
    /// node), with an id unique in the session. The engine asks a human first
    /// when the tool's spec sets `needs_approval`, as it does for a model's
    /// calls, and starts the work only once it was approved.
    fn tool_call(&self, ctx: &WorkContext) -> Option<ToolCall> {
        let _ = ctx;
        None
    }

    /// The record of this work when a human denied its tool call, instead of
    /// performing it.
    fn denied(&self, reason: &str) -> WorkRecord {
        WorkRecord {
            name: "work_denied".into(),
            data: serde_json::json!({ "reason": reason }),
            usage: None,
        }
    }
}

/// One piece of work with a key that names it (a node's name).
#[derive(Clone)]
pub struct Work {
    /// Unique among the work in flight.
    pub key: String,
    /// What to do.
    pub job: Arc<dyn StrategyWork>,
}

impl std::fmt::Debug for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Work").field("key", &self.key).finish()
    }
}

impl PartialEq for Work {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && Arc::ptr_eq(&self.job, &other.job)
    }
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

    /// Whether this strategy may continue `state` (for example: the graph it
    /// recorded at start is the graph this strategy holds). A refusal stops a
    /// resume before anything is written.
    fn check_resume(&self, state: &SessionState) -> Result<(), String> {
        let _ = state;
        Ok(())
    }

    /// Whether a session of this strategy may go on after its answer with a
    /// follow-up message (`Engine::send` in `agent-engine`): the strategy
    /// then decides from the history with the message at its end (default:
    /// no; a strategy whose state is not the history, such as a plan or a
    /// graph, does not).
    fn takes_follow_ups(&self) -> bool {
        false
    }
}
