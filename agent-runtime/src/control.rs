//! Human decisions on a stored session, as the CLI and the HTTP API take them:
//! approve (optionally with edited arguments, checked against the tool's schema
//! when the tool is a built-in one) and deny, and putting a session back in the
//! work queue. No process drives a session while it waits, so the decisions are
//! published to the session's recorded trace here. A decision that settles the
//! last waiting call of a session that went through the work queue queues it
//! again, so a worker continues it.

use agent_core::event::{ApprovalDecision, Event, EventKind};
use agent_core::result::RunResult;
use agent_core::state::SessionState;
use agent_core::store::{Append, Durability, EventStore, Store, StoreError};
use agent_engine::control::append_next;
use agent_engine::{ControlError, decide_approval, load_state};
use agent_tools::{ArgumentValidator, BuiltinOptions, builtin_tool};
use serde_json::Value;

use crate::config::SessionConfig;
use crate::error::ConfigError;
use crate::session::trace_sink;

/// Why a decision was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum DecisionError {
    /// Nothing waits, the call is not waiting, it was decided already, or the
    /// session has ended.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// The edited arguments break the tool's schema, or do not say which call
    /// they are for; nothing was recorded.
    #[error("{0}")]
    InvalidArguments(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The session's trace could not be written (the decision is recorded).
    #[error("{0}")]
    Trace(String),
    /// A follow-up message was refused: the session cannot take one now (it
    /// runs, waits for approval, was cancelled) or its strategy takes none;
    /// nothing was recorded.
    #[error("session `{session_id}` cannot take a follow-up message: {reason}")]
    FollowUpRefused {
        /// The session.
        session_id: String,
        /// Why, and what to do instead.
        reason: String,
    },
}

impl From<ConfigError> for DecisionError {
    fn from(err: ConfigError) -> Self {
        Self::Trace(err.to_string())
    }
}

/// What a decision did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// The decided call ids.
    pub calls: Vec<String>,
    /// Whether the session went back to the work queue (it was submitted and
    /// nothing waits any more); otherwise it continues with a resume.
    pub queued: bool,
}

/// Approves the waiting calls of `session_id` (`call` alone, or all of them),
/// with `arguments` instead of the proposed ones if given.
pub async fn approve(
    store: &dyn Store,
    session_id: &str,
    call: Option<&str>,
    arguments: Option<Value>,
    by: &str,
) -> Result<Decided, DecisionError> {
    if let Some(arguments) = &arguments {
        check_edit(store, session_id, call, arguments).await?;
    }
    decide(
        store,
        session_id,
        call,
        ApprovalDecision::Approved { arguments },
        by,
    )
    .await
}

/// Denies the waiting calls of `session_id` (`call` alone, or all of them); the
/// model receives `reason` as an error observation.
pub async fn deny(
    store: &dyn Store,
    session_id: &str,
    call: Option<&str>,
    reason: &str,
    by: &str,
) -> Result<Decided, DecisionError> {
    decide(
        store,
        session_id,
        call,
        ApprovalDecision::Denied {
            reason: reason.to_owned(),
        },
        by,
    )
    .await
}

async fn decide(
    store: &dyn Store,
    session_id: &str,
    call: Option<&str>,
    decision: ApprovalDecision,
    by: &str,
) -> Result<Decided, DecisionError> {
    let before = store.load(session_id).await?.last().map_or(0, |e| e.seq);
    let calls = decide_approval(store, session_id, call, decision, by).await?;
    publish_to_trace(store, session_id, before).await?;
    let state = load(store, session_id).await?;
    let queued = state.is_submitted()
        && state.undecided_calls().is_empty()
        && queue_again(store, session_id, &format!("decided by {by}")).await? == Requeued::Queued;
    Ok(Decided { calls, queued })
}

/// Where a session stands after [`queue_again`].
#[derive(Debug, Clone, PartialEq)]
pub enum Requeued {
    /// It waits in the work queue for a worker.
    Queued,
    /// It has ended, or waits for a human decision: nothing to queue; its result.
    Stopped(Box<RunResult>),
}

/// Tries at recording the queueing while others write to the same session.
const QUEUE_TRIES: usize = 20;

/// Puts a stored session back in the work queue for a worker to continue (`agent
/// resume --detach`, or after a decision): records `Queued { reason }` in its log
/// and queues it. A session that has ended or waits for a decision is left as it
/// is and its result returned.
pub async fn queue_again(
    store: &dyn Store,
    session_id: &str,
    reason: &str,
) -> Result<Requeued, DecisionError> {
    for _ in 0..QUEUE_TRIES {
        let mut state = load(store, session_id).await?;
        if let Some(result) = state.run_result().or_else(|| state.awaiting_result()) {
            return Ok(Requeued::Stopped(Box::new(result)));
        }
        let before = state.last_seq();
        let queued = EventKind::Queued {
            reason: reason.to_owned(),
        };
        if appended(append_next(store, &mut state, queued).await)? {
            store.enqueue_session(session_id).await?;
            publish_to_trace(store, session_id, before).await?;
            return Ok(Requeued::Queued);
        }
    }
    Err(StoreError::Backend(format!(
        "the log of session `{session_id}` kept moving; it was not queued"
    ))
    .into())
}

