//! The SQLite schema and its versioned migrations, tracked in `PRAGMA user_version`.
//! A database written by a newer version is refused before anything is changed.

use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, TransactionBehavior};

use crate::error::OpenError;

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = 3;

/// Migration `n` (1-based) brings a database from version `n - 1` to `n`.
const MIGRATIONS: &[&str] = &[
    // 1: sessions, their events (deltas only: one row per event) and leases.
    "CREATE TABLE sessions (
         session_id TEXT PRIMARY KEY NOT NULL,
         task       TEXT NOT NULL,
         status     TEXT NOT NULL,
         last_seq   INTEGER NOT NULL,
         created_at INTEGER NOT NULL,
         updated_at INTEGER NOT NULL
     ) STRICT;
     CREATE INDEX sessions_by_creation ON sessions (created_at DESC, session_id DESC);
     CREATE TABLE events (
         session_id     TEXT NOT NULL,
         seq            INTEGER NOT NULL,
         at             INTEGER NOT NULL,
         schema_version INTEGER NOT NULL,
         kind           TEXT NOT NULL,
         body           TEXT NOT NULL,
         PRIMARY KEY (session_id, seq)
     ) STRICT, WITHOUT ROWID;
     CREATE TABLE leases (
         session_id  TEXT PRIMARY KEY NOT NULL,
         owner       TEXT NOT NULL,
         host        TEXT NOT NULL,
         boot_id     TEXT NOT NULL,
         pid         INTEGER NOT NULL,
         start_ticks INTEGER NOT NULL,
         expires_at  INTEGER NOT NULL
     ) STRICT;",
    // 2: snapshots of folded state, a cache (one per session, the newest).
    "CREATE TABLE snapshots (
         session_id TEXT PRIMARY KEY NOT NULL,
         seq        INTEGER NOT NULL,
         body       TEXT NOT NULL
     ) STRICT;",
    // 3: the work queue: sessions waiting for a worker, tool calls waiting to run.
    "CREATE TABLE queue_sessions (
         session_id         TEXT PRIMARY KEY NOT NULL,
         generation         INTEGER NOT NULL,
         queued_at          INTEGER NOT NULL,
         claimed_by         TEXT,
         claimed_generation INTEGER,
         expires_at         INTEGER,
         renewed_at         INTEGER
     ) STRICT;
     CREATE TABLE queue_actions (
         session_id  TEXT NOT NULL,
         call_id     TEXT NOT NULL,
         tool_name   TEXT NOT NULL,
         arguments   TEXT NOT NULL,
         idempotent  INTEGER NOT NULL,
         attempts    INTEGER NOT NULL,
         queued_at   INTEGER NOT NULL,
         claimed_by  TEXT,
         expires_at  INTEGER,
         renewed_at  INTEGER,
         PRIMARY KEY (session_id, call_id)
     ) STRICT, WITHOUT ROWID;",
];

/// The version recorded in the database file.
pub fn stored_version(conn: &Connection) -> Result<u32, rusqlite::Error> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// Refuses databases this build cannot use, without writing anything. The
/// version and the tables are read in one statement, so in one snapshot: a store
/// another process is creating at this moment is seen before or after, never
/// half made.
pub fn check_compatible(conn: &Connection) -> Result<(), OpenError> {
    let (version, table): (u32, Option<String>) = while_busy(|| {
        conn.query_row(
            "SELECT (SELECT user_version FROM pragma_user_version),
                    (SELECT name FROM sqlite_master WHERE type = 'table' LIMIT 1)",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
    })
    .map_err(OpenError::unreadable)?;
    if version > SCHEMA_VERSION {
        return Err(OpenError::Newer {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    match table {
        Some(table) if version == 0 => Err(OpenError::NotAStore(format!(
            "it is an SQLite database of something else (it has a table `{table}`)"
        ))),
        _ => Ok(()),
    }
}

/// Applies every migration the database lacks, in one transaction.
pub fn migrate(conn: &mut Connection) -> Result<(), OpenError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(OpenError::unreadable)?;
    let version = stored_version(&tx).map_err(OpenError::unreadable)?;
    if version > SCHEMA_VERSION {
        return Err(OpenError::Newer {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if version == SCHEMA_VERSION {
        // Up to date: nothing is written, so a store on a full or read-only disk
        // still opens for reading.
        return tx.rollback().map_err(OpenError::unreadable);
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.execute_batch(sql).map_err(|err| OpenError::Migration {
            version: index as u32 + 1,
            message: err.to_string(),
        })?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)
        .map_err(OpenError::unreadable)?;
    tx.commit().map_err(OpenError::unreadable)
}

/// How long opening a store waits out other processes that open or create it.
const OPENING_WAIT: Duration = Duration::from_secs(10);

/// Runs `op` again while the database is busy or locked, up to [`OPENING_WAIT`]:
/// while a new store is created, SQLite reports some lock conflicts at once
/// instead of waiting in its busy handler (a journal mode change, a read of a
/// file being initialised).
pub fn while_busy<T>(mut op: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = Instant::now() + OPENING_WAIT;
    loop {
        match op() {
            Err(rusqlite::Error::SqliteFailure(failure, _))
                if matches!(
                    failure.code,
                    ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked
                ) && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_1_store_is_migrated_in_place_keeping_its_rows() {
        let path = std::env::temp_dir().join(format!("schema-migrate-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut conn = Connection::open(&path).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute(
            "INSERT INTO sessions VALUES ('s', 'task', 'running', 1, 0, 0)",
            [],
        )
        .unwrap();
        check_compatible(&conn).unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(stored_version(&conn).unwrap(), SCHEMA_VERSION);
        let kept: String = conn
            .query_row(
                "SELECT task FROM sessions WHERE session_id = 's'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(kept, "task");
        conn.execute("INSERT INTO snapshots VALUES ('s', 1, '{}')", [])
            .unwrap();
        migrate(&mut conn).unwrap();
        drop(conn);
        let _ = std::fs::remove_file(&path);
    }
}
