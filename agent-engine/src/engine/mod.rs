//! The `Engine`: drives a session by deciding, persisting and acting, in that
//! order, until the session ends.
//!
//! Each turn of the driver loop ([`driver`]):
//!
//! 1. **Decide.** The strategy, a pure function of the folded state, names the next
//!    effect: a model call, a dispatch of tool calls, strategy work, a finish.
//! 2. **Guard.** Every [`Guard`](agent_core::guard::Guard) — budgets, the wall time, the
//!    completion gate, a user's own — may let it go on or name the event to record
//!    instead; that is the one place a run is stopped.
//! 3. **Persist, then act.** Everything is written before anything acts on it
//!    ([`commit`]), at one of two levels: *written* (survives a killed process)
//!    or *durable* (fsynced: survives a power loss). The previous step's results
//!    are written before each model call, durably once a second has passed since
//!    the last fsync ([`DURABLE_EVERY`](driver::DURABLE_EVERY)); a model's
//!    response and its turn's dispatches before its tools run or a completion
//!    gate checks its finish — durably if any tool is not idempotent; a
//!    non-idempotent call's result durably the moment it returns, each piece of
//!    strategy work durably as it completes, and a session's end durably. After
//!    a power cut a session resumes at most about a second of idempotent work
//!    behind: those calls run again and the model is asked again.
//!
//! The parts: [`model_step`] asks the model and records its response,
//! [`tool_step`] dispatches and runs tool calls (and settles calls a crash left in
//! flight), [`work_step`] runs strategy work concurrently, and [`lease`] keeps the
//! session's lease: one engine drives a session at a time, and the lease keeper
//! notices writes by others (a cancel, an approval); the driver then abandons what
//! it is doing, reloads the log and decides again. A stale append is a conflict
//! handled the same way, so no update is ever lost.

mod approval;
mod aside;
mod commit;
mod driver;
mod hooks;
mod lease;
mod log_hold;
mod model_step;
mod outcome;
mod repeat;
mod reports;
mod running;
mod tool_step;
mod work_set;
mod work_step;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde_json::Value;

use crate::control::{ControlError, decide_approval};
use crate::error::EngineError;
use crate::guards::FinishGate;
use crate::guards::{Budgets, OnLimit, WallTime};
use crate::guards::{OutputGuard, OutputSchema};
use crate::snapshot::{DEFAULT_SNAPSHOT_EVERY, load_state};
use agent_core::context::ContextPolicy;
use agent_core::delta::DeltaSink;
use agent_core::event::{ApprovalDecision, Event, EventKind};
use agent_core::gate::CompletionGate;
use agent_core::guard::Guard;
use agent_core::id::new_session_id;
use agent_core::model::Model;
use agent_core::result::RunResult;
use agent_core::schema::InvalidSchema;
use agent_core::sink::EventSink;
use agent_core::state::{PublicStatus, SessionState};
use agent_core::store::queue::WorkQueue;
use agent_core::store::{Append, Durability, EventStore, StoreError};
use agent_core::strategy::ExecutionStrategy;
use agent_core::tool::Toolbox;
use agent_store::MemoryStore;

use self::driver::Driver;
use self::lease::{Lease, LeaseSignal};

pub use self::approval::{WAIVE_APPROVAL, approval_waived};
pub use self::tool_step::INTERRUPTED;

/// How long a lease lasts without renewal.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);

/// How often a held lease is renewed (and the log checked for writes by others).
pub const DEFAULT_LEASE_RENEWAL: Duration = Duration::from_secs(1);

/// How long a commit is retried while the store cannot take it, unless set.
pub const DEFAULT_STORE_PATIENCE: Duration = Duration::from_secs(60);

/// Drives sessions: one model, one strategy, a toolbox, a store, sinks and guards.
pub struct Engine {
    model: Arc<dyn Model>,
    strategy: Arc<dyn ExecutionStrategy>,
    tools: Toolbox,
    store: Arc<dyn EventStore>,
    sinks: Vec<Arc<dyn EventSink>>,
    guards: Vec<Arc<dyn Guard>>,
    workspace: Arc<Path>,
    max_output_tokens: Option<u32>,
    record_content: bool,
    refuse_repeats: bool,
    lease_ttl: Duration,
    lease_renewal: Duration,
    store_patience: Duration,
    snapshot_every: Option<u64>,
    queue: Option<Arc<dyn WorkQueue>>,
    context: Option<Arc<dyn ContextPolicy>>,
    on_limit: OnLimit,
    reflect_every: Option<u32>,
    output: Option<Arc<OutputSchema>>,
    deltas: Option<Arc<dyn DeltaSink>>,
    /// Whether a completion gate (a program that may act on the workspace)
    /// checks every finish.
    gated: bool,
    /// The agent's instructions, ahead of the strategy's in every request.
    instructions: Option<Arc<str>>,
}

