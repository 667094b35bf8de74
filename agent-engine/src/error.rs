//! `EngineError`: why the engine could not drive a session at all. Failures of
//! models, tools and strategies are not engine errors: they end the run with an
//! exit reason recorded in the log.

use agent_core::sink::SinkError;
use agent_core::state::StateError;
use agent_core::store::StoreError;

/// Why the engine could not drive a session.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The store failed or another writer won a conflict; nothing uncommitted was acted on.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A sink could not record a committed event.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// The stored log cannot be folded.
    #[error("the session log is inconsistent: {0}")]
    State(#[from] StateError),
    /// The strategy refused to continue the stored session; nothing was written.
    #[error("session `{session_id}` cannot be resumed: {reason}")]
    ResumeRefused {
        /// The session.
        session_id: String,
        /// Why.
        reason: String,
    },
    /// A follow-up message was refused before anything was written: the
    /// session cannot take one now, or its strategy takes none.
    #[error("session `{session_id}` cannot take a follow-up message: {reason}")]
    FollowUpRefused {
        /// The session.
        session_id: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// A task or message the engine refuses before anything is written: it
    /// holds a NUL character, which PostgreSQL cannot store as text, so every
    /// store refuses it alike.
    #[error(
        "the {what} holds a NUL character (\\u0000), which no store keeps; remove it and try again"
    )]
    InvalidText {
        /// `task` or `message`.
        what: &'static str,
    },
    /// `submit` or `drive` on an engine built without a work queue.
    #[error("this engine has no work queue: build it with `EngineBuilder::queue`")]
    NoQueue,
    /// The drive handed the session's tool calls to the work queue, so a worker
    /// continues it.
    #[error(
        "session `{session_id}` waits for its tool calls in the work queue; a worker continues it"
    )]
    Parked {
        /// The session.
        session_id: String,
    },
    /// The work queue failed.
    #[error("work queue failure: {0}")]
    Queue(StoreError),
    /// The session was started with another strategy; resuming it with this one
    /// could drop what the original enforced (an approval policy, a graph).
    #[error(
        "session `{session_id}` was started with strategy `{recorded}`, but this engine runs `{engine}`; resume it with the same strategy"
    )]
    StrategyMismatch {
        /// The session.
        session_id: String,
        /// Its strategy.
        recorded: String,
        /// This engine's strategy.
        engine: String,
    },
}
