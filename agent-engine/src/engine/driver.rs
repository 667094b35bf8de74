//! The driver loop: one session, decided, guarded, persisted and acted on until
//! it ends or waits for a human. Every wait for a model, a tool, a gate or a piece
//! of work is bounded the same way ([`Bounds::wait`]): by the earliest guard
//! deadline and by the lease keeper's signal that the log moved; how such a wait
//! ended is settled in one place ([`Driver::settle`]).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use super::lease::LeaseSignal;
use super::log_hold::LogHold;
use super::work_set::WorkSet;
use super::{Drive, Engine};
use crate::error::EngineError;
use crate::guards::{check_all, earliest_deadline};
use crate::telemetry;
use agent_core::event::EventKind;
use agent_core::guard::{Checkpoint, Deadline, GuardContext, Verdict};
use agent_core::result::ExitReason;
use agent_core::state::SessionState;
use agent_core::store::Durability;
use agent_core::strategy::Decision;
use tracing::Instrument;

/// How a bounded wait ended.
pub(super) enum Bounded<T> {
    /// The future completed.
    Done(T),
    /// A guard's deadline passed first.
    TimedOut,
    /// The log moved under the driver, or the lease was lost.
    Interrupted,
}

/// What every wait of one run is bounded by.
pub(super) struct Bounds {
    deadline: Option<Deadline>,
    signal: Arc<LeaseSignal>,
}

impl Bounds {
    /// Runs `future` unless the deadline passes or the log moves first. A future
    /// that is ready at once (a scripted model, a pure tool) costs no timer.
    pub(super) async fn wait<F: Future>(&self, future: F) -> Bounded<F::Output> {
        let mut future = pin!(future);
        if let Poll::Ready(output) = future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            return Bounded::Done(output);
        }
        let deadline = async {
            match &self.deadline {
                Some(deadline) => {
                    tokio::time::sleep_until(tokio::time::Instant::from_std(deadline.at)).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            output = future => Bounded::Done(output),
            () = deadline => Bounded::TimedOut,
            () = self.signal.wake.notified() => Bounded::Interrupted,
        }
    }
}

impl Bounds {
    /// Runs `future` for at most `limit` unless the log moves first; the run's
    /// own deadline does not bound it (the last answer after that deadline).
    pub(super) async fn wait_at_most<F: Future>(
        &self,
        limit: std::time::Duration,
        future: F,
    ) -> Bounded<F::Output> {
        tokio::select! {
            output = future => Bounded::Done(output),
            () = tokio::time::sleep(limit) => Bounded::TimedOut,
            () = self.signal.wake.notified() => Bounded::Interrupted,
        }
    }
}

/// The state of one session while the engine drives it.
pub(super) struct Driver<'e> {
    pub(super) engine: &'e Engine,
    pub(super) state: SessionState,
    /// The lease's signal and what is not yet committed.
    pub(super) log: LogHold,
    pub(super) bounds: Bounds,
    pub(super) started: Instant,
    /// Set when the log may hold dispatched calls without results (after a resume
    /// or a reload); the next turn of the loop settles them first.
    pub(super) needs_recovery: bool,
    pub(super) work: WorkSet,
    /// Set when tool calls go to the work queue instead of running here.
    pub(super) via_queue: bool,
    /// Set when the drive handed its calls to the queue and must stop.
    pub(super) parked: bool,
}

impl<'e> Driver<'e> {
    pub(super) fn new(engine: &'e Engine, state: SessionState, signal: Arc<LeaseSignal>) -> Self {
        let started = Instant::now();
        Self {
            engine,
            log: LogHold::new(Arc::clone(&signal), state.last_seq(), started),
            state,
            bounds: Bounds {
                deadline: earliest_deadline(&engine.guards, started),
                signal,
            },
            started,
            needs_recovery: false,
            work: WorkSet::default(),
            via_queue: false,
            parked: false,
        }
    }

