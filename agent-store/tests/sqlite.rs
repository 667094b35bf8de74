//! The SQLite store against the `EventStore` contract: durability across reopen,
//! conflicts, races between connections, refusing unusable files, and leases.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_core::{Durability, Event, EventKind, EventStore, PublicStatus, StoreError};
use agent_store::{OpenError, SqliteStore};
use serde_json::json;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("agent-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn db(&self) -> PathBuf {
        self.0.join("agent.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn started(session: &str) -> Event {
    Event::new(
        session,
        1,
        EventKind::SessionStarted {
            task: format!("task of {session}"),
            strategy: "react".into(),
            config: json!({"model": "scripted:x"}),
        },
    )
}

fn requested(session: &str, seq: u64) -> Event {
    Event::new(session, seq, EventKind::ModelRequested { step: seq as u32 })
}

#[tokio::test]
async fn events_survive_a_reopen_and_sessions_list_newest_first() {
    let dir = TempDir::new("reopen");
    {
        let store = SqliteStore::open(dir.db()).unwrap();
        store
            .append("a", 0, &[started("a")], Durability::Full)
            .await
            .unwrap();
        store
            .append(
                "a",
                1,
                &[requested("a", 2), requested("a", 3)],
                Durability::Process,
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        store
            .append("b", 0, &[started("b")], Durability::Full)
            .await
            .unwrap();
        let finished = Event::new(
            "b",
            2,
            EventKind::Failed {
                exit_reason: agent_core::ExitReason::Cancelled,
                budget: None,
                error: None,
            },
        );
        store
            .append("b", 1, &[finished], Durability::Full)
            .await
            .unwrap();
    }
    let store = SqliteStore::open_existing(dir.db()).unwrap();
    let log = store.load("a").await.unwrap();
    assert_eq!(log.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(log[0], started("a").clone_with_at(log[0].at));
    let sessions = store.sessions().await.unwrap();
    let ids: Vec<&str> = sessions.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids, ["b", "a"]);
    assert_eq!(sessions[0].status, PublicStatus::Failed);
    assert_eq!(sessions[1].status, PublicStatus::Running);
    assert_eq!(sessions[1].task, "task of a");
    assert!(matches!(
        store.load("zzz").await,
        Err(StoreError::NotFound(_))
    ));
}

trait WithAt {
    fn clone_with_at(&self, at: u64) -> Event;
}

impl WithAt for Event {
    fn clone_with_at(&self, at: u64) -> Event {
        Event { at, ..self.clone() }
    }
}

#[tokio::test]
async fn a_stale_append_is_a_conflict_and_writes_nothing() {
    let dir = TempDir::new("conflict");
    let store = SqliteStore::open(dir.db()).unwrap();
    store
        .append("s", 0, &[started("s")], Durability::Full)
        .await
        .unwrap();
    store
        .append("s", 1, &[requested("s", 2)], Durability::Full)
        .await
        .unwrap();
    let err = store
        .append(
            "s",
            1,
            &[requested("s", 2), requested("s", 3)],
            Durability::Full,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                expected: 1,
                actual: 2,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(store.load("s").await.unwrap().len(), 2);
    let err = store
        .append("s", 0, &[started("s")], Durability::Full)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict { .. }),
        "creating twice conflicts"
    );
}

#[tokio::test]
async fn eight_racing_writers_leave_a_gap_free_log_with_one_winner_per_seq() {
    let dir = TempDir::new("race");
    let first = SqliteStore::open(dir.db()).unwrap();
    first
        .append("s", 0, &[started("s")], Durability::Full)
        .await
        .unwrap();
    let per_writer = 25;
    let mut tasks = Vec::new();
    for writer in 0..8 {
        let db = dir.db();
        tasks.push(tokio::spawn(async move {
            let store = SqliteStore::open(db).unwrap();
            let mut won = Vec::new();
            let mut conflicts = 0;
            while won.len() < per_writer {
                let last = store.load("s").await.unwrap().last().unwrap().seq;
                let event = requested("s", last + 1);
                match store.append("s", last, &[event], Durability::Full).await {
                    Ok(()) => won.push(last + 1),
                    Err(StoreError::Conflict { .. }) => conflicts += 1,
                    Err(other) => panic!("writer {writer}: {other}"),
                }
            }
            (won, conflicts)
        }));
    }
    let mut all = BTreeSet::new();
    let mut total = 0;
    for task in tasks {
        let (won, _) = task.await.unwrap();
        total += won.len();
        for seq in won {
            assert!(all.insert(seq), "seq {seq} won twice");
        }
    }
    let log = first.load("s").await.unwrap();
    let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=(total as u64 + 1)).collect::<Vec<_>>(),
        "gap-free"
    );
    assert_eq!(all, (2..=(total as u64 + 1)).collect::<BTreeSet<_>>());
}

