//! `SqliteStore`: the embedded, durable `EventStore`.
//!
//! WAL mode, `synchronous=FULL` for durable commits, a busy timeout for other
//! processes, `BEGIN IMMEDIATE` for every write. All writes of one store go through
//! one writer thread, which commits the appends waiting for it in one transaction
//! (a savepoint per append, so one conflict does not abort the others) and
//! acknowledges each caller only after that commit: group commit. Reads use their
//! own connection.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use agent_core::{
    Durability, Event, EventKind, EventStore, PublicStatus, SCHEMA_VERSION as EVENT_SCHEMA_VERSION,
    SessionSummary, StoreError, check_batch, now_millis, started_task, ttl_millis,
};
use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::error::OpenError;
use crate::process::{Liveness, ProcessIdentity};
use crate::schema::{check_compatible, migrate};

/// How long a write waits for another process's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Most appends committed in one transaction.
const MAX_GROUP: usize = 512;

/// Counters of what a store has committed, for benchmarks.
#[derive(Debug, Default)]
pub struct CommitStats {
    commits: AtomicU64,
    durable_commits: AtomicU64,
    appends: AtomicU64,
}

impl CommitStats {
    /// Transactions committed.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Transactions committed with `synchronous=FULL` (one WAL fsync each).
    pub fn durable_commits(&self) -> u64 {
        self.durable_commits.load(Ordering::Relaxed)
    }

    /// Appends acknowledged.
    pub fn appends(&self) -> u64 {
        self.appends.load(Ordering::Relaxed)
    }
}

/// An append waiting for the writer thread.
struct AppendJob {
    session_id: String,
    expected: u64,
    events: Vec<Event>,
    durability: Durability,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

/// Work for the writer thread.
enum Job {
    Append(AppendJob),
    Run(Box<dyn FnOnce(&mut Connection) + Send>),
}

/// An event store in one SQLite file.
pub struct SqliteStore {
    path: PathBuf,
    writer: mpsc::Sender<Job>,
    reader: Arc<Mutex<Connection>>,
    me: Arc<ProcessIdentity>,
    stats: Arc<CommitStats>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

impl SqliteStore {
    /// Opens the store at `path`, creating the file (and its directory) if needed and
    /// migrating it to the current schema. A file that is not an agent store, or
    /// was written by a newer version, is refused unmodified.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let path = path.as_ref();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|err| {
                OpenError::Unreadable(format!(
                    "cannot create directory `{}`: {err}",
                    parent.display()
                ))
            })?;
        }
        Self::open_with(path, OpenFlags::SQLITE_OPEN_CREATE)
    }

    /// Opens an existing store; fails with [`OpenError::Missing`] if there is none.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let path = path.as_ref();
        if !path.exists() {
            return Err(OpenError::Missing(path.to_owned()));
        }
        Self::open_with(path, OpenFlags::empty())
    }

    fn open_with(path: &Path, extra: OpenFlags) -> Result<Self, OpenError> {
        let mut writer = connect(path, extra)?;
        migrate(&mut writer)?;
        let reader = connect(path, OpenFlags::empty())?;
        let stats = Arc::new(CommitStats::default());
        let (sender, receiver) = mpsc::channel();
        let thread_stats = Arc::clone(&stats);
        std::thread::Builder::new()
            .name("agent-store-writer".into())
            .spawn(move || write_loop(writer, &receiver, &thread_stats))
            .map_err(|err| {
                OpenError::Unreadable(format!("cannot start the store writer: {err}"))
            })?;
        Ok(Self {
            path: path.to_owned(),
            writer: sender,
            reader: Arc::new(Mutex::new(reader)),
            me: Arc::new(ProcessIdentity::current()),
            stats,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Deletes every snapshot; they are a cache, so no result changes.
    pub async fn delete_snapshots(&self) -> Result<(), StoreError> {
        self.write(|conn| {
            conn.execute("DELETE FROM snapshots", [])
                .map(|_| ())
                .map_err(sql_error)
        })
        .await
    }

    /// Moves everything in the write-ahead log into the database file and truncates
    /// the log, leaving the files as a closed store would.
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        self.write(|conn| {
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .map_err(sql_error)
        })
        .await
    }

    /// What this store has committed so far.
    pub fn stats(&self) -> &CommitStats {
        &self.stats
    }

    /// Runs `work` on the writer thread, after the appends queued before it.
    async fn write<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        let job = Job::Run(Box::new(move |conn| {
            let _ = reply.send(work(conn));
        }));
        self.writer.send(job).map_err(|_| writer_gone())?;
        answer.await.map_err(|_| writer_gone())?
    }

    /// Runs `work` on the read connection, off the async threads.
    async fn read<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let reader = Arc::clone(&self.reader);
        tokio::task::spawn_blocking(move || {
            let conn = reader
                .lock()
                .map_err(|_| StoreError::Backend("store reader lock poisoned".into()))?;
            work(&conn)
        })
        .await
        .map_err(|err| StoreError::Backend(format!("store reader failed: {err}")))?
    }
}

