//! Why the runtime could not build or drive a session.

/// A configuration or environment problem the user can fix (a bad flag, a
/// missing file, an unknown tool): the CLI's exit 2, the server's 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl ConfigError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}
