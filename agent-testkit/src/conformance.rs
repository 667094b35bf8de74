//! One conformance suite for every event store: the same cases, the same
//! expectations, run against `MemoryStore`, `SqliteStore` and `PostgresStore`
//! (LangGraph's checkpointer tests are the model). A store passes by opening a
//! handle onto the same storage each time it is asked ([`Opener`]), a storage of
//! its own for each case.
//!
//! ```ignore
//! agent_testkit::store_conformance!(|| async { Some(open_my_store().await) });
//! ```

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use agent_core::event::{Event, EventKind};
use agent_core::result::ExitReason;
use agent_core::state::PublicStatus;
use agent_core::store::queue::QueuedAction;
use agent_core::store::{Append, Durability, EventStore, Store, StoreError};
use agent_core::types::ToolCall;
use serde_json::json;

/// Opens another handle onto the store under test; `None` skips the suite (a
/// service that is missing on a developer's machine).
pub type Opener =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Option<Arc<dyn Store>>> + Send>> + Send + Sync>;

/// A session id no other case or run uses.
fn unique(name: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!(
        "{name}-{}-{}-{}",
        std::process::id(),
        agent_core::event::now_millis(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
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
            step: u32::try_from(seq).unwrap_or(u32::MAX),
            context_tokens: None,
        },
    )
}

fn append<'a>(events: &'a [Event], expected: u64, status: PublicStatus) -> Append<'a> {
    Append {
        session_id: &events[0].session_id,
        expected_seq: expected,
        events,
        status,
        durability: Durability::Full,
    }
}

async fn create(store: &dyn EventStore, session: &str) {
    store
        .append(append(&[started(session)], 0, PublicStatus::Running))
        .await
        .unwrap();
}

/// Appended events come back in order, also from a new handle; sessions list
/// newest first with the status their writer folded; an unknown id is not found.
pub async fn appends_survive_a_reopen_and_list_newest_first(open: &Opener) {
    let Some(store) = open().await else { return };
    let (a, b) = (unique("a"), unique("b"));
    create(store.as_ref(), &a).await;
    store
        .append(Append {
            durability: Durability::Process,
            ..append(
                &[requested(&a, 2), requested(&a, 3)],
                1,
                PublicStatus::Running,
            )
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    create(store.as_ref(), &b).await;
    let failed = Event::new(
        &b,
        2,
        EventKind::Failed {
            exit_reason: ExitReason::Cancelled,
            budget: None,
            error: None,
        },
    );
    store
        .append(append(&[failed], 1, PublicStatus::Failed))
        .await
        .unwrap();
    drop(store);
    let store = open().await.unwrap();
    let log = store.load(&a).await.unwrap();
    assert_eq!(log.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(
        log[0],
        Event {
            at: log[0].at,
            ..started(&a)
        }
    );
    assert_eq!(store.load_after(&a, 1).await.unwrap(), log[1..]);
    let sessions: Vec<_> = store
        .sessions()
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.session_id == a || s.session_id == b)
        .collect();
    let ids: Vec<&str> = sessions.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids, [b.as_str(), a.as_str()], "newest first");
    assert_eq!(sessions[0].status, PublicStatus::Failed);
    assert_eq!(sessions[1].status, PublicStatus::Running);
    assert_eq!(sessions[1].task, format!("task of {a}"));
    assert!(matches!(
        store.load(&unique("nobody")).await,
        Err(StoreError::NotFound(_))
    ));
}

/// A stale append conflicts, names the real last seq and writes nothing;
/// creating a session twice conflicts; a batch that skips a seq or names another
/// session is refused.
pub async fn a_stale_append_is_a_conflict_and_writes_nothing(open: &Opener) {
    let Some(store) = open().await else { return };
    let s = unique("conflict");
    create(store.as_ref(), &s).await;
    store
        .append(append(&[requested(&s, 2)], 1, PublicStatus::Running))
        .await
        .unwrap();
    let err = store
        .append(append(
            &[requested(&s, 2), requested(&s, 3)],
            1,
            PublicStatus::Running,
        ))
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
    assert_eq!(
        store.load(&s).await.unwrap().len(),
        2,
        "nothing was written"
    );
    let err = store
        .append(append(&[started(&s)], 0, PublicStatus::Running))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict { .. }),
        "creating twice: {err}"
    );
    let err = store
        .append(append(&[requested(&s, 4)], 2, PublicStatus::Running))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidBatch(_)), "{err}");
    let other = unique("other");
    let err = store
        .append(Append {
            session_id: &other,
            ..append(&[started(&s)], 0, PublicStatus::Running)
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::InvalidBatch(_)), "{err}");
    assert!(matches!(
        store.load(&other).await,
        Err(StoreError::NotFound(_))
    ));
}

