//! Human decisions on a stored session, as the CLI and the HTTP API take them:
//! approve (optionally with edited arguments, checked against the tool's schema
//! when the tool is a built-in one) and deny. No process drives a session while
//! it waits, so the decisions are published to the session's recorded trace here.

use agent::tools::{ArgumentValidator, BuiltinOptions, builtin_tool};
use agent::{
    ApprovalDecision, ControlError, EventKind, EventStore, SessionState, StoreError,
    decide_approval,
};
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
}

impl From<ConfigError> for DecisionError {
    fn from(err: ConfigError) -> Self {
        Self::Trace(err.to_string())
    }
}

/// Approves the waiting calls of `session_id` (`call` alone, or all of them),
/// with `arguments` instead of the proposed ones if given. Returns the decided
/// call ids; the session then continues with a resume (or a worker).
pub async fn approve(
    store: &dyn EventStore,
    session_id: &str,
    call: Option<&str>,
    arguments: Option<Value>,
    by: &str,
) -> Result<Vec<String>, DecisionError> {
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
    store: &dyn EventStore,
    session_id: &str,
    call: Option<&str>,
    reason: &str,
    by: &str,
) -> Result<Vec<String>, DecisionError> {
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
    store: &dyn EventStore,
    session_id: &str,
    call: Option<&str>,
    decision: ApprovalDecision,
    by: &str,
) -> Result<Vec<String>, DecisionError> {
    let before = store.load(session_id).await?.last().map_or(0, |e| e.seq);
    let decided = decide_approval(store, session_id, call, decision, by).await?;
    publish_to_trace(store, session_id, before).await?;
    Ok(decided)
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
