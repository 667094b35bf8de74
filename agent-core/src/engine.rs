//! The `Engine`: drives a session by asking its strategy for the next decision,
//! performing it (model call, tool calls, strategy work, finish), recording every
//! fact as an event, committing events to the store before acting on them, then
//! publishing them to the sinks.
//!
//! Commit points: the previous step's results are committed (with fsync) before
//! each model call, so a tool result is durable before the model sees it. A turn's
//! dispatches are committed before its tools run: with fsync if any tool is not
//! idempotent, otherwise without (they survive a killed process; after a power cut
//! the model is simply asked again). A non-idempotent call's result is committed
//! the moment it returns, and so is each piece of strategy work. A step of
//! idempotent tools therefore costs one fsync.
//!
//! One engine drives a session at a time: it holds a lease, renewed by a timer task
//! that also notices writes by others (a cancel, an approval); the engine then stops
//! what it is doing, reloads the log and decides again. A stale append is a conflict
//! and is handled the same way, so no update is ever lost.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use crate::budget::{Budgets, Exhausted};
use crate::event::{Event, EventKind};
use crate::gate::CompletionGate;
use crate::id::new_session_id;
use crate::model::{Model, ModelError, ModelRequest, ModelResponse, RetryNotice, RetryObserver};
use crate::result::{BudgetKind, ExitReason, RunResult};
use crate::sink::{EventSink, SinkError};
use crate::snapshot::{DEFAULT_SNAPSHOT_EVERY, load_state, snapshot_of};
use crate::state::{SessionState, StateError, Status};
use crate::store::{Durability, EventStore, MemoryStore, StoreError};
use crate::strategy::{Decision, ExecutionStrategy, ModelCall, Work, WorkContext};
use crate::tool::{
    AttemptFailure, CircuitState, Tool, ToolContext, ToolError, ToolObserver, Toolbox,
};
use crate::types::{Action, Observation, ToolCall};

/// The observation a non-idempotent call gets when a crash left its outcome unknown.
pub const INTERRUPTED: &str = "interrupted: outcome unknown";

/// How long a lease lasts without renewal.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);

/// How often a held lease is renewed (and the log checked for writes by others).
pub const DEFAULT_LEASE_RENEWAL: Duration = Duration::from_secs(1);

/// Why the engine could not drive a session. Failures of models, tools and
/// strategies are not engine errors: they end the run with an exit reason.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The store failed or another writer won a conflict; nothing uncommitted was acted on.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A sink could not record a committed event.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// The stored log cannot be folded.
    #[error("the session log is inconsistent: {0}")]
    State(#[from] StateError),
    /// The strategy refused to continue the stored session; nothing was written.
    #[error("session `{session_id}` cannot be resumed: {reason}")]
    ResumeRefused {
        /// The session.
        session_id: String,
        /// Why.
        reason: String,
    },
    /// The session was started with another strategy; resuming it with this one
    /// could drop what the original enforced (an approval policy, a graph).
    #[error(
        "session `{session_id}` was started with strategy `{recorded}`, but this engine runs `{engine}`; resume it with the same strategy"
    )]
    StrategyMismatch {
        /// The session.
        session_id: String,
        /// Its strategy.
        recorded: String,
        /// This engine's strategy.
        engine: String,
    },
}

/// Drives sessions: one model, one strategy, a toolbox, a store, sinks and budgets.
pub struct Engine {
    model: Arc<dyn Model>,
    strategy: Arc<dyn ExecutionStrategy>,
    tools: Toolbox,
    store: Arc<dyn EventStore>,
    sinks: Vec<Arc<dyn EventSink>>,
    budgets: Budgets,
    workspace: Arc<Path>,
    max_output_tokens: Option<u32>,
    lease_ttl: Duration,
    lease_renewal: Duration,
    snapshot_every: Option<u64>,
    gate: Option<Arc<dyn CompletionGate>>,
}

/// Builds an [`Engine`]; every setting but the model and strategy has a default.
pub struct EngineBuilder {
    engine: Engine,
}

impl EngineBuilder {
    /// The tools the model may call (default: none).
    pub fn tools(mut self, tools: Toolbox) -> Self {
        self.engine.tools = tools;
        self
    }

    /// Where events are committed (default: a fresh [`MemoryStore`]).
    pub fn store(mut self, store: Arc<dyn EventStore>) -> Self {
        self.engine.store = store;
        self
    }