    /// How durable a step's commit before its model call must be: written (a
    /// killed process keeps it), and fsynced once [`DURABLE_EVERY`] passed
    /// since this driver's last fsync, so a power loss costs at most that
    /// much of a session's idempotent work.
    pub(super) fn step_durability(&self) -> Durability {
        if self.log.durable_at.elapsed() >= DURABLE_EVERY {
            Durability::Full
        } else {
            Durability::Process
        }
    }

    /// Hands tool calls to the engine's work queue instead of running them.
    pub(super) fn hand_tools_to_queue(&mut self) {
        self.via_queue = self.engine.queue.is_some();
    }

    /// The lease keeper's signal.
    pub(super) fn signal(&self) -> &LeaseSignal {
        &self.log.signal
    }

    /// Settles calls a crash may have left in flight before the next decision.
    pub(super) fn recover_before_next_decision(&mut self) {
        self.needs_recovery = true;
    }

    /// Decides and performs until the session ends or waits for a human, or (with
    /// the work queue) until its tool calls are in the queue, inside the run's
    /// `invoke_agent` span.
    pub(super) async fn drive(self) -> Result<Drive, EngineError> {
        let span = telemetry::run_span(
            self.state.session_id(),
            self.engine.strategy.name(),
            &self.engine.model.identity(),
        );
        // Boxed: the loop's state is allocated when the drive starts, so a
        // session spawned but not yet polled (thousands of them, in a server
        // under load) holds a small future, not the loop's whole state.
        let outcome = Box::pin(self.drive_loop()).instrument(span.clone()).await;
        match &outcome {
            Ok(Drive::Stopped(result)) => {
                span.record("agent.exit_reason", result.exit_reason.as_str());
                if !matches!(
                    result.exit_reason,
                    ExitReason::Finished | ExitReason::AwaitingApproval | ExitReason::Paused
                ) {
                    let message = result
                        .error
                        .as_deref()
                        .unwrap_or(result.exit_reason.as_str());
                    telemetry::record_error(&span, result.exit_reason.as_str(), message);
                }
                tracing::info!(parent: &span, exit_reason = result.exit_reason.as_str(), steps = result.steps_used, "run ended");
            }
            Ok(Drive::Parked) => {
                span.record("agent.exit_reason", "parked");
                tracing::debug!(parent: &span, "run parked: its tool calls are in the work queue");
            }
            Err(err) => {
                telemetry::record_error(&span, "engine_error", &err.to_string());
                tracing::info!(parent: &span, error = %err, "run stopped by an engine error");
            }
        }
        outcome
    }

    async fn drive_loop(mut self) -> Result<Drive, EngineError> {
        loop {
            if let Some(result) = self
                .state
                .run_result()
                .or_else(|| self.state.awaiting_result())
                .or_else(|| self.state.paused_result())
            {
                if self.flush(Durability::Full).await? {
                    return Ok(Drive::Stopped(Box::new(result)));
                }
                continue;
            }
            if self.parked {
                if self.flush(Durability::Full).await? {
                    return Ok(Drive::Parked);
                }
                self.parked = false;
                continue;
            }
            if std::mem::take(&mut self.needs_recovery) {
                self.recover_in_flight().await?;
                continue;
            }
            if self.state.pause_requested() && self.state.status().is_step_boundary() {
                self.record(EventKind::Paused {
                    reason: "paused on request after its step".into(),
                })?;
                continue;
            }
            let pending = self.state.pending_messages().len();
            if pending > 0 && self.state.status().is_step_boundary() {
                self.record(EventKind::MessagesDelivered {
                    count: u32::try_from(pending).unwrap_or(u32::MAX),
                })?;
                continue;
            }
            let decision = match self.engine.strategy.next(&self.state) {
                Ok(decision) => decision,
                Err(err) => {
                    self.record(internal_failure(err.to_string()))?;
                    continue;
                }
            };
            self.perform(decision).await?;
        }
    }

