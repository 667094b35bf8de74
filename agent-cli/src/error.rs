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
    /// The session is driven by another live process (exit 8).
    #[error("{0}")]
    Busy(String),
    /// `agent wait` gave up; the session keeps running (exit 9).
    #[error("{0}")]
    TimedOut(String),
}

impl CliError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Internal(_) => 1,
            Self::Busy(_) => 8,
            Self::TimedOut(_) => 9,
        }
    }
}

impl From<agent::store::StoreError> for CliError {
    fn from(err: agent::store::StoreError) -> Self {
        use agent::store::StoreError;
        match err {
            StoreError::NotFound(id) => Self::Usage(format!(
                "unknown session id `{id}`; `agent sessions` lists the stored sessions"
            )),
            StoreError::Leased { .. } | StoreError::LeaseLost(_) => {
                Self::Busy(format!("{err}; wait for it to end, or `agent cancel` it"))
            }
            StoreError::Corrupt(_) => Self::Usage(damaged(&err)),
            StoreError::Unwritable(_) => Self::Usage(err.to_string()),
            other => Self::Internal(other.to_string()),
        }
    }
}

/// The message for a log that cannot be read or folded: the data, not the
/// runtime, is wrong, and nothing was changed.
fn damaged(err: &dyn std::fmt::Display) -> String {
    format!(
        "{err}; nothing was changed: restore the store from a backup (other sessions are unaffected)"
    )
}

/// A log that does not fold (exit 2, like any unreadable input).
pub fn inconsistent(err: agent::state::StateError) -> CliError {
    CliError::Usage(damaged(&format!("the session log is inconsistent: {err}")))
}

impl From<agent::engine::EngineError> for CliError {
    fn from(err: agent::engine::EngineError) -> Self {
        match err {
            agent::engine::EngineError::Store(store) => store.into(),
            agent::engine::EngineError::State(state) => inconsistent(state),
            refused @ (agent::engine::EngineError::FollowUpRefused { .. }
            | agent::engine::EngineError::InvalidText { .. }) => Self::Usage(refused.to_string()),
            other => Self::Internal(other.to_string()),
        }
    }
}

impl From<agent::engine::ControlError> for CliError {
    fn from(err: agent::engine::ControlError) -> Self {
        match err {
            agent::engine::ControlError::Store(store) => store.into(),
            agent::engine::ControlError::State(state) => inconsistent(state),
            usage @ (agent::engine::ControlError::Ended { .. }
            | agent::engine::ControlError::OutOfRange { .. }
            | agent::engine::ControlError::NothingPending { .. }
            | agent::engine::ControlError::NotPending { .. }
            | agent::engine::ControlError::NotPausable { .. }) => Self::Usage(usage.to_string()),
        }
    }
}

impl From<agent_runtime::ConfigError> for CliError {
    fn from(err: agent_runtime::ConfigError) -> Self {
        Self::Usage(err.to_string())
    }
}

impl From<agent_runtime::control::DecisionError> for CliError {
    fn from(err: agent_runtime::control::DecisionError) -> Self {
        use agent_runtime::control::DecisionError;
        match err {
            DecisionError::Control(control) => control.into(),
            DecisionError::Store(store) => store.into(),
            DecisionError::InvalidArguments(message) => Self::Usage(format!("--args: {message}")),
            DecisionError::Trace(message) => Self::Internal(message),
            refused @ DecisionError::FollowUpRefused { .. } => Self::Usage(refused.to_string()),
        }
    }
}
