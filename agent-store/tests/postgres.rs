//! What only the PostgreSQL store does (the shared contract is the conformance
//! suite): versioned schema migrations that refuse a newer or foreign database
//! unchanged and are safe when processes race; leases that a live holder
//! elsewhere keeps and this host's dead holder loses; writers in separate
//! processes; connections killed mid-append; unreachable servers and wrong
//! passwords that never show a password.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::collections::BTreeSet;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::event::{Event, EventKind};
use agent_core::state::PublicStatus;
use agent_core::store::{Append, Durability, EventLog, EventStore, StoreError};
use agent_store::{OpenError, PostgresStore, PostgresTarget, open_url};
use agent_testkit::postgres::{fresh_database, test_url};
use serde_json::json;

async fn sql(url: &str, statements: &str) -> Vec<tokio_postgres::SimpleQueryMessage> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    let rows = client.simple_query(statements).await.unwrap();
    drop(client);
    let _ = driver.await;
    rows
}

async fn first_value(url: &str, query: &str) -> Option<String> {
    sql(url, query)
        .await
        .into_iter()
        .find_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
}

fn started(session: &str) -> Event {
    Event::new(
        session,
        1,
        EventKind::SessionStarted {
            task: "t".into(),
            strategy: "react".into(),
            config: json!({}),
        },
    )
}

fn requested(session: &str, seq: u64) -> Event {
    Event::new(
        session,
        seq,
        EventKind::ModelRequested {
            step: 1,
            context_tokens: None,
        },
    )
}

fn next<'a>(events: &'a [Event], expected: u64) -> Append<'a> {
    Append {
        session_id: &events[0].session_id,
        expected_seq: expected,
        events,
        status: PublicStatus::Running,
        durability: Durability::Full,
    }
}

#[tokio::test]
async fn a_newer_or_foreign_database_is_refused_unchanged_and_a_missing_one_is_not_created() {
    let Some(url) = test_url() else { return };
    let newer = fresh_database(&url).await;
    open_url(&newer, true).await.unwrap();
    sql(
        &newer,
        "UPDATE agent.meta SET value = '99' WHERE key = 'schema_version'",
    )
    .await;
    let err = open_url(&newer, true).await.err().unwrap();
    assert!(matches!(err, OpenError::Newer { found: 99, .. }), "{err}");
    assert!(err.to_string().contains("upgrade agent"), "{err}");
    assert_eq!(
        first_value(
            &newer,
            "SELECT value FROM agent.meta WHERE key = 'schema_version'"
        )
        .await,
        Some("99".into()),
        "left untouched"
    );

    let foreign = fresh_database(&url).await;
    sql(
        &foreign,
        "CREATE SCHEMA agent; CREATE TABLE agent.invoices (id int)",
    )
    .await;
    let err = open_url(&foreign, true).await.err().unwrap();
    assert!(matches!(err, OpenError::NotAStore(_)), "{err}");
    assert_eq!(
        first_value(&foreign, "SELECT to_regclass('agent.meta')::text").await,
        None,
        "nothing was created"
    );

    let empty = fresh_database(&url).await;
    assert!(matches!(
        open_url(&empty, false).await,
        Err(OpenError::Missing(_))
    ));
    assert_eq!(
        first_value(
            &empty,
            "SELECT nspname::text FROM pg_namespace WHERE nspname = 'agent'"
        )
        .await,
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_racing_first_opens_all_succeed() {
    let Some(url) = test_url() else { return };
    for _ in 0..20 {
        let db = fresh_database(&url).await;
        let opens: Vec<_> = (0..16)
            .map(|_| {
                let db = db.clone();
                tokio::spawn(async move { open_url(&db, true).await.map(|_| ()) })
            })
            .collect();
        for open in opens {
            open.await.unwrap().unwrap();
        }
    }
}

#[tokio::test]
async fn a_live_holder_elsewhere_keeps_its_lease_and_a_dead_one_here_loses_it() {
    let Some(url) = test_url() else { return };
    let store = open_url(&url, true).await.unwrap();
    let session = agent_core::id::new_session_id();
    let minute = Duration::from_secs(60);
    store.acquire_lease(&session, "a", minute).await.unwrap();
    let err = store
        .acquire_lease(&session, "b", minute)
        .await
        .unwrap_err();
    let StoreError::Leased { holder, .. } = &err else {
        panic!("{err}");
    };
    assert!(
        holder.contains(&format!("pid {}", std::process::id())),
        "{holder}"
    );
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    sql(
        &url,
        &format!("UPDATE agent.leases SET pid = {dead}, host = 'elsewhere' WHERE session_id = '{session}'"),
    )
    .await;
    let err = store
        .acquire_lease(&session, "b", minute)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("pid {dead} on host elsewhere")),
        "a holder on another host is judged by expiry alone: {err}"
    );
    if agent_store::ProcessIdentity::current().boot_id.is_empty() {
        return;
    }
    let me = agent_store::ProcessIdentity::current();
    sql(
        &url,
        &format!(
            "UPDATE agent.leases SET host = '{}', boot_id = '{}' WHERE session_id = '{session}'",
            me.host, me.boot_id
        ),
    )
    .await;
    store.acquire_lease(&session, "b", minute).await.unwrap();
    assert!(matches!(
        store.renew_lease(&session, "a", minute).await,
        Err(StoreError::LeaseLost(_))
    ));
}