/// Eight writers on their own handles race on one session: every seq has one
/// winner and the log has no gap.
pub async fn racing_writers_leave_a_gap_free_log_with_one_winner_per_seq(open: &Opener) {
    let Some(first) = open().await else { return };
    let s = unique("race");
    create(first.as_ref(), &s).await;
    let per_writer = 20;
    let mut tasks = Vec::new();
    for writer in 0..8 {
        let store = open().await.unwrap();
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut won = Vec::new();
            while won.len() < per_writer {
                let last = store.load(&s).await.unwrap().last().unwrap().seq;
                let event = requested(&s, last + 1);
                match store
                    .append(append(&[event], last, PublicStatus::Running))
                    .await
                {
                    Ok(()) => won.push(last + 1),
                    Err(StoreError::Conflict { .. }) => {}
                    Err(other) => panic!("writer {writer}: {other}"),
                }
            }
            won
        }));
    }
    let mut all = BTreeSet::new();
    for task in tasks {
        for seq in task.await.unwrap() {
            assert!(all.insert(seq), "seq {seq} won twice");
        }
    }
    let total = all.len() as u64;
    let seqs: Vec<u64> = first
        .load(&s)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=total + 1).collect::<Vec<_>>(), "gap-free");
    assert_eq!(all, (2..=total + 1).collect::<BTreeSet<_>>());
}

/// Fifty sessions appending at once are all acknowledged and all there.
pub async fn concurrent_appends_of_many_sessions_are_all_acknowledged(open: &Opener) {
    let Some(store) = open().await else { return };
    let prefix = unique("many");
    let mut tasks = Vec::new();
    for n in 0..50 {
        let store = Arc::clone(&store);
        let id = format!("{prefix}-{n}");
        tasks.push(tokio::spawn(async move {
            create(store.as_ref(), &id).await;
            for seq in 2..=5 {
                store
                    .append(append(
                        &[requested(&id, seq)],
                        seq - 1,
                        PublicStatus::Running,
                    ))
                    .await
                    .unwrap();
            }
            id
        }));
    }
    for task in tasks {
        let id = task.await.unwrap();
        assert_eq!(store.load(&id).await.unwrap().len(), 5);
    }
}

/// A live lease refuses others; renewing returns the log's last seq; only the
/// holder releases; an expired lease is taken over and its old holder has lost it.
pub async fn leases_refuse_others_until_they_expire(open: &Opener) {
    let Some(store) = open().await else { return };
    let s = unique("lease");
    let long = Duration::from_secs(60);
    store.acquire_lease(&s, "a", long).await.unwrap();
    store.acquire_lease(&s, "a", long).await.unwrap();
    let err = store.acquire_lease(&s, "b", long).await.unwrap_err();
    assert!(matches!(err, StoreError::Leased { .. }), "{err}");
    assert_eq!(store.renew_lease(&s, "a", long).await.unwrap(), 0);
    create(store.as_ref(), &s).await;
    assert_eq!(store.renew_lease(&s, "a", long).await.unwrap(), 1);
    store.release_lease(&s, "b").await.unwrap();
    assert!(
        store.acquire_lease(&s, "b", long).await.is_err(),
        "b cannot release a's lease"
    );
    store.acquire_lease(&s, "a", Duration::ZERO).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    store.acquire_lease(&s, "b", long).await.unwrap();
    assert!(matches!(
        store.renew_lease(&s, "a", long).await,
        Err(StoreError::LeaseLost(_))
    ));
    store.release_lease(&s, "b").await.unwrap();
    store.acquire_lease(&s, "c", long).await.unwrap();
}

