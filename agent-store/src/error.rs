//! Why a store could not be opened.

/// A store location that cannot be used; nothing was modified.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The location is not of a form this build knows.
    #[error(
        "unsupported store `{0}`: use sqlite://PATH or postgres://USER@HOST:PORT/DATABASE (with the feature that supports it)"
    )]
    UnsupportedUrl(String),
    /// No database exists at the path (for commands that only read).
    #[error("no store at `{0}`")]
    Missing(String),
    /// The file exists but is not an agent store.
    #[error("not an agent store: {0}")]
    NotAStore(String),
    /// Written by a newer version of agent.
    #[error(
        "the store was written by a newer version of agent (schema {found}; this build knows up to {supported}); upgrade agent to use it"
    )]
    Newer {
        /// Version in the file.
        found: u32,
        /// Newest version this build knows.
        supported: u32,
    },
    /// The server cannot be reached or refused us (never naming a password).
    #[error("{0}")]
    Unreachable(String),
    /// A migration failed; the transaction was rolled back.
    #[error("migration to schema {version} failed: {message}")]
    Migration {
        /// The version being created.
        version: u32,
        /// The SQLite error.
        message: String,
    },
    /// The file cannot be read or written.
    #[error("{0}")]
    Unreadable(String),
}

#[cfg(feature = "sqlite")]
impl OpenError {
    pub(crate) fn unreadable(err: rusqlite::Error) -> Self {
        match err.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => {
                Self::NotAStore("the file is not an SQLite database".into())
            }
            Some(rusqlite::ErrorCode::DatabaseCorrupt) => {
                Self::NotAStore("the database file is corrupt".into())
            }
            _ => Self::Unreadable(err.to_string()),
        }
    }
}
