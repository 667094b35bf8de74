//! The `EventStore` trait (append-only per-session logs with optimistic
//! concurrency) and `MemoryStore`, its in-memory implementation.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::event::Event;

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
    ) -> Result<(), StoreError>;

    /// The whole log of a session, in seq order.
    async fn load(&self, session_id: &str) -> Result<Vec<Event>, StoreError>;
}

/// Checks that `events` is a non-empty batch of `session_id` following `expected_seq`.
pub fn check_batch(
    session_id: &str,
    expected_seq: u64,
    events: &[Event],
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Err(StoreError::InvalidBatch("no events to append".into()));
    }
    for (offset, event) in (1u64..).zip(events) {
        if event.session_id != session_id {
            return Err(StoreError::InvalidBatch(format!(
                "event seq {} belongs to session `{}`, not `{session_id}`",
                event.seq, event.session_id
            )));
        }
        if event.seq != expected_seq + offset {
            return Err(StoreError::InvalidBatch(format!(
                "event seq {} where {} was expected",
                event.seq,
                expected_seq + offset
            )));
        }
    }
    Ok(())
}

/// Event logs held in memory; lost when the process ends. Safe to share between tasks.
#[derive(Debug, Default)]
pub struct MemoryStore {
    logs: Mutex<HashMap<String, Vec<Event>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn logs(&self) -> Result<std::sync::MutexGuard<'_, HashMap<String, Vec<Event>>>, StoreError> {
        self.logs
            .lock()
            .map_err(|_| StoreError::Backend("memory store lock poisoned".into()))
    }
}

#[async_trait]
impl EventStore for MemoryStore {
    async fn append(
        &self,
        session_id: &str,
        expected_seq: u64,
        events: &[Event],
    ) -> Result<(), StoreError> {
        check_batch(session_id, expected_seq, events)?;
        let mut logs = self.logs()?;
        let log = logs.entry(session_id.to_owned()).or_default();
        let actual = log.last().map_or(0, |event| event.seq);
        if actual != expected_seq {
            return Err(StoreError::Conflict {
                session_id: session_id.to_owned(),
                expected: expected_seq,
                actual,
            });
        }
        log.extend_from_slice(events);
        Ok(())
    }

    async fn load(&self, session_id: &str) -> Result<Vec<Event>, StoreError> {
        self.logs()?
            .get(session_id)
            .filter(|log| !log.is_empty())
            .cloned()
            .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::event::EventKind;

    fn requested(seq: u64) -> Event {
        Event::new("s", seq, EventKind::ModelRequested { step: 1 })
    }

    #[tokio::test]
    async fn two_concurrent_appends_with_the_same_expected_seq_have_one_winner() {
        let store = Arc::new(MemoryStore::new());
        store.append("s", 0, &[requested(1)]).await.unwrap();
        let mut handles = Vec::new();
        for _ in 0..8 {
            let store = Arc::clone(&store);
            handles.push(tokio::spawn(async move {
                store.append("s", 1, &[requested(2), requested(3)]).await
            }));
        }
        let mut wins = 0;
        for handle in handles {
            match handle.await.unwrap() {
                Ok(()) => wins += 1,
                Err(StoreError::Conflict {
                    expected, actual, ..
                }) => assert_eq!((expected, actual), (1, 3)),
                Err(other) => panic!("unexpected error {other}"),
            }
        }
        assert_eq!(wins, 1);
        let seqs: Vec<u64> = store
            .load("s")
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, [1, 2, 3]);
    }

    #[tokio::test]
    async fn a_batch_that_skips_a_seq_or_names_another_session_is_refused() {
        let store = MemoryStore::new();
        assert!(matches!(
            store.append("s", 0, &[requested(2)]).await,
            Err(StoreError::InvalidBatch(_))
        ));
        assert!(matches!(
            store.append("other", 0, &[requested(1)]).await,
            Err(StoreError::InvalidBatch(_))
        ));
        assert!(matches!(
            store.load("s").await,
            Err(StoreError::NotFound(_))
        ));
    }
}
