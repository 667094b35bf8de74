//! `MemoryStore`: event logs, leases and snapshots in memory.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::Notify;

use super::memory_queue::MemoryQueue;
use super::support::{check_batch, started_task, ttl_millis};
use super::{
    Append, EventLog, LeaseStore, SessionIndex, SessionSummary, SnapshotStore, StoreError,
};
use crate::event::{Event, now_millis};
use crate::state::PublicStatus;

/// Event logs held in memory; lost when the process ends. Safe to share between tasks.
#[derive(Debug, Default)]
pub struct MemoryStore {
    logs: Mutex<HashMap<String, MemoryLog>>,
    leases: Mutex<HashMap<String, MemoryLease>>,
    snapshots: Mutex<HashMap<String, MemorySnapshot>>,
    pub(super) queue: Mutex<MemoryQueue>,
    pub(super) work: Notify,
}

/// One session's log and the public status its last writer folded.
#[derive(Debug)]
struct MemoryLog {
    events: Vec<Event>,
    status: PublicStatus,
}

/// A snapshot in a [`MemoryStore`]: the seq it folds and its JSON.
type MemorySnapshot = (u64, Value);

/// A lease in a [`MemoryStore`]: its owner and expiry in Unix milliseconds.
type MemoryLease = (String, u64);

pub(super) fn locked<T>(mutex: &Mutex<T>) -> Result<MutexGuard<'_, T>, StoreError> {
    mutex
        .lock()
        .map_err(|_| StoreError::Backend("memory store lock poisoned".into()))
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Drops every snapshot (they are a cache; no result changes).
    pub fn clear_snapshots(&self) -> Result<(), StoreError> {
        locked(&self.snapshots)?.clear();
        Ok(())
    }
}

#[async_trait]
impl EventLog for MemoryStore {
    async fn append(&self, append: Append<'_>) -> Result<(), StoreError> {
        check_batch(append.session_id, append.expected_seq, append.events)?;
        let mut logs = locked(&self.logs)?;
        let log = logs
            .entry(append.session_id.to_owned())
            .or_insert_with(|| MemoryLog {
                events: Vec::new(),
                status: append.status,
            });
        let actual = log.events.last().map_or(0, |event| event.seq);
        if actual != append.expected_seq {
            return Err(StoreError::Conflict {
                session_id: append.session_id.to_owned(),
                expected: append.expected_seq,
                actual,
            });
        }
        log.events.extend_from_slice(append.events);
        log.status = append.status;
        Ok(())
    }

    async fn load(&self, session_id: &str) -> Result<Vec<Event>, StoreError> {
        locked(&self.logs)?
            .get(session_id)
            .filter(|log| !log.events.is_empty())
            .map(|log| log.events.clone())
            .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))
    }

    async fn load_after(&self, session_id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
        let logs = locked(&self.logs)?;
        let log = logs
            .get(session_id)
            .filter(|log| !log.events.is_empty())
            .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))?;
        let start = usize::try_from(after).unwrap_or(usize::MAX);
        Ok(log.events.get(start..).unwrap_or_default().to_vec())
    }
}

#[async_trait]
impl SessionIndex for MemoryStore {
    async fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let logs = locked(&self.logs)?;
        let mut summaries: Vec<SessionSummary> = logs
            .iter()
            .filter_map(|(session_id, log)| {
                let (first, last) = (log.events.first()?, log.events.last()?);
                Some(SessionSummary {
                    session_id: session_id.clone(),
                    status: log.status,
                    task: started_task(first).unwrap_or_default().to_owned(),
                    created_at: first.at,
                    updated_at: last.at,
                })
            })
            .collect();
        summaries.sort_by(|a, b| (b.created_at, &b.session_id).cmp(&(a.created_at, &a.session_id)));
        Ok(summaries)
    }
}

#[async_trait]
impl LeaseStore for MemoryStore {
    async fn acquire_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let now = now_millis();
        let mut leases = locked(&self.leases)?;
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
            let mut leases = locked(&self.leases)?;
            match leases.get_mut(session_id) {
                Some((holder, expires)) if holder == owner => {
                    *expires = now_millis() + ttl_millis(ttl);
                }
                _ => return Err(StoreError::LeaseLost(session_id.to_owned())),
            }
        }
        Ok(locked(&self.logs)?
            .get(session_id)
            .and_then(|log| log.events.last())
            .map_or(0, |event| event.seq))
    }

    async fn release_lease(&self, session_id: &str, owner: &str) -> Result<(), StoreError> {
        let mut leases = locked(&self.leases)?;
        if leases
            .get(session_id)
            .is_some_and(|(holder, _)| holder == owner)
        {
            leases.remove(session_id);
        }
        Ok(())
    }
}

#[async_trait]
impl SnapshotStore for MemoryStore {
    async fn save_snapshot(
        &self,
        session_id: &str,
        seq: u64,
        snapshot: &Value,
    ) -> Result<(), StoreError> {
        let mut snapshots = locked(&self.snapshots)?;
        if snapshots
            .get(session_id)
            .is_none_or(|(kept, _)| *kept < seq)
        {
            snapshots.insert(session_id.to_owned(), (seq, snapshot.clone()));
        }
        Ok(())
    }

    async fn load_snapshot(&self, session_id: &str) -> Result<Option<(u64, Value)>, StoreError> {
        Ok(locked(&self.snapshots)?.get(session_id).cloned())
    }
}