/// A child process: appends to one session until it has won `AGENT_PG_WINS` seqs,
/// printing `won SEQ` for each.
#[tokio::test]
async fn child_writer() {
    let (Ok(url), Ok(session), Ok(wins)) = (
        std::env::var("AGENT_PG_CHILD_URL"),
        std::env::var("AGENT_PG_CHILD_SESSION"),
        std::env::var("AGENT_PG_WINS"),
    ) else {
        return;
    };
    let wins: usize = wins.parse().unwrap();
    let store = open_url(&url, false).await.unwrap();
    let mut won = 0;
    while won < wins {
        let last = store.load(&session).await.unwrap().last().unwrap().seq;
        match store
            .append(next(&[requested(&session, last + 1)], last))
            .await
        {
            Ok(()) => {
                println!("won {}", last + 1);
                won += 1;
            }
            Err(StoreError::Conflict { .. }) => {}
            Err(other) => panic!("{other}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_writers_in_separate_processes_leave_a_gap_free_log_with_one_winner_per_seq() {
    let Some(url) = test_url() else { return };
    let store = open_url(&url, true).await.unwrap();
    let session = agent_core::id::new_session_id();
    store.append(next(&[started(&session)], 0)).await.unwrap();
    let wins = 10;
    let children: Vec<_> = (0..16)
        .map(|_| {
            tokio::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "child_writer",
                    "--nocapture",
                    "--test-threads",
                    "1",
                ])
                .env("AGENT_PG_CHILD_URL", &url)
                .env("AGENT_PG_CHILD_SESSION", &session)
                .env("AGENT_PG_WINS", wins.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut all = BTreeSet::new();
    for child in children {
        let output = child.wait_with_output().await.unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            if let Some((_, seq)) = line.split_once("won ") {
                let seq: u64 = seq.trim().parse().unwrap();
                assert!(all.insert(seq), "seq {seq} won twice");
            }
        }
    }
    assert_eq!(all.len(), 16 * wins);
    let seqs: Vec<u64> = store
        .load(&session)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(
        seqs,
        (1..=16 * wins as u64 + 1).collect::<Vec<_>>(),
        "gap-free"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_killed_mid_append_lose_no_acknowledged_event_and_never_hang() {
    let Some(url) = test_url() else { return };
    let db = fresh_database(&url).await;
    let store: Arc<dyn EventStore> = open_url(&db, true).await.unwrap();
    let killer = {
        let db = db.clone();
        tokio::spawn(async move {
            for _ in 0..20 {
                sql(
                    &db,
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                     WHERE datname = current_database() AND pid <> pg_backend_pid()",
                )
                .await;
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        })
    };
    let started_at = Instant::now();
    let writers: Vec<_> = (0..10)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let session = agent_core::id::new_session_id();
                let mut acknowledged = 0u64;
                let mut last = 0u64;
                for _ in 0..30 {
                    let event = if last == 0 {
                        started(&session)
                    } else {
                        requested(&session, last + 1)
                    };
                    match store.append(next(&[event], last)).await {
                        Ok(()) => {
                            last += 1;
                            acknowledged = last;
                        }
                        Err(StoreError::Conflict { actual, .. }) => last = actual,
                        Err(StoreError::Backend(_)) => {
                            last = store.load(&session).await.map_or(0, |log| log.len() as u64);
                        }
                        Err(other) => panic!("{other}"),
                    }
                }
                (session, acknowledged)
            })
        })
        .collect();
    let mut results = Vec::new();
    for writer in writers {
        results.push(writer.await.unwrap());
    }
    killer.await.unwrap();
    assert!(started_at.elapsed() < Duration::from_secs(120), "no hang");
    let store = open_url(&db, false).await.unwrap();
    for (session, acknowledged) in results {
        let log = match store.load(&session).await {
            Ok(log) => log,
            Err(StoreError::NotFound(_)) => Vec::new(),
            Err(other) => panic!("{other}"),
        };
        let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "gap-free"
        );
        assert!(
            log.len() as u64 >= acknowledged,
            "every acknowledged event is there ({} < {acknowledged})",
            log.len()
        );
    }
}

#[tokio::test]
async fn unreachable_servers_and_wrong_passwords_are_clear_and_never_show_the_password() {
    let Some(url) = test_url() else { return };
    let started_at = Instant::now();
    let err = open_url("postgres://agent:canary-secret-1@127.0.0.1:1/agent", true)
        .await
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(matches!(err, OpenError::Unreachable(_)), "{text}");
    assert!(text.contains("postgres://127.0.0.1:1/agent"), "{text}");
    assert!(!text.contains("canary-secret-1"), "{text}");
    assert!(started_at.elapsed() < Duration::from_secs(20));

    let target = PostgresTarget::parse(&url).unwrap();
    let shown = target.to_string();
    let (host_port, _) = shown
        .strip_prefix("postgres://")
        .unwrap()
        .split_once('/')
        .unwrap();
    let wrong = format!("postgres://agent_pw:canary-secret-2@{host_port}/agent_test");
    let err = open_url(&wrong, true).await.err().unwrap();
    let text = err.to_string();
    assert!(text.contains("password authentication failed"), "{text}");
    assert!(!text.contains("canary-secret-2"), "{text}");

    let right = format!("postgres://agent_pw:agent-pw-secret@{host_port}/agent_test");
    let store = PostgresStore::connect(PostgresTarget::parse(&right).unwrap(), true)
        .await
        .unwrap();
    assert!(!format!("{store:?}").contains("agent-pw-secret"));
    let err = store.load("no-such-session").await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)));
}

