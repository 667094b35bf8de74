//! `Worker`: claims work from a store's queue and does it, until told to stop —
//! on one machine or many (SQLite for one machine, PostgreSQL for many).
//!
//! A worker claims queued tool calls first (they unblock sessions), then queued
//! sessions. A session is driven under its lease with its recorded configuration
//! until it ends, waits for a human, or hands its tool calls to the queue and
//! parks ([`drive`]); a tool call is run with the tools of its session's
//! configuration and its result appended to the log ([`action`]). Claims are
//! renewed by a heartbeat; a worker killed at any instant loses nothing, because
//! its claims expire and go to others, and the log says what was done.
//!
//! When the shutdown signal is raised the worker stops claiming, lets what it
//! started finish for up to the drain time, gives back what is left and returns.

mod action;
mod drive;
mod retry;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_core::cancel::Cancellation;
use agent_core::delta::DeltaSink;
use agent_core::store::Store;
use agent_core::tool::Tool;
use tokio::task::JoinSet;

use self::action::ToolCache;

/// How long a claim lasts without renewal when none is configured.
pub const DEFAULT_CLAIM_TTL: Duration = Duration::from_secs(30);

/// How long a stopping worker lets started work finish when none is configured.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(30);

/// Longest an idle worker waits before looking at the queue again.
const IDLE: Duration = Duration::from_secs(1);

/// What a worker did, for its log and its tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Drives of sessions.
    pub drives: u64,
    /// Tool calls run (or reported interrupted).
    pub actions: u64,
    /// Work given back unfinished when the drain time ran out.
    pub abandoned: u64,
}

/// Where a worker says what it does (a log line each); stderr by default.
pub type WorkerLog = Arc<dyn Fn(&str) + Send + Sync>;

/// Builds a [`Worker`].
pub struct WorkerBuilder {
    store: Arc<dyn Store>,
    name: String,
    concurrency: usize,
    tools: Option<Vec<String>>,
    extra_tools: Vec<Arc<dyn Tool>>,
    claim_ttl: Duration,
    drain: Duration,
    shutdown: Cancellation,
    log: WorkerLog,
    deltas: Option<Arc<dyn DeltaSink>>,
}

impl WorkerBuilder {
    /// The worker's name in claims and logs (default: `HOST:PID`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Drives and tool calls in flight at once (default 8, at least 1).
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Run only calls of these tools (default: any tool the session configures);
    /// calls of other tools are left for workers that have them.
    pub fn only_tools(mut self, tools: Vec<String>) -> Self {
        self.tools = Some(tools);
        self
    }

    /// Tools registered in code, offered to every session beside its configured ones.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.extra_tools.push(tool);
        self
    }

    /// How long a claim lasts without renewal (default [`DEFAULT_CLAIM_TTL`]): how
    /// soon the work of a worker that died goes to another.
    pub fn claim_ttl(mut self, ttl: Duration) -> Self {
        self.claim_ttl = ttl;
        self
    }

    /// How long a stopping worker lets started work finish (default [`DEFAULT_DRAIN`]).
    pub fn drain(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// The signal that stops the worker.
    pub fn shutdown(mut self, shutdown: Cancellation) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// Where the worker says what it does (default: stderr).
    pub fn log(mut self, log: WorkerLog) -> Self {
        self.log = log;
        self
    }

    /// Where the sessions it drives report their text while it is written
    /// (default: nowhere, so nothing streams).
    pub fn deltas(mut self, sink: Arc<dyn DeltaSink>) -> Self {
        self.deltas = Some(sink);
        self
    }

    /// The worker.
    pub fn build(self) -> Worker {
        Worker {
            shared: Arc::new(Shared {
                store: self.store,
                name: self.name,
                tools: self.tools,
                extra_tools: self.extra_tools,
                claim_ttl: self.claim_ttl,
                log: self.log,
                deltas: self.deltas,
                held: Mutex::new(HashSet::new()),
                cache: ToolCache::default(),
                claims_failing: std::sync::atomic::AtomicBool::new(false),
            }),
            concurrency: self.concurrency,
            drain: self.drain,
            shutdown: self.shutdown,
        }
    }
}

/// Work a worker holds a claim on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Held {
    Session(String),
    Action(String, String),
}

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Session(session_id) => write!(f, "session {session_id}"),
            Self::Action(session_id, call_id) => write!(f, "call {call_id} of {session_id}"),
        }
    }
}

