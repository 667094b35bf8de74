//! The tool step: guard a turn's calls, record their dispatch and commit it with
//! the model response that proposed them before any of them runs — with fsync
//! when any call is not idempotent, without otherwise (a write that survives a
//! killed process; the next step's commit makes it durable against power loss)
//! — run them concurrently (bounded), and record each result as it arrives —
//! committed at once when its tool is not idempotent, so a finished side effect
//! is never run twice. After a crash, calls left in flight are re-run when
//! idempotent and otherwise completed with [`INTERRUPTED`].

use std::sync::Arc;

use tracing::Instrument;

use super::driver::{Driver, internal_failure};
use super::repeat::repeat_message;
use super::running::{Calls, Pending};
use crate::call::{CallObserver, outcome_event};
use crate::error::EngineError;
use crate::telemetry;
use agent_core::cancel::Cancellation;
use agent_core::event::EventKind;
use agent_core::guard::Checkpoint;
use agent_core::state::Status;
use agent_core::store::Durability;
use agent_core::store::queue::QueuedAction;
use agent_core::tool::{Tool, ToolContext};
use agent_core::types::{Observation, ToolCall};

/// The observation a non-idempotent call gets when a crash left its outcome unknown.
pub const INTERRUPTED: &str = "interrupted: outcome unknown";

