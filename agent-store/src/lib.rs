//! Event stores for the agent runtime.
//!
//! - [`MemoryStore`] keeps logs, leases, snapshots and the work queue in
//!   memory, for tests and programs that need no durability (always built).
//! - [`SqliteStore`] (feature `sqlite`, the default) keeps every session in one
//!   embedded SQLite file: versioned migrations, WAL with durable commits, leases
//!   whose dead holders are detected, and group commit across sessions.
//! - [`PostgresStore`] (feature `postgres`) keeps them in a PostgreSQL database
//!   that many processes and machines share, with the same guarantees: leases
//!   expire by the database's clock, and commits of concurrent sessions are
//!   grouped.
//!
//! [`open_url`] opens a store from a `--store` URL; [`support`] holds helpers
//! for those who write a store of their own.

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod error;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod process;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod redact;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod rows;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod stats;
pub mod support;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod url;

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use error::OpenError;
pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use postgres::{DEFAULT_POOL_MAX, PostgresStore, PostgresTarget};
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use process::{Liveness, ProcessIdentity};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
#[cfg(feature = "sqlite")]
pub use sqlite::schema::SCHEMA_VERSION;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use stats::CommitStats;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use url::{DEFAULT_STORE_URL, StoreUrl, open_url, shown_url};