    /// Adds an observer of committed events.
    pub fn sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.engine.sinks.push(sink);
        self
    }

    /// The limits of each session (default: [`Budgets::default`]).
    pub fn budgets(mut self, budgets: Budgets) -> Self {
        self.engine.budgets = budgets;
        self
    }

    /// Root of every file-touching tool (default: the current directory).
    pub fn workspace(mut self, workspace: impl Into<PathBuf>) -> Self {
        self.engine.workspace = Arc::from(workspace.into());
        self
    }

    /// Per-request output token cap sent to the model (default: none).
    pub fn max_output_tokens(mut self, max: Option<u32>) -> Self {
        self.engine.max_output_tokens = max;
        self
    }

    /// Lease duration and renewal period (defaults: [`DEFAULT_LEASE_TTL`],
    /// [`DEFAULT_LEASE_RENEWAL`]). The renewal period is also how quickly a cancel
    /// from another process is noticed.
    pub fn lease(mut self, ttl: Duration, renewal: Duration) -> Self {
        self.engine.lease_ttl = ttl;
        self.engine.lease_renewal = renewal;
        self
    }

    /// Snapshot the folded state every `every` events (default
    /// [`DEFAULT_SNAPSHOT_EVERY`]); `None` turns snapshots off. Snapshots only speed
    /// up loading: results are the same with or without them.
    pub fn snapshot_every(mut self, every: Option<u64>) -> Self {
        self.engine.snapshot_every = every.filter(|every| *every > 0);
        self
    }

    /// A gate every finish must pass; a refusal becomes feedback and the run goes on.
    pub fn completion_gate(mut self, gate: Arc<dyn CompletionGate>) -> Self {
        self.engine.gate = Some(gate);
        self
    }

    /// The finished engine.
    pub fn build(self) -> Engine {
        self.engine
    }
}

impl Engine {
    /// Starts building an engine around a model and a strategy.
    pub fn builder(model: Arc<dyn Model>, strategy: Arc<dyn ExecutionStrategy>) -> EngineBuilder {
        EngineBuilder {
            engine: Engine {
                model,
                strategy,
                tools: Toolbox::new(),
                store: Arc::new(MemoryStore::new()),
                sinks: Vec::new(),
                budgets: Budgets::default(),
                workspace: Arc::from(PathBuf::from(".")),
                max_output_tokens: None,
                lease_ttl: DEFAULT_LEASE_TTL,
                lease_renewal: DEFAULT_LEASE_RENEWAL,
                snapshot_every: Some(DEFAULT_SNAPSHOT_EVERY),
                gate: None,
            },
        }
    }

    /// The name of this engine's strategy.
    pub fn strategy_name(&self) -> &str {
        self.strategy.name()
    }

    /// The store this engine commits to.
    pub fn store(&self) -> &Arc<dyn EventStore> {
        &self.store
    }

    /// Starts a new session for `task` and drives it until it ends.
    ///
    /// `config` is recorded in the first event for later resumes.
    pub async fn run(
        &self,
        task: impl Into<String>,
        config: Value,
    ) -> Result<RunResult, EngineError> {
        let session_id = new_session_id();
        let lease = self.lease_session(&session_id).await?;
        let mut driver = Driver::new(self, SessionState::new(session_id.clone()), &lease);
        let started = driver.record(EventKind::SessionStarted {
            task: task.into(),
            strategy: self.strategy.name().to_owned(),
            config,
        });
        let outcome = match started {
            // Nothing has been acted on yet, so the start need not survive a power
            // cut on its own: the first result's commit makes it durable.
            Ok(()) => match driver.flush(Durability::Process).await {
                Ok(_) => driver.drive().await,
                Err(err) => Err(err),
            },
            Err(err) => Err(err),
        };
        lease.release(self).await;
        outcome
    }

    /// Continues a stored session from where its log ends.
    ///
    /// Fails with [`StoreError::Leased`] at once while another live engine drives
    /// it. A call dispatched but not completed is re-run when its tool is idempotent;
    /// otherwise it gets the error observation [`INTERRUPTED`]. A session that
    /// already ended returns its stored result unchanged.
    pub async fn resume(&self, session_id: &str) -> Result<RunResult, EngineError> {
        let lease = self.lease_session(session_id).await?;
        let outcome = self.resume_leased(session_id, &lease).await;
        lease.release(self).await;
        outcome
    }

