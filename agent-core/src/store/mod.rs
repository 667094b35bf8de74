//! The `EventStore` trait (append-only per-session logs with optimistic
//! concurrency, leases, snapshots) and [`MemoryStore`], its in-memory
//! implementation. [`support`] holds helpers for those who write a store.

mod memory;
pub mod support;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::event::Event;
use crate::state::PublicStatus;

/// How durable a commit must be before `append` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Survives a power loss (the commit is fsynced).
    #[default]
    Full,
    /// Survives the process being killed, not necessarily a power loss; a later
    /// `Full` commit makes it durable too. For records whose loss is harmless, such as
    /// the dispatch of an idempotent call.
    Process,
}

/// One line of `agent sessions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// The session.
    pub session_id: String,
    /// Its public status after its last event.
    pub status: PublicStatus,
    /// The task text.
    pub task: String,
    /// Time of the first event, in Unix milliseconds.
    pub created_at: u64,
    /// Time of the last event, in Unix milliseconds.
    pub updated_at: u64,
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// Another writer appended first; nothing was written. Reload and decide again.
    #[error(
        "conflict on session `{session_id}`: expected last seq {expected}, but the log is at {actual}; nothing was written"
    )]
    Conflict {
        /// The session.
        session_id: String,
        /// The seq the caller expected to be last.
        expected: u64,
        /// The seq that really is last.
        actual: u64,
    },
    /// No session has this id.
    #[error("no session with id `{0}`")]
    NotFound(String),
    /// The events handed to `append` are not a contiguous batch of this session.
    #[error("invalid append batch: {0}")]
    InvalidBatch(String),
    /// Another live engine drives the session.
    #[error("session `{session_id}` is driven by another live process: {holder}")]
    Leased {
        /// The session.
        session_id: String,
        /// Who holds the lease, for people.
        holder: String,
    },
    /// This engine's lease was taken over or removed.
    #[error("the lease on session `{0}` was lost to another process")]
    LeaseLost(String),
    /// The storage backend failed.
    #[error("event store failure: {0}")]
    Backend(String),
}

/// Durable (or in-memory) per-session event logs.
#[async_trait]
pub trait EventStore: Send + Sync {
    /// Appends `events` after seq `expected_seq` (0 creates the session).
    ///
    /// All or nothing: fails with [`StoreError::Conflict`] and writes nothing when the
    /// log's last seq is not `expected_seq`. The events must belong to `session_id`
    /// and carry seqs `expected_seq + 1, expected_seq + 2, …`.
    async fn append(
        &self,
        session_id: &str,
        expected_seq: u64,
        events: &[Event],
        durability: Durability,
    ) -> Result<(), StoreError>;

    /// The whole log of a session, in seq order.
    async fn load(&self, session_id: &str) -> Result<Vec<Event>, StoreError>;

    /// Every session, newest first.
    async fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError>;

    /// Takes the lease on a session for `owner` for `ttl`, or fails with
    /// [`StoreError::Leased`] while another live owner holds it. A lease whose holder
    /// expired or is known to be dead is taken over at once.
    async fn acquire_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<(), StoreError>;

    /// Extends `owner`'s lease and returns the session's last seq (0 if it has no
    /// events), so the holder notices writes by others; fails with
    /// [`StoreError::LeaseLost`] when `owner` no longer holds it.
    async fn renew_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<u64, StoreError>;

    /// Gives up `owner`'s lease; releasing a lease one does not hold does nothing.
    async fn release_lease(&self, session_id: &str, owner: &str) -> Result<(), StoreError>;

    /// The events after seq `after`, in order (all of them for 0).
    async fn load_after(&self, session_id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
        let mut events = self.load(session_id).await?;
        events.retain(|event| event.seq > after);
        Ok(events)
    }

    /// Keeps `snapshot`, the folded state at `seq`, replacing older snapshots. A
    /// snapshot is a cache: a store may drop it, and losing it changes no result.
    async fn save_snapshot(
        &self,
        session_id: &str,
        seq: u64,
        snapshot: &Value,
    ) -> Result<(), StoreError> {
        let _ = (session_id, seq, snapshot);
        Ok(())
    }

    /// The newest snapshot of a session and the seq it folds, if any.
    async fn load_snapshot(&self, session_id: &str) -> Result<Option<(u64, Value)>, StoreError> {
        let _ = session_id;
        Ok(None)
    }
}

pub use self::memory::MemoryStore;