impl Driver<'_> {
    fn tool(&self, call: &ToolCall) -> Option<Arc<dyn Tool>> {
        self.engine.tools.get(&call.tool_name).cloned()
    }

    /// Whether running `call` twice is harmless; a call of an unknown tool has no effect.
    fn is_idempotent(&self, call: &ToolCall) -> bool {
        self.tool(call).is_none_or(|tool| tool.spec().idempotent)
    }

    pub(super) async fn dispatch(&mut self, calls: Vec<ToolCall>) -> Result<(), EngineError> {
        if calls.is_empty() {
            return self.record(internal_failure(format!(
                "strategy `{}` asked to dispatch no calls",
                self.engine.strategy.name()
            )));
        }
        if !self.guarded(Checkpoint::Dispatch(&calls)).await? {
            return Ok(());
        }
        for call in &calls {
            self.record(EventKind::ActionDispatched { call: call.clone() })?;
        }
        let calls = self.answer_repeats(calls)?;
        if self.state.status() != Status::ActionExecuting || calls.is_empty() {
            return Ok(());
        }
        let durability = if calls.iter().all(|call| self.is_idempotent(call)) {
            Durability::Process
        } else {
            Durability::Full
        };
        if self.via_queue {
            return self.hand_to_queue(calls, durability).await;
        }
        // Nothing acts on the model's response before it is written: a process
        // killed while the calls run loses neither the response nor the
        // dispatch, so a resume never pays for the step again. A call that is
        // not idempotent runs only once its dispatch is durable.
        if !self.flush(durability).await? {
            return Ok(());
        }
        self.execute(calls).await
    }

    /// Hands dispatched calls to the work queue: calls of unknown tools get their
    /// error observation here, the others are marked queued in the log, committed,
    /// then queued; the drive then parks until workers have their results.
    async fn hand_to_queue(
        &mut self,
        calls: Vec<ToolCall>,
        durability: Durability,
    ) -> Result<(), EngineError> {
        let mut queued = Vec::new();
        for call in calls {
            match self.tool(&call) {
                Some(tool) => queued.push(QueuedAction {
                    session_id: self.state.session_id().to_owned(),
                    idempotent: tool.spec().idempotent,
                    call,
                }),
                None => {
                    let message = self.unknown_tool_message(&call.tool_name);
                    self.record(EventKind::ActionCompleted {
                        observation: Observation::error(&call, message),
                    })?;
                }
            }
        }
        if !queued.is_empty() {
            self.record(EventKind::ActionsQueued {
                call_ids: queued.iter().map(|action| action.call.id.clone()).collect(),
            })?;
        }
        if !self.flush(durability).await? || queued.is_empty() {
            return Ok(());
        }
        self.enqueue(&queued).await
    }

    /// Puts `actions` in the work queue and parks the drive.
    async fn enqueue(&mut self, actions: &[QueuedAction]) -> Result<(), EngineError> {
        if let Some(queue) = &self.engine.queue {
            queue
                .enqueue_actions(actions)
                .await
                .map_err(EngineError::Queue)?;
            self.parked = true;
        }
        Ok(())
    }

    /// After a crash: re-runs in-flight idempotent calls, and reports the others as
    /// interrupted.
    pub(super) async fn recover_in_flight(&mut self) -> Result<(), EngineError> {
        if self.via_queue {
            return self.recover_through_queue().await;
        }
        let mut rerun = Vec::new();
        for call in self.state.in_flight_calls() {
            if self.tool(&call).is_some() && self.is_idempotent(&call) {
                rerun.push(call);
            } else {
                self.record(EventKind::ActionCompleted {
                    observation: Observation::error(&call, INTERRUPTED),
                })?;
            }
        }
        if rerun.is_empty() {
            return Ok(());
        }
        self.execute(rerun).await
    }

    /// With the work queue: calls handed to it are queued again (a queue entry that
    /// exists is kept, with its attempts); calls a crashed in-process run left
    /// behind are queued when idempotent and otherwise reported interrupted.
    async fn recover_through_queue(&mut self) -> Result<(), EngineError> {
        let mut queued = Vec::new();
        let mut marked = Vec::new();
        for call in self.state.in_flight_calls() {
            let tool = self.tool(&call);
            let handed = self.state.is_queued(&call.id);
            match tool {
                Some(tool) if handed || tool.spec().idempotent => {
                    if !handed {
                        marked.push(call.id.clone());
                    }
                    queued.push(QueuedAction {
                        session_id: self.state.session_id().to_owned(),
                        idempotent: tool.spec().idempotent,
                        call,
                    });
                }
                _ => self.record(EventKind::ActionCompleted {
                    observation: Observation::error(&call, INTERRUPTED),
                })?,
            }
        }
        if !marked.is_empty() {
            self.record(EventKind::ActionsQueued { call_ids: marked })?;
        }
        if queued.is_empty() || !self.flush(Durability::Full).await? {
            return Ok(());
        }
        self.enqueue(&queued).await
    }

    /// Runs dispatched calls concurrently and records each result as it arrives.
    async fn execute(&mut self, calls: Vec<ToolCall>) -> Result<(), EngineError> {
        let cancel = Cancellation::new();
        let mut ready = Vec::with_capacity(calls.len());
        for call in calls {
            let Some(tool) = self.tool(&call) else {
                let message = self.unknown_tool_message(&call.tool_name);
                self.record(EventKind::ActionCompleted {
                    observation: Observation::error(&call, message),
                })?;
                continue;
            };
            let observer = CallObserver::new(&call);
            let ctx = ToolContext {
                session_id: self.state.session_id().to_owned(),
                call_id: call.id.clone(),
                attempt: 1,
                workspace: Arc::clone(&self.engine.workspace),
                observer: Arc::clone(&observer) as Arc<dyn agent_core::layer::LayerObserver>,
                cancel: cancel.clone(),
            };
            let arguments = call.arguments.clone();
            let span =
                telemetry::tool_span(self.state.session_id(), &call, self.engine.record_content);
            let future = async move { tool.call(arguments, &ctx).await }.instrument(span.clone());
            ready.push((
                future,
                Pending {
                    call,
                    observer,
                    span,
                },
            ));
        }
        let mut running = Calls::start(ready);
        while !running.is_empty() {
            let ended = self.bounds.wait(running.next()).await;
            let Some(ended) = self.settle(ended).await? else {
                cancel.cancel();
                return Ok(());
            };
            let Some((
                outcome,
                Pending {
                    call,
                    observer,
                    span,
                },
            )) = ended
            else {
                break;
            };
            for report in observer.take() {
                self.record_timed(report)?;
            }
            let kind = outcome_event(&call, outcome);
            telemetry::record_tool_outcome(&span, &kind, self.engine.record_content);
            self.record(kind)?;
            if self.state.status().is_terminal() {
                cancel.cancel();
                return Ok(());
            }
            if !self.is_idempotent(&call) && !self.flush(Durability::Full).await? {
                cancel.cancel();
                return Ok(());
            }
        }
        Ok(())
    }

    /// Completes the calls that repeat an earlier successful call of an
    /// idempotent tool with a reminder of its result; returns the others.
    fn answer_repeats(&mut self, calls: Vec<ToolCall>) -> Result<Vec<ToolCall>, EngineError> {
        if !self.engine.refuse_repeats {
            return Ok(calls);
        }
        let mut others = Vec::with_capacity(calls.len());
        for call in calls {
            let idempotent = self.tool(&call).is_some_and(|tool| tool.spec().idempotent);
            let repeat = idempotent
                .then(|| self.state.earlier_success(&call))
                .flatten()
                .map(|(earlier, result)| {
                    (earlier.to_owned(), repeat_message(&call, earlier, result))
                });
            match repeat {
                Some((earlier_call_id, message)) => {
                    tracing::info!(tool = %call.tool_name, call_id = %call.id, earlier = %earlier_call_id, "repeated call answered from the history");
                    self.record(EventKind::RepeatedCallAnswered {
                        call_id: call.id.clone(),
                        tool_name: call.tool_name.clone(),
                        earlier_call_id,
                    })?;
                    self.record(EventKind::ActionCompleted {
                        observation: Observation::error(&call, message),
                    })?;
                }
                None => others.push(call),
            }
        }
        Ok(others)
    }

    fn unknown_tool_message(&self, name: &str) -> String {
        let available: Vec<&str> = self.engine.tools.names().collect();
        if available.is_empty() {
            format!("unknown tool `{name}`: no tools are available in this session")
        } else {
            format!(
                "unknown tool `{name}`: available tools are {}",
                available.join(", ")
            )
        }
    }
}