    async fn resume_leased(
        &self,
        session_id: &str,
        lease: &Lease,
    ) -> Result<RunResult, EngineError> {
        let state = load_state(self.store.as_ref(), session_id).await?;
        if let Some(result) = state.run_result().or_else(|| state.awaiting_result()) {
            return Ok(result);
        }
        if let Err(reason) = self.strategy.check_resume(&state) {
            return Err(EngineError::ResumeRefused {
                session_id: session_id.to_owned(),
                reason,
            });
        }
        if state.strategy() != self.strategy.name() {
            return Err(EngineError::StrategyMismatch {
                session_id: session_id.to_owned(),
                recorded: state.strategy().to_owned(),
                engine: self.strategy.name().to_owned(),
            });
        }
        let mut driver = Driver::new(self, state, lease);
        driver.record(EventKind::Resumed {
            reason: "resume".into(),
        })?;
        driver.needs_recovery = true;
        driver.drive().await
    }

    /// Approves the calls of a session that wait for a decision — `call_id` alone,
    /// or all of them — optionally with edited arguments (checked against the
    /// tool's schema when the call runs). Returns the decided call ids; resume the
    /// session to run them.
    pub async fn approve(
        &self,
        session_id: &str,
        call_id: Option<&str>,
        arguments: Option<Value>,
        by: &str,
    ) -> Result<Vec<String>, crate::control::ControlError> {
        let decision = crate::event::ApprovalDecision::Approved { arguments };
        crate::control::decide_approval(self.store.as_ref(), session_id, call_id, decision, by)
            .await
    }

    /// Denies the calls of a session that wait for a decision; the model receives
    /// `reason` as an error observation. Returns the decided call ids.
    pub async fn deny(
        &self,
        session_id: &str,
        call_id: Option<&str>,
        reason: &str,
        by: &str,
    ) -> Result<Vec<String>, crate::control::ControlError> {
        let decision = crate::event::ApprovalDecision::Denied {
            reason: reason.to_owned(),
        };
        crate::control::decide_approval(self.store.as_ref(), session_id, call_id, decision, by)
            .await
    }

    async fn lease_session(&self, session_id: &str) -> Result<Lease, EngineError> {
        let owner = new_session_id();
        self.store
            .acquire_lease(session_id, &owner, self.lease_ttl)
            .await?;
        Ok(Lease::keep(self, session_id, owner))
    }
}

/// What the lease keeper tells the driver.
#[derive(Debug, Default)]
struct LeaseSignal {
    /// Woken when the log moved under the driver or the lease was lost.
    wake: Notify,
    /// The last seq the driver committed.
    committed: AtomicU64,
    /// Set when another owner took the lease.
    lost: AtomicBool,
}

/// A held lease and the timer task that renews it.
struct Lease {
    session_id: String,
    owner: String,
    signal: Arc<LeaseSignal>,
    keeper: JoinHandle<()>,
}

impl Lease {
    fn keep(engine: &Engine, session_id: &str, owner: String) -> Self {
        let signal = Arc::new(LeaseSignal::default());
        let keeper = tokio::spawn(renew_lease(
            Arc::clone(&engine.store),
            session_id.to_owned(),
            owner.clone(),
            engine.lease_ttl,
            engine.lease_renewal,
            Arc::clone(&signal),
        ));
        Self {
            session_id: session_id.to_owned(),
            owner,
            signal,
            keeper,
        }
    }

    /// Stops renewing and gives the lease up. A failed release only delays the
    /// next owner until the lease expires, so it is not an error.
    async fn release(self, engine: &Engine) {
        self.keeper.abort();
        let _ = engine
            .store
            .release_lease(&self.session_id, &self.owner)
            .await;
    }
}

/// Renews the lease every `period`, waking the driver when the log holds events it
/// did not write or the lease was lost. A failed renewal is retried next period.
async fn renew_lease(
    store: Arc<dyn EventStore>,
    session_id: String,
    owner: String,
    ttl: Duration,
    period: Duration,
    signal: Arc<LeaseSignal>,
) {
    loop {
        tokio::time::sleep(period).await;
        match store.renew_lease(&session_id, &owner, ttl).await {
            Ok(last_seq) => {
                if last_seq > signal.committed.load(Ordering::Acquire) {
                    signal.wake.notify_one();
                }
            }
            Err(StoreError::LeaseLost(_)) => {
                signal.lost.store(true, Ordering::Release);
                signal.wake.notify_one();
                return;
            }
            Err(_) => {}
        }
    }
}