/// What the worker's tasks share.
struct Shared {
    store: Arc<dyn Store>,
    name: String,
    tools: Option<Vec<String>>,
    extra_tools: Vec<Arc<dyn Tool>>,
    claim_ttl: Duration,
    log: WorkerLog,
    deltas: Option<Arc<dyn DeltaSink>>,
    held: Mutex<HashSet<Held>>,
    cache: ToolCache,
    /// Set while claiming fails (the store is down), so that the log says so
    /// once, not at every look at the queue.
    claims_failing: std::sync::atomic::AtomicBool,
}

impl Shared {
    /// Says that claiming failed, once until claiming works again.
    fn claim_failed(&self, what: &str, err: &agent_core::store::StoreError) {
        if !self
            .claims_failing
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            self.say(&format!(
                "cannot claim {what}: {err}; keeps looking until the store answers"
            ));
        }
    }

    /// Notes that claiming works (again).
    fn claim_worked(&self) {
        if self
            .claims_failing
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            self.say("can claim work again: the store answers");
        }
    }

    fn say(&self, line: &str) {
        tracing::debug!(worker = self.name.as_str(), "{line}");
        (self.log)(&format!("worker {}: {line}", self.name));
    }

    fn hold(&self, held: Held) {
        if let Ok(mut set) = self.held.lock() {
            set.insert(held);
        }
    }

    fn drop_hold(&self, held: &Held) {
        if let Ok(mut set) = self.held.lock() {
            set.remove(held);
        }
    }
}

/// What one task of the worker did.
enum Done {
    Drive,
    Action,
}

/// Claims and does queued work; see the module documentation.
pub struct Worker {
    shared: Arc<Shared>,
    concurrency: usize,
    drain: Duration,
    shutdown: Cancellation,
}

impl Worker {
    /// Starts building a worker on `store`.
    pub fn builder(store: Arc<dyn Store>) -> WorkerBuilder {
        WorkerBuilder {
            store,
            name: default_worker_name(),
            concurrency: 8,
            tools: None,
            extra_tools: Vec::new(),
            claim_ttl: DEFAULT_CLAIM_TTL,
            drain: DEFAULT_DRAIN,
            shutdown: Cancellation::new(),
            log: Arc::new(|line| eprintln!("{line}")),
            deltas: None,
        }
    }

    /// The worker's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Works until the shutdown signal, then drains.
    pub async fn run(self) -> WorkerReport {
        let shared = Arc::clone(&self.shared);
        shared.say(&format!("started, {} at a time", self.concurrency));
        let heartbeat = tokio::spawn(heartbeat(Arc::clone(&shared)));
        let mut report = WorkerReport::default();
        let mut running: JoinSet<Done> = JoinSet::new();
        let mut passed_over = PassedOver::default();
        while !self.shutdown.is_cancelled() {
            while running.len() < self.concurrency && !self.shutdown.is_cancelled() {
                match claim(&shared).await {
                    Some(job) => {
                        running.spawn(job);
                    }
                    None => {
                        passed_over.tell(&shared).await;
                        break;
                    }
                }
            }
            tokio::select! {
                Some(done) = running.join_next(), if !running.is_empty() => count(&mut report, done),
                () = shared.store.wait_for_work(IDLE), if running.len() < self.concurrency => {}
                () = self.shutdown.cancelled() => {}
            }
        }
        shared.say(&format!("stopping: draining {} task(s)", running.len()));
        let drained = tokio::time::timeout(self.drain, async {
            while let Some(done) = running.join_next().await {
                count(&mut report, done);
            }
        })
        .await;
        if drained.is_err() {
            running.abort_all();
            report.abandoned = give_back(&shared).await;
        }
        heartbeat.abort();
        shared.cache.shutdown().await;
        shared.say(&format!(
            "stopped after {} drive(s) and {} tool call(s)",
            report.drives, report.actions
        ));
        report
    }
}

/// How often an idle worker that runs only some tools looks for calls it leaves
/// to others.
const PASSED_OVER_EVERY: Duration = Duration::from_secs(5);

/// Queued calls of tools a worker does not run: said once each in its log, so an
/// operator sees why a session waits.
#[derive(Default)]
struct PassedOver {
    told: HashSet<(String, String)>,
    looked: Option<tokio::time::Instant>,
}