/// How a [`Engine::drive`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Drive {
    /// The session ended, or waits for a human: its result.
    Stopped(Box<RunResult>),
    /// Its tool calls are in the work queue; it continues when their results are in.
    Parked,
}

/// Builds an [`Engine`]; every setting but the model and strategy has a default.
pub struct EngineBuilder {
    engine: Engine,
    budgets: Budgets,
    guards: Vec<Arc<dyn Guard>>,
    gate: Option<Arc<dyn CompletionGate>>,
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

    /// The limits of each session (default: [`Budgets::default`]); its `timeout`
    /// becomes the [`WallTime`] guard.
    pub fn budgets(mut self, budgets: Budgets) -> Self {
        self.budgets = budgets;
        self
    }

    /// Adds a guard, asked after the budgets and the wall time and before the
    /// completion gate, in the order guards are added.
    pub fn guard(mut self, guard: Arc<dyn Guard>) -> Self {
        self.guards.push(guard);
        self
    }

    /// Root of every file-touching tool (default: the current directory).
    pub fn workspace(mut self, workspace: impl Into<PathBuf>) -> Self {
        self.engine.workspace = Arc::from(workspace.into());
        self
    }

    /// Whether telemetry spans carry message content — the model's input and
    /// output, tool arguments and results (default: no; `--trace-content full`).
    pub fn record_content(mut self, record: bool) -> Self {
        self.engine.record_content = record;
        self
    }

    /// Whether a call identical to an earlier successful call of an idempotent
    /// tool (same tool, same arguments) is answered with that earlier result
    /// and a request to finish or change course, instead of being run again
    /// (default: yes).
    pub fn refuse_repeated_calls(mut self, refuse: bool) -> Self {
        self.engine.refuse_repeats = refuse;
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

    /// The agent's instructions — what it is for and how it works — given to
    /// the model ahead of the strategy's own instructions in every request it
    /// makes: each step, a last answer, and a workflow's model nodes (default:
    /// none, so the strategy's alone).
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        let instructions = instructions.into();
        self.engine.instructions =
            (!instructions.trim().is_empty()).then(|| Arc::from(instructions.as_str()));
        self
    }

    /// How long a commit the store cannot take for now (its server is down or
    /// restarting, its disk is full) is retried, with backoff, before the run
    /// stops with the store's error (default [`DEFAULT_STORE_PATIENCE`]). What
    /// the run learned meanwhile stays in memory, so an outage shorter than this
    /// costs nothing but the wait; a longer one is what a resume or a worker's
    /// next drive picks up from the log.
    pub fn store_patience(mut self, patience: Duration) -> Self {
        self.engine.store_patience = patience;
        self
    }

    /// Snapshot the folded state at most every `every` events (default
    /// [`DEFAULT_SNAPSHOT_EVERY`]), and in a long session once at least half of
    /// its log followed the previous snapshot, so that snapshots cost the
    /// same per event however long it runs; `None` turns snapshots off.
    /// Snapshots only speed up loading: results are the same with or without them.
    pub fn snapshot_every(mut self, every: Option<u64>) -> Self {
        self.engine.snapshot_every = every.filter(|every| *every > 0);
        self
    }

    /// The work queue: [`Engine::submit`] puts sessions there, and
    /// [`Engine::drive`] hands tool calls to it instead of running them.
    pub fn queue(mut self, queue: Arc<dyn WorkQueue>) -> Self {
        self.engine.queue = Some(queue);
        self
    }

    /// The policy that decides what history each model request holds (default:
    /// none, so every request holds the whole history). A summary it asks for is
    /// made with this engine's model and recorded before the next model call.
    pub fn context(mut self, policy: Arc<dyn ContextPolicy>) -> Self {
        self.engine.context = Some(policy);
        self
    }