#[tokio::test]
async fn concurrent_appends_of_many_sessions_are_all_acknowledged() {
    let dir = TempDir::new("group");
    let store = Arc::new(SqliteStore::open(dir.db()).unwrap());
    let mut tasks = Vec::new();
    for n in 0..50 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let id = format!("s{n}");
            store
                .append(&id, 0, &[started(&id)], Durability::Full)
                .await
                .unwrap();
            for seq in 2..=5 {
                store
                    .append(&id, seq - 1, &[requested(&id, seq)], Durability::Full)
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    for n in 0..50 {
        assert_eq!(store.load(&format!("s{n}")).await.unwrap().len(), 5);
    }
    assert_eq!(store.stats().appends(), 250);
    assert!(store.stats().commits() <= 250);
}

#[test]
fn files_that_are_not_usable_stores_are_refused_unmodified() {
    let dir = TempDir::new("refuse");
    let garbage = dir.0.join("garbage.db");
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&garbage, &bytes).unwrap();
    let err = SqliteStore::open(&garbage).unwrap_err();
    assert!(matches!(err, OpenError::NotAStore(_)), "{err}");
    assert_eq!(std::fs::read(&garbage).unwrap(), bytes);

    let newer = dir.0.join("newer.db");
    {
        let conn = rusqlite::Connection::open(&newer).unwrap();
        conn.execute_batch("CREATE TABLE sessions (x); PRAGMA user_version = 99;")
            .unwrap();
    }
    let before = std::fs::read(&newer).unwrap();
    let err = SqliteStore::open(&newer).unwrap_err();
    assert!(matches!(err, OpenError::Newer { found: 99, .. }), "{err}");
    assert!(err.to_string().contains("upgrade agent"));
    assert_eq!(std::fs::read(&newer).unwrap(), before);

    let foreign = dir.0.join("foreign.db");
    {
        let conn = rusqlite::Connection::open(&foreign).unwrap();
        conn.execute_batch("CREATE TABLE invoices (id INTEGER);")
            .unwrap();
    }
    let err = SqliteStore::open(&foreign).unwrap_err();
    assert!(err.to_string().contains("invoices"), "{err}");

    let missing = dir.0.join("missing.db");
    assert!(matches!(
        SqliteStore::open_existing(&missing),
        Err(OpenError::Missing(_))
    ));
    assert!(!missing.exists());
}

#[tokio::test]
async fn a_lease_held_by_a_live_process_is_refused_and_a_dead_holder_is_taken_over() {
    let dir = TempDir::new("lease");
    let store = SqliteStore::open(dir.db()).unwrap();
    let minute = Duration::from_secs(60);
    store.acquire_lease("s", "owner-a", minute).await.unwrap();
    let err = store
        .acquire_lease("s", "owner-b", minute)
        .await
        .unwrap_err();
    let StoreError::Leased { holder, .. } = &err else {
        panic!("expected Leased, got {err}");
    };
    assert!(
        holder.contains(&format!("pid {}", std::process::id())),
        "{holder}"
    );
    assert_eq!(store.renew_lease("s", "owner-a", minute).await.unwrap(), 0);

    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = child.id();
    child.wait().unwrap();
    {
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        conn.busy_timeout(Duration::from_secs(5)).unwrap();
        conn.execute(
            "UPDATE leases SET pid = ?1 WHERE session_id = 's'",
            [dead_pid],
        )
        .unwrap();
    }
    if agent_store::ProcessIdentity::current().boot_id.is_empty() {
        return;
    }
    store.acquire_lease("s", "owner-b", minute).await.unwrap();
    assert!(matches!(
        store.renew_lease("s", "owner-a", minute).await,
        Err(StoreError::LeaseLost(_))
    ));
    store.release_lease("s", "owner-b").await.unwrap();
    store.acquire_lease("s", "owner-c", minute).await.unwrap();
}