impl PassedOver {
    async fn tell(&mut self, shared: &Shared) {
        let Some(tools) = &shared.tools else {
            return;
        };
        if self
            .looked
            .is_some_and(|looked| looked.elapsed() < PASSED_OVER_EVERY)
        {
            return;
        }
        self.looked = Some(tokio::time::Instant::now());
        let Ok(view) = shared.store.queue_view().await else {
            return;
        };
        let waiting: HashSet<(String, String)> = view
            .actions
            .iter()
            .map(|action| (action.session_id.clone(), action.call_id.clone()))
            .collect();
        self.told.retain(|key| waiting.contains(key));
        for action in view.actions {
            if action.claimed_by.is_some() || tools.contains(&action.tool_name) {
                continue;
            }
            let key = (action.session_id, action.call_id);
            if !self.told.contains(&key) {
                shared.say(&format!(
                    "leaves {} [{}] of {} to a worker that has the tool (this one runs only {})",
                    action.tool_name,
                    key.1,
                    key.0,
                    tools.join(", ")
                ));
                self.told.insert(key);
            }
        }
    }
}

fn count(report: &mut WorkerReport, done: Result<Done, tokio::task::JoinError>) {
    match done {
        Ok(Done::Drive) => report.drives += 1,
        Ok(Done::Action) => report.actions += 1,
        Err(_) => {}
    }
}

/// A task of the worker.
type Job = std::pin::Pin<Box<dyn std::future::Future<Output = Done> + Send>>;

/// The next piece of work: a queued tool call first, else a queued session.
async fn claim(shared: &Arc<Shared>) -> Option<Job> {
    let store = &shared.store;
    match store
        .claim_action(&shared.name, shared.tools.as_deref(), shared.claim_ttl)
        .await
    {
        Ok(Some(claim)) => {
            shared.claim_worked();
            let held = Held::Action(
                claim.action.session_id.clone(),
                claim.action.call.id.clone(),
            );
            let work = {
                let shared = Arc::clone(shared);
                async move { action::run(&shared, claim).await }
            };
            return Some(job(shared, held, Done::Action, work));
        }
        Ok(None) => {}
        Err(err) => {
            shared.claim_failed("a tool call", &err);
            return None;
        }
    }
    match store.claim_session(&shared.name, shared.claim_ttl).await {
        Ok(Some(claim)) => {
            shared.claim_worked();
            let held = Held::Session(claim.session_id.clone());
            let work = {
                let shared = Arc::clone(shared);
                async move { drive::run(&shared, claim).await }
            };
            Some(job(shared, held, Done::Drive, work))
        }
        Ok(None) => {
            shared.claim_worked();
            None
        }
        Err(err) => {
            shared.claim_failed("a session", &err);
            None
        }
    }
}

/// The task that does `work` for the claim `held`. The work runs in a task of
/// its own, stopped with this one (a drain that ran out): a panic in it gives
/// the claim back at once, instead of leaving a claim the heartbeat renews
/// forever.
fn job(
    shared: &Arc<Shared>,
    held: Held,
    done: Done,
    work: impl std::future::Future<Output = ()> + Send + 'static,
) -> Job {
    let shared = Arc::clone(shared);
    shared.hold(held.clone());
    Box::pin(async move {
        let mut task = JoinSet::new();
        task.spawn(work);
        if let Some(Err(err)) = task.join_next().await
            && err.is_panic()
        {
            shared.say(&format!("failed on {held} and gives it back: {err}"));
            give_back_one(&shared, &held).await;
        }
        shared.drop_hold(&held);
        done
    })
}

/// Renews every claim of the worker, three times per claim lifetime.
async fn heartbeat(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(shared.claim_ttl / 3).await;
        if let Err(err) = shared.store.heartbeat(&shared.name, shared.claim_ttl).await {
            shared.say(&format!("cannot renew its claims: {err}"));
        }
    }
}

/// Gives back every claim still held; returns how many.
async fn give_back(shared: &Shared) -> u64 {
    let held: Vec<Held> = shared
        .held
        .lock()
        .map(|set| set.iter().cloned().collect())
        .unwrap_or_default();
    for item in &held {
        give_back_one(shared, item).await;
    }
    held.len() as u64
}

/// Gives one claim back to the queue: a session to be driven again, a call
/// with its attempt counted (it may have started, so it is not run twice).
async fn give_back_one(shared: &Shared, held: &Held) {
    let given = match held {
        Held::Session(session_id) => shared.store.release_session(session_id, &shared.name).await,
        Held::Action(session_id, call_id) => {
            shared
                .store
                .abandon_action(session_id, call_id, &shared.name)
                .await
        }
    };
    if let Err(err) = given {
        shared.say(&format!("cannot give back {held}: {err}"));
    }
}

/// The name a worker has unless given one: `HOST:PID`.
pub fn default_worker_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|host| host.trim().to_owned())
        .unwrap_or_else(|_| "host".into());
    format!("{host}:{}", std::process::id())
}
