//! Workers in one process, on the memory and SQLite stores: submitted sessions
//! are driven and their tool calls run by whichever worker claims them; a call
//! whose worker died is re-run or reported; a worker leaves calls of tools it
//! does not run; a stopping worker drains.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent::cancel::Cancellation;
use agent::engine::load_state;
use agent::result::{ExitReason, RunResult};
use agent::store::queue::QueuedAction;
use agent::store::{MemoryStore, Store};
use agent_runtime::{AgentSpec, Session, SessionConfig, SessionOptions, Worker, WorkerReport};
use serde_json::{Value, json};

/// A directory removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "agent-worker-{name}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A script that sleeps, appends `line` to `out.txt` and finishes.
fn script(dir: &Path, line: &str, seconds: f64) -> PathBuf {
    let path = dir.join(format!("script-{line}.json"));
    let responses = json!([
        {"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": seconds}},
        {"type": "tool_call", "tool_name": "append_line",
         "arguments": {"path": "out.txt", "line": line}},
        {"type": "finish", "answer": format!("wrote {line}")}
    ]);
    std::fs::write(&path, responses.to_string()).unwrap();
    path
}

/// Submits a session that writes `line`; returns its id.
async fn submit(store: &Arc<dyn Store>, dir: &Path, line: &str, seconds: f64) -> String {
    let options = AgentSpec {
        model: Some(format!("scripted:{}", script(dir, line, seconds).display())),
        tools: Some(vec!["sleep".into(), "append_line".into()]),
        workspace: Some(dir.to_path_buf()),
        ..AgentSpec::default()
    };
    let config = SessionConfig::resolve(&options, None, dir).unwrap();
    agent_runtime::submit(&config, store.clone(), format!("write {line}"))
        .await
        .unwrap()
}