fn connect(path: &Path, extra: OpenFlags) -> Result<Connection, OpenError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | extra;
    let conn = Connection::open_with_flags(path, flags).map_err(OpenError::unreadable)?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(OpenError::unreadable)?;
    check_compatible(&conn)?;
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(OpenError::unreadable)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(OpenError::Unreadable(format!(
            "cannot switch `{}` to WAL mode (it stays in `{mode}`)",
            path.display()
        )));
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(OpenError::unreadable)?;
    Ok(conn)
}

fn writer_gone() -> StoreError {
    StoreError::Backend("the store writer thread stopped".into())
}

fn sql_error(err: rusqlite::Error) -> StoreError {
    StoreError::Backend(err.to_string())
}

/// The writer thread: takes whatever jobs are waiting, commits the appends among
/// them together, runs other jobs in order.
fn write_loop(mut conn: Connection, jobs: &mpsc::Receiver<Job>, stats: &CommitStats) {
    while let Ok(first) = jobs.recv() {
        let mut waiting = vec![first];
        while waiting.len() < MAX_GROUP {
            match jobs.try_recv() {
                Ok(job) => waiting.push(job),
                Err(_) => break,
            }
        }
        let mut group = Vec::new();
        for job in waiting {
            match job {
                Job::Append(append) => group.push(append),
                Job::Run(work) => {
                    commit_group(&mut conn, std::mem::take(&mut group), stats);
                    work(&mut conn);
                }
            }
        }
        commit_group(&mut conn, group, stats);
    }
}

fn commit_group(conn: &mut Connection, group: Vec<AppendJob>, stats: &CommitStats) {
    if group.is_empty() {
        return;
    }
    let durable = group.iter().any(|job| job.durability == Durability::Full);
    match append_group(conn, &group, durable) {
        Ok(results) => {
            stats.commits.fetch_add(1, Ordering::Relaxed);
            if durable {
                stats.durable_commits.fetch_add(1, Ordering::Relaxed);
            }
            for (job, result) in group.into_iter().zip(results) {
                if result.is_ok() {
                    stats.appends.fetch_add(1, Ordering::Relaxed);
                }
                let _ = job.reply.send(result);
            }
        }
        Err(err) => {
            let message = format!("the commit failed and nothing was written: {err}");
            for job in group {
                let _ = job.reply.send(Err(StoreError::Backend(message.clone())));
            }
        }
    }
}

/// Commits a group of appends in one transaction; each append is all or nothing.
fn append_group(
    conn: &mut Connection,
    group: &[AppendJob],
    durable: bool,
) -> Result<Vec<Result<(), StoreError>>, rusqlite::Error> {
    conn.pragma_update(None, "synchronous", if durable { "FULL" } else { "NORMAL" })?;
    let mut tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut results = Vec::with_capacity(group.len());
    for job in group {
        let savepoint = tx.savepoint()?;
        match append_one(&savepoint, job)? {
            Ok(()) => {
                savepoint.commit()?;
                results.push(Ok(()));
            }
            Err(conflict) => results.push(Err(conflict)),
        }
    }
    tx.commit()?;
    Ok(results)
}

/// One append inside the group's transaction: `Ok(Err(_))` is a conflict, whose
/// savepoint the caller rolls back.
fn append_one(
    conn: &Connection,
    job: &AppendJob,
) -> Result<Result<(), StoreError>, rusqlite::Error> {
    let actual: u64 = conn
        .prepare_cached("SELECT last_seq FROM sessions WHERE session_id = ?1")?
        .query_row([&job.session_id], |row| row.get(0))
        .optional()?
        .unwrap_or(0);
    if actual != job.expected {
        return Ok(Err(StoreError::Conflict {
            session_id: job.session_id.clone(),
            expected: job.expected,
            actual,
        }));
    }
    let mut insert = conn.prepare_cached(
        "INSERT INTO events (session_id, seq, at, schema_version, kind, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for event in &job.events {
        let body = serde_json::to_string(&event.kind)
            .map_err(|err| rusqlite::Error::ToSqlConversionFailure(Box::new(err)))?;
        insert.execute(params![
            job.session_id,
            event.seq,
            event.at,
            event.schema_version,
            event.kind.name(),
            body
        ])?;
    }
    let (Some(first), Some(last)) = (job.events.first(), job.events.last()) else {
        return Ok(Ok(()));
    };
    let status = PublicStatus::after(&last.kind).as_str();
    if job.expected == 0 {
        conn.prepare_cached(
            "INSERT INTO sessions (session_id, task, status, last_seq, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![
            job.session_id,
            started_task(first).unwrap_or_default(),
            status,
            last.seq,
            first.at,
            last.at
        ])?;
    } else {
        conn.prepare_cached(
            "UPDATE sessions SET status = ?2, last_seq = ?3, updated_at = ?4 WHERE session_id = ?1",
        )?
        .execute(params![job.session_id, status, last.seq, last.at])?;
    }
    Ok(Ok(()))
}

