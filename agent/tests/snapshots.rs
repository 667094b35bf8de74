//! Snapshots are a cache: states with and without them are identical, and a long
//! session loads from one snapshot and the events after it.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agent::engine::load_state;
use agent::event::Event;
use agent::prelude::*;
use agent::state::SessionState;
use agent::store::{Append, LeaseStore, SessionIndex, SessionSummary, SnapshotStore, StoreError};
use async_trait::async_trait;
use serde_json::{Value, json};

/// A memory store that counts the events it hands out.
#[derive(Default)]
struct Counting {
    inner: MemoryStore,
    events_read: AtomicUsize,
}

#[async_trait]
impl EventLog for Counting {
    async fn append(&self, append: Append<'_>) -> Result<(), StoreError> {
        self.inner.append(append).await
    }
    async fn load(&self, id: &str) -> Result<Vec<Event>, StoreError> {
        let events = self.inner.load(id).await?;
        self.events_read.fetch_add(events.len(), Ordering::Relaxed);
        Ok(events)
    }
    async fn load_after(&self, id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
        let events = self.inner.load_after(id, after).await?;
        self.events_read.fetch_add(events.len(), Ordering::Relaxed);
        Ok(events)
    }
}

#[async_trait]
impl SessionIndex for Counting {
    async fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError> {
        self.inner.sessions().await
    }
}

#[async_trait]
impl LeaseStore for Counting {
    async fn acquire_lease(&self, id: &str, owner: &str, ttl: Duration) -> Result<(), StoreError> {
        self.inner.acquire_lease(id, owner, ttl).await
    }
    async fn renew_lease(&self, id: &str, owner: &str, ttl: Duration) -> Result<u64, StoreError> {
        self.inner.renew_lease(id, owner, ttl).await
    }
    async fn release_lease(&self, id: &str, owner: &str) -> Result<(), StoreError> {
        self.inner.release_lease(id, owner).await
    }
}

#[async_trait]
impl SnapshotStore for Counting {
    async fn save_snapshot(&self, id: &str, seq: u64, snapshot: &Value) -> Result<(), StoreError> {
        self.inner.save_snapshot(id, seq, snapshot).await
    }
    async fn load_snapshot(&self, id: &str) -> Result<Option<(u64, Value)>, StoreError> {
        self.inner.load_snapshot(id).await
    }
}

fn adding_script(calls: usize) -> Vec<Value> {
    let mut script: Vec<Value> = (0..calls)
        .map(|n| {
            json!({"type": "tool_call", "tool_name": "calculator",
                   "arguments": {"left": n, "operation": "add", "right": 1}})
        })
        .collect();
    script.push(json!({"type": "finish", "answer": "done"}));
    script
}

fn engine(store: Arc<dyn EventStore>, calls: usize, snapshot_every: Option<u64>) -> Engine {
    let mut tools = ToolRegistry::new();
    tools.register_typed::<Calculator>().unwrap();
    Engine::builder(
        Arc::new(ScriptedModel::from_values(adding_script(calls)).unwrap()),
        Arc::new(ReAct::new()),
    )
    .tools(tools.into_toolbox())
    .store(store)
    .budgets(Budgets {
        max_steps: 1000,
        ..Budgets::default()
    })
    .snapshot_every(snapshot_every)
    .build()
}

#[tokio::test]
async fn states_with_and_without_snapshots_are_identical() {
    let store = Arc::new(Counting::default());
    let result = engine(store.clone(), 30, Some(10))
        .run("add", json!({}))
        .await
        .unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    let id = result.session_id;
    let (seq, _) = store
        .load_snapshot(&id)
        .await
        .unwrap()
        .expect("a snapshot was written");
    let total = store.inner.load(&id).await.unwrap().len() as u64;
    assert!(
        seq >= 50 && total - seq <= total / 2 + 10,
        "the newest snapshot is recent: {seq} of {total}"
    );
    let with = load_state(store.as_ref(), &id).await.unwrap();
    store.inner.clear_snapshots().unwrap();
    let without = load_state(store.as_ref(), &id).await.unwrap();
    let folded = SessionState::from_events(&id, &store.load(&id).await.unwrap()).unwrap();
    assert_eq!(with, without);
    assert_eq!(with, folded);
    assert_eq!(
        with.run_result().unwrap(),
        engine(store.clone(), 30, None).resume(&id).await.unwrap()
    );
}

#[tokio::test]
async fn a_long_session_loads_from_one_snapshot_and_the_events_after_it() {
    let store = Arc::new(Counting::default());
    let result = engine(store.clone(), 250, Some(100))
        .run("add", json!({}))
        .await
        .unwrap();
    let id = result.session_id;
    let total = store.inner.load(&id).await.unwrap().len();
    assert!(total >= 1000, "{total} events");
    store.events_read.store(0, Ordering::Relaxed);
    let state = load_state(store.as_ref(), &id).await.unwrap();
    let read = store.events_read.load(Ordering::Relaxed);
    assert!(
        read < 100 + total / 2,
        "read {read} of {total} events: snapshots are at most half the log apart"
    );
    assert_eq!(state.last_seq() as usize, total);
}

#[tokio::test]
async fn a_snapshot_that_does_not_fit_is_ignored() {
    let store = Arc::new(Counting::default());
    let result = engine(store.clone(), 12, Some(10))
        .run("add", json!({}))
        .await
        .unwrap();
    let id = result.session_id;
    let good = load_state(store.as_ref(), &id).await.unwrap();
    store
        .save_snapshot(&id, 10_000, &json!({"version": 1, "state": "garbage"}))
        .await
        .unwrap();
    assert_eq!(load_state(store.as_ref(), &id).await.unwrap(), good);
    store
        .save_snapshot(&id, 3, &json!({"version": 99}))
        .await
        .unwrap();
    assert_eq!(load_state(store.as_ref(), &id).await.unwrap(), good);
}
