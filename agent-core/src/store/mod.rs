//! The store contract, in small traits: [`EventLog`] (append-only per-session
//! logs with optimistic concurrency), [`SessionIndex`], [`LeaseStore`] and
//! [`SnapshotStore`]; [`EventStore`] is all four, what the engine asks for.
//! `agent-store` implements them (in memory, SQLite, PostgreSQL) and holds
//! helpers for those who write a store (`agent_store::support`);
//! `agent-testkit` has a conformance suite every store passes.

pub mod queue;

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use self::queue::WorkQueue;
use crate::event::Event;
use crate::state::{PublicStatus, SessionState, StateError};

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
    /// Stored data cannot be read: an event that does not decode, or one a newer
    /// version wrote. Nothing was modified; the message names the session and seq.
    #[error("the store is damaged or newer than this build: {0}")]
    Corrupt(String),
    /// The store cannot take writes (a full disk, a read-only file or mount);
    /// nothing was written and what it holds is intact.
    #[error("the store cannot be written: {0}; free space or fix its permissions, then resume")]
    Unwritable(String),
}

impl StoreError {
    /// Whether the same operation may succeed later without anyone changing
    /// anything: the backend failed (a server down or restarting, a lost
    /// connection) or cannot take writes for now (a full disk).
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Backend(_) | Self::Unwritable(_))
    }
}

/// One append: `events` after seq `expected_seq` of `session_id` (0 creates the
/// session), all or nothing.
#[derive(Debug, Clone, Copy)]
pub struct Append<'a> {
    /// The session.
    pub session_id: &'a str,
    /// The seq the caller believes is last.
    pub expected_seq: u64,
    /// The events, carrying seqs `expected_seq + 1, expected_seq + 2, …`.
    pub events: &'a [Event],
    /// The session's public status once these events apply, from the writer's
    /// fold of the log ([`SessionState::status`](crate::state::SessionState::status)):
    /// what session listings show, so a store never derives it on its own.
    pub status: PublicStatus,
    /// How durable the commit must be before `append` returns.
    pub durability: Durability,
}

impl<'a> Append<'a> {
    /// The append of `events`, which `state` has already applied, with the status
    /// `state` is in afterwards.
    pub fn after(state: &SessionState, events: &'a [Event], durability: Durability) -> Self {
        let expected_seq = events
            .first()
            .map_or(state.last_seq(), |event| event.seq.saturating_sub(1));
        Self {
            session_id: events.first().map_or("", |event| event.session_id.as_str()),
            expected_seq,
            events,
            status: state.public_status(),
            durability,
        }
    }

    /// The append that creates a session from a whole log, with the status the
    /// log's fold ends in; fails if the log does not fold.
    pub fn creating(events: &'a [Event], durability: Durability) -> Result<Self, StateError> {
        let session_id = events.first().map_or("", |event| event.session_id.as_str());
        let state = SessionState::from_events(session_id, events)?;
        Ok(Self::after(&state, events, durability))
    }
}

