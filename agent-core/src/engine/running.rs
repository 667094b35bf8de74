//! The calls of one tool turn while they run: a call alone runs inside the
//! driver's own task (no task to spawn, no worker to wake, and a tool that is
//! ready at once is done at the first poll); several run as tasks of a
//! `JoinSet`, concurrently. Either way a panic becomes the call's failure.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::FutureExt;
use tokio::task::{Id, JoinSet};
use tracing::Span;

use crate::call::{CallObserver, panic_message, payload_message};
use crate::tool::{ToolError, ToolOutput};
use crate::types::ToolCall;

/// How a call ended: its result, or the message of its panic.
pub(super) type Outcome = Result<Result<ToolOutput, ToolError>, String>;

/// A call that ended, with what its result is recorded with.
pub(super) struct Ended {
    pub(super) outcome: Outcome,
    pub(super) call: ToolCall,
    pub(super) observer: Arc<CallObserver>,
    pub(super) span: Span,
}

type Running = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// The running calls of a turn.
pub(super) enum Calls {
    /// One call, polled by the driver's task.
    Alone(Option<(Running, ToolCall, Arc<CallObserver>, Span)>),
    /// Several calls, each its own task.
    Together {
        set: JoinSet<Result<ToolOutput, ToolError>>,
        calls: HashMap<Id, (ToolCall, Arc<CallObserver>, Span)>,
    },
}

/// A call ready to start: the tool's future and what its result is recorded with.
pub(super) struct Ready<F> {
    pub(super) future: F,
    pub(super) call: ToolCall,
    pub(super) observer: Arc<CallObserver>,
    pub(super) span: Span,
}

impl Calls {
    /// Starts `ready`: alone when it is one call, as tasks otherwise.
    pub(super) fn start<F>(ready: Vec<Ready<F>>) -> Self
    where
        F: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        if ready.len() == 1 {
            let alone = ready.into_iter().next().map(|call| {
                let future: Running = Box::pin(
                    AssertUnwindSafe(call.future)
                        .catch_unwind()
                        .map(|caught| caught.map_err(payload_message)),
                );
                (future, call.call, call.observer, call.span)
            });
            return Self::Alone(alone);
        }
        let mut set = JoinSet::new();
        let mut calls = HashMap::new();
        for call in ready {
            let handle = set.spawn(call.future);
            calls.insert(handle.id(), (call.call, call.observer, call.span));
        }
        Self::Together { set, calls }
    }

    /// Whether every call has ended.
    pub(super) fn is_empty(&self) -> bool {
        match self {
            Self::Alone(alone) => alone.is_none(),
            Self::Together { set, .. } => set.is_empty(),
        }
    }

    /// Whether the calls run as tasks (so they need the driver to yield to start).
    pub(super) fn are_tasks(&self) -> bool {
        matches!(self, Self::Together { .. })
    }

    /// The next call to end; `None` when all have. Cancel-safe: dropped before
    /// it is ready, no call is lost.
    pub(super) async fn next(&mut self) -> Option<Ended> {
        match self {
            Self::Alone(alone) => {
                let (future, ..) = alone.as_mut()?;
                let outcome = future.as_mut().await;
                let (_, call, observer, span) = alone.take()?;
                Some(Ended {
                    outcome,
                    call,
                    observer,
                    span,
                })
            }
            Self::Together { set, calls } => loop {
                let (id, outcome) = match set.join_next_with_id().await? {
                    Ok((id, outcome)) => (id, Ok(outcome)),
                    Err(err) => (err.id(), Err(panic_message(err))),
                };
                if let Some((call, observer, span)) = calls.remove(&id) {
                    return Some(Ended {
                        outcome,
                        call,
                        observer,
                        span,
                    });
                }
            },
        }
    }
}