/// Whether [`append_next`] wrote its event: `false` when someone wrote
/// first (load and decide again). A store failure stays a store error.
fn appended(outcome: Result<(), ControlError>) -> Result<bool, DecisionError> {
    match outcome {
        Ok(()) => Ok(true),
        Err(ControlError::Store(StoreError::Conflict { .. })) => Ok(false),
        Err(ControlError::Store(err)) => Err(err.into()),
        Err(err) => Err(err.into()),
    }
}

/// What [`send_message`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageSent {
    /// The session's last turn had ended: the message opens turn `turn`, which
    /// waits in the work queue for a worker.
    TurnQueued {
        /// The turn the message opened.
        turn: u32,
    },
    /// The session runs: the message waits for its driver to deliver it at its
    /// next step boundary (`interrupt`: a model call in flight is abandoned).
    Delivering {
        /// The turn that runs.
        turn: u32,
        /// Whether the session's policy is `interrupt`.
        interrupt: bool,
    },
}

/// Whether `state` runs a turn that a message is added to rather than one
/// opened by it.
pub fn is_running(state: &SessionState) -> bool {
    use agent_core::state::Status;
    matches!(
        state.status(),
        Status::Idle
            | Status::Thinking
            | Status::ActionPending
            | Status::ActionExecuting
            | Status::Observing
    )
}

/// Refuses a message that is empty or holds a NUL character (which no store
/// keeps) before anything is read or written.
fn check_message(session_id: &str, text: &str) -> Result<(), DecisionError> {
    let reason = if text.trim().is_empty() {
        "the message is empty"
    } else if text.contains('\0') {
        "the message holds a NUL character (\\u0000), which no store keeps; remove it"
    } else {
        return Ok(());
    };
    Err(DecisionError::FollowUpRefused {
        session_id: session_id.to_owned(),
        reason: reason.to_owned(),
    })
}

/// Adds `text` to a running session as its recorded `--on-message` policy
/// says: `enqueue` and `interrupt` record a `message_queued` event its driver
/// delivers at its next step boundary; `reject` refuses. Returns whether the
/// message interrupts, or `None` (nothing written) when the session does not
/// run (any more): its next turn is [`queue_message`] or `Engine::send`.
pub async fn message_running(
    store: &dyn Store,
    session_id: &str,
    text: &str,
) -> Result<Option<bool>, DecisionError> {
    let refused = |reason: String| DecisionError::FollowUpRefused {
        session_id: session_id.to_owned(),
        reason,
    };
    check_message(session_id, text)?;
    for _ in 0..QUEUE_TRIES {
        let mut state = load(store, session_id).await?;
        if !is_running(&state) {
            return Ok(None);
        }
        let config = SessionConfig::recorded(state.config())?;
        if config.strategy() != "react" {
            return Err(refused(format!(
                "its strategy `{}` decides from a plan or graph of its own, not from a conversation",
                config.strategy()
            )));
        }
        let interrupt = match config.on_message()? {
            crate::OnMessage::Reject => {
                return Err(refused(
                    "it is running and its --on-message policy is reject; send the message when its turn has ended".into(),
                ));
            }
            crate::OnMessage::Enqueue => false,
            crate::OnMessage::Interrupt => true,
        };
        let queued = EventKind::MessageQueued {
            text: text.to_owned(),
            interrupt,
        };
        // The driver publishes the message to the session's trace when its
        // next commit is placed after it.
        if appended(append_next(store, &mut state, queued).await)? {
            return Ok(Some(interrupt));
        }
    }
    Err(StoreError::Backend(format!(
        "the log of session `{session_id}` kept moving; the message was not recorded"
    ))
    .into())
}

/// Sends `text` to a stored session over the work queue (`POST
/// /v1/sessions/{id}/messages`): a session whose turn ended gets its next turn
/// queued for a worker ([`queue_message`]); a running one gets the message as
/// its policy says ([`message_running`]).
pub async fn send_message(
    store: &dyn Store,
    session_id: &str,
    text: &str,
) -> Result<MessageSent, DecisionError> {
    let state = load(store, session_id).await?;
    if is_running(&state)
        && let Some(interrupt) = message_running(store, session_id, text).await?
    {
        return Ok(MessageSent::Delivering {
            turn: state.turn(),
            interrupt,
        });
    }
    let turn = queue_message(store, session_id, text).await?;
    Ok(MessageSent::TurnQueued { turn })
}