fn load_events(conn: &Connection, session_id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
    let mut statement = conn
        .prepare_cached(
            "SELECT seq, at, schema_version, body FROM events WHERE session_id = ?1 AND seq > ?2 ORDER BY seq",
        )
        .map_err(sql_error)?;
    let rows = statement
        .query_map(params![session_id, after], |row| {
            Ok((
                row.get::<_, u64>(0)?,
                row.get::<_, u64>(1)?,
                row.get::<_, u32>(2)?,
                row.get::<_, String>(3)?,
            ))
        })
        .map_err(sql_error)?;
    let mut events = Vec::new();
    for row in rows {
        let (seq, at, schema_version, body) = row.map_err(sql_error)?;
        if schema_version > EVENT_SCHEMA_VERSION {
            return Err(StoreError::Backend(format!(
                "event {seq} of session `{session_id}` has schema version {schema_version}, newer than this build's {EVENT_SCHEMA_VERSION}; upgrade agent"
            )));
        }
        let kind: EventKind = serde_json::from_str(&body).map_err(|err| {
            StoreError::Backend(format!(
                "event {seq} of session `{session_id}` cannot be read: {err}"
            ))
        })?;
        events.push(Event {
            schema_version,
            session_id: session_id.to_owned(),
            seq,
            at,
            kind,
        });
    }
    if events.is_empty() && !session_exists(conn, session_id)? {
        return Err(StoreError::NotFound(session_id.to_owned()));
    }
    Ok(events)
}

fn session_exists(conn: &Connection, session_id: &str) -> Result<bool, StoreError> {
    conn.prepare_cached("SELECT 1 FROM sessions WHERE session_id = ?1")
        .and_then(|mut select| select.exists([session_id]))
        .map_err(sql_error)
}

/// The lease row of a session.
struct LeaseRow {
    owner: String,
    holder: ProcessIdentity,
    expires_at: u64,
}

fn lease_row(conn: &Connection, session_id: &str) -> Result<Option<LeaseRow>, rusqlite::Error> {
    conn.prepare_cached(
        "SELECT owner, host, boot_id, pid, start_ticks, expires_at FROM leases WHERE session_id = ?1",
    )?
    .query_row([session_id], |row| {
        Ok(LeaseRow {
            owner: row.get(0)?,
            holder: ProcessIdentity {
                host: row.get(1)?,
                boot_id: row.get(2)?,
                pid: row.get(3)?,
                start_ticks: row.get(4)?,
            },
            expires_at: row.get(5)?,
        })
    })
    .optional()
}

fn acquire(
    conn: &mut Connection,
    session_id: &str,
    owner: &str,
    ttl: Duration,
    me: &ProcessIdentity,
) -> Result<(), StoreError> {
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(sql_error)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error)?;
    let now = now_millis();
    if let Some(row) = lease_row(&tx, session_id).map_err(sql_error)?
        && row.owner != owner
        && row.expires_at > now
        && row.holder.liveness(me) != Liveness::Dead
    {
        return Err(StoreError::Leased {
            session_id: session_id.to_owned(),
            holder: format!(
                "pid {} on host {} holds its lease (it expires in {}s unless renewed)",
                row.holder.pid,
                row.holder.host,
                (row.expires_at - now).div_ceil(1000)
            ),
        });
    }
    tx.prepare_cached(
        "INSERT OR REPLACE INTO leases (session_id, owner, host, boot_id, pid, start_ticks, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut insert| {
        insert.execute(params![
            session_id,
            owner,
            me.host,
            me.boot_id,
            me.pid,
            me.start_ticks,
            now + ttl_millis(ttl)
        ])
    })
    .map_err(sql_error)?;
    tx.commit().map_err(sql_error)
}