    /// What a run that a limit ends does first (default: one last request for
    /// an answer from what was gathered, marked `partial`).
    pub fn on_limit(mut self, on_limit: OnLimit) -> Self {
        self.engine.on_limit = on_limit;
        self
    }

    /// Every `every` steps, asks the model in a separate request whether it is
    /// closer to the goal or going in circles; the note enters the history.
    /// `None` or 0: never.
    pub fn reflect_every(mut self, every: Option<u32>) -> Self {
        self.engine.reflect_every = every.filter(|every| *every > 0);
        self
    }

    /// The JSON Schema every finish's answer must satisfy: a finish that does not
    /// is refused with feedback naming the field, and the accepted answer is the
    /// result's `output`.
    pub fn output_schema(mut self, schema: OutputSchema) -> Self {
        let schema = Arc::new(schema);
        self.guards.push(Arc::new(OutputGuard(Arc::clone(&schema))));
        self.engine.output = Some(schema);
        self
    }

    /// [`output_schema`](Self::output_schema) derived from `T`; read the result's
    /// output back as a `T` with [`RunResult::output_as`].
    pub fn output<T: JsonSchema>(self) -> Result<Self, InvalidSchema> {
        Ok(self.output_schema(OutputSchema::of::<T>()?))
    }

    /// Where the text of each step's response (and of a last answer) goes while
    /// it is generated: a provider that can stream then streams (default: none,
    /// so no call streams). Deltas are never recorded.
    pub fn deltas(mut self, sink: Arc<dyn DeltaSink>) -> Self {
        self.engine.deltas = Some(sink);
        self
    }

    /// A gate every finish must pass; a refusal becomes feedback and the run goes
    /// on. It is the last guard asked.
    pub fn completion_gate(mut self, gate: Arc<dyn CompletionGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// The finished engine. Its guards, in the order they are asked: the
    /// budgets, the wall time (if the budgets set one), the added guards, the
    /// completion gate (if any).
    pub fn build(self) -> Engine {
        let mut guards: Vec<Arc<dyn Guard>> = Vec::with_capacity(self.guards.len() + 3);
        if let Some(timeout) = self.budgets.timeout {
            guards.push(Arc::new(WallTime(timeout)));
        }
        guards.insert(0, Arc::new(self.budgets));
        guards.extend(self.guards);
        let gated = self.gate.is_some();
        if let Some(gate) = self.gate {
            guards.push(Arc::new(FinishGate(gate)));
        }
        Engine {
            guards,
            gated,
            ..self.engine
        }
    }
}

impl Drive {
    /// The result of a `run` or `resume` drive, which only parks when asked to.
    fn into_result(self, session_id: &str) -> Result<RunResult, EngineError> {
        match self {
            Self::Stopped(result) => Ok(*result),
            Self::Parked => Err(EngineError::Parked {
                session_id: session_id.to_owned(),
            }),
        }
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
                guards: Vec::new(),
                workspace: Arc::from(PathBuf::from(".")),
                max_output_tokens: None,
                record_content: false,
                refuse_repeats: true,
                lease_ttl: DEFAULT_LEASE_TTL,
                lease_renewal: DEFAULT_LEASE_RENEWAL,
                store_patience: DEFAULT_STORE_PATIENCE,
                snapshot_every: Some(DEFAULT_SNAPSHOT_EVERY),
                queue: None,
                context: None,
                on_limit: OnLimit::default(),
                reflect_every: None,
                output: None,
                deltas: None,
                gated: false,
                instructions: None,
            },
            budgets: Budgets::default(),
            guards: Vec::new(),
            gate: None,
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
        // Boxed: a run spawned but not yet polled holds a small future, not the
        // whole run's state.
        Box::pin(self.run_as(&session_id, task.into(), config)).await
    }

