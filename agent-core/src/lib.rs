//! The event-sourced core of the agent runtime.
//!
//! A model proposes actions; the runtime owns every fact. Each state change is an
//! [`Event`] appended to a per-session log through an [`EventStore`]; a session's
//! [`SessionState`] is a fold of that log, and [`SessionState::apply`] enforces the
//! status machine. The [`Engine`] drives a session: it asks an
//! [`ExecutionStrategy`] for the next [`Decision`], lets every [`Guard`] check it,
//! performs it with a [`Model`] or [`Tool`]s, commits the resulting events, and
//! publishes them to [`EventSink`]s. Cross-cutting behaviour around tools and
//! models is a [`Layer`].

mod budget;
mod call;
mod cancel;
mod context;
mod control;
mod delta;
mod engine;
mod error;
mod event;
mod gate;
mod guard;
mod history;
mod id;
mod layer;
mod model;
mod output;
mod queue;
mod rate;
mod result;
mod schema;
mod sink;
mod snapshot;
mod state;
pub mod store;
mod strategy;
pub mod strict_json;
pub mod telemetry;
mod tool;
mod types;

pub use budget::{
    Budgets, DEFAULT_MAX_INVALID, DEFAULT_MAX_STEPS, Exhausted, OnLimit, UnknownOnLimit, WallTime,
};
pub use call::{CallObserver, Timed, call_result_event};
pub use cancel::Cancellation;
pub use context::{
    Compaction, ContextInput, ContextPolicy, EstimatedTokens, TOKENS_PER_MESSAGE, TokenCounter,
    digest, item_tokens, items_tokens, reflection_digest, turns,
};
pub use control::{
    ControlError, Fork, cancel_session, decide_approval, fork_session, pause_session,
};
pub use delta::{DeltaSink, IgnoreDeltas, ModelDelta};
pub use engine::{
    DEFAULT_LEASE_RENEWAL, DEFAULT_LEASE_TTL, DEFAULT_STORE_PATIENCE, Drive, Engine, EngineBuilder,
    INTERRUPTED, WAIVE_APPROVAL, agent_instructions, approval_waived, is_repeated_call_answer,
};
pub use error::EngineError;
pub use event::{ApprovalDecision, Event, EventKind, LastAnswerKind, SCHEMA_VERSION, now_millis};
pub use gate::{CompletionGate, FinishGate, GateRefusal};
pub use guard::{Checkpoint, Deadline, Guard, GuardContext, Verdict};
pub use history::HistoryItem;
pub use id::new_session_id;
pub use layer::{CircuitState, IgnoreReports, Layer, LayerObserver, RetryNotice, Stack};
pub use model::{
    CallPurpose, Model, ModelContext, ModelError, ModelIdentity, ModelRequest, ModelResponse,
};
pub use output::{OutputGuard, OutputSchema};
pub use queue::{
    ActionClaim, QueueView, QueuedAction, QueuedActionView, QueuedSessionView, SessionClaim,
    WorkQueue,
};
pub use rate::ModelRateLimit;
pub use result::{BudgetKind, ExitReason, ModelUsage, RunResult, RunUsage, UnknownBudget};
pub use schema::{ArgumentValidator, InvalidSchema, input_schema_for};
pub use sink::{EventSink, SinkError};
pub use snapshot::{DEFAULT_SNAPSHOT_EVERY, load_state, snapshot_of};
pub use state::{
    PublicStatus, SessionState, Spent, StateError, Status, StrategyRecord, UnknownStatus,
};
pub use store::{
    Append, Durability, EventLog, EventStore, LeaseStore, MemoryStore, SessionCursor, SessionIndex,
    SessionQuery, SessionSummary, SnapshotStore, Store, StoreCounts, StoreError,
};
pub use strategy::{
    Decision, ExecutionStrategy, ModelCall, StrategyError, StrategyWork, Work, WorkContext,
    WorkRecord,
};
pub use tool::{DuplicateTool, Tool, ToolContext, ToolError, ToolOutput, Toolbox};
pub use types::{Action, Finish, Observation, PlanStep, ToolCall, ToolSpec, Usage};
