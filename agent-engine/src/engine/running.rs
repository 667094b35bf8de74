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
use agent_core::tool::{ToolError, ToolOutput};
use agent_core::types::ToolCall;

/// How a call ended: its result, or the message of its panic.
pub(super) type Outcome = Result<Result<ToolOutput, ToolError>, String>;

/// A call and what its result is recorded with.
pub(super) struct Pending {
    pub(super) call: ToolCall,
    pub(super) observer: Arc<CallObserver>,
    pub(super) span: Span,
}

type Running = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// The running calls of a turn.
pub(super) enum Calls {
    /// One call, polled by the driver's task.
    Alone(Option<(Running, Pending)>),
    /// Several calls, each its own task.
    Together {
        set: JoinSet<Result<ToolOutput, ToolError>>,
        calls: HashMap<Id, Pending>,
    },
}

impl Calls {
    /// Starts the tool futures in `ready`: alone when there is one call, as
    /// tasks otherwise.
    pub(super) fn start<F>(ready: Vec<(F, Pending)>) -> Self
    where
        F: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        if ready.len() == 1 {
            let alone = ready.into_iter().next().map(|(future, pending)| {
                let future: Running = Box::pin(
                    AssertUnwindSafe(future)
                        .catch_unwind()
                        .map(|caught| caught.map_err(payload_message)),
                );
                (future, pending)
            });
            return Self::Alone(alone);
        }
        let mut set = JoinSet::new();
        let mut calls = HashMap::new();
        for (future, pending) in ready {
            calls.insert(set.spawn(future).id(), pending);
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

    /// The next call to end and how it ended; `None` when all have. Cancel-safe:
    /// dropped before it is ready, no call is lost.
    pub(super) async fn next(&mut self) -> Option<(Outcome, Pending)> {
        match self {
            Self::Alone(alone) => {
                let (future, _) = alone.as_mut()?;
                let outcome = future.as_mut().await;
                let (_, pending) = alone.take()?;
                Some((outcome, pending))
            }
            Self::Together { set, calls } => loop {
                let (id, outcome) = match set.join_next_with_id().await? {
                    Ok((id, outcome)) => (id, Ok(outcome)),
                    Err(err) => (err.id(), Err(panic_message(err))),
                };
                if let Some(pending) = calls.remove(&id) {
                    return Some((outcome, pending));
                }
            },
        }
    }
}
