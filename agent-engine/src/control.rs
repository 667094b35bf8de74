//! Operations on stored sessions from outside the engine that drives them, such as
//! `agent cancel`. They append with optimistic concurrency like the engine does; the
//! driving engine notices the write and stops.

use agent_core::event::{ApprovalDecision, Event, EventKind};
use agent_core::id::new_session_id;
use agent_core::state::{SessionState, StateError, Status};
use agent_core::store::{Append, Durability, EventLog, EventStore, StoreError};

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
    /// A fork point outside the log.
    #[error("seq {at} is not in session `{session_id}`, whose events are 1 to {last}")]
    OutOfRange {
        /// The session.
        session_id: String,
        /// The requested seq.
        at: u64,
        /// Its last seq.
        last: u64,
    },
    /// Nothing waits for a decision.
    #[error("session `{session_id}` has no call waiting for approval ({status})")]
    NothingPending {
        /// The session.
        session_id: String,
        /// Its status.
        status: String,
    },
    /// The named call does not wait for a decision.
    #[error("call `{call_id}` of session `{session_id}` is not waiting for approval{detail}")]
    NotPending {
        /// The session.
        session_id: String,
        /// The call.
        call_id: String,
        /// More about why (already decided, unknown).
        detail: String,
    },
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
    /// The session waits for a human decision or has not started: there is no
    /// step to pause after.
    #[error(
        "session `{session_id}` cannot pause while it is {status}; decide its waiting calls (`agent approve`, `agent deny`) or cancel it"
    )]
    NotPausable {
        /// The session.
        session_id: String,
        /// Its status.
        status: Status,
    },
}

/// Where a fork ended up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fork {
    /// The new session.
    pub session_id: String,
    /// The session it copies.
    pub parent: String,
    /// The last seq copied: the requested one, or the start of the step it fell in.
    pub at: u64,
}

/// Creates a new session whose log is a copy of `session_id`'s up to `at`, followed
/// by a `Forked` event naming the parent. An `at` inside a step (an action without
/// its result, a finish not yet accepted, an ending) moves back to where that step
/// began. The parent is not touched.
pub async fn fork_session(
    store: &dyn EventStore,
    session_id: &str,
    at: u64,
) -> Result<Fork, ControlError> {
    let events = store.load(session_id).await?;
    let last = events.last().map_or(0, |event| event.seq);
    if at == 0 || at > last {
        return Err(ControlError::OutOfRange {
            session_id: session_id.to_owned(),
            at,
            last,
        });
    }
    let mut state = SessionState::new(session_id);
    let mut cut = 0;
    for event in events.iter().take_while(|event| event.seq <= at) {
        state.apply(event)?;
        if state.status().is_step_boundary() {
            cut = event.seq;
        }
    }
    let fork_id = new_session_id();
    let mut copy: Vec<Event> = events
        .into_iter()
        .take_while(|event| event.seq <= cut)
        .map(|event| Event {
            session_id: fork_id.clone(),
            ..event
        })
        .collect();
    copy.push(Event::new(
        &fork_id,
        cut + 1,
        EventKind::Forked {
            parent: session_id.to_owned(),
            at: cut,
        },
    ));
    let forked = SessionState::from_events(&fork_id, &copy)?;
    store
        .append(Append::after(&forked, &copy, Durability::Full))
        .await?;
    Ok(Fork {
        session_id: fork_id,
        parent: session_id.to_owned(),
        at: cut,
    })
}

