//! The session index of an SQLite store: listings and pages from the `sessions`
//! table (newest first, by its creation index), and counts for metrics.

use agent_core::state::PublicStatus;
use agent_core::store::{SessionIndex, SessionQuery, SessionSummary, StoreCounts, StoreError};
use async_trait::async_trait;
use rusqlite::{Row, params};

use super::{SqliteStore, sql_error};

const COLUMNS: &str = "SELECT session_id, status, task, created_at, updated_at FROM sessions";

fn summary(row: &Row<'_>) -> rusqlite::Result<(String, String, String, u64, u64)> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
    ))
}

fn parsed(
    (session_id, status, task, created_at, updated_at): (String, String, String, u64, u64),
) -> Result<SessionSummary, StoreError> {
    let status = status
        .parse()
        .map_err(|err| StoreError::Backend(format!("session `{session_id}`: {err}")))?;
    Ok(SessionSummary {
        session_id,
        status,
        task,
        created_at,
        updated_at,
    })
}

#[async_trait]
impl SessionIndex for SqliteStore {
    async fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError> {
        self.read(|conn| {
            let mut statement = conn
                .prepare_cached(&format!(
                    "{COLUMNS} ORDER BY created_at DESC, session_id DESC"
                ))
                .map_err(sql_error)?;
            let rows = statement.query_map([], summary).map_err(sql_error)?;
            rows.map(|row| parsed(row.map_err(sql_error)?)).collect()
        })
        .await
    }

    async fn sessions_page(&self, query: &SessionQuery) -> Result<Vec<SessionSummary>, StoreError> {
        let status = query.status.map(PublicStatus::as_str);
        let (created_at, session_id) = query
            .after
            .as_ref()
            .map(|after| (after.created_at, after.session_id.clone()))
            .unzip();
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
        self.read(move |conn| {
            let mut statement = conn
                .prepare_cached(&format!(
                    "{COLUMNS}
                     WHERE (?1 IS NULL OR status = ?1)
                       AND (?2 IS NULL OR created_at < ?2 OR (created_at = ?2 AND session_id < ?3))
                     ORDER BY created_at DESC, session_id DESC LIMIT ?4"
                ))
                .map_err(sql_error)?;
            let rows = statement
                .query_map(params![status, created_at, session_id, limit], summary)
                .map_err(sql_error)?;
            rows.map(|row| parsed(row.map_err(sql_error)?)).collect()
        })
        .await
    }

    async fn counts(&self) -> Result<StoreCounts, StoreError> {
        self.read(|conn| {
            let mut counts = StoreCounts::default();
            let mut by_status = conn
                .prepare_cached("SELECT status, count(*) FROM sessions GROUP BY status")
                .map_err(sql_error)?;
            let rows = by_status
                .query_map([], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, u64>(1)?))
                })
                .map_err(sql_error)?;
            for row in rows {
                let (status, count) = row.map_err(sql_error)?;
                let status: PublicStatus = status
                    .parse()
                    .map_err(|err| StoreError::Backend(format!("the sessions table: {err}")))?;
                counts.sessions.insert(status, count);
            }
            let mut by_kind = conn
                .prepare_cached("SELECT kind, count(*) FROM events GROUP BY kind")
                .map_err(sql_error)?;
            let rows = by_kind
                .query_map([], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, u64>(1)?))
                })
                .map_err(sql_error)?;
            for row in rows {
                let (kind, count) = row.map_err(sql_error)?;
                counts.events.insert(kind, count);
            }
            counts.tool_errors = conn
                .prepare_cached(
                    "SELECT count(*) FROM events WHERE kind = 'action_completed'
                     AND json_extract(body, '$.observation.is_error') = 1",
                )
                .and_then(|mut select| select.query_row([], |row| row.get(0)))
                .map_err(sql_error)?;
            Ok(counts)
        })
        .await
    }
}