/// Takes the first work item whose key is not already running.
trait PopWork {
    fn pop_first_not_in(&mut self, running: &HashMap<tokio::task::Id, String>) -> Option<Work>;
}

impl PopWork for Vec<Work> {
    fn pop_first_not_in(&mut self, running: &HashMap<tokio::task::Id, String>) -> Option<Work> {
        let index = self
            .iter()
            .position(|item| !running.values().any(|key| *key == item.key))?;
        Some(self.remove(index))
    }
}

/// Keeps the retry notices of one model call, to record them as events.
#[derive(Debug, Default)]
struct CollectRetries(std::sync::Mutex<Vec<RetryNotice>>);

impl CollectRetries {
    fn take(&self) -> Vec<RetryNotice> {
        self.0
            .lock()
            .map(|mut notices| std::mem::take(&mut *notices))
            .unwrap_or_default()
    }
}

impl RetryObserver for CollectRetries {
    fn retrying(&self, notice: RetryNotice) {
        if let Ok(mut notices) = self.0.lock() {
            notices.push(notice);
        }
    }
}

/// Reports of the tool layers of one turn, recorded as events as calls complete.
#[derive(Debug, Default)]
struct ToolReports(std::sync::Mutex<Vec<EventKind>>);

impl ToolReports {
    fn push(&self, event: EventKind) {
        if let Ok(mut reports) = self.0.lock() {
            reports.push(event);
        }
    }

    fn take(&self) -> Vec<EventKind> {
        self.0
            .lock()
            .map(|mut reports| std::mem::take(&mut *reports))
            .unwrap_or_default()
    }
}

/// The observer of one call, naming it in every report.
struct CallReports {
    call_id: String,
    tool_name: String,
    reports: Arc<ToolReports>,
}

impl ToolObserver for CallReports {
    fn attempt_failed(&self, failure: AttemptFailure) {
        self.reports.push(EventKind::ActionAttemptFailed {
            call_id: self.call_id.clone(),
            tool_name: self.tool_name.clone(),
            attempt: failure.attempt,
            error: failure.error,
            retryable: failure.retryable,
            delay_ms: u64::try_from(failure.delay.as_millis()).unwrap_or(u64::MAX),
        });
    }

    fn circuit_changed(&self, tool: &str, state: CircuitState) {
        self.reports.push(EventKind::CircuitChanged {
            tool_name: tool.to_owned(),
            state,
        });
    }
}

/// How a bounded wait ended.
enum Bounded<T> {
    /// The future completed.
    Done(T),
    /// The wall-time budget ran out first.
    TimedOut,
    /// The log moved under the driver, or the lease was lost.
    Interrupted,
}

/// The state of one session while the engine drives it.
struct Driver<'e> {
    engine: &'e Engine,
    state: SessionState,
    unflushed: Vec<Event>,
    unflushed_steps: Vec<u32>,
    deadline: Option<Instant>,
    signal: Arc<LeaseSignal>,
    /// Set when the log may hold dispatched calls without results (after a resume
    /// or a reload); the next turn of the loop settles them first.
    needs_recovery: bool,
}

impl<'e> Driver<'e> {
    fn new(engine: &'e Engine, state: SessionState, lease: &Lease) -> Self {
        lease
            .signal
            .committed
            .store(state.last_seq(), Ordering::Release);
        Self {
            engine,
            state,
            unflushed: Vec::new(),
            unflushed_steps: Vec::new(),
            deadline: engine
                .budgets
                .timeout
                .map(|timeout| Instant::now() + timeout),
            signal: Arc::clone(&lease.signal),
            needs_recovery: false,
        }
    }

