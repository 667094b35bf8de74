//! Completion gates: a finish is a request. A gate (for a code agent: the tests
//! must pass) decides whether it ends the run; a refusal becomes feedback to the
//! model and the run continues.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

use crate::event::EventKind;
use crate::guard::{Checkpoint, Guard, GuardContext, Verdict};

/// Why a gate refused a finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateRefusal {
    /// One line saying what failed, for traces and people.
    pub reason: String,
    /// The evidence (a command's output), for the model.
    pub details: String,
}

/// Decides whether a proposed finish may end the run.
#[async_trait]
pub trait CompletionGate: Send + Sync {
    /// Checks the work in `workspace` behind `answer`.
    async fn check(&self, answer: &str, workspace: &Path) -> Result<(), GateRefusal>;
}

/// The guard that puts every finish through a [`CompletionGate`].
pub struct FinishGate(pub Arc<dyn CompletionGate>);

#[async_trait]
impl Guard for FinishGate {
    async fn check(&self, checkpoint: Checkpoint<'_>, ctx: &GuardContext<'_>) -> Verdict {
        let Checkpoint::Finish(answer) = checkpoint else {
            return Verdict::Proceed;
        };
        match self.0.check(answer, ctx.workspace).await {
            Ok(()) => Verdict::Proceed,
            Err(refusal) => Verdict::Intervene(EventKind::FinishRejected {
                answer: answer.to_owned(),
                reason: refusal.reason,
                details: refusal.details,
            }),
        }
    }
}
