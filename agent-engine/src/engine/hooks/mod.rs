//! Step hooks: what the driver does besides the strategy's decisions, consulted
//! at fixed points the way guards are. A guard may stop a decision; a hook may
//! take a step of its own first — ask the model aside and record what it got —
//! and the driver then decides again from the new state:
//!
//! - [`compaction`]: before a model call, the summary a context policy asks for.
//! - [`reflection`]: before a model call, every `reflect_every` steps.
//! - [`last_answer`]: before the event that ends a run on a limit, one more
//!   request for the best answer the history holds.
//!
//! A hook is one file here and one entry in [`HOOKS`]; it reads the engine's
//! settings itself, so one that is not configured passes.

mod compaction;
mod last_answer;
mod reflection;

use std::sync::Arc;

use async_trait::async_trait;

use super::driver::Driver;
use crate::error::EngineError;
use agent_core::event::EventKind;
use agent_core::history::HistoryItem;
use agent_core::strategy::ModelCall;

/// Where the driver consults its hooks.
pub(super) enum HookPoint<'a> {
    /// Before the model call the strategy decided on, with the history the
    /// context policy lets the model see.
    ModelCall {
        /// The strategy's call, with the whole history.
        call: &'a ModelCall,
        /// What the model would be shown.
        view: &'a Arc<Vec<HistoryItem>>,
    },
    /// Before `ending`, the event that ends the run, is recorded.
    Ending(&'a EventKind),
}

/// What a hook did at its point.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Hooked {
    /// Nothing that concerns the driver: it goes on with its step.
    Pass,
    /// The hook took the step — it recorded events of its own, or the log
    /// moved under it and was reloaded — so the driver drops its step and
    /// decides again.
    Took,
}

/// A step hook.
#[async_trait]
pub(super) trait StepHook: Sync {
    /// Called at `point` of `driver`'s run.
    async fn consult(
        &self,
        driver: &mut Driver<'_>,
        point: &HookPoint<'_>,
    ) -> Result<Hooked, EngineError>;
}

/// Every hook, in the order the driver consults them.
const HOOKS: &[&dyn StepHook] = &[
    &compaction::ContextCompaction,
    &reflection::Reflection,
    &last_answer::LastAnswer,
];

impl Driver<'_> {
    /// Consults every hook at `point`; `false` when one took the step.
    pub(super) async fn consult_hooks(
        &mut self,
        point: HookPoint<'_>,
    ) -> Result<bool, EngineError> {
        for hook in HOOKS {
            if hook.consult(self, &point).await? == Hooked::Took {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Records `ending`, the event that ends the run, unless a hook takes the
    /// step first (the last answer, when the log moved under its request).
    pub(super) async fn end_with(&mut self, ending: EventKind) -> Result<(), EngineError> {
        if self.consult_hooks(HookPoint::Ending(&ending)).await? {
            self.record(ending)
        } else {
            Ok(())
        }
    }
}