    async fn drive(mut self) -> Result<RunResult, EngineError> {
        loop {
            if let Some(result) = self
                .state
                .run_result()
                .or_else(|| self.state.awaiting_result())
            {
                if self.flush(Durability::Full).await? {
                    return Ok(result);
                }
                continue;
            }
            if std::mem::take(&mut self.needs_recovery) {
                self.recover_in_flight().await?;
                continue;
            }
            match self.engine.strategy.next(&self.state) {
                Err(err) => self.record(internal_failure(err.to_string()))?,
                Ok(Decision::CallModel(call)) => self.call_model(call).await?,
                Ok(Decision::Dispatch(calls)) => self.dispatch(calls).await?,
                Ok(Decision::Finish { answer }) => self.finish(answer).await?,
                Ok(Decision::AwaitApproval(calls)) => {
                    self.record(EventKind::ApprovalRequested { calls })?;
                }
                Ok(Decision::Record { name, data }) => self.record(EventKind::Strategy {
                    strategy: self.engine.strategy.name().to_owned(),
                    name,
                    data,
                    usage: None,
                })?,
                Ok(Decision::RunWork { work, limit }) => self.run_work(work, limit).await?,
                Ok(Decision::Refuse { reason }) => {
                    self.record(EventKind::ResponseRefused { reason })?;
                }
                Ok(Decision::Fail { exit_reason, error }) => self.record(EventKind::Failed {
                    exit_reason,
                    budget: None,
                    error: Some(error),
                })?,
            }
        }
    }

    /// Applies a new event to the state and queues it for the next commit. An event
    /// the state machine refuses is a bug: the session fails with `internal_error`.
    fn record(&mut self, kind: EventKind) -> Result<(), EngineError> {
        match self.apply_new(kind) {
            Ok(()) => Ok(()),
            Err(err) if !self.state.status().is_terminal() => Ok(self.apply_new(
                internal_failure(format!("the engine produced an illegal event: {err}")),
            )?),
            Err(err) => Err(err.into()),
        }
    }

    fn apply_new(&mut self, kind: EventKind) -> Result<(), StateError> {
        let event = Event::new(self.state.session_id(), self.state.last_seq() + 1, kind);
        self.state.apply(&event)?;
        self.unflushed.push(event);
        self.unflushed_steps.push(self.state.steps_used());
        Ok(())
    }

    /// Commits queued events, then publishes them to the sinks. Returns `false`
    /// when another writer got there first: the state was reloaded from the log and
    /// the caller must abandon what it was doing.
    async fn flush(&mut self, durability: Durability) -> Result<bool, EngineError> {
        let Some(first) = self.unflushed.first() else {
            return Ok(true);
        };
        let expected = first.seq - 1;
        // Announced before the append, so the lease keeper never mistakes our own
        // commit for a write by someone else.
        self.signal
            .committed
            .store(self.state.last_seq(), Ordering::Release);
        let appended = self
            .engine
            .store
            .append(
                self.state.session_id(),
                expected,
                &self.unflushed,
                durability,
            )
            .await;
        match appended {
            Ok(()) => {}
            Err(StoreError::Conflict { .. }) => {
                self.signal.committed.store(expected, Ordering::Release);
                self.reload().await?;
                return Ok(false);
            }
            Err(err) => return Err(err.into()),
        }
        self.maybe_snapshot(expected).await;
        let events = std::mem::take(&mut self.unflushed);
        let steps = std::mem::take(&mut self.unflushed_steps);
        for (event, step) in events.iter().zip(steps) {
            for sink in &self.engine.sinks {
                sink.publish(event, step)?;
            }
        }
        Ok(true)
    }

    /// Saves a snapshot when the commit that followed seq `before` crossed a
    /// multiple of the snapshot interval. A failed save is ignored: snapshots are a
    /// cache.
    async fn maybe_snapshot(&self, before: u64) {
        let Some(every) = self.engine.snapshot_every else {
            return;
        };
        let last = self.state.last_seq();
        if last / every == before / every {
            return;
        }
        if let Ok(snapshot) = snapshot_of(&self.state) {
            let _ = self
                .engine
                .store
                .save_snapshot(self.state.session_id(), last, &snapshot)
                .await;
        }
    }

    /// Drops uncommitted events and folds the log again, after a write by another
    /// process (a cancel, a conflict); the events this driver did not write are
    /// published to its sinks. Fails if the lease was lost.
    async fn reload(&mut self) -> Result<(), EngineError> {
        if self.signal.lost.load(Ordering::Acquire) {
            return Err(StoreError::LeaseLost(self.state.session_id().to_owned()).into());
        }
        let committed = self.signal.committed.load(Ordering::Acquire);
        let state = load_state(self.engine.store.as_ref(), self.state.session_id()).await?;
        let foreign = self
            .engine
            .store
            .load_after(self.state.session_id(), committed)
            .await?;
        for event in foreign.iter().filter(|event| event.seq <= state.last_seq()) {
            for sink in &self.engine.sinks {
                sink.publish(event, state.steps_used())?;
            }
        }
        self.state = state;
        self.signal
            .committed
            .store(self.state.last_seq(), Ordering::Release);
        self.unflushed.clear();
        self.unflushed_steps.clear();
        self.needs_recovery = true;
        Ok(())
    }

