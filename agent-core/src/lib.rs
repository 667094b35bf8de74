//! The event-sourced core of the agent runtime.
//!
//! A model proposes actions; the runtime owns every fact. Each state change is an
//! [`Event`] appended to a per-session log through an [`EventStore`]; a session's
//! [`SessionState`] is a fold of that log, and [`SessionState::apply`] enforces the
//! status machine. The [`Engine`] drives a session: it asks an
//! [`ExecutionStrategy`] for the next [`Decision`], performs it with a [`Model`] or
//! [`Tool`]s, commits the resulting events, and publishes them to [`EventSink`]s.

mod budget;
mod control;
mod engine;
mod event;
mod gate;
mod history;
mod id;
mod model;
mod result;
mod sink;
mod snapshot;
mod state;
mod store;
mod strategy;
pub mod strict_json;
mod tool;
mod types;

pub use budget::{Budgets, DEFAULT_MAX_STEPS, Exhausted};
pub use control::{ControlError, Fork, cancel_session, decide_approval, fork_session};
pub use engine::{
    DEFAULT_LEASE_RENEWAL, DEFAULT_LEASE_TTL, Engine, EngineBuilder, EngineError, INTERRUPTED,
};
pub use event::{ApprovalDecision, Event, EventKind, SCHEMA_VERSION, now_millis};
pub use gate::{CompletionGate, GateRefusal};
pub use history::HistoryItem;
pub use id::new_session_id;
pub use model::{
    IgnoreRetries, Model, ModelError, ModelRequest, ModelResponse, RetryNotice, RetryObserver,
};
pub use result::{BudgetKind, ExitReason, RunResult, RunUsage, UnknownBudget};
pub use sink::{EventSink, SinkError};
pub use snapshot::{DEFAULT_SNAPSHOT_EVERY, load_state, snapshot_of};
pub use state::{PublicStatus, SessionState, StateError, Status, StrategyRecord, UnknownStatus};
pub use store::{
    Durability, EventStore, MemoryStore, SessionSummary, StoreError, check_batch, started_task,
    ttl_millis,
};
pub use strategy::{
    Decision, ExecutionStrategy, ModelCall, StrategyError, StrategyWork, Work, WorkContext,
    WorkRecord,
};
pub use tool::{
    AttemptFailure, CircuitState, DuplicateTool, IgnoreToolReports, Tool, ToolContext, ToolError,
    ToolObserver, ToolOutput, Toolbox,
};
pub use types::{Action, Finish, Observation, PlanStep, ToolCall, ToolSpec, Usage};
