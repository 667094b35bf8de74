//! `MemoryStore`: event logs, leases and snapshots in memory.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::support::{check_batch, started_task, ttl_millis};
use super::{Durability, EventStore, SessionSummary, StoreError};
use crate::event::{Event, now_millis};
use crate::state::PublicStatus;

/// Event logs held in memory; lost when the process ends. Safe to share between tasks.
#[derive(Debug, Default)]
pub struct MemoryStore {
    logs: Mutex<HashMap<String, Vec<Event>>>,
    leases: Mutex<HashMap<String, MemoryLease>>,
    snapshots: Mutex<HashMap<String, MemorySnapshot>>,
}

/// A snapshot in a [`MemoryStore`]: the seq it folds and its JSON.
type MemorySnapshot = (u64, Value);

/// A lease in a [`MemoryStore`]: its owner and expiry in Unix milliseconds.
type MemoryLease = (String, u64);

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

    fn snapshots(
        &self,
    ) -> Result<std::sync::MutexGuard<'_, HashMap<String, MemorySnapshot>>, StoreError> {
        self.snapshots
            .lock()
            .map_err(|_| StoreError::Backend("memory store lock poisoned".into()))
    }

    /// Drops every snapshot (they are a cache; no result changes).
    pub fn clear_snapshots(&self) -> Result<(), StoreError> {
        self.snapshots()?.clear();
        Ok(())
    }

    fn leases(
        &self,
    ) -> Result<std::sync::MutexGuard<'_, HashMap<String, MemoryLease>>, StoreError> {
        self.leases
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
        _durability: Durability,
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

    async fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let logs = self.logs()?;
        let mut summaries: Vec<SessionSummary> = logs
            .iter()
            .filter_map(|(session_id, log)| {
                let (first, last) = (log.first()?, log.last()?);
                Some(SessionSummary {
                    session_id: session_id.clone(),
                    status: PublicStatus::after(&last.kind),
                    task: started_task(first).unwrap_or_default().to_owned(),
                    created_at: first.at,
                    updated_at: last.at,
                })
            })
            .collect();
        summaries.sort_by(|a, b| (b.created_at, &b.session_id).cmp(&(a.created_at, &a.session_id)));
        Ok(summaries)
    }

    async fn acquire_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let now = now_millis();
        let mut leases = self.leases()?;
        if let Some((holder, expires)) = leases.get(session_id)
            && holder != owner
            && *expires > now
        {
            return Err(StoreError::Leased {
                session_id: session_id.to_owned(),
                holder: format!("engine `{holder}` in this process"),
            });
        }
        leases.insert(
            session_id.to_owned(),
            (owner.to_owned(), now + ttl_millis(ttl)),
        );
        Ok(())
    }

    async fn renew_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<u64, StoreError> {
        {
            let mut leases = self.leases()?;
            match leases.get_mut(session_id) {
                Some((holder, expires)) if holder == owner => {
                    *expires = now_millis() + ttl_millis(ttl);
                }
                _ => return Err(StoreError::LeaseLost(session_id.to_owned())),
            }
        }
        Ok(self
            .logs()?
            .get(session_id)
            .and_then(|log| log.last())
            .map_or(0, |event| event.seq))
    }

    async fn release_lease(&self, session_id: &str, owner: &str) -> Result<(), StoreError> {
        let mut leases = self.leases()?;
        if leases
            .get(session_id)
            .is_some_and(|(holder, _)| holder == owner)
        {
            leases.remove(session_id);
        }
        Ok(())
    }

    async fn load_after(&self, session_id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
        let logs = self.logs()?;
        let log = logs
            .get(session_id)
            .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))?;
        let start = usize::try_from(after).unwrap_or(usize::MAX);
        Ok(log.get(start..).unwrap_or_default().to_vec())
    }

    async fn save_snapshot(
        &self,
        session_id: &str,
        seq: u64,
        snapshot: &Value,
    ) -> Result<(), StoreError> {
        self.snapshots()?
            .insert(session_id.to_owned(), (seq, snapshot.clone()));
        Ok(())
    }

    async fn load_snapshot(&self, session_id: &str) -> Result<Option<(u64, Value)>, StoreError> {
        Ok(self.snapshots()?.get(session_id).cloned())
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
        store
            .append("s", 0, &[requested(1)], Durability::Full)
            .await
            .unwrap();
        let mut handles = Vec::new();
        for _ in 0..8 {
            let store = Arc::clone(&store);
            handles.push(tokio::spawn(async move {
                store
                    .append("s", 1, &[requested(2), requested(3)], Durability::Full)
                    .await
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
            store
                .append("s", 0, &[requested(2)], Durability::Full)
                .await,
            Err(StoreError::InvalidBatch(_))
        ));
        assert!(matches!(
            store
                .append("other", 0, &[requested(1)], Durability::Full)
                .await,
            Err(StoreError::InvalidBatch(_))
        ));
        assert!(matches!(
            store.load("s").await,
            Err(StoreError::NotFound(_))
        ));
    }
}

#[cfg(test)]
mod lease_tests {
    use super::*;

    #[tokio::test]
    async fn a_live_lease_refuses_others_and_an_expired_one_is_taken_over() {
        let store = MemoryStore::new();
        let long = Duration::from_secs(60);
        store.acquire_lease("s", "a", long).await.unwrap();
        store.acquire_lease("s", "a", long).await.unwrap();
        assert!(matches!(
            store.acquire_lease("s", "b", long).await,
            Err(StoreError::Leased { .. })
        ));
        store.release_lease("s", "b").await.unwrap();
        assert!(
            store.acquire_lease("s", "b", long).await.is_err(),
            "b cannot release a's lease"
        );
        store.acquire_lease("s", "a", Duration::ZERO).await.unwrap();
        store.acquire_lease("s", "b", long).await.unwrap();
        assert!(matches!(
            store.renew_lease("s", "a", long).await,
            Err(StoreError::LeaseLost(_))
        ));
        assert_eq!(store.renew_lease("s", "b", long).await.unwrap(), 0);
    }
}