/// The newest snapshot is kept; an older one does not replace it.
pub async fn the_newest_snapshot_is_kept(open: &Opener) {
    let Some(store) = open().await else { return };
    let s = unique("snapshot");
    create(store.as_ref(), &s).await;
    assert_eq!(store.load_snapshot(&s).await.unwrap(), None);
    store.save_snapshot(&s, 5, &json!({"at": 5})).await.unwrap();
    store.save_snapshot(&s, 3, &json!({"at": 3})).await.unwrap();
    assert_eq!(
        store.load_snapshot(&s).await.unwrap(),
        Some((5, json!({"at": 5})))
    );
    store.save_snapshot(&s, 9, &json!({"at": 9})).await.unwrap();
    assert_eq!(store.load_snapshot(&s).await.unwrap().unwrap().0, 9);
}

/// A queued session is claimed once; finishing the claim removes it; a session
/// queued again while claimed stays queued; a live claim is not taken, an
/// expired one is, and a heartbeat keeps a claim alive.
pub async fn queued_sessions_are_claimed_once_and_survive_a_dead_worker(open: &Opener) {
    let Some(store) = open().await else { return };
    let worker_a = unique("worker-a");
    let worker_b = unique("worker-b");
    let s = unique("queued");
    store.enqueue_session(&s).await.unwrap();
    let long = Duration::from_secs(60);
    let claim = claim_mine(store.as_ref(), &worker_a, &s, long).await;
    assert!(
        !claims_of(store.as_ref(), &worker_b, long)
            .await
            .contains(&s),
        "a live claim is not taken"
    );
    store.enqueue_session(&s).await.unwrap();
    store.finish_session(&claim, &worker_a).await.unwrap();
    let again = claim_mine(store.as_ref(), &worker_b, &s, Duration::from_millis(50)).await;
    tokio::time::sleep(Duration::from_millis(120)).await;
    let taken = claim_mine(store.as_ref(), &worker_a, &s, long).await;
    store.finish_session(&again, &worker_b).await.unwrap();
    store.heartbeat(&worker_a, long).await.unwrap();
    store.finish_session(&taken, &worker_a).await.unwrap();
    assert!(
        !store
            .queue_view()
            .await
            .unwrap()
            .sessions
            .iter()
            .any(|view| view.session_id == s),
        "a finished claim leaves the queue"
    );
    store.enqueue_session(&s).await.unwrap();
    let released = claim_mine(store.as_ref(), &worker_a, &s, long).await;
    store
        .release_session(&released.session_id, &worker_a)
        .await
        .unwrap();
    let view = store.queue_view().await.unwrap();
    let row = view
        .sessions
        .iter()
        .find(|view| view.session_id == s)
        .unwrap();
    assert_eq!(row.claimed_by, None, "released back to the queue");
    let last = claim_mine(store.as_ref(), &worker_b, &s, long).await;
    store.finish_session(&last, &worker_b).await.unwrap();
}

/// Claims `session` for `worker`, taking and giving back other sessions the
/// queue hands out first (other cases share the queue).
async fn claim_mine(
    store: &dyn Store,
    worker: &str,
    session: &str,
    ttl: Duration,
) -> agent_core::store::queue::SessionClaim {
    let mut others = Vec::new();
    let found = loop {
        match store.claim_session(worker, ttl).await.unwrap() {
            Some(claim) if claim.session_id == session => break claim,
            Some(other) => others.push(other),
            None => panic!("session {session} could not be claimed by {worker}"),
        }
    };
    for other in others {
        store
            .release_session(&other.session_id, worker)
            .await
            .unwrap();
    }
    found
}

/// Every session `worker` can claim now (given back afterwards).
async fn claims_of(store: &dyn Store, worker: &str, ttl: Duration) -> Vec<String> {
    let mut claimed = Vec::new();
    while let Some(claim) = store.claim_session(worker, ttl).await.unwrap() {
        claimed.push(claim.session_id);
    }
    for id in &claimed {
        store.release_session(id, worker).await.unwrap();
    }
    claimed
}

fn action(session: &str, call_id: &str, tool: &str, idempotent: bool) -> QueuedAction {
    QueuedAction {
        session_id: session.to_owned(),
        call: ToolCall {
            id: call_id.to_owned(),
            tool_name: tool.to_owned(),
            arguments: json!({"line": "x"}),
        },
        idempotent,
    }
}