    /// [`Engine::run`] under an id the caller chose (a fresh one from
    /// [`new_session_id`](agent_core::id::new_session_id)), for callers that must name the
    /// session before the run ends — to say how to resume it if they stop it. An
    /// id the store already holds fails with [`StoreError::Conflict`] and writes
    /// nothing.
    ///
    /// [`StoreError::Conflict`]: agent_core::store::StoreError::Conflict
    pub async fn run_as(
        &self,
        session_id: &str,
        task: impl Into<String>,
        config: Value,
    ) -> Result<RunResult, EngineError> {
        let session_id = session_id.to_owned();
        let task = checked_text("task", task.into())?;
        let signal = Arc::new(LeaseSignal::default());
        let mut driver = Driver::new(
            self,
            SessionState::new(session_id.clone()),
            Arc::clone(&signal),
        );
        driver.record(EventKind::SessionStarted {
            task,
            strategy: self.strategy.name().to_owned(),
            config,
        })?;
        // No other process can know the new session's id before its first event
        // is committed, so its lease is taken while that commit is made. Nothing
        // has been acted on yet, so the start need not survive a power cut on its
        // own: the first result's commit makes it durable.
        let (lease, started) = tokio::join!(
            Lease::acquire(self, &session_id, signal),
            driver.flush(Durability::Process)
        );
        let lease = lease?;
        let outcome = match started {
            Ok(true) => driver.drive().await,
            Ok(false) => Err(EngineError::Store(StoreError::Conflict {
                session_id: session_id.clone(),
                expected: 0,
                actual: driver.state.last_seq(),
            })),
            Err(err) => Err(err),
        };
        lease.release(self).await;
        outcome.and_then(|drive| drive.into_result(&session_id))
    }

    /// Records a new session for `task` and puts it in the work queue for a worker
    /// to drive; returns its id at once. `config` is recorded in the first event.
    pub async fn submit(
        &self,
        task: impl Into<String>,
        config: Value,
    ) -> Result<String, EngineError> {
        let queue = self.queue.as_ref().ok_or(EngineError::NoQueue)?;
        let task = checked_text("task", task.into())?;
        let session_id = new_session_id();
        let events = [
            Event::new(
                &session_id,
                1,
                EventKind::SessionStarted {
                    task,
                    strategy: self.strategy.name().to_owned(),
                    config,
                },
            ),
            Event::new(
                &session_id,
                2,
                EventKind::Queued {
                    reason: "submitted".into(),
                },
            ),
        ];
        self.store
            .append(Append::creating(&events, Durability::Full)?)
            .await?;
        for sink in &self.sinks {
            sink.publish(&events[0], 0)?;
        }
        queue
            .enqueue_session(&session_id)
            .await
            .map_err(EngineError::Queue)?;
        Ok(session_id)
    }

    /// Drives a stored session as a worker does: its tool calls go to the work
    /// queue, and the drive ends when they are there ([`Drive::Parked`]), or when
    /// the session ends or waits for a human. `by` names the driver in the log
    /// when it takes a queued session.
    pub async fn drive(&self, session_id: &str, by: &str) -> Result<Drive, EngineError> {
        if self.queue.is_none() {
            return Err(EngineError::NoQueue);
        }
        let signal = Arc::new(LeaseSignal::default());
        let lease = Lease::acquire(self, session_id, Arc::clone(&signal)).await?;
        let outcome = match self.prepare(session_id).await {
            Ok(Ok(state)) => {
                let taken = state.public_status() == PublicStatus::Queued;
                let mut driver = Driver::new(self, state, signal);
                driver.hand_tools_to_queue();
                let recorded = if taken {
                    driver.record(EventKind::Resumed {
                        reason: format!("taken by {by}"),
                    })
                } else {
                    Ok(())
                };
                match recorded {
                    Ok(()) => {
                        driver.recover_before_next_decision();
                        driver.drive().await
                    }
                    Err(err) => Err(err),
                }
            }
            Ok(Err(result)) => Ok(Drive::Stopped(Box::new(result))),
            Err(err) => Err(err),
        };
        lease.release(self).await;
        outcome
    }

    /// Continues a stored session from where its log ends.
    ///
    /// Fails with [`StoreError::Leased`](agent_core::store::StoreError::Leased) at once while
    /// another live engine drives it. A call dispatched but not completed is re-run
    /// when its tool is idempotent; otherwise it gets the error observation
    /// [`INTERRUPTED`]. A session that already ended returns its stored result
    /// unchanged.
    pub async fn resume(&self, session_id: &str) -> Result<RunResult, EngineError> {
        let signal = Arc::new(LeaseSignal::default());
        let lease = Lease::acquire(self, session_id, Arc::clone(&signal)).await?;
        let outcome = self.resume_leased(session_id, signal).await;
        lease.release(self).await;
        outcome
    }

