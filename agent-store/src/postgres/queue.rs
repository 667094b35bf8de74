//! The work queue on PostgreSQL: claims take the oldest free row with
//! `FOR UPDATE SKIP LOCKED`, so workers on many machines never wait for each
//! other nor claim one row twice; claims expire by the server's clock. Queueing
//! sends `NOTIFY agent_work`, and an idle worker listens on a connection of its
//! own, so it claims new work at once; it also looks every second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use agent_core::store::StoreError;
use agent_core::store::queue::{
    ActionClaim, QueueView, QueuedAction, QueuedActionView, QueuedSessionView, SessionClaim,
    WorkQueue,
};
use agent_core::types::ToolCall;
use async_trait::async_trait;
use tokio::sync::Notify;
use tokio_postgres::{AsyncMessage, NoTls};

use super::{PostgresStore, column};

/// Longest an idle worker waits before it looks at the queue again.
const POLL: Duration = Duration::from_secs(1);

/// The channel of wake-ups.
const CHANNEL: &str = "agent_work";

fn seconds(ttl: Duration) -> f64 {
    ttl.as_secs_f64()
}

/// What a store's listening connection did.
#[derive(Debug, Default)]
pub(super) struct Listened {
    /// Connections that got as far as `LISTEN`.
    pub(super) listens: AtomicU64,
    /// Wake-ups received.
    pub(super) notifications: AtomicU64,
}

/// Longest wait before a lost listening connection is opened again.
const RELISTEN_MAX: Duration = Duration::from_secs(2);

/// Listens for wake-ups on a connection of its own for as long as the store
/// lives; a connection that breaks (the server restarted) is opened again,
/// with backoff, and LISTENs again — and the waiters are woken then, since
/// work may have been queued while no one listened.
pub(super) async fn listen(
    config: tokio_postgres::Config,
    wake: Weak<Notify>,
    listened: Arc<Listened>,
) {
    let mut delay = POLL / 10;
    while wake.strong_count() > 0 {
        if listen_once(&config, &wake, &listened).await {
            delay = POLL / 10;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(RELISTEN_MAX);
    }
}

/// One listening connection, until it breaks or the store is gone; whether
/// it got as far as listening.
async fn listen_once(
    config: &tokio_postgres::Config,
    wake: &Weak<Notify>,
    listened: &Arc<Listened>,
) -> bool {
    let Ok((client, mut connection)) = config.connect(NoTls).await else {
        return false;
    };
    let notify = wake.clone();
    let counts = Arc::clone(listened);
    let mut driver = tokio::spawn(async move {
        while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            match (message, notify.upgrade()) {
                (Ok(AsyncMessage::Notification(_)), Some(wake)) => {
                    counts.notifications.fetch_add(1, Ordering::Relaxed);
                    wake.notify_waiters();
                }
                (Ok(_), Some(_)) => {}
                (Err(_), _) | (_, None) => break,
            }
        }
    });
    if client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .is_err()
    {
        driver.abort();
        return false;
    }
    listened.listens.fetch_add(1, Ordering::Relaxed);
    if let Some(wake) = wake.upgrade() {
        wake.notify_waiters();
    }
    let mut gone = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = &mut driver => break,
            _ = gone.tick() => if wake.strong_count() == 0 {
                driver.abort();
                break;
            },
        }
    }
    drop(client);
    true
}

impl PostgresStore {
    /// Ends `worker`'s claim of an action, taking back `uncount` (0 or 1) of
    /// its attempts (1: the call never started).
    async fn give_back_action(
        &self,
        session_id: &str,
        call_id: &str,
        worker: &str,
        uncount: i32,
    ) -> Result<(), StoreError> {
        self.query(
            "WITH released AS (
                 UPDATE agent.queue_actions
                 SET claimed_by = NULL, expires_at = NULL, attempts = greatest(attempts - $4, 0)
                 WHERE session_id = $1 AND call_id = $2 AND claimed_by = $3 RETURNING 1)
             SELECT pg_notify('agent_work', 'action') FROM released",
            &[&session_id, &call_id, &worker, &uncount],
        )
        .await
        .map(|_| ())
    }
}

