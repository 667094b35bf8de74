//! What only the SQLite store does (the shared contract is the conformance suite):
//! group commit, refusing unusable files unmodified, taking over the lease of a
//! dead holder.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agent_core::event::{Event, EventKind};
use agent_core::state::PublicStatus;
use agent_core::store::{Append, Durability, EventLog, LeaseStore, StoreError};
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
    Event::new(
        session,
        seq,
        EventKind::ModelRequested {
            step: seq as u32,
            context_tokens: None,
        },
    )
}

#[tokio::test]
async fn concurrent_appends_of_many_sessions_share_commits() {
    let dir = TempDir::new("group");
    let store = Arc::new(SqliteStore::open(dir.db()).unwrap());
    let mut tasks = Vec::new();
    for n in 0..50 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let id = format!("s{n}");
            store
                .append(Append::creating(&[started(&id)], Durability::Full).unwrap())
                .await
                .unwrap();
            for seq in 2..=5 {
                store
                    .append(Append {
                        session_id: &id,
                        expected_seq: seq - 1,
                        events: &[requested(&id, seq)],
                        status: PublicStatus::Running,
                        durability: Durability::Full,
                    })
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

/// Regression: a process that opened a store while another was creating it read
/// the version before the creation's commit and the tables after it, and took
/// the half-seen store for "an SQLite database of something else".
#[test]
fn processes_creating_one_store_at_once_all_open_it() {
    let dir = TempDir::new("create-race");
    for round in 0..20 {
        let path = dir.0.join(format!("race-{round}.db"));
        let openers: Vec<_> = (0..16)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || SqliteStore::open(&path).map(drop))
            })
            .collect();
        for opener in openers {
            let opened = opener.join().unwrap();
            assert!(opened.is_ok(), "round {round}: {:?}", opened.err());
        }
    }
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

/// Regression: `/healthz` said 200 while the disk under the store was full.
#[tokio::test]
async fn a_full_disk_fails_the_write_check_until_space_is_freed() {
    let dir = TempDir::new("full-check");
    let Some(_disk) = agent_testkit::SmallDisk::for_test(&dir.0, "2m") else {
        return;
    };
    let store = SqliteStore::open(dir.db()).unwrap();
    store.check_writable().await.unwrap();
    let filler = dir.0.join("filler");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&filler).unwrap();
        while file.write_all(&[0u8; 64 * 1024]).is_ok() {}
    }
    let big = "x".repeat(256 * 1024);
    let mut failure = None;
    for n in 0..64 {
        let session = format!("s{n}");
        let event = Event::new(
            &session,
            1,
            EventKind::SessionStarted {
                task: big.clone(),
                strategy: "react".into(),
                config: json!({}),
            },
        );
        if let Err(err) = store
            .append(Append::creating(std::slice::from_ref(&event), Durability::Full).unwrap())
            .await
        {
            failure = Some(err);
            break;
        }
    }
    assert!(
        matches!(failure, Some(StoreError::Unwritable(_))),
        "{failure:?}"
    );
    assert!(
        matches!(store.check_writable().await, Err(StoreError::Unwritable(_))),
        "the check says the store can be written while appends fail"
    );
    std::fs::remove_file(&filler).unwrap();
    let small = Event::new(
        "after",
        1,
        EventKind::SessionStarted {
            task: "t".into(),
            strategy: "react".into(),
            config: json!({}),
        },
    );
    store
        .append(Append::creating(std::slice::from_ref(&small), Durability::Full).unwrap())
        .await
        .unwrap();
    store.check_writable().await.unwrap();
}
