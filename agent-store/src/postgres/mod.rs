//! `PostgresStore`: the `EventStore` on a PostgreSQL database that many processes
//! and machines share.
//!
//! Appends are grouped ([`writer`]): all appends waiting at a moment commit in one
//! call and one transaction, each acknowledged after that commit, with
//! `synchronous_commit` on for [`Durability::Full`](agent_core::store::Durability::Full).
//! Conflicts are a compare-and-set on the session's row, so a stale append writes
//! nothing. Reads, leases ([`lease`]) and snapshots use a connection pool. Every
//! operation is bounded in time; no message names a password.

mod index;
mod lease;
mod lease_writer;
mod passfile;
mod queue;
pub(crate) mod schema;
mod target;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use agent_core::event::{Event, EventKind, SCHEMA_VERSION as EVENT_SCHEMA_VERSION};
use agent_core::store::{Append, EventLog, LeaseStore, SnapshotStore, StoreError};
use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use serde_json::Value;
use tokio::sync::{Mutex, mpsc, oneshot};
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};

use self::lease_writer::{LeaseOp, write_leases};
pub use self::target::{DEFAULT_POOL_MAX, PostgresTarget};
use self::writer::{WRITERS, write_groups};
use crate::error::OpenError;
use crate::process::ProcessIdentity;
use crate::rows::PendingAppend;
use crate::stats::CommitStats;

/// Longest wait for one statement or one connection from the pool.
pub(crate) const OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a pooled connection may stay unused before it is closed, so an
/// idle process holds few connections.
const IDLE_CONNECTION: Duration = Duration::from_secs(30);

/// An event store in a PostgreSQL database.
pub struct PostgresStore {
    target: PostgresTarget,
    pool: Pool,
    queue: mpsc::UnboundedSender<PendingAppend>,
    leases: mpsc::UnboundedSender<LeaseOp>,
    me: ProcessIdentity,
    stats: Arc<CommitStats>,
    /// Woken by `NOTIFY agent_work`, once a worker started listening.
    work: Arc<tokio::sync::Notify>,
    listening: std::sync::Once,
    /// What the listening connection did so far.
    listened: Arc<queue::Listened>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.target)
            .finish()
    }
}

/// A driver error with what the server said.
pub(crate) fn detail(err: &tokio_postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => {
            let mut text = err.to_string();
            let mut source = std::error::Error::source(err);
            while let Some(cause) = source {
                text.push_str(": ");
                text.push_str(&cause.to_string());
                source = cause.source();
            }
            text
        }
    }
}

/// Opens one connection up front, with the group statements prepared, so the
/// first append does not pay for connecting; the others open when needed. A
/// connection that fails here is simply opened again later.
async fn warm(pool: &Pool) {
    if let Ok(client) = pool.get().await {
        for statement in [writer::APPEND_GROUP, lease_writer::TAKE, lease_writer::GIVE] {
            if client.prepare_cached(statement).await.is_err() {
                return;
            }
        }
    }
}

/// Closes pooled connections unused for [`IDLE_CONNECTION`], for as long as
/// the pool lives.
async fn close_idle(pool: deadpool_postgres::WeakPool) {
    loop {
        tokio::time::sleep(IDLE_CONNECTION / 2).await;
        let Some(pool) = pool.upgrade() else {
            return;
        };
        pool.retain(|_, metrics| metrics.last_used() < IDLE_CONNECTION);
    }
}