    async fn resume_leased(
        &self,
        session_id: &str,
        signal: Arc<LeaseSignal>,
    ) -> Result<RunResult, EngineError> {
        let state = match self.prepare(session_id).await? {
            Ok(state) => state,
            Err(result) => return Ok(result),
        };
        let mut driver = Driver::new(self, state, signal);
        driver.record(EventKind::Resumed {
            reason: "resume".into(),
        })?;
        driver.recover_before_next_decision();
        driver.drive().await?.into_result(session_id)
    }

    /// Opens the next conversation turn of a stored session with the message
    /// `text` and drives that turn until it ends or waits for a human, as
    /// [`Engine::run`] drives the first: the model sees the whole history, the
    /// previous answer and the message at its end. The session must have ended
    /// with a result (not been cancelled) and have this engine's strategy,
    /// which must take follow-ups; otherwise nothing is written and the error
    /// says why. `config`, when given, is recorded with the message and
    /// replaces the session's configuration from this turn on (for the
    /// caller's own resumes, as `run` records it). Fails with
    /// [`StoreError::Leased`](agent_core::store::StoreError::Leased) at once while another
    /// live engine drives it.
    pub async fn send(
        &self,
        session_id: &str,
        text: &str,
        config: Option<Value>,
    ) -> Result<RunResult, EngineError> {
        let signal = Arc::new(LeaseSignal::default());
        let lease = Lease::acquire(self, session_id, Arc::clone(&signal)).await?;
        let outcome = self.send_leased(session_id, text, config, signal).await;
        lease.release(self).await;
        outcome
    }

    async fn send_leased(
        &self,
        session_id: &str,
        text: &str,
        config: Option<Value>,
        signal: Arc<LeaseSignal>,
    ) -> Result<RunResult, EngineError> {
        let refused = |reason: String| EngineError::FollowUpRefused {
            session_id: session_id.to_owned(),
            reason,
        };
        if text.trim().is_empty() {
            return Err(refused("the message is empty".into()));
        }
        checked_text("message", text.to_owned())?;
        let state = load_state(self.store.as_ref(), session_id).await?;
        if state.strategy() != self.strategy.name() {
            return Err(EngineError::StrategyMismatch {
                session_id: session_id.to_owned(),
                recorded: state.strategy().to_owned(),
                engine: self.strategy.name().to_owned(),
            });
        }
        if !self.strategy.takes_follow_ups() {
            return Err(refused(format!(
                "its strategy `{}` decides from a plan or graph of its own, not from a conversation; start a new session instead",
                self.strategy.name()
            )));
        }
        state.check_follow_up().map_err(refused)?;
        if let Err(reason) = self.strategy.check_resume(&state) {
            return Err(EngineError::ResumeRefused {
                session_id: session_id.to_owned(),
                reason,
            });
        }
        let turn = state.turn() + 1;
        let mut driver = Driver::new(self, state, signal);
        driver.record(EventKind::UserMessage {
            text: text.to_owned(),
            turn,
            config,
        })?;
        driver.drive().await?.into_result(session_id)
    }

    /// The state of a stored session this engine may continue, or its result when
    /// it has ended or waits for a human.
    async fn prepare(
        &self,
        session_id: &str,
    ) -> Result<Result<SessionState, RunResult>, EngineError> {
        let state = load_state(self.store.as_ref(), session_id).await?;
        if let Some(result) = state.run_result().or_else(|| state.awaiting_result()) {
            return Ok(Err(result));
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
        Ok(Ok(state))
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
    ) -> Result<Vec<String>, ControlError> {
        let decision = ApprovalDecision::Approved { arguments };
        decide_approval(self.store.as_ref(), session_id, call_id, decision, by).await
    }

    /// Denies the calls of a session that wait for a decision; the model receives
    /// `reason` as an error observation. Returns the decided call ids.
    pub async fn deny(
        &self,
        session_id: &str,
        call_id: Option<&str>,
        reason: &str,
        by: &str,
    ) -> Result<Vec<String>, ControlError> {
        let decision = ApprovalDecision::Denied {
            reason: reason.to_owned(),
        };
        decide_approval(self.store.as_ref(), session_id, call_id, decision, by).await
    }
}

/// `text` unless it holds a NUL character (see [`EngineError::InvalidText`]).
pub(crate) fn checked_text(what: &'static str, text: String) -> Result<String, EngineError> {
    if text.contains('\0') {
        return Err(EngineError::InvalidText { what });
    }
    Ok(text)
}