/// An action is queued once however often it is queued; a worker claims only
/// the tools it has; an expired claim comes back with its attempt counted, a
/// released one without; a finished action leaves the queue.
pub async fn queued_actions_count_their_attempts_and_go_to_workers_with_the_tool(open: &Opener) {
    let Some(store) = open().await else { return };
    let s = unique("actions");
    let tool = unique("tool");
    let worker = unique("worker");
    let queued = action(&s, "call_1", &tool, false);
    store
        .enqueue_actions(std::slice::from_ref(&queued))
        .await
        .unwrap();
    store
        .enqueue_actions(std::slice::from_ref(&queued))
        .await
        .unwrap();
    let others = [unique("other-tool")];
    assert!(
        store
            .claim_action(&worker, Some(&others), Duration::from_secs(60))
            .await
            .unwrap()
            .is_none(),
        "a worker without the tool claims nothing"
    );
    let mine = [tool.clone()];
    let first = store
        .claim_action(&worker, Some(&mine), Duration::from_millis(50))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.action, queued);
    assert_eq!(first.attempt, 1);
    let view = store.queue_view().await.unwrap();
    let row = view.actions.iter().find(|a| a.session_id == s).unwrap();
    assert_eq!(row.claimed_by.as_deref(), Some(worker.as_str()));
    assert!(row.lease_age_ms.is_some());
    tokio::time::sleep(Duration::from_millis(120)).await;
    let second = store
        .claim_action(&worker, Some(&mine), Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.attempt, 2, "an expired claim counts as an attempt");
    store.release_action(&s, "call_1", &worker).await.unwrap();
    let third = store
        .claim_action(&worker, Some(&mine), Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(third.attempt, 2, "a released claim does not");
    store.abandon_action(&s, "call_1", &worker).await.unwrap();
    let fourth = store
        .claim_action(&worker, Some(&mine), Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        fourth.attempt, 3,
        "an abandoned claim (its call may have started) counts"
    );
    store.finish_action(&s, "call_1").await.unwrap();
    assert!(
        store
            .claim_action(&worker, Some(&mine), Duration::from_secs(60))
            .await
            .unwrap()
            .is_none()
    );
}

/// Eight workers claiming at once from twenty queued sessions get each one once.
pub async fn racing_workers_claim_each_session_once(open: &Opener) {
    let Some(store) = open().await else { return };
    let prefix = unique("race-claim");
    let ids: BTreeSet<String> = (0..20).map(|n| format!("{prefix}-{n}")).collect();
    for id in &ids {
        store.enqueue_session(id).await.unwrap();
    }
    let mut tasks = Vec::new();
    for n in 0..8 {
        let store = open().await.unwrap();
        let worker = format!("{prefix}-worker-{n}");
        let prefix = prefix.clone();
        tasks.push(tokio::spawn(async move {
            let mut claimed = Vec::new();
            while let Some(claim) = store
                .claim_session(&worker, Duration::from_secs(60))
                .await
                .unwrap()
            {
                claimed.push(claim);
            }
            for claim in &claimed {
                if claim.session_id.starts_with(&prefix) {
                    store.finish_session(claim, &worker).await.unwrap();
                } else {
                    store
                        .release_session(&claim.session_id, &worker)
                        .await
                        .unwrap();
                }
            }
            claimed
                .into_iter()
                .map(|claim| claim.session_id)
                .collect::<Vec<_>>()
        }));
    }
    let mut seen = BTreeSet::new();
    for task in tasks {
        for id in task.await.unwrap() {
            if id.starts_with(&prefix) {
                assert!(seen.insert(id.clone()), "{id} claimed twice");
            }
        }
    }
    assert_eq!(seen, ids);
}