/// Append-only per-session logs with optimistic concurrency.
#[async_trait]
pub trait EventLog: Send + Sync {
    /// Appends `append.events` after seq `append.expected_seq`.
    ///
    /// All or nothing: fails with [`StoreError::Conflict`] and writes nothing when the
    /// log's last seq is not `expected_seq`. The events must belong to the session
    /// and carry the seqs that follow `expected_seq`.
    async fn append(&self, append: Append<'_>) -> Result<(), StoreError>;

    /// The whole log of a session, in seq order; [`StoreError::NotFound`] when the
    /// session does not exist.
    async fn load(&self, session_id: &str) -> Result<Vec<Event>, StoreError>;

    /// The events after seq `after`, in order (all of them for 0).
    async fn load_after(&self, session_id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
        let mut events = self.load(session_id).await?;
        events.retain(|event| event.seq > after);
        Ok(events)
    }

    /// Whether the store takes writes now, found by a write that changes
    /// nothing (a health check): [`StoreError::Unwritable`] for a full disk
    /// or a read-only file, [`StoreError::Backend`] for a server that does not
    /// answer. The default (a store in memory) always does.
    async fn check_writable(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Where a page of sessions starts: after the session last shown, in newest-first
/// order (its creation time and id, which break ties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCursor {
    /// The `created_at` of the last session shown.
    pub created_at: u64,
    /// Its id.
    pub session_id: String,
}

impl SessionCursor {
    /// The cursor after `summary`.
    pub fn after(summary: &SessionSummary) -> Self {
        Self {
            created_at: summary.created_at,
            session_id: summary.session_id.clone(),
        }
    }

    /// Whether `summary` comes after this cursor in newest-first order.
    pub fn precedes(&self, summary: &SessionSummary) -> bool {
        (summary.created_at, summary.session_id.as_str())
            < (self.created_at, self.session_id.as_str())
    }
}

/// One page of the session list: newest first, optionally only one status,
/// starting after a cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionQuery {
    /// Only sessions in this status.
    pub status: Option<PublicStatus>,
    /// At most this many sessions.
    pub limit: usize,
    /// Only sessions after this one.
    pub after: Option<SessionCursor>,
}

/// What a store holds, counted across every session: for metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreCounts {
    /// Sessions by public status.
    pub sessions: BTreeMap<PublicStatus, u64>,
    /// Committed events by kind name (`model_responded`, `action_completed`, …).
    pub events: BTreeMap<String, u64>,
    /// Tool calls whose result is an error (`action_completed` with `is_error`).
    pub tool_errors: u64,
}

/// The list of stored sessions, over their logs.
#[async_trait]
pub trait SessionIndex: EventLog {
    /// Every session, newest first.
    async fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError>;

    /// One page of sessions, newest first. The default filters [`sessions`](Self::sessions);
    /// database stores answer it with one indexed query.
    async fn sessions_page(&self, query: &SessionQuery) -> Result<Vec<SessionSummary>, StoreError> {
        Ok(self
            .sessions()
            .await?
            .into_iter()
            .filter(|summary| query.status.is_none_or(|status| summary.status == status))
            .filter(|summary| {
                query
                    .after
                    .as_ref()
                    .is_none_or(|after| after.precedes(summary))
            })
            .take(query.limit)
            .collect())
    }

    /// Sessions by status, events by kind and failed tool calls, across the store.
    /// The default reads every log; database stores count in the database.
    async fn counts(&self) -> Result<StoreCounts, StoreError> {
        let mut counts = StoreCounts::default();
        for summary in self.sessions().await? {
            *counts.sessions.entry(summary.status).or_default() += 1;
            for event in self.load(&summary.session_id).await? {
                if let crate::event::EventKind::ActionCompleted { observation } = &event.kind {
                    counts.tool_errors += u64::from(observation.is_error);
                }
                *counts
                    .events
                    .entry(event.kind.name().to_owned())
                    .or_default() += 1;
            }
        }
        Ok(counts)
    }
}

/// Leases: one engine drives a session at a time.
#[async_trait]
pub trait LeaseStore: Send + Sync {
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
}

/// Snapshots of folded state: a cache a store may drop; losing one changes no
/// result.
#[async_trait]
pub trait SnapshotStore: Send + Sync {
    /// Keeps `snapshot`, the folded state at `seq`, replacing older snapshots.
    async fn save_snapshot(
        &self,
        session_id: &str,
        seq: u64,
        snapshot: &Value,
    ) -> Result<(), StoreError>;

    /// The newest snapshot of a session and the seq it folds, if any.
    async fn load_snapshot(&self, session_id: &str) -> Result<Option<(u64, Value)>, StoreError>;
}

/// Everything the engine asks of a store: a log, a session index, leases and
/// snapshots. Implemented for every type that has the four.
pub trait EventStore: EventLog + SessionIndex + LeaseStore + SnapshotStore {}

impl<T: EventLog + SessionIndex + LeaseStore + SnapshotStore + ?Sized> EventStore for T {}

/// A store with a work queue: what workers, `agent submit` and the server use.
pub trait Store: EventStore + WorkQueue {}

impl<T: EventStore + WorkQueue + ?Sized> Store for T {}