/// Waits until the session ends and returns its result.
async fn ended(store: &Arc<dyn Store>, session_id: &str) -> RunResult {
    for _ in 0..1500 {
        let state = load_state(store.as_ref(), session_id).await.unwrap();
        if let Some(result) = state.run_result() {
            return result;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("session {session_id} did not end");
}

/// A log that keeps the worker's lines.
fn log() -> (agent_runtime::WorkerLog, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&lines);
    let log: agent_runtime::WorkerLog = Arc::new(move |line: &str| {
        kept.lock().unwrap().push(line.to_owned());
    });
    (log, lines)
}

fn start(
    store: &Arc<dyn Store>,
    name: &str,
    shutdown: &Cancellation,
) -> tokio::task::JoinHandle<WorkerReport> {
    let worker = Worker::builder(store.clone())
        .name(name)
        .concurrency(4)
        .claim_ttl(Duration::from_millis(600))
        .shutdown(shutdown.clone())
        .log(log().0)
        .build();
    tokio::spawn(worker.run())
}

fn lines_of(dir: &Path) -> Vec<String> {
    let mut lines: Vec<String> = std::fs::read_to_string(dir.join("out.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

async fn sqlite(dir: &Path) -> Arc<dyn Store> {
    let url = format!("sqlite://{}", dir.join("agent.db").display());
    agent::store::open_url(&url, true).await.unwrap()
}

async fn three_workers_finish_every_session(store: Arc<dyn Store>, dir: &Path) {
    let mut ids = Vec::new();
    for n in 0..12 {
        ids.push(submit(&store, dir, &format!("line-{n:02}"), 0.05).await);
    }
    let shutdown = Cancellation::new();
    let workers: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|name| start(&store, name, &shutdown))
        .collect();
    for id in &ids {
        let result = ended(&store, id).await;
        assert_eq!(result.exit_reason, ExitReason::Finished, "{result:?}");
        assert_eq!(result.usage.tool_calls, 2);
    }
    shutdown.cancel();
    let mut report = WorkerReport::default();
    for worker in workers {
        let done = worker.await.unwrap();
        report.drives += done.drives;
        report.actions += done.actions;
        report.abandoned += done.abandoned;
    }
    assert_eq!(report.actions, 24, "{report:?}");
    assert_eq!(report.abandoned, 0);
    let expected: Vec<String> = (0..12).map(|n| format!("line-{n:02}")).collect();
    assert_eq!(lines_of(dir), expected);
    let view = store.queue_view().await.unwrap();
    assert!(
        view.sessions.is_empty() && view.actions.is_empty(),
        "{view:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_workers_finish_every_session_in_memory() {
    let dir = Dir::new("memory");
    three_workers_finish_every_session(Arc::new(MemoryStore::new()), &dir.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_workers_finish_every_session_on_sqlite() {
    let dir = Dir::new("sqlite");
    three_workers_finish_every_session(sqlite(&dir.0).await, &dir.0).await;
}

/// Drives the session until its first call waits in the queue, without running it.
async fn park_at_first_call(store: &Arc<dyn Store>) -> QueuedAction {
    let claim = store
        .claim_session("driver", Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    let events = store.load(&claim.session_id).await.unwrap();
    let agent::event::EventKind::SessionStarted { config, .. } = &events[0].kind else {
        panic!("no configuration");
    };
    let config = SessionConfig::recorded(config).unwrap();
    let session = Session::open(
        &config,
        store.clone(),
        SessionOptions {
            queue: Some(store.clone()),
            ..SessionOptions::default()
        },
    )
    .await
    .unwrap();
    let drive = session
        .engine
        .drive(&claim.session_id, "driver")
        .await
        .unwrap();
    assert!(matches!(drive, agent::engine::Drive::Parked));
    session.shutdown().await;
    store.finish_session(&claim, "driver").await.unwrap();
    let claimed = store
        .claim_action("dead", None, Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();
    claimed.action
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_whose_worker_died_is_rerun_when_idempotent_and_reported_otherwise() {
    let dir = Dir::new("died");
    let store = sqlite(&dir.0).await;
    let path = dir.0.join("script-once.json");
    std::fs::write(
        &path,
        json!([
            {"type": "tool_call", "tool_name": "append_line",
             "arguments": {"path": "out.txt", "line": "once"}},
            {"type": "finish", "answer": "done"}
        ])
        .to_string(),
    )
    .unwrap();
    let options = AgentSpec {
        model: Some(format!("scripted:{}", path.display())),
        tools: Some(vec!["append_line".into()]),
        workspace: Some(dir.0.clone()),
        ..AgentSpec::default()
    };
    let config = SessionConfig::resolve(&options, None, &dir.0).unwrap();
    let id = agent_runtime::submit(&config, store.clone(), "append once")
        .await
        .unwrap();
    let action = park_at_first_call(&store).await;
    assert_eq!(action.call.tool_name, "append_line");
    assert!(!action.idempotent);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let shutdown = Cancellation::new();
    let worker = start(&store, "alive", &shutdown);
    let result = ended(&store, &id).await;
    shutdown.cancel();
    worker.await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    let events = store.load(&id).await.unwrap();
    let observation = events
        .iter()
        .find_map(|event| match &event.kind {
            agent::event::EventKind::ActionCompleted { observation } => Some(observation.clone()),
            _ => None,
        })
        .unwrap();
    assert!(observation.is_error);
    assert_eq!(observation.content, agent::engine::INTERRUPTED);
    assert!(lines_of(&dir.0).is_empty(), "the call must not run twice");

    let id = submit(&store, &dir.0, "slept", 0.01).await;
    let action = park_at_first_call(&store).await;
    assert_eq!(action.session_id, id);
    assert!(action.idempotent);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let shutdown = Cancellation::new();
    let worker = start(&store, "alive", &shutdown);
    let result = ended(&store, &id).await;
    shutdown.cancel();
    worker.await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    let events = store.load(&id).await.unwrap();
    let first: Value = events
        .iter()
        .find_map(|event| match &event.kind {
            agent::event::EventKind::ActionCompleted { observation } => {
                Some(json!({"error": observation.is_error, "content": observation.content}))
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(first, json!({"error": false, "content": "slept 0.01s"}));
    assert_eq!(lines_of(&dir.0), vec!["slept".to_owned()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_leaves_calls_of_tools_it_does_not_run_and_says_so() {
    let dir = Dir::new("tools");
    let store = sqlite(&dir.0).await;
    let id = submit(&store, &dir.0, "picky", 0.01).await;
    let shutdown = Cancellation::new();
    let (log, lines) = log();
    let picky = Worker::builder(store.clone())
        .name("picky")
        .only_tools(vec!["append_line".into()])
        .shutdown(shutdown.clone())
        .log(log)
        .build();
    let picky = tokio::spawn(picky.run());
    let mut waiting = false;
    for _ in 0..300 {
        let view = store.queue_view().await.unwrap();
        waiting = view
            .actions
            .iter()
            .any(|action| action.tool_name == "sleep" && action.claimed_by.is_none());
        let said = lines
            .lock()
            .unwrap()
            .iter()
            .any(|line| line.contains("leaves sleep") && line.contains(&id));
        if waiting && said {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(waiting, "the sleep call waits in the queue");
    let state = load_state(store.as_ref(), &id).await.unwrap();
    assert!(state.run_result().is_none());

    let other = start(&store, "has-sleep", &shutdown);
    let result = ended(&store, &id).await;
    assert_eq!(result.exit_reason, ExitReason::Finished);
    shutdown.cancel();
    picky.await.unwrap();
    other.await.unwrap();
    assert_eq!(lines_of(&dir.0), vec!["picky".to_owned()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopping_worker_finishes_what_it_started_or_gives_it_back() {
    let dir = Dir::new("drain");
    let store = sqlite(&dir.0).await;
    let id = submit(&store, &dir.0, "drained", 0.8).await;
    let run_until_sleeping = |drain: Duration| {
        let store = store.clone();
        async move {
            let shutdown = Cancellation::new();
            let worker = Worker::builder(store.clone())
                .name("stopping")
                .drain(drain)
                .shutdown(shutdown.clone())
                .log(log().0)
                .build();
            let worker = tokio::spawn(worker.run());
            for _ in 0..500 {
                let view = store.queue_view().await.unwrap();
                if view
                    .actions
                    .iter()
                    .any(|action| action.claimed_by.is_some())
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            shutdown.cancel();
            worker.await.unwrap()
        }
    };
    let report = run_until_sleeping(Duration::from_millis(50)).await;
    assert_eq!(report.abandoned, 1, "{report:?}");
    let view = store.queue_view().await.unwrap();
    assert_eq!(view.actions.len(), 1);
    assert_eq!(view.actions[0].claimed_by, None, "given back: {view:?}");

    let report = run_until_sleeping(Duration::from_secs(10)).await;
    assert_eq!(report.abandoned, 0, "{report:?}");
    assert_eq!(report.actions, 1, "{report:?}");
    let shutdown = Cancellation::new();
    let worker = start(&store, "finisher", &shutdown);
    assert_eq!(ended(&store, &id).await.exit_reason, ExitReason::Finished);
    shutdown.cancel();
    worker.await.unwrap();
    assert_eq!(lines_of(&dir.0), vec!["drained".to_owned()]);
}

/// How many times `deploy` really ran.
static DEPLOYS: AtomicU32 = AtomicU32::new(0);

/// Deploys a service (only with a human's approval).
#[derive(serde::Deserialize, schemars::JsonSchema, agent::prelude::Tool)]
#[tool(needs_approval)]
struct Deploy {
    /// The service.
    service: String,
}

impl Deploy {
    async fn run(self, _ctx: &agent::tool::ToolContext) -> Result<String, agent::tool::ToolError> {
        DEPLOYS.fetch_add(1, Ordering::SeqCst);
        Ok(format!("deployed {}", self.service))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_holds_a_flagged_tool_for_approval_and_runs_it_once_approved() {
    let dir = Dir::new("approval");
    let store = sqlite(&dir.0).await;
    let script = dir.0.join("deploy.json");
    std::fs::write(
        &script,
        json!([
            {"type": "tool_call", "tool_name": "deploy", "arguments": {"service": "web"}},
            {"type": "finish", "answer": "deployed"}
        ])
        .to_string(),
    )
    .unwrap();
    let options = AgentSpec {
        model: Some(format!("scripted:{}", script.display())),
        workspace: Some(dir.0.clone()),
        ..AgentSpec::default()
    };
    let config = SessionConfig::resolve(&options, None, &dir.0).unwrap();
    let deploy: Arc<dyn agent::tool::Tool> = Arc::new(agent::tools::Typed::<Deploy>::new());
    let session = Session::open(
        &config,
        store.clone(),
        SessionOptions {
            queue: Some(store.clone()),
            extra_tools: vec![Arc::clone(&deploy)],
            ..SessionOptions::default()
        },
    )
    .await
    .unwrap();
    let id = session
        .engine
        .submit("deploy web", config.to_value())
        .await
        .unwrap();
    let shutdown = Cancellation::new();
    let worker = tokio::spawn(
        Worker::builder(store.clone())
            .name("w")
            .tool(Arc::clone(&deploy))
            .claim_ttl(Duration::from_millis(600))
            .shutdown(shutdown.clone())
            .log(log().0)
            .build()
            .run(),
    );
    let mut paused = None;
    for _ in 0..1500 {
        let state = load_state(store.as_ref(), &id).await.unwrap();
        assert!(state.run_result().is_none(), "{:?}", state.run_result());
        paused = state.awaiting_result();
        if paused.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let paused = paused.expect("the session never waited for approval");
    assert_eq!(paused.pending[0].tool_name, "deploy");
    assert_eq!(DEPLOYS.load(Ordering::SeqCst), 0, "it ran before approval");
    let decided = agent_runtime::control::approve(store.as_ref(), &id, None, None, "tester")
        .await
        .unwrap();
    assert!(decided.queued, "{decided:?}");
    let result = ended(&store, &id).await;
    assert_eq!(result.exit_reason, ExitReason::Finished, "{result:?}");
    assert_eq!(DEPLOYS.load(Ordering::SeqCst), 1);
    shutdown.cancel();
    worker.await.unwrap();
    session.shutdown().await;
}
