//! The writer thread of an SQLite store: every write goes through it. It takes
//! whatever jobs are waiting, commits the appends among them in one transaction
//! and acknowledges each caller only after that commit: group commit. An
//! append's conflict is found before it writes anything, so it aborts only
//! itself; any other error fails the whole group, which writes nothing. Callers encode
//! their events before they queue them ([`EventRow`]), so the thread only runs SQL.

use std::sync::mpsc;

use agent_core::store::{Durability, StoreError};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::rows::PendingAppend;
use crate::stats::CommitStats;

/// Most appends committed in one transaction.
const MAX_GROUP: usize = 512;

/// Work for the writer thread.
pub(super) enum Job {
    Append(PendingAppend),
    Run(Box<dyn FnOnce(&mut Connection) + Send>),
}

/// The writer thread: takes whatever jobs are waiting, commits the appends among
/// them together, runs other jobs in order.
pub(super) fn write_loop(mut conn: Connection, jobs: &mpsc::Receiver<Job>, stats: &CommitStats) {
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

fn commit_group(conn: &mut Connection, group: Vec<PendingAppend>, stats: &CommitStats) {
    if group.is_empty() {
        return;
    }
    let durable = group.iter().any(|job| job.durability == Durability::Full);
    match append_group(conn, &group, durable) {
        Ok(results) => {
            stats.committed(durable);
            for (job, result) in group.into_iter().zip(results) {
                if result.is_ok() {
                    stats.acknowledged();
                }
                let _ = job.reply.send(result);
            }
        }
        Err(err) => {
            let failure = match super::sql_error(err) {
                StoreError::Unwritable(why) => StoreError::Unwritable(why),
                StoreError::Corrupt(why) => StoreError::Corrupt(why),
                other => StoreError::Backend(format!(
                    "the commit failed and nothing was written: {other}"
                )),
            };
            stats.failed(&failure);
            for job in group {
                let _ = job.reply.send(Err(failure.clone()));
            }
        }
    }
}

/// Commits a group of appends in one transaction; each append is all or nothing.
fn append_group(
    conn: &mut Connection,
    group: &[PendingAppend],
    durable: bool,
) -> Result<Vec<Result<(), StoreError>>, rusqlite::Error> {
    conn.pragma_update(None, "synchronous", if durable { "FULL" } else { "NORMAL" })?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut results = Vec::with_capacity(group.len());
    for job in group {
        results.push(append_one(&tx, job)?);
    }
    tx.commit()?;
    Ok(results)
}

/// One append inside the group's transaction: `Ok(Err(_))` is a conflict,
/// found before anything of the append is written.
fn append_one(
    conn: &Connection,
    job: &PendingAppend,
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
    for row in &job.rows {
        insert.execute(params![
            job.session_id,
            row.seq,
            row.at,
            row.schema_version,
            row.kind,
            row.body
        ])?;
    }
    let (Some(first), Some(last)) = (job.rows.first(), job.rows.last()) else {
        return Ok(Ok(()));
    };
    let status = job.status.as_str();
    if job.expected == 0 {
        conn.prepare_cached(
            "INSERT INTO sessions (session_id, task, status, last_seq, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(params![
            job.session_id,
            job.task,
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
