//! The session index of a PostgreSQL store: listings and pages from
//! `agent.sessions` (newest first, by its creation index), and counts for metrics.

use agent_core::state::PublicStatus;
use agent_core::store::{SessionIndex, SessionQuery, SessionSummary, StoreCounts, StoreError};
use async_trait::async_trait;
use tokio_postgres::Row;

use super::{PostgresStore, column};

const COLUMNS: &str = "SELECT session_id, status, task, created_at, updated_at FROM agent.sessions";

fn summary(row: &Row) -> Result<SessionSummary, StoreError> {
    let session_id: String = column(row, 0)?;
    let status: &str = column(row, 1)?;
    let status = status
        .parse()
        .map_err(|err| StoreError::Backend(format!("session `{session_id}`: {err}")))?;
    Ok(SessionSummary {
        status,
        task: column(row, 2)?,
        created_at: u64::try_from(column::<i64>(row, 3)?).unwrap_or(0),
        updated_at: u64::try_from(column::<i64>(row, 4)?).unwrap_or(0),
        session_id,
    })
}

fn count(row: &Row) -> Result<u64, StoreError> {
    Ok(u64::try_from(column::<i64>(row, 1)?).unwrap_or(0))
}

#[async_trait]
impl SessionIndex for PostgresStore {
    async fn sessions(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let rows = self
            .query(
                &format!("{COLUMNS} ORDER BY created_at DESC, session_id DESC"),
                &[],
            )
            .await?;
        rows.iter().map(summary).collect()
    }

    async fn sessions_page(&self, query: &SessionQuery) -> Result<Vec<SessionSummary>, StoreError> {
        let status = query.status.map(PublicStatus::as_str);
        let created_at = query
            .after
            .as_ref()
            .map(|after| i64::try_from(after.created_at).unwrap_or(i64::MAX));
        let session_id = query.after.as_ref().map(|after| after.session_id.as_str());
        let limit = i64::try_from(query.limit).unwrap_or(i64::MAX);
        let rows = self
            .query(
                &format!(
                    "{COLUMNS}
                     WHERE ($1::text IS NULL OR status = $1)
                       AND ($2::bigint IS NULL OR (created_at, session_id) < ($2, $3::text))
                     ORDER BY created_at DESC, session_id DESC LIMIT $4"
                ),
                &[&status, &created_at, &session_id, &limit],
            )
            .await?;
        rows.iter().map(summary).collect()
    }

    async fn counts(&self) -> Result<StoreCounts, StoreError> {
        let mut counts = StoreCounts::default();
        for row in &self
            .query(
                "SELECT status, count(*) FROM agent.sessions GROUP BY status",
                &[],
            )
            .await?
        {
            let status: &str = column(row, 0)?;
            let status: PublicStatus = status
                .parse()
                .map_err(|err| StoreError::Backend(format!("agent.sessions: {err}")))?;
            counts.sessions.insert(status, count(row)?);
        }
        for row in &self
            .query("SELECT kind, count(*) FROM agent.events GROUP BY kind", &[])
            .await?
        {
            counts.events.insert(column(row, 0)?, count(row)?);
        }
        let rows = self
            .query(
                "SELECT 0, count(*) FROM agent.events WHERE kind = 'action_completed'
                 AND (body::jsonb #>> '{observation,is_error}') = 'true'",
                &[],
            )
            .await?;
        counts.tool_errors = rows.first().map(count).transpose()?.unwrap_or(0);
        Ok(counts)
    }
}
