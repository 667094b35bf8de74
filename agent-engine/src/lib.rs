//! The engine of the agent runtime: it drives sessions through the contract of
//! `agent-core`.
//!
//! An [`Engine`] asks its strategy for the next decision, lets every guard
//! check it, commits what is decided before anything acts on it, performs it
//! with the model or the tools, and publishes the committed events to its
//! sinks — until the session ends or waits for a human. One engine drives a
//! session at a time (a lease); a write by anyone else (an approval, a cancel)
//! makes it reload the log and decide again.
//!
//! - [`guards`]: the guards it ships — budgets and the wall time, the model's
//!   rate limit, the output schema, the completion gate.
//! - [`context`]: the context policies — keep all, the last N turns, a token
//!   window, summaries past a token limit — and their `--context` spec.
//! - [`control`]: what people and programs do to sessions from outside a run —
//!   approve or deny a call, cancel, pause, fork.
//! - [`snapshot`]: a session's state saved beside its log, so a long session
//!   loads without folding every event.
//! - [`telemetry`]: the spans of runs, model calls and tool calls.
//! - [`call`]: how one tool call's outcome becomes events, the same in the
//!   engine's process and on a worker.

pub mod call;
pub mod context;
pub mod control;
mod engine;
mod error;
pub mod guards;
pub mod snapshot;
pub mod telemetry;

pub use call::{CallObserver, Timed, call_result_event};
pub use context::{ContextSpec, ContextSpecError, KeepAll, LastTurns, Summarise, TokenWindow};
pub use control::{
    ControlError, Fork, cancel_session, decide_approval, fork_session, pause_session,
};
pub use engine::{
    DEFAULT_LEASE_RENEWAL, DEFAULT_LEASE_TTL, DEFAULT_STORE_PATIENCE, Drive, Engine, EngineBuilder,
    INTERRUPTED, WAIVE_APPROVAL, approval_waived,
};
pub use error::EngineError;
pub use guards::{
    Budgets, DEFAULT_MAX_INVALID, DEFAULT_MAX_STEPS, Exhausted, FinishGate, ModelRateLimit,
    OnLimit, OutputGuard, OutputSchema, UnknownOnLimit, WallTime,
};
pub use snapshot::{DEFAULT_SNAPSHOT_EVERY, load_state, snapshot_of};