    /// Runs `future` unless the wall-time budget ends or the log moves first.
    async fn bounded<F: Future>(&self, future: F) -> Bounded<F::Output> {
        let deadline = async {
            match self.deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            output = future => Bounded::Done(output),
            () = deadline => Bounded::TimedOut,
            () = self.signal.wake.notified() => Bounded::Interrupted,
        }
    }

    fn wall_time_failure(&self) -> EventKind {
        let seconds = self.engine.budgets.timeout.map_or(0.0, |t| t.as_secs_f64());
        EventKind::Failed {
            exit_reason: ExitReason::BudgetExceeded,
            budget: Some(BudgetKind::WallTime),
            error: Some(format!(
                "the run exceeded its wall-time budget of {seconds}s"
            )),
        }
    }

    /// Runs strategy work concurrently (at most `limit` at once), recording each
    /// result as it arrives and starting newly ready work after each one.
    async fn run_work(&mut self, work: Vec<Work>, limit: usize) -> Result<(), EngineError> {
        if work.is_empty() {
            return self.record(internal_failure(format!(
                "strategy `{}` asked to run no work",
                self.engine.strategy.name()
            )));
        }
        let ctx = WorkContext {
            session_id: self.state.session_id().to_owned(),
            task: self.state.task().to_owned(),
            model: Arc::clone(&self.engine.model),
            tools: self.engine.tools.clone(),
            workspace: Arc::clone(&self.engine.workspace),
            max_output_tokens: self.engine.max_output_tokens,
        };
        let limit = limit.max(1);
        let mut running = JoinSet::new();
        let mut keys: HashMap<tokio::task::Id, String> = HashMap::new();
        let mut queued = work;
        loop {
            while keys.len() < limit {
                let Some(item) = queued.pop_first_not_in(&keys) else {
                    break;
                };
                if let Some(exhausted) = self.engine.budgets.before_model_call(&self.state) {
                    return self.record(exhausted_failure(exhausted));
                }
                let ctx = ctx.clone();
                let job = Arc::clone(&item.job);
                let handle = running.spawn(async move { job.perform(&ctx).await });
                keys.insert(handle.id(), item.key);
            }
            if running.is_empty() {
                return Ok(());
            }
            let joined = match self.bounded(running.join_next_with_id()).await {
                Bounded::Done(Some(joined)) => joined,
                Bounded::Done(None) => return Ok(()),
                Bounded::TimedOut => return self.record(self.wall_time_failure()),
                Bounded::Interrupted => return self.reload().await,
            };
            let kind = match joined {
                Ok((id, record)) => {
                    keys.remove(&id);
                    EventKind::Strategy {
                        strategy: self.engine.strategy.name().to_owned(),
                        name: record.name,
                        data: record.data,
                        usage: record.usage,
                    }
                }
                Err(err) => {
                    let key = keys.remove(&err.id()).unwrap_or_default();
                    internal_failure(format!("work `{key}` panicked: {}", panic_message(err)))
                }
            };
            self.record(kind)?;
            if self.state.status().is_terminal() || !self.flush(Durability::Full).await? {
                return Ok(());
            }
            match self.engine.strategy.next(&self.state) {
                Ok(Decision::RunWork { work, .. }) => queued = work,
                Ok(Decision::Fail { exit_reason, error }) => {
                    return self.record(EventKind::Failed {
                        exit_reason,
                        budget: None,
                        error: Some(error),
                    });
                }
                Ok(_) | Err(_) => queued = Vec::new(),
            }
        }
    }

    /// Accepts a finish, after the completion gate if there is one.
    async fn finish(&mut self, answer: String) -> Result<(), EngineError> {
        let Some(gate) = self.engine.gate.clone() else {
            return self.record(EventKind::Finished { answer });
        };
        match self
            .bounded(gate.check(&answer, &self.engine.workspace))
            .await
        {
            Bounded::Done(Ok(())) => self.record(EventKind::Finished { answer }),
            Bounded::Done(Err(refusal)) => self.record(EventKind::FinishRejected {
                answer,
                reason: refusal.reason,
                details: refusal.details,
            }),
            Bounded::TimedOut => self.record(self.wall_time_failure()),
            Bounded::Interrupted => self.reload().await,
        }
    }

