//! Operations on stored sessions from outside the engine that drives them, such as
//! `agent cancel`. They append with optimistic concurrency like the engine does; the
//! driving engine notices the write and stops.

use crate::event::{Event, EventKind};
use crate::state::{SessionState, StateError, Status};
use crate::store::{Durability, EventStore, StoreError};

/// How many times a control operation retries after losing a race with the engine.
const CONFLICT_RETRIES: usize = 20;

/// Why a control operation did nothing.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The store failed (an unknown id included).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored log cannot be folded.
    #[error("the session log is inconsistent: {0}")]
    State(#[from] StateError),
    /// The session has already ended.
    #[error("session `{session_id}` has already ended ({status}); there is nothing to {action}")]
    Ended {
        /// The session.
        session_id: String,
        /// Its final status.
        status: Status,
        /// What was asked.
        action: &'static str,
    },
}

/// Cancels a session that has not ended, also one whose process died. Returns
/// the state after the `Cancelled` event.
pub async fn cancel_session(
    store: &dyn EventStore,
    session_id: &str,
    reason: &str,
) -> Result<SessionState, ControlError> {
    let mut attempts = 0;
    loop {
        let events = store.load(session_id).await?;
        let mut state = SessionState::from_events(session_id, &events)?;
        if state.status().is_terminal() {
            return Err(ControlError::Ended {
                session_id: session_id.to_owned(),
                status: state.status(),
                action: "cancel",
            });
        }
        let event = Event::new(
            session_id,
            state.last_seq() + 1,
            EventKind::Cancelled {
                reason: reason.to_owned(),
            },
        );
        state.apply(&event)?;
        match store
            .append(session_id, event.seq - 1, &[event], Durability::Full)
            .await
        {
            Ok(()) => return Ok(state),
            Err(StoreError::Conflict { .. }) if attempts < CONFLICT_RETRIES => attempts += 1,
            Err(err) => return Err(err.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::state::PublicStatus;
    use crate::store::MemoryStore;

    #[tokio::test]
    async fn cancels_a_running_session_once() {
        let store = MemoryStore::new();
        let started = Event::new(
            "s",
            1,
            EventKind::SessionStarted {
                task: "t".into(),
                strategy: "react".into(),
                config: json!({}),
            },
        );
        store
            .append("s", 0, &[started], Durability::Full)
            .await
            .unwrap();
        let state = cancel_session(&store, "s", "by user").await.unwrap();
        assert_eq!(state.status().public(), PublicStatus::Cancelled);
        assert_eq!(
            state.run_result().unwrap().exit_reason,
            crate::ExitReason::Cancelled
        );
        assert!(matches!(
            cancel_session(&store, "s", "again").await,
            Err(ControlError::Ended { .. })
        ));
        assert!(matches!(
            cancel_session(&store, "nope", "x").await,
            Err(ControlError::Store(StoreError::NotFound(_)))
        ));
    }
}