fn renew(
    conn: &mut Connection,
    session_id: &str,
    owner: &str,
    ttl: Duration,
) -> Result<u64, StoreError> {
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(sql_error)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error)?;
    let renewed = tx
        .prepare_cached("UPDATE leases SET expires_at = ?3 WHERE session_id = ?1 AND owner = ?2")
        .and_then(|mut update| {
            update.execute(params![session_id, owner, now_millis() + ttl_millis(ttl)])
        })
        .map_err(sql_error)?;
    if renewed == 0 {
        return Err(StoreError::LeaseLost(session_id.to_owned()));
    }
    let last_seq: u64 = tx
        .prepare_cached("SELECT last_seq FROM sessions WHERE session_id = ?1")
        .and_then(|mut select| select.query_row([session_id], |row| row.get(0)).optional())
        .map_err(sql_error)?
        .unwrap_or(0);
    tx.commit().map_err(sql_error)?;
    Ok(last_seq)
}

#[async_trait]
impl EventStore for SqliteStore {
    async fn append(
        &self,
        session_id: &str,
        expected_seq: u64,
        events: &[Event],
        durability: Durability,
    ) -> Result<(), StoreError> {
        check_batch(session_id, expected_seq, events)?;
        let (reply, answer) = oneshot::channel();
        let job = Job::Append(AppendJob {
            session_id: session_id.to_owned(),
            expected: expected_seq,
            events: events.to_vec(),
            durability,
            reply,
        });
        self.writer.send(job).map_err(|_| writer_gone())?;
        answer.await.map_err(|_| writer_gone())?
    }

    async fn load(&self, session_id: &str) -> Result<Vec<Event>, StoreError> {
        let session_id = session_id.to_owned();
        self.read(move |conn| load_events(conn, &session_id, 0))
            .await
    }

    async fn load_after(&self, session_id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
        let session_id = session_id.to_owned();
        self.read(move |conn| load_events(conn, &session_id, after))
            .await
    }

    async fn save_snapshot(
        &self,
        session_id: &str,
        seq: u64,
        snapshot: &Value,
    ) -> Result<(), StoreError> {
        let (session_id, body) = (session_id.to_owned(), snapshot.to_string());
        self.write(move |conn| {
            conn.pragma_update(None, "synchronous", "NORMAL")
                .map_err(sql_error)?;
            conn.prepare_cached(
                "INSERT INTO snapshots (session_id, seq, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id) DO UPDATE SET seq = excluded.seq, body = excluded.body
                 WHERE excluded.seq > snapshots.seq",
            )
            .and_then(|mut upsert| upsert.execute(params![session_id, seq, body]))
            .map(|_| ())
            .map_err(sql_error)
        })
        .await
    }

    async fn load_snapshot(&self, session_id: &str) -> Result<Option<(u64, Value)>, StoreError> {
        let session_id = session_id.to_owned();
        self.read(move |conn| {
            let row: Option<(u64, String)> = conn
                .prepare_cached("SELECT seq, body FROM snapshots WHERE session_id = ?1")
                .and_then(|mut select| {
                    select
                        .query_row([&session_id], |row| Ok((row.get(0)?, row.get(1)?)))
                        .optional()
                })
                .map_err(sql_error)?;
            Ok(row
                .and_then(|(seq, body)| serde_json::from_str(&body).ok().map(|value| (seq, value))))
        })
        .await
    }

    async fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError> {
        self.read(|conn| {
            let mut statement = conn
                .prepare_cached(
                    "SELECT session_id, status, task, created_at, updated_at FROM sessions ORDER BY created_at DESC, session_id DESC",
                )
                .map_err(sql_error)?;
            let rows = statement
                .query_map([], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, u64>(3)?,
                        row.get::<_, u64>(4)?,
                    ))
                })
                .map_err(sql_error)?;
            rows.map(|row| {
                let (session_id, status, task, created_at, updated_at) = row.map_err(sql_error)?;
                let status = status.parse().map_err(|err| {
                    StoreError::Backend(format!("session `{session_id}`: {err}"))
                })?;
                Ok(SessionSummary {
                    session_id,
                    status,
                    task,
                    created_at,
                    updated_at,
                })
            })
            .collect()
        })
        .await
    }

    async fn acquire_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let (session_id, owner, me) = (
            session_id.to_owned(),
            owner.to_owned(),
            Arc::clone(&self.me),
        );
        self.write(move |conn| acquire(conn, &session_id, &owner, ttl, &me))
            .await
    }

    async fn renew_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<u64, StoreError> {
        let (session_id, owner) = (session_id.to_owned(), owner.to_owned());
        self.write(move |conn| renew(conn, &session_id, &owner, ttl))
            .await
    }

    async fn release_lease(&self, session_id: &str, owner: &str) -> Result<(), StoreError> {
        let (session_id, owner) = (session_id.to_owned(), owner.to_owned());
        self.write(move |conn| {
            conn.prepare_cached("DELETE FROM leases WHERE session_id = ?1 AND owner = ?2")
                .and_then(|mut delete| delete.execute([&session_id, &owner]))
                .map(|_| ())
                .map_err(sql_error)
        })
        .await
    }
}
