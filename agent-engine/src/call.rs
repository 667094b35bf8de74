//! One tool call's outcome as events, the same wherever the call runs — in the
//! engine's process, or on a worker that took it from the work queue: what its
//! layers reported (retries, circuit-breaker changes), then how it ended.

use std::sync::{Arc, Mutex};

use agent_core::event::{EventKind, now_millis};
use agent_core::layer::{CircuitState, LayerObserver, RetryNotice};
use agent_core::result::ExitReason;
use agent_core::tool::{ToolError, ToolOutput};
use agent_core::types::{Observation, ToolCall};

/// An event that happened before it was recorded, with the moment it happened
/// (Unix milliseconds): a layer's report is recorded when the call returns, but
/// its event carries the time of the retry it reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Timed {
    /// The event.
    pub kind: EventKind,
    /// When it happened.
    pub at: u64,
}

impl Timed {
    /// `kind`, happening now.
    pub fn now(kind: EventKind) -> Self {
        Self {
            kind,
            at: now_millis(),
        }
    }
}

/// The observer of one call: keeps what its layers report, as events.
#[derive(Debug)]
pub struct CallObserver {
    call_id: String,
    tool_name: String,
    events: Mutex<Vec<Timed>>,
}

impl CallObserver {
    /// An observer of `call`.
    pub fn new(call: &ToolCall) -> Arc<Self> {
        Arc::new(Self {
            call_id: call.id.clone(),
            tool_name: call.tool_name.clone(),
            events: Mutex::new(Vec::new()),
        })
    }

    /// What the layers reported so far, oldest first, each with its moment.
    pub fn take(&self) -> Vec<Timed> {
        self.events
            .lock()
            .map(|mut events| std::mem::take(&mut *events))
            .unwrap_or_default()
    }

    fn push(&self, event: EventKind) {
        if let Ok(mut events) = self.events.lock() {
            events.push(Timed::now(event));
        }
    }
}

impl LayerObserver for CallObserver {
    fn retrying(&self, notice: RetryNotice) {
        self.push(EventKind::ActionAttemptFailed {
            call_id: self.call_id.clone(),
            tool_name: self.tool_name.clone(),
            attempt: notice.attempt,
            delay_ms: u64::try_from(notice.delay.as_millis()).unwrap_or(u64::MAX),
            error: notice.error,
            retryable: true,
        });
    }

    fn circuit_changed(&self, target: &str, state: CircuitState) {
        self.push(EventKind::CircuitChanged {
            tool_name: target.to_owned(),
            state,
        });
    }
}

/// The event of how `call` ended: its observation (an expected failure is an
/// error observation), or `internal_error` for a bug (an internal tool error, a
/// panic — `outcome` is the task the call ran in).
pub fn call_result_event(
    call: &ToolCall,
    outcome: Result<Result<ToolOutput, ToolError>, tokio::task::JoinError>,
) -> EventKind {
    outcome_event(call, outcome.map_err(panic_message))
}

/// [`call_result_event`] of a call whose panic (or cancellation) was caught as
/// the message in `Err`.
pub(crate) fn outcome_event(
    call: &ToolCall,
    outcome: Result<Result<ToolOutput, ToolError>, String>,
) -> EventKind {
    let failure = |error: String| EventKind::Failed {
        exit_reason: ExitReason::InternalError,
        budget: None,
        error: Some(error),
    };
    match outcome {
        Ok(Ok(output)) => EventKind::ActionCompleted {
            observation: Observation::success(call, output.content),
        },
        Ok(Err(ToolError::InvalidArguments(message))) => EventKind::ActionCompleted {
            observation: Observation::error(
                call,
                format!("invalid arguments for `{}`: {message}", call.tool_name),
            ),
        },
        Ok(Err(ToolError::Failed { message, .. })) => EventKind::ActionCompleted {
            observation: Observation::error(call, message),
        },
        Ok(Err(ToolError::Internal(message))) => failure(format!(
            "tool `{}` failed unexpectedly on call `{}`: {message}",
            call.tool_name, call.id
        )),
        Err(panic) => failure(format!(
            "tool `{}` panicked on call `{}`: {panic}",
            call.tool_name, call.id
        )),
    }
}

/// What a panicked (or cancelled) task said.
pub(crate) fn panic_message(err: tokio::task::JoinError) -> String {
    if !err.is_panic() {
        return "the task was cancelled".into();
    }
    payload_message(err.into_panic())
}

/// The message a panic carried.
pub(crate) fn payload_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".into()
    }
}