    async fn call_model(&mut self, call: ModelCall) -> Result<(), EngineError> {
        if let Some(exhausted) = self.engine.budgets.before_model_call(&self.state) {
            return self.record(exhausted_failure(exhausted));
        }
        if !self.flush(Durability::Full).await? {
            return Ok(());
        }
        let step = self.state.steps_used() + 1;
        self.record(EventKind::ModelRequested { step })?;
        if self.state.status() != Status::Thinking {
            return Ok(());
        }
        let request = ModelRequest {
            instructions: call.instructions,
            task: self.state.task().to_owned(),
            history: call.history,
            tools: self.engine.tools.specs(),
            step,
            max_output_tokens: self.engine.max_output_tokens,
        };
        let retries = CollectRetries::default();
        let call = self.engine.model.complete_observed(&request, &retries);
        let outcome = match self.bounded(call).await {
            Bounded::Done(outcome) => outcome,
            Bounded::TimedOut => return self.record(self.wall_time_failure()),
            Bounded::Interrupted => return self.reload().await,
        };
        for notice in retries.take() {
            self.record(EventKind::ModelRetried {
                attempt: notice.attempt,
                error: notice.error,
                delay_ms: u64::try_from(notice.delay.as_millis()).unwrap_or(u64::MAX),
            })?;
        }
        let kind = match outcome {
            Ok(response) => self.responded(response, step),
            Err(ModelError::InvalidOutput {
                raw,
                message,
                usage,
            }) => EventKind::ModelOutputRejected {
                raw,
                error: message,
                usage,
            },
            Err(err @ (ModelError::Transient { .. } | ModelError::Fatal { .. })) => {
                EventKind::Failed {
                    exit_reason: ExitReason::ProviderError,
                    budget: None,
                    error: Some(format!("step {step}: {err}")),
                }
            }
            Err(ModelError::Internal { message }) => internal_failure(message),
        };
        self.record(kind)
    }

    /// The event for a usable response: ids made unique within the session, and an
    /// empty response turned into rejected output.
    fn responded(&self, response: ModelResponse, step: u32) -> EventKind {
        if response.actions.is_empty() {
            return EventKind::ModelOutputRejected {
                raw: response.text.unwrap_or_default(),
                error: "the response holds no action: call a tool or finish with an answer".into(),
                usage: response.usage,
            };
        }
        let mut seen: Vec<String> = Vec::new();
        let actions = response
            .actions
            .into_iter()
            .enumerate()
            .map(|(index, action)| match action {
                Action::ToolCall(mut call) => {
                    if call.id.is_empty()
                        || seen.contains(&call.id)
                        || self.state.knows_call(&call.id)
                    {
                        call.id = self.fresh_call_id(step, index, &seen);
                    }
                    seen.push(call.id.clone());
                    Action::ToolCall(call)
                }
                other => other,
            })
            .collect();
        EventKind::ModelResponded {
            actions,
            usage: response.usage,
            text: response.text,
        }
    }

    fn fresh_call_id(&self, step: u32, index: usize, seen: &[String]) -> String {
        let base = format!("call_{step}_{}", index + 1);
        let mut candidate = base.clone();
        let mut suffix = 1;
        while seen.contains(&candidate) || self.state.knows_call(&candidate) {
            suffix += 1;
            candidate = format!("{base}_{suffix}");
        }
        candidate
    }

    fn tool(&self, call: &ToolCall) -> Option<Arc<dyn Tool>> {
        self.engine.tools.get(&call.tool_name).cloned()
    }

    /// Whether running `call` twice is harmless; a call of an unknown tool has no effect.
    fn is_idempotent(&self, call: &ToolCall) -> bool {
        self.tool(call).is_none_or(|tool| tool.spec().idempotent)
    }

