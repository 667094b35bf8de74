//! Store locations as `--store` and `AGENT_STORE` give them: `sqlite://PATH`.

use std::path::PathBuf;
use std::sync::Arc;

use agent_core::EventStore;

use crate::error::OpenError;
use crate::sqlite::SqliteStore;

/// The store used when none is given: `.agent/agent.db` under the current directory.
pub const DEFAULT_STORE_URL: &str = "sqlite://.agent/agent.db";

/// A parsed store location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// An SQLite file (relative paths are relative to the current directory).
    Sqlite(PathBuf),
}

impl StoreUrl {
    /// Parses `sqlite://PATH`.
    pub fn parse(url: &str) -> Result<Self, OpenError> {
        match url.strip_prefix("sqlite://") {
            Some(path) if !path.is_empty() => Ok(Self::Sqlite(PathBuf::from(path))),
            _ => Err(OpenError::UnsupportedUrl(url.to_owned())),
        }
    }
}

/// Opens the store at `url`; with `create`, a missing store is created.
pub fn open_url(url: &str, create: bool) -> Result<Arc<dyn EventStore>, OpenError> {
    match StoreUrl::parse(url)? {
        StoreUrl::Sqlite(path) => {
            let store = if create {
                SqliteStore::open(&path)?
            } else {
                SqliteStore::open_existing(&path)?
            };
            Ok(Arc::new(store))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sqlite_urls_only() {
        assert_eq!(
            StoreUrl::parse("sqlite://.agent/agent.db").unwrap(),
            StoreUrl::Sqlite(".agent/agent.db".into())
        );
        assert_eq!(
            StoreUrl::parse("sqlite:///var/lib/a.db").unwrap(),
            StoreUrl::Sqlite("/var/lib/a.db".into())
        );
        assert!(StoreUrl::parse("postgres://x").is_err());
        assert!(StoreUrl::parse("sqlite://").is_err());
    }
}
