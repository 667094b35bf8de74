//! The work queue in an SQLite store: two tables beside the logs, written by the
//! store's writer thread in immediate transactions (so a claim is atomic among
//! processes), expiry by this machine's clock (an SQLite file has one machine).
//! Workers poll every 100 ms; a queueing in this process wakes them at once.

use std::time::Duration;

use crate::support::ttl_millis;
use agent_core::event::now_millis;
use agent_core::store::StoreError;
use agent_core::store::queue::{
    ActionClaim, QueueView, QueuedAction, QueuedActionView, QueuedSessionView, SessionClaim,
    WorkQueue,
};
use agent_core::types::ToolCall;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::{SqliteStore, sql_error};

/// Longest a worker waits before looking at the queue again.
const POLL: Duration = Duration::from_millis(100);

/// Runs `work` in an immediate transaction, durably if `durable`.
fn transaction<T>(
    conn: &mut Connection,
    durable: bool,
    work: impl FnOnce(&rusqlite::Transaction<'_>) -> Result<T, rusqlite::Error>,
) -> Result<T, StoreError> {
    conn.pragma_update(None, "synchronous", if durable { "FULL" } else { "NORMAL" })
        .map_err(sql_error)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_error)?;
    let value = work(&tx).map_err(sql_error)?;
    tx.commit().map_err(sql_error)?;
    Ok(value)
}

fn tools_match(tools: Option<&[String]>, tool: &str) -> bool {
    tools.is_none_or(|tools| tools.iter().any(|name| name == tool))
}

impl SqliteStore {
    /// Ends `worker`'s claim of an action, taking back `uncount` (0 or 1) of
    /// its attempts (1: the call never started).
    async fn give_back_action(
        &self,
        session_id: &str,
        call_id: &str,
        worker: &str,
        uncount: i64,
    ) -> Result<(), StoreError> {
        let (session_id, call_id, worker) =
            (session_id.to_owned(), call_id.to_owned(), worker.to_owned());
        self.write(move |conn| {
            transaction(conn, false, |tx| {
                tx.prepare_cached(
                    "UPDATE queue_actions SET claimed_by = NULL, expires_at = NULL,
                         attempts = MAX(attempts - ?4, 0)
                     WHERE session_id = ?1 AND call_id = ?2 AND claimed_by = ?3",
                )?
                .execute(params![session_id, call_id, worker, uncount])
            })
        })
        .await?;
        self.work.notify_waiters();
        Ok(())
    }
}

#[async_trait]
impl WorkQueue for SqliteStore {
    async fn enqueue_session(&self, session_id: &str) -> Result<(), StoreError> {
        let session_id = session_id.to_owned();
        self.write(move |conn| {
            transaction(conn, true, |tx| {
                tx.prepare_cached(
                    "INSERT INTO queue_sessions (session_id, generation, queued_at) VALUES (?1, 1, ?2)
                     ON CONFLICT (session_id) DO UPDATE SET generation = generation + 1",
                )?
                .execute(params![session_id, now_millis()])
            })
        })
        .await?;
        self.work.notify_waiters();
        Ok(())
    }