/// Walking the list a page at a time returns every session once, newest first;
/// a status filter returns only that status.
pub async fn pages_walk_the_list_newest_first_without_gaps_or_repeats(open: &Opener) {
    let Some(store) = open().await else { return };
    let mut mine = Vec::new();
    for n in 0..5 {
        let session = unique(&format!("page{n}"));
        create(store.as_ref(), &session).await;
        if n % 2 == 1 {
            let failed = Event::new(
                &session,
                2,
                EventKind::Failed {
                    exit_reason: ExitReason::Cancelled,
                    budget: None,
                    error: None,
                },
            );
            store
                .append(append(&[failed], 1, PublicStatus::Failed))
                .await
                .unwrap();
        }
        mine.push(session);
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let walk = |status: Option<PublicStatus>| {
        let store = Arc::clone(&store);
        async move {
            let mut seen = Vec::new();
            let mut after = None;
            loop {
                let query = agent_core::store::SessionQuery {
                    status,
                    limit: 2,
                    after: after.clone(),
                };
                let page = store.sessions_page(&query).await.unwrap();
                assert!(page.len() <= 2, "a page holds at most its limit");
                let Some(last) = page.last() else { break };
                after = Some(agent_core::store::SessionCursor::after(last));
                seen.extend(page);
            }
            seen
        }
    };
    let all = walk(None).await;
    let ids: Vec<&str> = all.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        ids.len(),
        "no session twice"
    );
    let order: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| mine.iter().any(|m| m == id))
        .collect();
    let newest_first: Vec<&str> = mine.iter().rev().map(String::as_str).collect();
    assert_eq!(order, newest_first);
    let failed = walk(Some(PublicStatus::Failed)).await;
    assert!(failed.iter().all(|s| s.status == PublicStatus::Failed));
    let failed_mine: Vec<&str> = failed
        .iter()
        .map(|s| s.session_id.as_str())
        .filter(|id| mine.iter().any(|m| m == id))
        .collect();
    assert_eq!(failed_mine, [mine[3].as_str(), mine[1].as_str()]);
}

/// Counts grow with the sessions, events and failed tool calls committed.
pub async fn counts_follow_what_was_committed(open: &Opener) {
    let Some(store) = open().await else { return };
    let before = store.counts().await.unwrap();
    let session = unique("counts");
    create(store.as_ref(), &session).await;
    let completed = |seq, id: &str, is_error| {
        Event::new(
            &session,
            seq,
            EventKind::ActionCompleted {
                observation: agent_core::types::Observation {
                    call_id: id.into(),
                    tool_name: "calculator".into(),
                    content: "x".into(),
                    is_error,
                },
            },
        )
    };
    let events = [
        completed(2, "c1", true),
        completed(3, "c2", false),
        completed(4, "c3", true),
    ];
    store
        .append(append(&events, 1, PublicStatus::Running))
        .await
        .unwrap();
    let after = store.counts().await.unwrap();
    let kind = |counts: &agent_core::store::StoreCounts, kind: &str| {
        counts.events.get(kind).copied().unwrap_or(0)
    };
    assert!(kind(&after, "action_completed") >= kind(&before, "action_completed") + 3);
    assert!(kind(&after, "session_started") > kind(&before, "session_started"));
    assert!(after.tool_errors >= before.tool_errors + 2);
    let running = |counts: &agent_core::store::StoreCounts| {
        counts
            .sessions
            .get(&PublicStatus::Running)
            .copied()
            .unwrap_or(0)
    };
    assert!(running(&after) >= 1, "the session just created is running");
}

/// One `#[tokio::test]` per conformance case, for the store `opener` opens
/// (an expression of type [`Opener`]).
#[macro_export]
macro_rules! store_conformance {
    ($opener:expr) => {
        $crate::store_conformance!(@cases $opener;
            appends_survive_a_reopen_and_list_newest_first,
            a_stale_append_is_a_conflict_and_writes_nothing,
            racing_writers_leave_a_gap_free_log_with_one_winner_per_seq,
            concurrent_appends_of_many_sessions_are_all_acknowledged,
            leases_refuse_others_until_they_expire,
            the_newest_snapshot_is_kept,
            queued_sessions_are_claimed_once_and_survive_a_dead_worker,
            queued_actions_count_their_attempts_and_go_to_workers_with_the_tool,
            racing_workers_claim_each_session_once,
            pages_walk_the_list_newest_first_without_gaps_or_repeats,
            counts_follow_what_was_committed);
    };
    (@cases $opener:expr; $($case:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let opener: $crate::conformance::Opener = $opener;
                $crate::conformance::$case(&opener).await;
            }
        )*
    };
}