impl PostgresStore {
    /// Connects to `target`. With `create`, the store's schema is created or
    /// migrated (under an advisory lock, so racing processes take turns); without
    /// it a database with no store is [`OpenError::Missing`]. A database that is
    /// not ours, or was written by a newer version, is refused unchanged.
    pub async fn connect(target: PostgresTarget, create: bool) -> Result<Self, OpenError> {
        let unreachable = |what: String| {
            OpenError::Unreachable(
                target.scrub(&format!("cannot reach PostgreSQL at {target}: {what}")),
            )
        };
        let (mut client, connection) =
            tokio::time::timeout(OPERATION_TIMEOUT, target.config().connect(NoTls))
                .await
                .map_err(|_| {
                    unreachable(format!("no answer within {}s", OPERATION_TIMEOUT.as_secs()))
                })?
                .map_err(|err| unreachable(detail(&err)))?;
        let driver = tokio::spawn(connection);
        let prepared = if create {
            schema::migrate(&mut client).await
        } else {
            schema::check_existing(&client, &target.to_string()).await
        };
        drop(client);
        let _ = driver.await;
        prepared.map_err(|err| match err {
            OpenError::Unreadable(message) => {
                OpenError::Unreadable(target.scrub(&format!("{target}: {message}")))
            }
            other => other,
        })?;
        let manager = Manager::from_config(
            target.config().clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(target.pool_max())
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(OPERATION_TIMEOUT))
            .create_timeout(Some(OPERATION_TIMEOUT))
            .build()
            .map_err(|err| unreachable(err.to_string()))?;
        warm(&pool).await;
        tokio::spawn(close_idle(pool.weak()));
        let (queue, waiting) = mpsc::unbounded_channel();
        let waiting = Arc::new(Mutex::new(waiting));
        let stats = Arc::new(CommitStats::default());
        for _ in 0..WRITERS {
            tokio::spawn(write_groups(
                pool.clone(),
                Arc::clone(&waiting),
                Arc::clone(&stats),
                target.to_string(),
            ));
        }
        let me = ProcessIdentity::current();
        let (leases, lease_ops) = mpsc::unbounded_channel();
        tokio::spawn(write_leases(pool.clone(), lease_ops, me.clone()));
        Ok(Self {
            target,
            pool,
            queue,
            leases,
            me,
            stats,
            work: Arc::default(),
            listening: std::sync::Once::new(),
            listened: Arc::default(),
        })
    }

    /// Starts listening for wake-ups, once.
    fn start_listening(&self) {
        self.listening.call_once(|| {
            tokio::spawn(queue::listen(
                self.target.config().clone(),
                Arc::downgrade(&self.work),
                Arc::clone(&self.listened),
            ));
        });
    }

    /// Where this store is, for people (no password).
    pub fn target(&self) -> &PostgresTarget {
        &self.target
    }

    /// What this store has committed so far.
    pub fn stats(&self) -> &CommitStats {
        &self.stats
    }

    /// How many times this store started listening for work (`LISTEN`; more
    /// than once when the connection broke and was opened again) and how many
    /// wake-ups (`NOTIFY`) it received: 0 and 0 until a worker first waits for
    /// work.
    pub fn listened(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.listened.listens.load(Relaxed),
            self.listened.notifications.load(Relaxed),
        )
    }

    /// Runs one statement on a pooled connection, bounded in time.
    async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let failed = |message: String| {
            StoreError::Backend(
                self.target
                    .scrub(&format!("PostgreSQL at {}: {message}", self.target)),
            )
        };
        let work = async {
            let client = self.pool.get().await.map_err(|err| err.to_string())?;
            let statement = client
                .prepare_cached(sql)
                .await
                .map_err(|err| detail(&err))?;
            client
                .query(&statement, params)
                .await
                .map_err(|err| detail(&err))
        };
        match tokio::time::timeout(OPERATION_TIMEOUT, work).await {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(message)) => Err(failed(message)),
            Err(_) => Err(failed(format!(
                "no answer within {}s",
                OPERATION_TIMEOUT.as_secs()
            ))),
        }
    }

    async fn events_after(&self, session_id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let rows = self
            .query(
                "SELECT seq, at, schema_version, body FROM agent.events
                 WHERE session_id = $1 AND seq > $2 ORDER BY seq",
                &[&session_id, &after],
            )
            .await?;
        let mut events = Vec::with_capacity(rows.len());
        for row in &rows {
            events.push(event_of(session_id, row)?);
        }
        if events.is_empty()
            && self
                .query(
                    "SELECT 1 FROM agent.sessions WHERE session_id = $1",
                    &[&session_id],
                )
                .await?
                .is_empty()
        {
            return Err(StoreError::NotFound(session_id.to_owned()));
        }
        Ok(events)
    }
}

