//! `SqliteStore`: the embedded, durable `EventStore`.
//!
//! WAL mode, `synchronous=FULL` for durable commits, a busy timeout for other
//! processes, `BEGIN IMMEDIATE` for every write. All writes of one store go through
//! one writer thread, which commits the appends waiting for it in one transaction
//! (a conflict is found before its append writes anything, so it aborts only
//! that append) and acknowledges each caller only after that commit: group
//! commit. Reads use their own connection.

mod index;
mod lease;
mod queue;
mod read;
pub(crate) mod schema;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use agent_core::event::Event;
use agent_core::store::{Append, EventLog, LeaseStore, SnapshotStore, StoreError};
use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde_json::Value;
use tokio::sync::oneshot;

use self::lease::{acquire, renew};
use self::read::load_events;
use self::schema::{check_compatible, migrate};
use self::writer::{Job, write_loop};
use crate::error::OpenError;
use crate::process::ProcessIdentity;
use crate::rows::PendingAppend;
pub use crate::stats::CommitStats;

/// How long a write waits for another process's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// An event store in one SQLite file.
pub struct SqliteStore {
    path: PathBuf,
    writer: mpsc::Sender<Job>,
    reader: Arc<Mutex<Connection>>,
    me: Arc<ProcessIdentity>,
    stats: Arc<CommitStats>,
    /// Wakes this process's workers when work is queued here.
    work: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

impl SqliteStore {
    /// Opens the store at `path`, creating the file if needed and migrating it to
    /// the current schema. A missing parent directory is created when its own
    /// parent exists (the default `.agent/agent.db`); deeper missing directories
    /// are refused, as a mistyped path should be, rather than created up to `/`. A
    /// file that is not an agent store, or was written by a newer version, is
    /// refused unmodified.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let path = path.as_ref();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_store_directory(parent)?;
        }
        Self::open_with(path, OpenFlags::SQLITE_OPEN_CREATE)
    }

    /// Opens an existing store; fails with [`OpenError::Missing`] if there is none.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Self, OpenError> {
        let path = path.as_ref();
        if !path.exists() {
            return Err(OpenError::Missing(path.display().to_string()));
        }
        Self::open_with(path, OpenFlags::empty())
    }

    fn open_with(path: &Path, extra: OpenFlags) -> Result<Self, OpenError> {
        let mut writer = connect(path, extra).map_err(|err| unwritable_or(path, err))?;
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
            work: Arc::default(),
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

/// `err`, or — when the file exists but cannot be opened for writing (a
/// read-only file system, no permission; SQLite then only says it cannot open
/// it) — the reason it cannot be written.
fn unwritable_or(path: &Path, err: OpenError) -> OpenError {
    if !matches!(err, OpenError::Unreadable(_)) || !path.exists() {
        return err;
    }
    match std::fs::OpenOptions::new().append(true).open(path) {
        Err(io) => OpenError::Unreadable(format!(
            "the store cannot be written: {io}; free space or fix its permissions, then resume"
        )),
        Ok(_) => err,
    }
}

fn connect(path: &Path, extra: OpenFlags) -> Result<Connection, OpenError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | extra;
    let conn = Connection::open_with_flags(path, flags).map_err(OpenError::unreadable)?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(OpenError::unreadable)?;
    check_compatible(&conn)?;
    let mode: String = schema::while_busy(|| {
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
    })
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

/// Creates `dir` if it is missing and its parent exists.
fn create_store_directory(dir: &Path) -> Result<(), OpenError> {
    if dir.is_dir() {
        return Ok(());
    }
    let grandparent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !grandparent.is_dir() {
        return Err(OpenError::Unreadable(format!(
            "directory `{}` does not exist; create it first, or give a store path in an existing directory",
            grandparent.display()
        )));
    }
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(err) => Err(OpenError::Unreadable(format!(
            "cannot create directory `{}`: {err}",
            dir.display()
        ))),
    }
}

pub(super) fn sql_error(err: rusqlite::Error) -> StoreError {
    match err.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
            StoreError::Corrupt(format!("the SQLite file is damaged: {err}"))
        }
        Some(
            rusqlite::ErrorCode::DiskFull
            | rusqlite::ErrorCode::ReadOnly
            | rusqlite::ErrorCode::CannotOpen
            | rusqlite::ErrorCode::PermissionDenied,
        ) => StoreError::Unwritable(err.to_string()),
        _ => StoreError::Backend(err.to_string()),
    }
}

#[async_trait]
impl EventLog for SqliteStore {
    async fn check_writable(&self) -> Result<(), StoreError> {
        if let Some(err) = self.stats.unwritable() {
            return Err(err);
        }
        self.write(|conn| {
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(sql_error)?;
            let version: i64 = tx
                .pragma_query_value(None, "user_version", |row| row.get(0))
                .map_err(sql_error)?;
            tx.pragma_update(None, "user_version", version)
                .map_err(sql_error)?;
            tx.commit().map_err(sql_error)
        })
        .await
    }

    async fn append(&self, append: Append<'_>) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        let job = Job::Append(PendingAppend::new(&append, "sqlite", reply)?);
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
}

#[async_trait]
impl LeaseStore for SqliteStore {
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

#[async_trait]
impl SnapshotStore for SqliteStore {
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
}
