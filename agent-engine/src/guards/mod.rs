//! The guards the engine ships — budgets and the wall time, the model's rate
//! limit, the output schema, the completion gate — and how a run asks them all
//! (in order; the first intervention wins) and finds its earliest deadline.

mod budget;
mod finish_gate;
mod output;
mod rate;

use std::sync::Arc;
use std::time::Instant;

use agent_core::guard::{Checkpoint, Deadline, Guard, GuardContext, Verdict};

pub use budget::{
    Budgets, DEFAULT_MAX_INVALID, DEFAULT_MAX_STEPS, Exhausted, OnLimit, UnknownOnLimit, WallTime,
};
pub use finish_gate::FinishGate;
pub use output::{OutputGuard, OutputSchema};
pub use rate::ModelRateLimit;

/// Asks `guards` in order; the first intervention wins.
pub(crate) async fn check_all(
    guards: &[Arc<dyn Guard>],
    checkpoint: Checkpoint<'_>,
    ctx: &GuardContext<'_>,
) -> Verdict {
    for guard in guards {
        if let Verdict::Intervene(event) = guard.check(checkpoint, ctx).await {
            return Verdict::Intervene(event);
        }
    }
    Verdict::Proceed
}

/// The earliest deadline of `guards` for a run that began at `started`.
pub(crate) fn earliest_deadline(guards: &[Arc<dyn Guard>], started: Instant) -> Option<Deadline> {
    guards
        .iter()
        .filter_map(|guard| guard.deadline(started))
        .min_by_key(|deadline| deadline.at)
}
