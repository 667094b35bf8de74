//! Leases in an SQLite store: a row per session naming its holder's process, so
//! a dead, zombie, rebooted or reused-PID holder is taken over at once.

use std::time::Duration;

use crate::support::ttl_millis;
use agent_core::event::now_millis;
use agent_core::store::StoreError;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::sql_error;
use crate::process::{Liveness, ProcessIdentity};

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

pub(super) fn acquire(
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

pub(super) fn renew(
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
