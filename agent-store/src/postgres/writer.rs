//! Group commit on PostgreSQL: appends wait in one queue; a few writer tasks
//! each take every append waiting at that moment and commit them with one call
//! of `agent.append_batch` — one round trip and one commit for the whole group —
//! then acknowledge each append after that commit. While one group commits, the
//! next gathers. A group whose connection breaks is retried on a new one a few
//! times: an append that had committed then reads as a conflict (its writer
//! reloads and sees its own events), one that had not is written once.

use std::sync::Arc;
use std::time::Duration;

use agent_core::store::{Durability, StoreError};
use deadpool_postgres::Pool;
use tokio::sync::{Mutex, mpsc};

use super::{OPERATION_TIMEOUT, detail};
use crate::rows::PendingAppend;
use crate::stats::CommitStats;

/// One group of appends in one statement (and so one transaction): append `i`
/// writes its events only if its session's last seq is `expected[i]` — a
/// compare-and-set on the session's row, which stays locked until commit, so a
/// concurrent writer of the same session waits and then fails the check. The
/// result holds, per append, -1 when it was written and otherwise the log's last
/// seq as this statement saw it.
pub(super) const APPEND_GROUP: &str = "
WITH input AS (
    SELECT * FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
                         $7::text[], $8::text[])
        WITH ORDINALITY AS a(session_id, expected, last, created, updated, task, status, i)
), updated AS (
    UPDATE agent.sessions s
    SET last_seq = a.last, status = a.status, updated_at = a.updated
    FROM input a
    WHERE a.expected > 0 AND s.session_id = a.session_id AND s.last_seq = a.expected
    RETURNING a.i
), created AS (
    INSERT INTO agent.sessions (session_id, task, status, last_seq, created_at, updated_at)
    SELECT session_id, task, status, last, created, updated FROM input WHERE expected = 0
    ON CONFLICT (session_id) DO NOTHING
    RETURNING session_id
), written AS (
    SELECT i FROM updated
    UNION ALL
    SELECT a.i FROM input a JOIN created c USING (session_id) WHERE a.expected = 0
), events AS (
    INSERT INTO agent.events (session_id, seq, at, schema_version, kind, body)
    SELECT a.session_id, e.seq, e.at, e.version, e.kind, e.body
    FROM unnest($9::int[], $10::bigint[], $11::bigint[], $12::int[], $13::text[], $14::text[])
         AS e(i, seq, at, version, kind, body)
    JOIN written w ON w.i = e.i
    JOIN input a ON a.i = e.i
)
SELECT array_agg(
           CASE WHEN w.i IS NOT NULL THEN -1
                ELSE COALESCE((SELECT last_seq FROM agent.sessions s
                               WHERE s.session_id = a.session_id), 0)
           END ORDER BY a.i),
       set_config('synchronous_commit', $1, true)
FROM input a
LEFT JOIN written w ON w.i = a.i";

/// Most appends committed in one group.
const MAX_GROUP: usize = 512;

/// Tasks committing groups at once.
pub(super) const WRITERS: usize = 2;

/// Attempts of a group whose connection failed.
const ATTEMPTS: u32 = 3;

/// Takes groups from `queue` until every sender is gone.
pub(super) async fn write_groups(
    pool: Pool,
    queue: Arc<Mutex<mpsc::UnboundedReceiver<PendingAppend>>>,
    stats: Arc<CommitStats>,
    shown: String,
) {
    loop {
        let group = {
            let mut queue = queue.lock().await;
            let Some(first) = queue.recv().await else {
                return;
            };
            let mut group = vec![first];
            while group.len() < MAX_GROUP {
                match queue.try_recv() {
                    Ok(append) => group.push(append),
                    Err(_) => break,
                }
            }
            group
        };
        commit(&pool, group, &stats, &shown).await;
    }
}

/// The arrays `agent.append_batch` takes, from a group.
#[derive(Default)]
struct Arrays {
    session: Vec<String>,
    expected: Vec<i64>,
    last: Vec<i64>,
    created: Vec<i64>,
    updated: Vec<i64>,
    task: Vec<String>,
    status: Vec<String>,
    event_append: Vec<i32>,
    seq: Vec<i64>,
    at: Vec<i64>,
    version: Vec<i32>,
    kind: Vec<String>,
    body: Vec<String>,
}

fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl Arrays {
    /// Moves the rows and tasks out of `group`, which keeps what answering it needs.
    fn of(group: &mut [PendingAppend]) -> Result<Self, String> {
        let mut arrays = Self::default();
        for (index, append) in (1i32..).zip(group) {
            let (Some(first), Some(last)) = (append.rows.first(), append.rows.last()) else {
                return Err("an append without events".into());
            };
            arrays.session.push(append.session_id.clone());
            arrays.expected.push(signed(append.expected));
            arrays.last.push(signed(last.seq));
            arrays.created.push(signed(first.at));
            arrays.updated.push(signed(last.at));
            arrays.task.push(std::mem::take(&mut append.task));
            arrays.status.push(append.status.as_str().to_owned());
            for row in std::mem::take(&mut append.rows) {
                arrays.event_append.push(index);
                arrays.seq.push(signed(row.seq));
                arrays.at.push(signed(row.at));
                arrays
                    .version
                    .push(i32::try_from(row.schema_version).unwrap_or(i32::MAX));
                arrays.kind.push(row.kind.to_owned());
                arrays.body.push(row.body);
            }
        }
        Ok(arrays)
    }
}

/// Commits `group` and answers every append in it: the appends that need not
/// survive a power cut in one transaction that does not wait for the WAL flush,
/// the others in another, both at once.
async fn commit(pool: &Pool, group: Vec<PendingAppend>, stats: &CommitStats, shown: &str) {
    let (durable, fast): (Vec<PendingAppend>, Vec<PendingAppend>) = group
        .into_iter()
        .partition(|append| append.durability == Durability::Full);
    tokio::join!(
        commit_one(pool, fast, false, stats, shown),
        commit_one(pool, durable, true, stats, shown)
    );
}

/// Commits `group` in one transaction, durably or not.
async fn commit_one(
    pool: &Pool,
    mut group: Vec<PendingAppend>,
    durable: bool,
    stats: &CommitStats,
    shown: &str,
) {
    if group.is_empty() {
        return;
    }
    let outcome = match Arrays::of(&mut group) {
        Ok(arrays) => attempt(pool, &arrays, durable, shown).await,
        Err(message) => Err(message),
    };
    match outcome {
        Ok(results) => {
            stats.committed(durable);
            for (append, actual) in group.into_iter().zip(results) {
                let result = if actual < 0 {
                    stats.acknowledged();
                    Ok(())
                } else {
                    Err(StoreError::Conflict {
                        session_id: append.session_id.clone(),
                        expected: append.expected,
                        actual: u64::try_from(actual).unwrap_or(0),
                    })
                };
                let _ = append.reply.send(result);
            }
        }
        Err(message) => {
            for append in group {
                let _ = append.reply.send(Err(StoreError::Backend(message.clone())));
            }
        }
    }
}

/// Why one attempt at a group failed.
enum Failure {
    /// The connection failed or the server did not answer: worth a new connection.
    Connection(String),
    /// The server refused the statement: trying again would fail the same way.
    Refused(String),
}

impl Failure {
    fn of(err: &tokio_postgres::Error) -> Self {
        if err.is_closed() || err.as_db_error().is_none() {
            Self::Connection(detail(err))
        } else {
            Self::Refused(detail(err))
        }
    }
}

/// Runs `agent.append_batch` for `arrays`, retrying on a fresh connection when the
/// connection fails; the per-append results, or why nothing is known to be written.
async fn attempt(
    pool: &Pool,
    arrays: &Arrays,
    durable: bool,
    shown: &str,
) -> Result<Vec<i64>, String> {
    let synchronous = if durable { "on" } else { "off" };
    let mut last_error = String::new();
    for attempt in 1..=ATTEMPTS {
        let call = async {
            let client = pool
                .get()
                .await
                .map_err(|err| Failure::Connection(err.to_string()))?;
            let statement = client
                .prepare_cached(APPEND_GROUP)
                .await
                .map_err(|err| Failure::of(&err))?;
            let row = client
                .query_one(
                    &statement,
                    &[
                        &synchronous,
                        &arrays.session,
                        &arrays.expected,
                        &arrays.last,
                        &arrays.created,
                        &arrays.updated,
                        &arrays.task,
                        &arrays.status,
                        &arrays.event_append,
                        &arrays.seq,
                        &arrays.at,
                        &arrays.version,
                        &arrays.kind,
                        &arrays.body,
                    ],
                )
                .await
                .map_err(|err| Failure::of(&err))?;
            row.try_get::<_, Vec<i64>>(0)
                .map_err(|err| Failure::Refused(detail(&err)))
        };
        match tokio::time::timeout(OPERATION_TIMEOUT, call).await {
            Ok(Ok(results)) => return Ok(results),
            Ok(Err(Failure::Refused(message))) => {
                last_error = message;
                break;
            }
            Ok(Err(Failure::Connection(message))) => last_error = message,
            Err(_) => {
                last_error = format!("no answer within {}s", OPERATION_TIMEOUT.as_secs());
            }
        }
        tokio::time::sleep(Duration::from_millis(200) * attempt).await;
    }
    Err(format!(
        "the commit to {shown} failed and nothing was acknowledged: {last_error}"
    ))
}
