//! The contract of the agent runtime: what every other crate builds on.
//!
//! A model proposes actions; the runtime owns every fact. Each state change is an
//! [`Event`] appended to a per-session log through an
//! [`EventStore`]; a session's
//! [`SessionState`] is a fold of that log, and
//! [`SessionState::apply`] enforces the status
//! machine. An [`ExecutionStrategy`] names the next
//! [`Decision`], a [`Guard`] may stop it, a
//! [`Model`] or [`Tool`]s perform it, and
//! [`EventSink`]s see what was committed; cross-cutting
//! behaviour around tools and models is a [`Layer`]. The engine
//! that drives sessions through these traits is the `agent-engine` crate; this
//! one holds no engine code.
//!
//! Each module holds one concept; the most used names are also re-exported at
//! the crate's root.

pub mod cancel;
pub mod context;
pub mod delta;
pub mod event;
pub mod gate;
pub mod guard;
pub mod history;
pub mod id;
pub mod layer;
pub mod model;
pub mod result;
pub mod schema;
pub mod sink;
pub mod state;
pub mod store;
pub mod strategy;
pub mod strict_json;
pub mod telemetry;
pub mod tool;
pub mod types;

pub use cancel::Cancellation;
pub use context::{
    Compaction, ContextInput, ContextPolicy, EstimatedTokens, TOKENS_PER_MESSAGE, TokenCounter,
    digest, item_tokens, items_tokens, reflection_digest, turns,
};
pub use delta::{DeltaSink, IgnoreDeltas, ModelDelta};
pub use event::{ApprovalDecision, Event, EventKind, LastAnswerKind, SCHEMA_VERSION, now_millis};
pub use gate::{CompletionGate, GateRefusal};
pub use guard::{Checkpoint, Deadline, Guard, GuardContext, Verdict};
pub use history::{HistoryItem, is_repeated_call_answer};
pub use id::new_session_id;
pub use layer::{CircuitState, IgnoreReports, Layer, LayerObserver, RetryNotice, Stack};
pub use model::{
    CallPurpose, Model, ModelContext, ModelError, ModelIdentity, ModelRequest, ModelResponse,
    agent_instructions,
};
pub use result::{BudgetKind, ExitReason, ModelUsage, RunResult, RunUsage, UnknownBudget};
pub use schema::{ArgumentValidator, InvalidSchema, input_schema_for};
pub use sink::{EventSink, SinkError};
pub use state::{
    PublicStatus, SessionState, Spent, StateError, Status, StrategyRecord, UnknownStatus,
};
pub use store::queue::{
    ActionClaim, QueueView, QueuedAction, QueuedActionView, QueuedSessionView, SessionClaim,
    WorkQueue,
};
pub use store::{
    Append, Durability, EventLog, EventStore, LeaseStore, SessionCursor, SessionIndex,
    SessionQuery, SessionSummary, SnapshotStore, Store, StoreCounts, StoreError,
};
pub use strategy::{
    Decision, ExecutionStrategy, ModelCall, StrategyError, StrategyWork, Work, WorkContext,
    WorkRecord,
};
pub use tool::{DuplicateTool, Tool, ToolContext, ToolError, ToolOutput, Toolbox};
pub use types::{Action, Finish, Observation, PlanStep, ToolCall, ToolSpec, Usage};