/// Records a human decision on the calls of `session_id` that wait for approval:
/// on `call_id` alone, or on every waiting call when it is `None`. Returns the
/// decided call ids. Deciding twice, deciding a call that is not waiting, or
/// deciding when nothing waits (an ended session included) is an error.
pub async fn decide_approval(
    store: &dyn EventStore,
    session_id: &str,
    call_id: Option<&str>,
    decision: ApprovalDecision,
    by: &str,
) -> Result<Vec<String>, ControlError> {
    let mut attempts = 0;
    loop {
        let events = store.load(session_id).await?;
        let mut state = SessionState::from_events(session_id, &events)?;
        let waiting = state.undecided_calls();
        if waiting.is_empty() {
            return Err(ControlError::NothingPending {
                session_id: session_id.to_owned(),
                status: state.public_status().to_string(),
            });
        }
        let chosen: Vec<String> = match call_id {
            None => waiting.iter().map(|call| call.id.clone()).collect(),
            Some(id) if waiting.iter().any(|call| call.id == id) => vec![id.to_owned()],
            Some(id) => {
                let detail = if state.is_decided(id) {
                    ": it was already decided".to_owned()
                } else {
                    format!(
                        "; waiting calls: {}",
                        waiting
                            .iter()
                            .map(|call| call.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                return Err(ControlError::NotPending {
                    session_id: session_id.to_owned(),
                    call_id: id.to_owned(),
                    detail,
                });
            }
        };
        let mut batch = Vec::new();
        let mut remaining = waiting.len();
        for id in &chosen {
            remaining -= 1;
            let event = Event::new(
                session_id,
                state.last_seq() + 1,
                EventKind::ApprovalDecided {
                    call_id: id.clone(),
                    tool_name: waiting
                        .iter()
                        .find(|call| &call.id == id)
                        .map(|call| call.tool_name.clone())
                        .unwrap_or_default(),
                    decision: decision.clone(),
                    by: by.to_owned(),
                    remaining: u32::try_from(remaining).unwrap_or(u32::MAX),
                },
            );
            state.apply(&event)?;
            batch.push(event);
        }
        match store
            .append(Append::after(&state, &batch, Durability::Full))
            .await
        {
            Ok(()) => return Ok(chosen),
            Err(StoreError::Conflict { .. }) if attempts < CONFLICT_RETRIES => attempts += 1,
            Err(err) => return Err(err.into()),
        }
    }
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
        let cancelled = EventKind::Cancelled {
            reason: reason.to_owned(),
        };
        match append_next(store, &mut state, cancelled).await {
            Ok(()) => return Ok(state),
            Err(ControlError::Store(StoreError::Conflict { .. }))
                if attempts < CONFLICT_RETRIES =>
            {
                attempts += 1;
            }
            Err(err) => return Err(err),
        }
    }
}

/// Applies `kind` as the next event of `state` and appends it durably after
/// it: what a person's or a program's action on a stored session writes. A
/// `Store(StoreError::Conflict)` means someone wrote first: load the log and
/// decide again.
pub async fn append_next(
    store: &dyn EventLog,
    state: &mut SessionState,
    kind: EventKind,
) -> Result<(), ControlError> {
    let event = Event::new(state.session_id(), state.last_seq() + 1, kind);
    state.apply(&event)?;
    store
        .append(Append::after(
            state,
            std::slice::from_ref(&event),
            Durability::Full,
        ))
        .await?;
    Ok(())
}

/// How long `pause_session` holds the lease of a session nobody drives while
/// it records the pause.
const PAUSE_LEASE: std::time::Duration = std::time::Duration::from_secs(15);

/// Pauses a running session after its current step. When a live process
/// drives it, a `pause_requested` event asks that process to pause it at its
/// next step boundary (it then ends its run with `paused`, exit 11); when none
/// does (its process died), the session is paused at once. Returns the state
/// after the write: status `paused`, or still running with the request
/// recorded. Asking again, or pausing a paused session, writes nothing.
pub async fn pause_session(
    store: &dyn EventStore,
    session_id: &str,
    by: &str,
) -> Result<SessionState, ControlError> {
    let owner = format!("pause-{}", new_session_id());
    let mut attempts = 0;
    loop {
        let events = store.load(session_id).await?;
        let mut state = SessionState::from_events(session_id, &events)?;
        match state.status() {
            status if status.is_terminal() => {
                return Err(ControlError::Ended {
                    session_id: session_id.to_owned(),
                    status,
                    action: "pause",
                });
            }
            Status::Paused => return Ok(state),
            status @ (Status::AwaitingApproval | Status::New) => {
                return Err(ControlError::NotPausable {
                    session_id: session_id.to_owned(),
                    status,
                });
            }
            _ if state.pause_requested() => return Ok(state),
            _ => {}
        }
        let held = match store.acquire_lease(session_id, &owner, PAUSE_LEASE).await {
            Ok(()) => true,
            Err(StoreError::Leased { .. }) => false,
            Err(err) => return Err(err.into()),
        };
        let kind = if held {
            EventKind::Paused {
                reason: format!("paused by {by} while no process drove it"),
            }
        } else {
            EventKind::PauseRequested { by: by.to_owned() }
        };
        let appended = append_next(store, &mut state, kind).await;
        if held {
            let _ = store.release_lease(session_id, &owner).await;
        }
        match appended {
            Ok(()) => return Ok(state),
            Err(ControlError::Store(StoreError::Conflict { .. }))
                if attempts < CONFLICT_RETRIES =>
            {
                attempts += 1;
            }
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use agent_core::state::PublicStatus;
    use agent_core::store::EventLog;
    use agent_store::MemoryStore;

    fn log(kinds: Vec<EventKind>) -> Vec<Event> {
        kinds
            .into_iter()
            .zip(1..)
            .map(|(kind, seq)| Event::new("p", seq, kind))
            .collect()
    }

    #[tokio::test]
    async fn a_fork_inside_a_step_moves_back_to_its_start_and_leaves_the_parent_alone() {
        use agent_core::types::{Action, Observation, ToolCall, Usage};
        let call = ToolCall {
            id: "c1".into(),
            tool_name: "calculator".into(),
            arguments: json!({}),
        };
        let events = log(vec![
            EventKind::SessionStarted {
                task: "t".into(),
                strategy: "react".into(),
                config: json!({}),
            },
            EventKind::ModelRequested {
                step: 1,
                context_tokens: None,
            },
            EventKind::ModelResponded {
                actions: vec![Action::ToolCall(call.clone())],
                usage: Usage::default(),
                text: None,
            },
            EventKind::ActionDispatched { call: call.clone() },
            EventKind::ActionCompleted {
                observation: Observation::success(&call, "1"),
            },
            EventKind::ModelRequested {
                step: 2,
                context_tokens: None,
            },
        ]);
        let store = MemoryStore::new();
        store
            .append(Append::creating(&events, Durability::Full).unwrap())
            .await
            .unwrap();
        let fork = fork_session(&store, "p", 4).await.unwrap();
        assert_eq!(fork.at, 1, "inside the first step: back to its start");
        let copy = store.load(&fork.session_id).await.unwrap();
        assert_eq!(copy.len(), 2);
        assert!(matches!(&copy[1].kind, EventKind::Forked { parent, at: 1 } if parent == "p"));
        let fork = fork_session(&store, "p", 5).await.unwrap();
        assert_eq!(fork.at, 5, "a step boundary stays");
        assert_eq!(store.load("p").await.unwrap(), events);
        assert!(matches!(
            fork_session(&store, "p", 7).await,
            Err(ControlError::OutOfRange { last: 6, .. })
        ));
    }

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
            .append(Append::creating(&[started], Durability::Full).unwrap())
            .await
            .unwrap();
        let state = cancel_session(&store, "s", "by user").await.unwrap();
        assert_eq!(state.status().public(), PublicStatus::Cancelled);
        assert_eq!(
            state.run_result().unwrap().exit_reason,
            agent_core::result::ExitReason::Cancelled
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