fn column<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    index: usize,
) -> Result<T, StoreError> {
    row.try_get(index)
        .map_err(|err| StoreError::Backend(format!("an unreadable row: {}", detail(&err))))
}

fn event_of(session_id: &str, row: &Row) -> Result<Event, StoreError> {
    let seq: i64 = column(row, 0)?;
    let at: i64 = column(row, 1)?;
    let schema_version: i32 = column(row, 2)?;
    let body: &str = column(row, 3)?;
    let schema_version = u32::try_from(schema_version).unwrap_or(u32::MAX);
    if schema_version > EVENT_SCHEMA_VERSION {
        return Err(StoreError::Corrupt(format!(
            "event {seq} of session `{session_id}` has schema version {schema_version}, newer than this build's {EVENT_SCHEMA_VERSION}; upgrade agent"
        )));
    }
    let kind: EventKind = serde_json::from_str(body).map_err(|err| {
        StoreError::Corrupt(format!(
            "event {seq} of session `{session_id}` cannot be read: {err}"
        ))
    })?;
    Ok(Event {
        schema_version,
        session_id: session_id.to_owned(),
        seq: u64::try_from(seq).unwrap_or(0),
        at: u64::try_from(at).unwrap_or(0),
        kind,
    })
}

#[async_trait]
impl EventLog for PostgresStore {
    async fn check_writable(&self) -> Result<(), StoreError> {
        let rows = self.query("SELECT pg_is_in_recovery()", &[]).await?;
        match rows.first().map(|row| column::<bool>(row, 0)).transpose()? {
            Some(true) => Err(StoreError::Unwritable(
                self.target
                    .scrub(&format!("{} is a read-only standby", self.target)),
            )),
            _ => Ok(()),
        }
    }

    async fn append(&self, append: Append<'_>) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        let pending = PendingAppend::new(&append, "postgres", reply)?;
        let gone = || StoreError::Backend(format!("the writers of {} stopped", self.target));
        self.queue.send(pending).map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    async fn load(&self, session_id: &str) -> Result<Vec<Event>, StoreError> {
        self.events_after(session_id, 0).await
    }

    async fn load_after(&self, session_id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
        self.events_after(session_id, after).await
    }
}

#[async_trait]
impl LeaseStore for PostgresStore {
    async fn acquire_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.take_lease(session_id, owner, ttl).await
    }

    async fn renew_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<u64, StoreError> {
        self.extend_lease(session_id, owner, ttl).await
    }

    async fn release_lease(&self, session_id: &str, owner: &str) -> Result<(), StoreError> {
        self.give_lease(session_id, owner).await
    }
}

#[async_trait]
impl SnapshotStore for PostgresStore {
    async fn save_snapshot(
        &self,
        session_id: &str,
        seq: u64,
        snapshot: &Value,
    ) -> Result<(), StoreError> {
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        let body = snapshot.to_string();
        self.query(
            "INSERT INTO agent.snapshots AS s (session_id, seq, body) VALUES ($1, $2, $3)
             ON CONFLICT (session_id) DO UPDATE SET seq = EXCLUDED.seq, body = EXCLUDED.body
             WHERE s.seq < EXCLUDED.seq",
            &[&session_id, &seq, &body],
        )
        .await
        .map(|_| ())
    }

    async fn load_snapshot(&self, session_id: &str) -> Result<Option<(u64, Value)>, StoreError> {
        let rows = self
            .query(
                "SELECT seq, body FROM agent.snapshots WHERE session_id = $1",
                &[&session_id],
            )
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let seq: i64 = column(row, 0)?;
        let body: &str = column(row, 1)?;
        Ok(serde_json::from_str(body)
            .ok()
            .map(|value| (u64::try_from(seq).unwrap_or(0), value)))
    }
}
