//! Durable event stores for the agent runtime.
//!
//! [`SqliteStore`] (feature `sqlite`, the default) keeps every session in one
//! embedded SQLite file: versioned migrations, WAL with durable commits, leases whose
//! dead holders are detected, and group commit across sessions. [`open_url`] opens a
//! store from a `--store` URL.

#[cfg(feature = "sqlite")]
mod error;
#[cfg(feature = "sqlite")]
mod process;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
mod url;

#[cfg(feature = "sqlite")]
pub use error::OpenError;
#[cfg(feature = "sqlite")]
pub use process::{Liveness, ProcessIdentity};
#[cfg(feature = "sqlite")]
pub use sqlite::schema::SCHEMA_VERSION;
#[cfg(feature = "sqlite")]
pub use sqlite::{CommitStats, SqliteStore};
#[cfg(feature = "sqlite")]
pub use url::{DEFAULT_STORE_URL, StoreUrl, open_url};