    async fn claim_session(
        &self,
        worker: &str,
        ttl: Duration,
    ) -> Result<Option<SessionClaim>, StoreError> {
        let worker = worker.to_owned();
        self.write(move |conn| {
            transaction(conn, false, |tx| {
                let now = now_millis();
                let found: Option<(String, u64)> = tx
                    .prepare_cached(
                        "SELECT session_id, generation FROM queue_sessions
                         WHERE claimed_by IS NULL OR expires_at <= ?1
                         ORDER BY queued_at, session_id LIMIT 1",
                    )?
                    .query_row([now], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()?;
                let Some((session_id, generation)) = found else {
                    return Ok(None);
                };
                tx.prepare_cached(
                    "UPDATE queue_sessions SET claimed_by = ?2, claimed_generation = generation,
                         expires_at = ?3, renewed_at = ?4 WHERE session_id = ?1",
                )?
                .execute(params![
                    session_id,
                    worker,
                    now + ttl_millis(ttl),
                    now
                ])?;
                Ok(Some(SessionClaim {
                    session_id,
                    generation,
                }))
            })
        })
        .await
    }

    async fn finish_session(&self, claim: &SessionClaim, worker: &str) -> Result<(), StoreError> {
        let (session_id, generation, worker) = (
            claim.session_id.clone(),
            claim.generation,
            worker.to_owned(),
        );
        let requeued = self
            .write(move |conn| {
                transaction(conn, true, |tx| {
                    let deleted = tx
                        .prepare_cached(
                            "DELETE FROM queue_sessions
                             WHERE session_id = ?1 AND claimed_by = ?2 AND generation = ?3",
                        )?
                        .execute(params![session_id, worker, generation])?;
                    if deleted == 0 {
                        tx.prepare_cached(
                            "UPDATE queue_sessions SET claimed_by = NULL, expires_at = NULL
                             WHERE session_id = ?1 AND claimed_by = ?2",
                        )?
                        .execute(params![session_id, worker])?;
                    }
                    Ok(deleted == 0)
                })
            })
            .await?;
        if requeued {
            self.work.notify_waiters();
        }
        Ok(())
    }

    async fn release_session(&self, session_id: &str, worker: &str) -> Result<(), StoreError> {
        let (session_id, worker) = (session_id.to_owned(), worker.to_owned());
        self.write(move |conn| {
            transaction(conn, false, |tx| {
                tx.prepare_cached(
                    "UPDATE queue_sessions SET claimed_by = NULL, expires_at = NULL
                     WHERE session_id = ?1 AND claimed_by = ?2",
                )?
                .execute(params![session_id, worker])
            })
        })
        .await?;
        self.work.notify_waiters();
        Ok(())
    }

    async fn enqueue_actions(&self, actions: &[QueuedAction]) -> Result<(), StoreError> {
        let mut rows = Vec::with_capacity(actions.len());
        for action in actions {
            let arguments = serde_json::to_string(&action.call.arguments)
                .map_err(|err| StoreError::Backend(format!("cannot serialise arguments: {err}")))?;
            rows.push((action.clone(), arguments));
        }
        self.write(move |conn| {
            transaction(conn, true, |tx| {
                let now = now_millis();
                let mut insert = tx.prepare_cached(
                    "INSERT INTO queue_actions (session_id, call_id, tool_name, arguments, idempotent, attempts, queued_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, 0, ?6) ON CONFLICT (session_id, call_id) DO NOTHING",
                )?;
                for (action, arguments) in &rows {
                    insert.execute(params![
                        action.session_id,
                        action.call.id,
                        action.call.tool_name,
                        arguments,
                        action.idempotent,
                        now
                    ])?;
                }
                Ok(())
            })
        })
        .await?;
        self.work.notify_waiters();
        Ok(())
    }

    async fn claim_action(
        &self,
        worker: &str,
        tools: Option<&[String]>,
        ttl: Duration,
    ) -> Result<Option<ActionClaim>, StoreError> {
        let worker = worker.to_owned();
        let tools = tools.map(<[String]>::to_vec);
        self.write(move |conn| {
            transaction(conn, false, |tx| {
                let now = now_millis();
                let mut select = tx.prepare_cached(
                    "SELECT session_id, call_id, tool_name, arguments, idempotent, attempts
                     FROM queue_actions WHERE claimed_by IS NULL OR expires_at <= ?1
                     ORDER BY queued_at, session_id, call_id",
                )?;
                let mut rows = select.query([now])?;
                while let Some(row) = rows.next()? {
                    let tool_name: String = row.get(2)?;
                    if !tools_match(tools.as_deref(), &tool_name) {
                        continue;
                    }
                    let (session_id, call_id): (String, String) = (row.get(0)?, row.get(1)?);
                    let arguments: String = row.get(3)?;
                    let idempotent: bool = row.get(4)?;
                    let attempts: u32 = row.get::<_, u32>(5)? + 1;
                    drop(rows);
                    tx.prepare_cached(
                        "UPDATE queue_actions SET attempts = ?3, claimed_by = ?4, expires_at = ?5,
                             renewed_at = ?6 WHERE session_id = ?1 AND call_id = ?2",
                    )?
                    .execute(params![
                        session_id,
                        call_id,
                        attempts,
                        worker,
                        now + ttl_millis(ttl),
                        now
                    ])?;
                    let arguments = serde_json::from_str(&arguments).unwrap_or_default();
                    return Ok(Some(ActionClaim {
                        action: QueuedAction {
                            session_id,
                            call: ToolCall {
                                id: call_id,
                                tool_name,
                                arguments,
                            },
                            idempotent,
                        },
                        attempt: attempts,
                    }));
                }
                Ok(None)
            })
        })
        .await
    }

    async fn finish_action(&self, session_id: &str, call_id: &str) -> Result<(), StoreError> {
        let (session_id, call_id) = (session_id.to_owned(), call_id.to_owned());
        self.write(move |conn| {
            transaction(conn, true, |tx| {
                tx.prepare_cached(
                    "DELETE FROM queue_actions WHERE session_id = ?1 AND call_id = ?2",
                )?
                .execute([session_id, call_id])
            })
        })
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
        let worker = worker.to_owned();
        self.write(move |conn| {
            transaction(conn, false, |tx| {
                let now = now_millis();
                let expires = now + ttl_millis(ttl);
                for table in ["queue_sessions", "queue_actions"] {
                    tx.prepare_cached(&format!(
                        "UPDATE {table} SET expires_at = ?2, renewed_at = ?3 WHERE claimed_by = ?1"
                    ))?
                    .execute(params![worker, expires, now])?;
                }
                Ok(())
            })
        })
        .await
    }

    async fn wait_for_work(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout.min(POLL), self.work.notified()).await;
    }

    async fn queue_view(&self) -> Result<QueueView, StoreError> {
        self.read(|conn| {
            let now = now_millis();
            let live = |claimed: Option<String>, expires: Option<u64>| {
                claimed.filter(|_| expires.is_some_and(|expires| expires > now))
            };
            let sessions = conn
                .prepare_cached(
                    "SELECT session_id, queued_at, claimed_by, expires_at FROM queue_sessions
                     ORDER BY queued_at, session_id",
                )
                .and_then(|mut select| {
                    select
                        .query_map([], |row| {
                            Ok(QueuedSessionView {
                                session_id: row.get(0)?,
                                queued_at: row.get(1)?,
                                claimed_by: live(row.get(2)?, row.get(3)?),
                            })
                        })?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(sql_error)?;
            let actions = conn
                .prepare_cached(
                    "SELECT session_id, call_id, tool_name, attempts, claimed_by, expires_at, renewed_at
                     FROM queue_actions ORDER BY queued_at, session_id, call_id",
                )
                .and_then(|mut select| {
                    select
                        .query_map([], |row| {
                            let claimed_by = live(row.get(4)?, row.get(5)?);
                            let renewed: Option<u64> = row.get(6)?;
                            Ok(QueuedActionView {
                                session_id: row.get(0)?,
                                call_id: row.get(1)?,
                                tool_name: row.get(2)?,
                                attempts: row.get(3)?,
                                lease_age_ms: claimed_by
                                    .as_ref()
                                    .and(renewed)
                                    .map(|renewed| now.saturating_sub(renewed)),
                                claimed_by,
                            })
                        })?
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(sql_error)?;
            Ok(QueueView { sessions, actions })
        })
        .await
    }
}