/// Records `text` as the follow-up message that opens the next turn of
/// `session_id` and queues the session for a worker to run that turn (`POST
/// /v1/sessions/{id}/messages`); returns the turn. The session must have ended
/// with a result, not been cancelled, and run the `react` strategy (the one
/// that decides from a conversation); otherwise nothing is recorded.
pub async fn queue_message(
    store: &dyn Store,
    session_id: &str,
    text: &str,
) -> Result<u32, DecisionError> {
    let refused = |reason: String| DecisionError::FollowUpRefused {
        session_id: session_id.to_owned(),
        reason,
    };
    check_message(session_id, text)?;
    for _ in 0..QUEUE_TRIES {
        let mut state = load(store, session_id).await?;
        let strategy = SessionConfig::recorded(state.config())
            .map(|config| config.strategy().to_owned())
            .unwrap_or_else(|_| state.strategy().to_owned());
        if strategy != "react" {
            return Err(refused(format!(
                "its strategy `{strategy}` decides from a plan or graph of its own, not from a conversation; start a new session instead"
            )));
        }
        state.check_follow_up().map_err(refused)?;
        let before = state.last_seq();
        let turn = state.turn() + 1;
        let events = [
            Event::new(
                session_id,
                before + 1,
                EventKind::UserMessage {
                    text: text.to_owned(),
                    turn,
                    config: None,
                },
            ),
            Event::new(
                session_id,
                before + 2,
                EventKind::Queued {
                    reason: format!("message for turn {turn}"),
                },
            ),
        ];
        for event in &events {
            state.apply(event).map_err(ControlError::from)?;
        }
        match store
            .append(Append::after(&state, &events, Durability::Full))
            .await
        {
            Ok(()) => {
                store.enqueue_session(session_id).await?;
                publish_to_trace(store, session_id, before).await?;
                return Ok(turn);
            }
            Err(StoreError::Conflict { .. }) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Err(StoreError::Backend(format!(
        "the log of session `{session_id}` kept moving; the message was not recorded"
    ))
    .into())
}

async fn load(store: &dyn EventStore, session_id: &str) -> Result<SessionState, DecisionError> {
    load_state(store, session_id)
        .await
        .map_err(|err| match err {
            agent_engine::EngineError::Store(store) => DecisionError::Store(store),
            other => DecisionError::Store(StoreError::Backend(other.to_string())),
        })
}

/// Refuses edited arguments that are not an object, that do not say which call
/// they are for, or that break the schema of the built-in tool they are for.
async fn check_edit(
    store: &dyn EventStore,
    session_id: &str,
    call: Option<&str>,
    arguments: &Value,
) -> Result<(), DecisionError> {
    if !arguments.is_object() {
        return Err(DecisionError::InvalidArguments(
            "the edited arguments must be a JSON object".into(),
        ));
    }
    let events = store.load(session_id).await?;
    let state = SessionState::from_events(session_id, &events).map_err(ControlError::from)?;
    let waiting = state.undecided_calls();
    let call = match call {
        Some(id) => waiting.iter().find(|waiting| waiting.id == id),
        None if waiting.len() <= 1 => waiting.first(),
        None => {
            return Err(DecisionError::InvalidArguments(format!(
                "{} calls wait; name the one whose arguments are edited",
                waiting.len()
            )));
        }
    };
    if let Some(tool) =
        call.and_then(|call| builtin_tool(&call.tool_name, &BuiltinOptions::default()))
    {
        let validator = ArgumentValidator::new(&tool.spec().input_schema)
            .map_err(|err| DecisionError::InvalidArguments(err.to_string()))?;
        validator.validate(arguments).map_err(|err| {
            DecisionError::InvalidArguments(format!("arguments for `{}`: {err}", tool.spec().name))
        })?;
    }
    Ok(())
}

/// Publishes the events of `session_id` after seq `after` to the trace file its
/// configuration names, if any: for events committed by someone other than the
/// session's driver (a decision, a tool result from a worker).
pub async fn publish_to_trace(
    store: &dyn EventStore,
    session_id: &str,
    after: u64,
) -> Result<(), DecisionError> {
    let events = store.load(session_id).await?;
    let Some(EventKind::SessionStarted { config, .. }) = events.first().map(|event| &event.kind)
    else {
        return Ok(());
    };
    let Ok(config) = SessionConfig::recorded(config) else {
        return Ok(());
    };
    let Some(trace) = trace_sink(&config)? else {
        return Ok(());
    };
    let mut state = SessionState::new(session_id);
    for event in &events {
        state.apply(event).map_err(ControlError::from)?;
        if event.seq > after {
            trace
                .publish(event, state.steps_used())
                .map_err(|err| DecisionError::Trace(err.to_string()))?;
        }
    }
    Ok(())
}
