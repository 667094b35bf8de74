//! `MemoryStore`: event logs, leases and snapshots in memory, and its work
//! queue (`queue`).

mod queue;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::Notify;

use crate::support::{check_batch, started_task, ttl_millis};
use agent_core::event::{Event, now_millis};
use agent_core::state::PublicStatus;
use agent_core::store::{
    Append, EventLog, LeaseStore, SessionIndex, SessionSummary, SnapshotStore, StoreError,
};

use self::queue::MemoryQueue;

/// Event logs held in memory; lost when the process ends. Safe to share between tasks.
#[derive(Debug, Default)]
pub struct MemoryStore {
    logs: Mutex<HashMap<String, MemoryLog>>,
    leases: Mutex<HashMap<String, MemoryLease>>,
    snapshots: Mutex<HashMap<String, MemorySnapshot>>,
    queue: Mutex<MemoryQueue>,
    work: Notify,
}

/// One session's log and the public status its last writer folded.
#[derive(Debug)]
struct MemoryLog {
    /// The events of a session that goes on, as they are.
    events: Vec<Event>,
    /// The events of an ended session, packed: [`MemoryLog::events`] is empty then.
    packed: Option<PackedLog>,
    status: PublicStatus,
}

/// An ended session's events as one JSON array — a fraction of the memory the
/// events take as values — with what listings and appends read without
/// unpacking them. A follow-up message unpacks the log and it goes on.
#[derive(Debug)]
struct PackedLog {
    json: Box<str>,
    last_seq: u64,
    task: Box<str>,
    created_at: u64,
    updated_at: u64,
}

impl MemoryLog {
    fn last_seq(&self) -> u64 {
        match &self.packed {
            Some(packed) => packed.last_seq,
            None => self.events.last().map_or(0, |event| event.seq),
        }
    }

    /// Every event, in order.
    fn all(&self) -> Result<Vec<Event>, StoreError> {
        match &self.packed {
            Some(packed) => serde_json::from_str(&packed.json).map_err(|err| {
                StoreError::Corrupt(format!("a packed log of the memory store: {err}"))
            }),
            None => Ok(self.events.clone()),
        }
    }

    fn unpack(&mut self) -> Result<(), StoreError> {
        if self.packed.is_some() {
            self.events = self.all()?;
            self.packed = None;
        }
        Ok(())
    }

    /// Packs the log once its session has ended; a log that cannot be packed
    /// stays as it is.
    fn pack_if_ended(&mut self) {
        let (true, Some(first), Some(last)) = (
            self.status.is_final(),
            self.events.first(),
            self.events.last(),
        ) else {
            return;
        };
        if let Ok(json) = serde_json::to_string(&self.events) {
            self.packed = Some(PackedLog {
                json: json.into_boxed_str(),
                last_seq: last.seq,
                task: started_task(first).unwrap_or_default().into(),
                created_at: first.at,
                updated_at: last.at,
            });
            self.events = Vec::new();
        }
    }

    fn summary(&self, session_id: &str) -> Option<SessionSummary> {
        let (task, created_at, updated_at) = match &self.packed {
            Some(packed) => (
                packed.task.to_string(),
                packed.created_at,
                packed.updated_at,
            ),
            None => {
                let (first, last) = (self.events.first()?, self.events.last()?);
                (
                    started_task(first).unwrap_or_default().to_owned(),
                    first.at,
                    last.at,
                )
            }
        };
        Some(SessionSummary {
            session_id: session_id.to_owned(),
            status: self.status,
            task,
            created_at,
            updated_at,
        })
    }

    fn is_empty(&self) -> bool {
        self.packed.is_none() && self.events.is_empty()
    }
}

/// A snapshot in a [`MemoryStore`]: the seq it folds and its JSON.
type MemorySnapshot = (u64, Value);

/// A lease in a [`MemoryStore`]: its owner and expiry in Unix milliseconds.
type MemoryLease = (String, u64);

fn locked<T>(mutex: &Mutex<T>) -> Result<MutexGuard<'_, T>, StoreError> {
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
                packed: None,
                status: append.status,
            });
        let actual = log.last_seq();
        if actual != append.expected_seq {
            return Err(StoreError::Conflict {
                session_id: append.session_id.to_owned(),
                expected: append.expected_seq,
                actual,
            });
        }
        log.unpack()?;
        log.events.extend_from_slice(append.events);
        log.status = append.status;
        log.pack_if_ended();
        Ok(())
    }

    async fn load(&self, session_id: &str) -> Result<Vec<Event>, StoreError> {
        locked(&self.logs)?
            .get(session_id)
            .filter(|log| !log.is_empty())
            .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))?
            .all()
    }

    async fn load_after(&self, session_id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
        let logs = locked(&self.logs)?;
        let log = logs
            .get(session_id)
            .filter(|log| !log.is_empty())
            .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))?;
        let start = usize::try_from(after).unwrap_or(usize::MAX);
        if log.packed.is_some() {
            let mut events = log.all()?;
            return Ok(events.split_off(start.min(events.len())));
        }
        Ok(log.events.get(start..).unwrap_or_default().to_vec())
    }
}

#[async_trait]
impl SessionIndex for MemoryStore {
    async fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let logs = locked(&self.logs)?;
        let mut summaries: Vec<SessionSummary> = logs
            .iter()
            .filter_map(|(session_id, log)| log.summary(session_id))
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
            .map_or(0, MemoryLog::last_seq))
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

#[cfg(test)]
mod tests {
    use super::*;
    use agent_core::event::EventKind;
    use agent_core::store::Durability;
    use serde_json::json;

    fn append<'a>(events: &'a [Event], status: PublicStatus) -> Append<'a> {
        Append {
            session_id: "s",
            expected_seq: events.first().map_or(0, |event| event.seq - 1),
            events,
            status,
            durability: Durability::Full,
        }
    }

    #[tokio::test]
    async fn an_ended_log_is_packed_and_reads_back_the_same_then_goes_on() {
        let store = MemoryStore::new();
        let started = [Event::new(
            "s",
            1,
            EventKind::SessionStarted {
                task: "t".into(),
                strategy: "react".into(),
                config: json!({"model": "m"}),
            },
        )];
        store
            .append(append(&started, PublicStatus::Running))
            .await
            .unwrap();
        let finished = [Event::new(
            "s",
            2,
            EventKind::Finished {
                answer: "42".into(),
                output: None,
            },
        )];
        store
            .append(append(&finished, PublicStatus::Finished))
            .await
            .unwrap();
        assert!(locked(&store.logs).unwrap()["s"].packed.is_some());
        let all: Vec<Event> = started.iter().chain(&finished).cloned().collect();
        assert_eq!(store.load("s").await.unwrap(), all);
        assert_eq!(store.load_after("s", 1).await.unwrap(), finished.to_vec());
        assert_eq!(store.load_after("s", 5).await.unwrap(), Vec::new());
        let listed = store.sessions().await.unwrap();
        assert_eq!(
            (listed[0].task.as_str(), listed[0].status),
            ("t", PublicStatus::Finished)
        );
        assert!(matches!(
            store.append(append(&started, PublicStatus::Running)).await,
            Err(StoreError::Conflict { actual: 2, .. })
        ));
        let more = [Event::new(
            "s",
            3,
            EventKind::MessagesDelivered { count: 1 },
        )];
        store
            .append(append(&more, PublicStatus::Running))
            .await
            .unwrap();
        assert!(locked(&store.logs).unwrap()["s"].packed.is_none());
        assert_eq!(store.load("s").await.unwrap().len(), 3);
    }
}
