//! The guard that puts every finish through a [`CompletionGate`]: a refusal
//! is recorded as `finish_rejected`, feedback to the model, and the run
//! continues.

use std::sync::Arc;

use async_trait::async_trait;

use agent_core::event::EventKind;
use agent_core::gate::CompletionGate;
use agent_core::guard::{Checkpoint, Guard, GuardContext, Verdict};

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