    async fn perform(&mut self, decision: Decision) -> Result<(), EngineError> {
        match decision {
            Decision::CallModel(call) => self.call_model(call).await,
            Decision::Dispatch(calls) => {
                let waiting = self.awaiting_decision(&calls);
                if waiting.is_empty() {
                    self.dispatch(calls).await
                } else {
                    self.record(EventKind::ApprovalRequested { calls: waiting })
                }
            }
            Decision::Finish { .. }
                if !self.state.pending_messages().is_empty()
                    && self.state.proposed_finish().is_some() =>
            {
                self.record(EventKind::ResponseRefused {
                    reason: UNANSWERED_MESSAGE.into(),
                })
            }
            Decision::Finish { answer } => {
                // A completion gate runs a program: the response it checks is
                // written first, so a crash during the check does not lose it.
                if self.engine.gated && !self.flush(Durability::Process).await? {
                    return Ok(());
                }
                if self.guarded(Checkpoint::Finish(&answer)).await? {
                    let output = self
                        .engine
                        .output
                        .as_ref()
                        .and_then(|schema| schema.check(&answer).ok());
                    self.record(EventKind::Finished { answer, output })?;
                }
                Ok(())
            }
            Decision::AwaitApproval(calls) => self.record(EventKind::ApprovalRequested { calls }),
            Decision::Record { name, data } => self.record(EventKind::Strategy {
                strategy: self.engine.strategy.name().to_owned(),
                name,
                data,
                usage: None,
            }),
            Decision::RunWork { work, limit } => self.run_work(work, limit).await,
            Decision::Refuse { reason } => self.record(EventKind::ResponseRefused { reason }),
            Decision::Fail { exit_reason, error } => self.record(EventKind::Failed {
                exit_reason,
                budget: None,
                error: Some(error),
            }),
        }
    }

    /// Asks every guard whether the decision at `checkpoint` may go on; an
    /// intervention is recorded instead. `false` means: do not perform it.
    pub(super) async fn guarded(
        &mut self,
        checkpoint: Checkpoint<'_>,
    ) -> Result<bool, EngineError> {
        let ctx = GuardContext {
            state: &self.state,
            workspace: &self.engine.workspace,
            started: self.started,
        };
        let verdict = self
            .bounds
            .wait(check_all(&self.engine.guards, checkpoint, &ctx))
            .await;
        match self.settle(verdict).await? {
            Some(Verdict::Proceed) => Ok(true),
            Some(Verdict::Intervene(event)) => {
                self.end_with(event).await?;
                Ok(false)
            }
            None => Ok(false),
        }
    }

    /// The output of a bounded wait, or `None` when the step must be abandoned:
    /// the deadline's event was recorded, or the log moved and was reloaded.
    pub(super) async fn settle<T>(
        &mut self,
        outcome: Bounded<T>,
    ) -> Result<Option<T>, EngineError> {
        match outcome {
            Bounded::Done(output) => Ok(Some(output)),
            Bounded::TimedOut => {
                let event = self
                    .bounds
                    .deadline
                    .as_ref()
                    .map(|deadline| deadline.event.clone())
                    .unwrap_or_else(|| internal_failure("a wait timed out without a deadline"));
                self.end_with(event).await?;
                Ok(None)
            }
            Bounded::Interrupted => {
                self.reload().await?;
                Ok(None)
            }
        }
    }
}

/// The longest a driver goes without an fsync while its steps commit (see
/// [`Driver::step_durability`]).
pub(super) const DURABLE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The feedback on a finish proposed while a message waits that the model has
/// not seen; the message follows it in the history.
const UNANSWERED_MESSAGE: &str =
    "A new message arrived while you were answering; read it below and answer it as well.";

/// The event that ends a run with `internal_error`.
pub(super) fn internal_failure(error: impl Into<String>) -> EventKind {
    EventKind::Failed {
        exit_reason: ExitReason::InternalError,
        budget: None,
        error: Some(error.into()),
    }
}