/// Regression: a session queued again while its drive's claim was being
/// finished stayed claimed by the finishing worker forever (its heartbeat renews
/// every claim it holds), so no worker drove it again. The enqueue is held open
/// in another transaction while `finish_session` runs, then committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_queued_again_while_its_claim_finishes_is_left_for_a_worker() {
    use agent_core::store::queue::WorkQueue;
    let Some(url) = test_url() else { return };
    let db = fresh_database(&url).await;
    let store = Arc::new(
        PostgresStore::connect(PostgresTarget::parse(&db).unwrap(), true)
            .await
            .unwrap(),
    );
    store.enqueue_session("s").await.unwrap();
    let claim = store
        .claim_session("w1", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let (client, connection) = tokio_postgres::connect(&db, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    client
        .batch_execute(
            "BEGIN; UPDATE agent.queue_sessions SET generation = generation + 1 WHERE session_id = 's'",
        )
        .await
        .unwrap();
    let finishing = {
        let store = Arc::clone(&store);
        tokio::spawn(async move { store.finish_session(&claim, "w1").await })
    };
    // The finisher must be waiting for the row the open transaction locked:
    // the race is only exercised if it decides after that commit.
    let deadline = Instant::now() + Duration::from_secs(20);
    while first_value(
        &db,
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .await
    .as_deref()
        != Some("1")
    {
        assert!(
            !finishing.is_finished(),
            "the finisher did not wait for the locked row"
        );
        assert!(
            Instant::now() < deadline,
            "the finisher never blocked on the locked row"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!finishing.is_finished());
    client.batch_execute("COMMIT").await.unwrap();
    finishing.await.unwrap().unwrap();
    drop(client);
    let _ = driver.await;
    assert_eq!(
        first_value(
            &db,
            "SELECT coalesce(claimed_by, 'unclaimed') FROM agent.queue_sessions WHERE session_id = 's'"
        )
        .await,
        Some("unclaimed".into()),
        "the session waits, unclaimed, for the next worker"
    );
    let again = store
        .claim_session("w2", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(again.map(|claim| claim.session_id), Some("s".into()));
}

/// Polls `done` until it holds, failing after `seconds` with `what`.
async fn eventually(seconds: u64, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A waiting worker is woken by NOTIFY, not only by its one-second poll — also
/// after its listening connection was cut and opened again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_are_woken_by_notify_and_listen_again_after_their_connection_is_cut() {
    use agent_core::store::queue::WorkQueue;
    let Some(url) = test_url() else { return };
    let db = fresh_database(&url).await;
    let connect = || async {
        PostgresStore::connect(PostgresTarget::parse(&db).unwrap(), true)
            .await
            .unwrap()
    };
    let waiter = Arc::new(connect().await);
    let sender = connect().await;
    waiter.wait_for_work(Duration::from_millis(1)).await;
    eventually(20, "the worker never listened", || waiter.listened().0 == 1).await;
    sender.enqueue_session("first").await.unwrap();
    eventually(20, "no NOTIFY reached the waiting worker", || {
        waiter.listened().1 >= 1
    })
    .await;
    sql(
        &db,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND query ILIKE 'LISTEN%'",
    )
    .await;
    eventually(20, "the worker did not listen again", || {
        waiter.listened().0 == 2
    })
    .await;
    let before = waiter.listened().1;
    sender.enqueue_session("second").await.unwrap();
    eventually(20, "no NOTIFY after the worker listened again", || {
        waiter.listened().1 > before
    })
    .await;
}
