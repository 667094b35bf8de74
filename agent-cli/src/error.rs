//! Errors of the `agent` command and the exit codes they map to.

/// A command that ends without a RunResult.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A bad flag, missing file, unknown id or unreadable store (exit 2).
    #[error("{0}")]
    Usage(String),
    /// A failure of the runtime itself (exit 1).
    #[error("internal error: {0}")]
    Internal(String),
}

impl CliError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Internal(_) => 1,
        }
    }
}