#[async_trait]
impl WorkQueue for PostgresStore {
    async fn enqueue_session(&self, session_id: &str) -> Result<(), StoreError> {
        self.query(
            "WITH queued AS (
                 INSERT INTO agent.queue_sessions (session_id, generation) VALUES ($1, 1)
                 ON CONFLICT (session_id) DO UPDATE SET generation = agent.queue_sessions.generation + 1
                 RETURNING 1)
             SELECT pg_notify('agent_work', 'session') FROM queued",
            &[&session_id],
        )
        .await
        .map(|_| ())
    }

    async fn claim_session(
        &self,
        worker: &str,
        ttl: Duration,
    ) -> Result<Option<SessionClaim>, StoreError> {
        let rows = self
            .query(
                "UPDATE agent.queue_sessions q
                 SET claimed_by = $1, claimed_generation = q.generation,
                     expires_at = now() + make_interval(secs => $2), renewed_at = now()
                 WHERE q.session_id = (
                     SELECT session_id FROM agent.queue_sessions
                     WHERE claimed_by IS NULL OR expires_at <= now()
                     ORDER BY queued_at, session_id
                     FOR UPDATE SKIP LOCKED LIMIT 1)
                 RETURNING q.session_id, q.generation",
                &[&worker, &seconds(ttl)],
            )
            .await?;
        rows.first()
            .map(|row| {
                Ok(SessionClaim {
                    session_id: column(row, 0)?,
                    generation: u64::try_from(column::<i64>(row, 1)?).unwrap_or(0),
                })
            })
            .transpose()
    }

    async fn finish_session(&self, claim: &SessionClaim, worker: &str) -> Result<(), StoreError> {
        // The row is locked first and both branches decide on the generation it
        // holds then. Deciding in each branch on its own scan went wrong: under
        // READ COMMITTED a branch scans the statement's snapshot, so an enqueue
        // committing meanwhile made the DELETE skip the row (its generation had
        // moved on) while the UPDATE had never selected it (it had not moved in
        // the snapshot), and the row stayed claimed by a live worker forever.
        let generation = i64::try_from(claim.generation).unwrap_or(i64::MAX);
        self.query(
            "WITH current AS (
                 SELECT generation FROM agent.queue_sessions
                 WHERE session_id = $1 AND claimed_by = $2 FOR UPDATE),
             done AS (
                 DELETE FROM agent.queue_sessions q USING current
                 WHERE q.session_id = $1 AND current.generation = $3 RETURNING 1),
             kept AS (
                 UPDATE agent.queue_sessions q SET claimed_by = NULL, expires_at = NULL
                 FROM current
                 WHERE q.session_id = $1 AND current.generation <> $3 RETURNING 1)
             SELECT pg_notify('agent_work', 'session') FROM kept",
            &[&claim.session_id, &worker, &generation],
        )
        .await
        .map(|_| ())
    }

    async fn release_session(&self, session_id: &str, worker: &str) -> Result<(), StoreError> {
        self.query(
            "WITH released AS (
                 UPDATE agent.queue_sessions SET claimed_by = NULL, expires_at = NULL
                 WHERE session_id = $1 AND claimed_by = $2 RETURNING 1)
             SELECT pg_notify('agent_work', 'session') FROM released",
            &[&session_id, &worker],
        )
        .await
        .map(|_| ())
    }

    async fn enqueue_actions(&self, actions: &[QueuedAction]) -> Result<(), StoreError> {
        if actions.is_empty() {
            return Ok(());
        }
        let (mut sessions, mut calls, mut tools, mut arguments, mut idempotent) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for action in actions {
            sessions.push(action.session_id.clone());
            calls.push(action.call.id.clone());
            tools.push(action.call.tool_name.clone());
            arguments.push(action.call.arguments.to_string());
            idempotent.push(action.idempotent);
        }
        self.query(
            "WITH queued AS (
                 INSERT INTO agent.queue_actions (session_id, call_id, tool_name, arguments, idempotent)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::boolean[])
                 ON CONFLICT (session_id, call_id) DO NOTHING RETURNING 1)
             SELECT pg_notify('agent_work', 'action') WHERE EXISTS (SELECT 1 FROM queued)",
            &[&sessions, &calls, &tools, &arguments, &idempotent],
        )
        .await
        .map(|_| ())
    }

    async fn claim_action(
        &self,
        worker: &str,
        tools: Option<&[String]>,
        ttl: Duration,
    ) -> Result<Option<ActionClaim>, StoreError> {
        let tools: Option<Vec<String>> = tools.map(<[String]>::to_vec);
        let rows = self
            .query(
                "UPDATE agent.queue_actions q
                 SET attempts = q.attempts + 1, claimed_by = $1,
                     expires_at = now() + make_interval(secs => $2), renewed_at = now()
                 WHERE (q.session_id, q.call_id) = (
                     SELECT session_id, call_id FROM agent.queue_actions
                     WHERE (claimed_by IS NULL OR expires_at <= now())
                       AND ($3::text[] IS NULL OR tool_name = ANY ($3))
                     ORDER BY queued_at, session_id, call_id
                     FOR UPDATE SKIP LOCKED LIMIT 1)
                 RETURNING q.session_id, q.call_id, q.tool_name, q.arguments, q.idempotent, q.attempts",
                &[&worker, &seconds(ttl), &tools],
            )
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let arguments: &str = column(row, 3)?;
        Ok(Some(ActionClaim {
            action: QueuedAction {
                session_id: column(row, 0)?,
                call: ToolCall {
                    id: column(row, 1)?,
                    tool_name: column(row, 2)?,
                    arguments: serde_json::from_str(arguments).unwrap_or_default(),
                },
                idempotent: column(row, 4)?,
            },
            attempt: u32::try_from(column::<i32>(row, 5)?).unwrap_or(1),
        }))
    }

    async fn finish_action(&self, session_id: &str, call_id: &str) -> Result<(), StoreError> {
        self.query(
            "DELETE FROM agent.queue_actions WHERE session_id = $1 AND call_id = $2",
            &[&session_id, &call_id],
        )
        .await
        .map(|_| ())
    }

    async fn release_action(
        &self,
        session_id: &str,
        call_id: &str,
        worker: &str,
    ) -> Result<(), StoreError> {
        self.give_back_action(session_id, call_id, worker, 1).await
    }

    async fn abandon_action(
        &self,
        session_id: &str,
        call_id: &str,
        worker: &str,
    ) -> Result<(), StoreError> {
        self.give_back_action(session_id, call_id, worker, 0).await
    }

    async fn heartbeat(&self, worker: &str, ttl: Duration) -> Result<(), StoreError> {
        self.query(
            "WITH sessions AS (
                 UPDATE agent.queue_sessions
                 SET expires_at = now() + make_interval(secs => $2), renewed_at = now()
                 WHERE claimed_by = $1 RETURNING 1),
             actions AS (
                 UPDATE agent.queue_actions
                 SET expires_at = now() + make_interval(secs => $2), renewed_at = now()
                 WHERE claimed_by = $1 RETURNING 1)
             SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM actions)",
            &[&worker, &seconds(ttl)],
        )
        .await
        .map(|_| ())
    }

    async fn wait_for_work(&self, timeout: Duration) {
        self.start_listening();
        let _ = tokio::time::timeout(timeout.min(POLL), self.work.notified()).await;
    }

    async fn queue_view(&self) -> Result<QueueView, StoreError> {
        let sessions = self
            .query(
                "SELECT session_id, (EXTRACT(EPOCH FROM queued_at) * 1000)::bigint,
                        CASE WHEN expires_at > now() THEN claimed_by END
                 FROM agent.queue_sessions ORDER BY queued_at, session_id",
                &[],
            )
            .await?
            .iter()
            .map(|row| {
                Ok(QueuedSessionView {
                    session_id: column(row, 0)?,
                    queued_at: u64::try_from(column::<i64>(row, 1)?).unwrap_or(0),
                    claimed_by: column(row, 2)?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let actions = self
            .query(
                "SELECT session_id, call_id, tool_name, attempts,
                        CASE WHEN expires_at > now() THEN claimed_by END,
                        CASE WHEN expires_at > now()
                             THEN (EXTRACT(EPOCH FROM now() - renewed_at) * 1000)::bigint END
                 FROM agent.queue_actions ORDER BY queued_at, session_id, call_id",
                &[],
            )
            .await?
            .iter()
            .map(|row| {
                Ok(QueuedActionView {
                    session_id: column(row, 0)?,
                    call_id: column(row, 1)?,
                    tool_name: column(row, 2)?,
                    attempts: u32::try_from(column::<i32>(row, 3)?).unwrap_or(0),
                    claimed_by: column(row, 4)?,
                    lease_age_ms: column::<Option<i64>>(row, 5)?
                        .map(|age| u64::try_from(age).unwrap_or(0)),
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(QueueView { sessions, actions })
    }
}
