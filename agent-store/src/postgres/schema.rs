//! The PostgreSQL schema: everything lives in the schema `agent`, versioned in
//! `agent.meta`. Opening migrates under an advisory lock, so processes that open
//! a new database at once take turns; a database whose `agent` schema was not
//! written by us, or by a newer version, is refused before anything changes.

use tokio_postgres::{Client, GenericClient};

use super::detail;

use crate::error::OpenError;

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = 2;

/// The advisory lock every migration holds (an arbitrary constant).
const MIGRATION_LOCK: i64 = 0x6167_656e_745f_7631;

/// What `agent.meta` says the store is.
const STORE_NAME: &str = "agent-runtime";

/// Migration `n` (1-based) brings the schema from version `n - 1` to `n`.
const MIGRATIONS: &[&str] = &[
    // 1: sessions, events (one row each), leases expiring by the server's clock
    // (unlogged: a lease is not worth a WAL write; if the server crashes, every
    // holder finds its lease gone at its next renewal and stops), and snapshots.
    r#"
    CREATE TABLE agent.sessions (
        session_id text PRIMARY KEY,
        task       text NOT NULL,
        status     text NOT NULL,
        last_seq   bigint NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL
    );
    CREATE INDEX sessions_by_creation ON agent.sessions (created_at DESC, session_id DESC);
    CREATE TABLE agent.events (
        session_id     text NOT NULL,
        seq            bigint NOT NULL,
        at             bigint NOT NULL,
        schema_version integer NOT NULL,
        kind           text NOT NULL,
        body           text NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE UNLOGGED TABLE agent.leases (
        session_id  text PRIMARY KEY,
        owner       text NOT NULL,
        host        text NOT NULL,
        boot_id     text NOT NULL,
        pid         bigint NOT NULL,
        start_ticks bigint NOT NULL,
        expires_at  timestamptz NOT NULL
    );
    CREATE TABLE agent.snapshots (
        session_id text PRIMARY KEY,
        seq        bigint NOT NULL,
        body       text NOT NULL
    );
    "#,
    // 2: the work queue: sessions waiting for a worker, tool calls waiting to run;
    // claims expire by the server's clock.
    r#"
    CREATE TABLE agent.queue_sessions (
        session_id         text PRIMARY KEY,
        generation         bigint NOT NULL,
        queued_at          timestamptz NOT NULL DEFAULT now(),
        claimed_by         text,
        claimed_generation bigint,
        expires_at         timestamptz,
        renewed_at         timestamptz
    );
    CREATE TABLE agent.queue_actions (
        session_id  text NOT NULL,
        call_id     text NOT NULL,
        tool_name   text NOT NULL,
        arguments   text NOT NULL,
        idempotent  boolean NOT NULL,
        attempts    integer NOT NULL DEFAULT 0,
        queued_at   timestamptz NOT NULL DEFAULT now(),
        claimed_by  text,
        expires_at  timestamptz,
        renewed_at  timestamptz,
        PRIMARY KEY (session_id, call_id)
    );
    "#,
];

/// What is in the database before we change anything.
enum Found {
    /// No schema `agent`.
    Nothing,
    /// Our store at this version.
    Store(u32),
}

async fn inspect(client: &impl GenericClient) -> Result<Found, OpenError> {
    let row = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'agent'),
                    to_regclass('agent.meta') IS NOT NULL",
            &[],
        )
        .await
        .map_err(|err| {
            OpenError::Unreadable(format!("cannot inspect the database: {}", detail(&err)))
        })?;
    let (schema, meta): (bool, bool) = (row.get(0), row.get(1));
    if !schema {
        return Ok(Found::Nothing);
    }
    let not_ours = || {
        OpenError::NotAStore(
            "the database has a schema `agent` that an agent store did not create".into(),
        )
    };
    if !meta {
        return Err(not_ours());
    }
    let rows = client
        .query("SELECT key, value FROM agent.meta", &[])
        .await
        .map_err(|err| {
            OpenError::Unreadable(format!("cannot read agent.meta: {}", detail(&err)))
        })?;
    let value = |key: &str| {
        rows.iter()
            .find(|row| row.get::<_, String>(0) == key)
            .map(|row| row.get::<_, String>(1))
    };
    if value("store").as_deref() != Some(STORE_NAME) {
        return Err(not_ours());
    }
    let version = value("schema_version")
        .and_then(|text| text.parse().ok())
        .ok_or_else(not_ours)?;
    Ok(Found::Store(version))
}

/// Refuses a database this build cannot use, without changing it; `Missing`
/// when there is no store yet.
pub(super) async fn check_existing(
    client: &impl GenericClient,
    shown: &str,
) -> Result<(), OpenError> {
    match inspect(client).await? {
        Found::Nothing => Err(OpenError::Missing(shown.to_owned())),
        Found::Store(version) => compatible(version),
    }
}

fn compatible(version: u32) -> Result<(), OpenError> {
    if version > SCHEMA_VERSION {
        Err(OpenError::Newer {
            found: version,
            supported: SCHEMA_VERSION,
        })
    } else {
        Ok(())
    }
}

/// Creates or migrates the store in one transaction under the migration lock.
pub(super) async fn migrate(client: &mut Client) -> Result<(), OpenError> {
    let failed = |what: &str, err: tokio_postgres::Error| {
        OpenError::Unreadable(format!("cannot {what}: {}", detail(&err)))
    };
    let tx = client
        .transaction()
        .await
        .map_err(|err| failed("start the migration", err))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(|err| failed("take the migration lock", err))?;
    let version = match inspect(&tx).await? {
        Found::Nothing => {
            tx.batch_execute(
                "CREATE SCHEMA agent;
                 CREATE TABLE agent.meta (key text PRIMARY KEY, value text NOT NULL);",
            )
            .await
            .map_err(|err| failed("create the schema `agent`", err))?;
            tx.execute(
                "INSERT INTO agent.meta (key, value) VALUES ('store', $1), ('schema_version', '0')",
                &[&STORE_NAME],
            )
            .await
            .map_err(|err| failed("write agent.meta", err))?;
            0
        }
        Found::Store(version) => {
            compatible(version)?;
            version
        }
    };
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tx.batch_execute(sql)
            .await
            .map_err(|err| OpenError::Migration {
                version: index as u32 + 1,
                message: detail(&err),
            })?;
    }
    if version < SCHEMA_VERSION {
        tx.execute(
            "UPDATE agent.meta SET value = $1 WHERE key = 'schema_version'",
            &[&SCHEMA_VERSION.to_string()],
        )
        .await
        .map_err(|err| failed("record the schema version", err))?;
    }
    tx.commit()
        .await
        .map_err(|err| failed("commit the migration", err))
}