    async fn dispatch(&mut self, calls: Vec<ToolCall>) -> Result<(), EngineError> {
        if calls.is_empty() {
            return self.record(internal_failure(format!(
                "strategy `{}` asked to dispatch no calls",
                self.engine.strategy.name()
            )));
        }
        if let Some(exhausted) = self.engine.budgets.before_dispatch(&self.state, &calls) {
            return self.record(exhausted_failure(exhausted));
        }
        for call in &calls {
            self.record(EventKind::ActionDispatched { call: call.clone() })?;
        }
        if self.state.status() != Status::ActionExecuting {
            return Ok(());
        }
        let durability = if calls.iter().all(|call| self.is_idempotent(call)) {
            Durability::Process
        } else {
            Durability::Full
        };
        if !self.flush(durability).await? {
            return Ok(());
        }
        self.execute(calls).await
    }

    /// After a crash: re-runs in-flight idempotent calls, and reports the others as
    /// interrupted.
    async fn recover_in_flight(&mut self) -> Result<(), EngineError> {
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

    /// Runs dispatched calls concurrently and records each result as it arrives.
    async fn execute(&mut self, calls: Vec<ToolCall>) -> Result<(), EngineError> {
        let mut running = JoinSet::new();
        let mut calls_by_task = HashMap::new();
        let reports = Arc::new(ToolReports::default());
        for call in calls {
            let Some(tool) = self.tool(&call) else {
                let message = self.unknown_tool_message(&call.tool_name);
                self.record(EventKind::ActionCompleted {
                    observation: Observation::error(&call, message),
                })?;
                continue;
            };
            let ctx = ToolContext {
                session_id: self.state.session_id().to_owned(),
                call_id: call.id.clone(),
                attempt: 1,
                workspace: Arc::clone(&self.engine.workspace),
                observer: Arc::new(CallReports {
                    call_id: call.id.clone(),
                    tool_name: call.tool_name.clone(),
                    reports: Arc::clone(&reports),
                }),
            };
            let arguments = call.arguments.clone();
            let handle = running.spawn(async move { tool.call(arguments, &ctx).await });
            calls_by_task.insert(handle.id(), call);
        }
        while !running.is_empty() {
            let joined = match self.bounded(running.join_next_with_id()).await {
                Bounded::Done(joined) => joined,
                Bounded::TimedOut => return self.record(self.wall_time_failure()),
                Bounded::Interrupted => return self.reload().await,
            };
            let Some(joined) = joined else {
                break;
            };
            let (task_id, outcome) = match joined {
                Ok((task_id, outcome)) => (task_id, Ok(outcome)),
                Err(err) => (err.id(), Err(err)),
            };
            let Some(call) = calls_by_task.remove(&task_id) else {
                continue;
            };
            for report in reports.take() {
                self.record(report)?;
            }
            let kind = match outcome {
                Ok(Ok(output)) => EventKind::ActionCompleted {
                    observation: Observation::success(&call, output.content),
                },
                Ok(Err(ToolError::InvalidArguments(message))) => EventKind::ActionCompleted {
                    observation: Observation::error(
                        &call,
                        format!("invalid arguments for `{}`: {message}", call.tool_name),
                    ),
                },
                Ok(Err(ToolError::Failed { message, .. })) => EventKind::ActionCompleted {
                    observation: Observation::error(&call, message),
                },
                Ok(Err(ToolError::Internal(message))) => internal_failure(format!(
                    "tool `{}` failed unexpectedly on call `{}`: {message}",
                    call.tool_name, call.id
                )),
                Err(join_error) => internal_failure(format!(
                    "tool `{}` panicked on call `{}`: {}",
                    call.tool_name,
                    call.id,
                    panic_message(join_error)
                )),
            };
            self.record(kind)?;
            if self.state.status().is_terminal() {
                return Ok(());
            }
            if !self.is_idempotent(&call) && !self.flush(Durability::Full).await? {
                return Ok(());
            }
        }
        Ok(())
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

fn internal_failure(error: impl Into<String>) -> EventKind {
    EventKind::Failed {
        exit_reason: ExitReason::InternalError,
        budget: None,
        error: Some(error.into()),
    }
}

fn exhausted_failure(exhausted: Exhausted) -> EventKind {
    EventKind::Failed {
        exit_reason: exhausted.exit_reason,
        budget: exhausted.budget,
        error: Some(exhausted.error),
    }
}

fn panic_message(err: tokio::task::JoinError) -> String {
    if !err.is_panic() {
        return "the task was cancelled".into();
    }
    let payload = err.into_panic();
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".into()
    }
}
