//! Completion gates: a finish is a request. A gate (for a code agent: the tests
//! must pass) decides whether it ends the run; a refusal becomes feedback to the
//! model and the run continues. The engine's `FinishGate` guard puts every
//! finish through one.

use std::path::Path;

use async_trait::async_trait;

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
