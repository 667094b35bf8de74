//! Reading an SQLite store's logs.

use agent_core::event::{Event, EventKind, SCHEMA_VERSION as EVENT_SCHEMA_VERSION};
use agent_core::store::StoreError;
use rusqlite::{Connection, params};

use super::sql_error;

pub(super) fn load_events(
    conn: &Connection,
    session_id: &str,
    after: u64,
) -> Result<Vec<Event>, StoreError> {
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
            return Err(StoreError::Corrupt(format!(
                "event {seq} of session `{session_id}` has schema version {schema_version}, newer than this build's {EVENT_SCHEMA_VERSION}; upgrade agent"
            )));
        }
        let kind: EventKind = serde_json::from_str(&body).map_err(|err| {
            StoreError::Corrupt(format!(
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
