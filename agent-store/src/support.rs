//! Helpers for implementers of [`EventStore`](agent_core::store::EventStore): checking an
//! append batch, reading a session's task, lease arithmetic.

use std::time::Duration;

use agent_core::event::{Event, EventKind};
use agent_core::store::StoreError;

/// The task recorded by a `SessionStarted` event, if `event` is one.
pub fn started_task(event: &Event) -> Option<&str> {
    match &event.kind {
        EventKind::SessionStarted { task, .. } => Some(task),
        _ => None,
    }
}

/// Checks that `events` is a non-empty batch of `session_id` following `expected_seq`.
pub fn check_batch(
    session_id: &str,
    expected_seq: u64,
    events: &[Event],
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Err(StoreError::InvalidBatch("no events to append".into()));
    }
    for (offset, event) in (1u64..).zip(events) {
        if event.session_id != session_id {
            return Err(StoreError::InvalidBatch(format!(
                "event seq {} belongs to session `{}`, not `{session_id}`",
                event.seq, event.session_id
            )));
        }
        if event.seq != expected_seq + offset {
            return Err(StoreError::InvalidBatch(format!(
                "event seq {} where {} was expected",
                event.seq,
                expected_seq + offset
            )));
        }
    }
    Ok(())
}

/// A lease duration in milliseconds, saturating.
pub fn ttl_millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
}
