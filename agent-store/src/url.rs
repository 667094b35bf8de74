//! Store locations as `--store` and `AGENT_STORE` give them: `sqlite://PATH` or
//! `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` (also `postgresql://`).

#[cfg(feature = "sqlite")]
use std::path::PathBuf;
use std::sync::Arc;

use agent_core::store::Store;

use crate::error::OpenError;
#[cfg(feature = "postgres")]
use crate::postgres::{PostgresStore, PostgresTarget};
use crate::redact::redacted;
#[cfg(feature = "sqlite")]
use crate::sqlite::SqliteStore;

/// The store used when none is given: `.agent/agent.db` under the current directory.
pub const DEFAULT_STORE_URL: &str = "sqlite://.agent/agent.db";

/// A parsed store location.
#[derive(Debug, Clone)]
pub enum StoreUrl {
    /// An SQLite file (relative paths are relative to the current directory).
    #[cfg(feature = "sqlite")]
    Sqlite(PathBuf),
    /// A PostgreSQL database.
    #[cfg(feature = "postgres")]
    Postgres(Box<PostgresTarget>),
}

impl StoreUrl {
    /// Parses a store URL. The error never repeats a password.
    pub fn parse(url: &str) -> Result<Self, OpenError> {
        #[cfg(feature = "sqlite")]
        if let Some(path) = url.strip_prefix("sqlite://") {
            return if path.is_empty() {
                Err(OpenError::UnsupportedUrl(url.to_owned()))
            } else {
                Ok(Self::Sqlite(PathBuf::from(path)))
            };
        }
        #[cfg(feature = "postgres")]
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return PostgresTarget::parse(url).map(|target| Self::Postgres(Box::new(target)));
        }
        Err(OpenError::UnsupportedUrl(redacted(url)))
    }

    /// The location for people: a path, or `postgres://HOST:PORT/DATABASE`
    /// (never a user's password).
    pub fn display(&self) -> String {
        match self {
            #[cfg(feature = "sqlite")]
            Self::Sqlite(path) => format!("sqlite://{}", path.display()),
            #[cfg(feature = "postgres")]
            Self::Postgres(target) => target.to_string(),
        }
    }
}

/// `url` as it may be shown to people: the parsed location, or, when it does not
/// parse, the text with any user and password removed.
pub fn shown_url(url: &str) -> String {
    StoreUrl::parse(url).map_or_else(|_| redacted(url), |parsed| parsed.display())
}

/// Opens the store at `url`; with `create`, a missing store is created (and a
/// PostgreSQL schema migrated), without it a missing one is [`OpenError::Missing`].
pub async fn open_url(url: &str, create: bool) -> Result<Arc<dyn Store>, OpenError> {
    match StoreUrl::parse(url)? {
        #[cfg(feature = "sqlite")]
        StoreUrl::Sqlite(path) => {
            let store = if create {
                SqliteStore::open(&path)?
            } else {
                SqliteStore::open_existing(&path)?
            };
            Ok(Arc::new(store))
        }
        #[cfg(feature = "postgres")]
        StoreUrl::Postgres(target) => Ok(Arc::new(PostgresStore::connect(*target, create).await?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "sqlite")]
    #[test]
    fn parses_sqlite_urls() {
        assert!(matches!(
            StoreUrl::parse("sqlite://.agent/agent.db").unwrap(),
            StoreUrl::Sqlite(path) if path == std::path::Path::new(".agent/agent.db")
        ));
        assert!(matches!(
            StoreUrl::parse("sqlite:///var/lib/a.db").unwrap(),
            StoreUrl::Sqlite(path) if path == std::path::Path::new("/var/lib/a.db")
        ));
        assert!(StoreUrl::parse("sqlite://").is_err());
    }

    #[test]
    fn an_unknown_scheme_is_refused_without_repeating_credentials() {
        let err = StoreUrl::parse("mysql://me:hunter2@db/x").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(err.to_string().contains("db/x"), "{err}");
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn postgres_urls_are_shown_without_user_or_password() {
        let url = StoreUrl::parse("postgres://agent:hunter2@db.example:6543/agents").unwrap();
        assert_eq!(url.display(), "postgres://db.example:6543/agents");
        let url = StoreUrl::parse("postgresql://agent@localhost/agents").unwrap();
        assert_eq!(url.display(), "postgres://localhost:5432/agents");
        let err = StoreUrl::parse("postgres://me:hunter2@").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    /// Regression (found by the fuzz suite): with a second `@`, or one after the
    /// authority, the driver read part of the password as the database name, and
    /// the URL was shown with it.
    #[cfg(feature = "postgres")]
    #[test]
    fn an_ambiguous_at_is_refused_without_repeating_the_password() {
        for url in [
            "postgresql://u:p@/:hunter2@host/db",
            "postgresql://?@/:hunter2@host/db",
            "postgres://me:hun@ter2@host/db",
            "postgres://host/db:hunter2@x",
        ] {
            let err = StoreUrl::parse(url).unwrap_err();
            assert!(!err.to_string().contains("hunter2"), "{err}");
            assert!(err.to_string().contains("%40"), "{err}");
            assert!(!shown_url(url).contains("hunter2"), "{url}");
        }
        assert!(StoreUrl::parse("postgres://me:hun%40ter2@host/db").is_ok());
    }
}
