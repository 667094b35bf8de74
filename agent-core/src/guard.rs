//! Guards: the checks the engine's driver makes before it performs a decision.
//! Budgets, the wall-time limit and the completion gate are guards; so is any
//! check a user adds with `EngineBuilder::guard` (in `agent-engine`).
//!
//! Before each model call, dispatch, piece of strategy work and finish, the driver
//! asks every guard in order. A guard lets the decision go on, or names the event
//! to record instead — an ending (`failed` with a budget), or feedback that sends
//! the model back to work (`finish_rejected`). The driver records it and decides
//! again; that is the one place where a run is stopped. A guard may also name a
//! deadline, after which the driver abandons whatever is in flight and records the
//! guard's event.

use std::path::Path;
use std::time::Instant;

use async_trait::async_trait;

use crate::event::EventKind;
use crate::state::SessionState;
use crate::types::ToolCall;

/// The decision a guard is asked about.
#[derive(Debug, Clone, Copy)]
pub enum Checkpoint<'a> {
    /// A model call for step `steps_used() + 1`.
    ModelCall,
    /// Dispatching these calls of the current turn.
    Dispatch(&'a [ToolCall]),
    /// Starting the piece of strategy work with this key (it may call the model).
    Work(&'a str),
    /// Accepting a finish with this answer.
    Finish(&'a str),
}

/// What a guard says about a decision.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Perform the decision.
    Proceed,
    /// Record this event instead of performing the decision.
    Intervene(EventKind),
}

/// What a guard can see.
#[derive(Debug, Clone, Copy)]
pub struct GuardContext<'a> {
    /// The session as it stands.
    pub state: &'a SessionState,
    /// The workspace root.
    pub workspace: &'a Path,
    /// When this run (or resume) began.
    pub started: Instant,
}

/// A moment after which a guard ends the run, even in the middle of a call.
#[derive(Debug, Clone, PartialEq)]
pub struct Deadline {
    /// When.
    pub at: Instant,
    /// What is recorded then.
    pub event: EventKind,
}

/// A check before each decision. Guards are shared by every session an engine
/// drives, so whatever they count must come from the state they are shown.
#[async_trait]
pub trait Guard: Send + Sync {
    /// Whether the decision at `checkpoint` may go on.
    async fn check(&self, checkpoint: Checkpoint<'_>, ctx: &GuardContext<'_>) -> Verdict;

    /// The deadline of a run that began at `started`, if this guard has one.
    fn deadline(&self, started: Instant) -> Option<Deadline> {
        let _ = started;
        None
    }
}
