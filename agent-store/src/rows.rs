//! Events as both stores' `events` tables hold them, encoded by the appending
//! caller: the stores' writers (SQLite's one thread, PostgreSQL's few tasks)
//! then only run SQL, the JSON encoding of concurrent appends spreads over the
//! callers, and an event that cannot be encoded fails its own append instead of
//! its group's commit.

use tokio::sync::oneshot;

use crate::support::{check_batch, started_task};
use agent_core::event::Event;
use agent_core::state::PublicStatus;
use agent_core::store::{Append, Durability, StoreError};

/// An append on its way to a store's writer: its batch checked and encoded.
pub(crate) struct PendingAppend {
    pub(crate) session_id: String,
    pub(crate) expected: u64,
    /// The events, in order; never empty.
    pub(crate) rows: Vec<EventRow>,
    /// The session's task, when this append creates the session.
    pub(crate) task: String,
    pub(crate) status: PublicStatus,
    pub(crate) durability: Durability,
    /// Where the writer answers once the append is committed or refused.
    pub(crate) reply: oneshot::Sender<Result<(), StoreError>>,
}

impl PendingAppend {
    /// Checks `append`'s batch, encodes its events and logs it (debug level)
    /// as an append to `store`; the writer answers on `reply`.
    pub(crate) fn new(
        append: &Append<'_>,
        store: &'static str,
        reply: oneshot::Sender<Result<(), StoreError>>,
    ) -> Result<Self, StoreError> {
        check_batch(append.session_id, append.expected_seq, append.events)?;
        tracing::debug!(
            store,
            session_id = append.session_id,
            after = append.expected_seq,
            events = append.events.len(),
            durability = ?append.durability,
            "append"
        );
        Ok(Self {
            session_id: append.session_id.to_owned(),
            expected: append.expected_seq,
            rows: EventRow::encode_all(append.events)?,
            task: created_task(append.expected_seq, append.events),
            status: append.status,
            durability: append.durability,
            reply,
        })
    }
}

/// One event's row, its body already encoded.
pub(crate) struct EventRow {
    pub(crate) seq: u64,
    pub(crate) at: u64,
    pub(crate) schema_version: u32,
    pub(crate) kind: &'static str,
    pub(crate) body: String,
}

impl EventRow {
    /// The rows of `events`, in order.
    pub(crate) fn encode_all(events: &[Event]) -> Result<Vec<Self>, StoreError> {
        events.iter().map(Self::encode).collect()
    }

    fn encode(event: &Event) -> Result<Self, StoreError> {
        let body = serde_json::to_string(&event.kind).map_err(|err| {
            StoreError::Backend(format!("cannot encode event {}: {err}", event.seq))
        })?;
        Ok(Self {
            seq: event.seq,
            at: event.at,
            schema_version: event.schema_version,
            kind: event.kind.name(),
            body,
        })
    }
}

/// The task a new session's row records: its `SessionStarted` task when the
/// append creates the session (`expected` is 0), otherwise empty (an existing
/// row keeps its own).
pub(crate) fn created_task(expected: u64, events: &[Event]) -> String {
    events
        .first()
        .filter(|_| expected == 0)
        .and_then(started_task)
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use agent_core::event::{Event, EventKind};

    use super::*;

    #[test]
    fn rows_keep_the_events_fields_and_encode_their_kind() {
        let event = Event::new(
            "s",
            3,
            EventKind::Cancelled {
                reason: "stop".into(),
            },
        );
        let rows = EventRow::encode_all(std::slice::from_ref(&event)).unwrap();
        let [row] = rows.as_slice() else {
            panic!("one row expected");
        };
        assert_eq!((row.seq, row.at, row.kind), (3, event.at, "cancelled"));
        assert_eq!(row.schema_version, event.schema_version);
        let decoded: EventKind = serde_json::from_str(&row.body).unwrap();
        assert_eq!(decoded, event.kind);
    }

    #[test]
    fn only_a_creating_append_records_its_task() {
        let started = [Event::new(
            "s",
            1,
            EventKind::SessionStarted {
                task: "add 2 and 3".into(),
                strategy: "react".into(),
                config: serde_json::json!({}),
            },
        )];
        assert_eq!(created_task(0, &started), "add 2 and 3");
        assert_eq!(created_task(4, &started), "");
        assert_eq!(created_task(0, &[]), "");
    }
}
