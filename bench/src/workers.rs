//! `agent-bench workers`: sessions submitted to the work queue and run by `agent
//! worker` processes, whose tool sleeps: how well tool latency overlaps across
//! sessions and workers. One JSON line per worker count.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent::state::PublicStatus;
use agent::store::Store;
use agent_runtime::{AgentSpec, Session, SessionConfig, SessionOptions};
use anyhow::Context;
use serde_json::json;

use crate::{StoreKind, parse_store, remove_db};

/// Arguments of `agent-bench workers`.
#[derive(Debug, clap::Args)]
pub struct WorkersArgs {
    /// Sessions to submit.
    #[arg(long, default_value_t = 200)]
    sessions: usize,
    /// Tool steps per session (each session has K+1 steps).
    #[arg(long, default_value_t = 4)]
    tool_steps: usize,
    /// Seconds each tool call sleeps.
    #[arg(long, default_value_t = 1.0)]
    tool_secs: f64,
    /// Worker process counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    workers: Vec<usize>,
    /// `--concurrency` of each worker.
    #[arg(long, default_value_t = 50)]
    concurrency: usize,
    /// Where sessions go: sqlite (the file `--db`) or a postgres:// URL of a
    /// database the benchmark may fill.
    #[arg(long, value_parser = parse_store, default_value = "sqlite")]
    store: StoreKind,
    /// The SQLite file, suffixed with the worker count (deleted before each run).
    #[arg(long, default_value = "/tmp/agent-bench-workers.db")]
    db: PathBuf,
    /// The `agent` binary (default: the one beside this benchmark).
    #[arg(long)]
    agent: Option<PathBuf>,
}

/// Worker processes, killed if the benchmark stops early.
struct Fleet(Vec<Child>);

impl Fleet {
    fn start(agent: &PathBuf, url: &str, count: usize, concurrency: usize) -> anyhow::Result<Self> {
        let mut children = Vec::with_capacity(count);
        for n in 0..count {
            let child = Command::new(agent)
                .args(["worker", "--store", url, "--name", &format!("bench-{n}")])
                .args(["--concurrency", &concurrency.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .with_context(|| format!("cannot start `{}`", agent.display()))?;
            children.push(child);
        }
        Ok(Self(children))
    }

    /// Stops every worker with SIGTERM and waits for it.
    fn stop(mut self) -> anyhow::Result<()> {
        for child in &self.0 {
            let pid = rustix::process::Pid::from_child(child);
            rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
        }
        for child in &mut self.0 {
            let status = child.wait()?;
            anyhow::ensure!(status.success(), "a worker exited with {status}");
        }
        self.0.clear();
        Ok(())
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The scripted model of the sessions: `steps` sleeps of `secs`, then a finish.
fn script_of(steps: usize, secs: f64) -> anyhow::Result<PathBuf> {
    let mut responses: Vec<_> = (0..steps)
        .map(|_| json!({"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": secs}}))
        .collect();
    responses.push(json!({"type": "finish", "answer": "slept"}));
    let path = std::env::temp_dir().join(format!(
        "agent-bench-workers-{}-{steps}-{secs}.json",
        std::process::id()
    ));
    std::fs::write(&path, serde_json::to_string(&responses)?)?;
    Ok(path)
}

/// The store of the run with `count` workers: a fresh SQLite file each (a file
/// still open in the last run is never deleted under it), or the database given.
fn url_of(args: &WorkersArgs, count: usize) -> anyhow::Result<String> {
    match &args.store {
        StoreKind::Sqlite => {
            let mut name = args.db.as_os_str().to_owned();
            name.push(format!("-{count}"));
            let db = PathBuf::from(name);
            remove_db(&db);
            Ok(format!("sqlite://{}", db.display()))
        }
        StoreKind::Postgres(url) => Ok(url.clone()),
        StoreKind::Memory => {
            anyhow::bail!("workers need a store other processes reach: sqlite or postgres://…")
        }
    }
}

/// Submits the sessions; returns their ids.
async fn submit_all(
    store: &Arc<dyn Store>,
    args: &WorkersArgs,
    script: &std::path::Path,
) -> anyhow::Result<HashSet<String>> {
    let options = AgentSpec {
        model: Some(format!("scripted:{}", script.display())),
        tools: Some(vec!["sleep".into()]),
        max_steps: Some(u32::try_from(args.tool_steps + 1)?),
        ..AgentSpec::default()
    };
    let config = SessionConfig::resolve(&options, None, &std::env::current_dir()?)?;
    let session = Session::open(
        &config,
        store.clone(),
        SessionOptions {
            queue: Some(store.clone()),
            ..SessionOptions::default()
        },
    )
    .await?;
    let mut ids = HashSet::with_capacity(args.sessions);
    for n in 0..args.sessions {
        ids.insert(
            session
                .engine
                .submit(format!("sleep {n}"), config.to_value())
                .await?,
        );
    }
    session.shutdown().await;
    Ok(ids)
}

/// Waits until every session of `ids` has ended; fails on any that did not finish.
async fn all_ended(store: &Arc<dyn Store>, ids: &HashSet<String>) -> anyhow::Result<()> {
    loop {
        let sessions = store.sessions().await?;
        let mine: Vec<_> = sessions
            .iter()
            .filter(|summary| ids.contains(&summary.session_id))
            .collect();
        let ended = mine.iter().filter(|s| s.status.is_final()).count();
        if ended == ids.len() {
            let failed = mine
                .iter()
                .filter(|s| s.status != PublicStatus::Finished)
                .count();
            anyhow::ensure!(failed == 0, "{failed} sessions did not finish");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Milliseconds from submit to a worker's pickup (its `resumed` event) of single
/// sessions submitted to the idle fleet, sorted.
async fn pickup_ms(
    store: &Arc<dyn Store>,
    args: &WorkersArgs,
    script: &std::path::Path,
) -> anyhow::Result<Vec<u64>> {
    let single = WorkersArgs {
        sessions: 1,
        tool_steps: 1,
        tool_secs: 0.0,
        workers: Vec::new(),
        agent: None,
        db: args.db.clone(),
        store: args.store.clone(),
        ..*args
    };
    let mut pickups = Vec::new();
    for _ in 0..5 {
        let ids = submit_all(store, &single, script).await?;
        all_ended(store, &ids).await?;
        for id in &ids {
            let events = store.load(id).await?;
            let submitted = events.first().map_or(0, |event| event.at);
            let taken = events
                .iter()
                .find(|event| matches!(event.kind, agent::event::EventKind::Resumed { .. }))
                .map_or(submitted, |event| event.at);
            pickups.push(taken.saturating_sub(submitted));
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    pickups.sort_unstable();
    Ok(pickups)
}

/// The `agent` binary: `given`, or the one beside this benchmark.
pub fn agent_binary(given: Option<&PathBuf>) -> anyhow::Result<PathBuf> {
    let agent = match given {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("agent"),
    };
    anyhow::ensure!(
        agent.exists(),
        "no `agent` binary at {}: build it (cargo build --release -p agent-cli) or pass --agent",
        agent.display()
    );
    Ok(agent)
}

/// Runs the benchmark for each worker count and prints a JSON line for each.
pub async fn workers(args: WorkersArgs) -> anyhow::Result<()> {
    let agent = agent_binary(args.agent.as_ref())?;
    let script = script_of(args.tool_steps, args.tool_secs)?;
    let quick = script_of(1, 0.0)?;
    for &count in &args.workers {
        let url = url_of(&args, count)?;
        let store = agent::store::open_url(&url, true).await?;
        let fleet = Fleet::start(&agent, &url, count, args.concurrency)?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let pickups = pickup_ms(&store, &args, &quick).await?;
        let started = Instant::now();
        let ids = submit_all(&store, &args, &script).await?;
        let submitted_s = started.elapsed().as_secs_f64();
        all_ended(&store, &ids).await?;
        let wall_s = started.elapsed().as_secs_f64();
        fleet.stop()?;
        let steps_total = args.sessions * (args.tool_steps + 1);
        let tool_calls = args.sessions * args.tool_steps;
        println!(
            "{}",
            json!({
                "peer": "agent-rs",
                "bench": "workers",
                "version": env!("CARGO_PKG_VERSION"),
                "store": args.store.name(),
                "workers": count,
                "concurrency": args.concurrency,
                "sessions": args.sessions,
                "tool_steps": args.tool_steps,
                "tool_secs": args.tool_secs,
                "steps_total": steps_total,
                "wall_s": wall_s,
                "submit_s": submitted_s,
                "steps_per_s": steps_total as f64 / wall_s,
                "tool_calls_per_s": tool_calls as f64 / wall_s,
                "serial_tool_s": tool_calls as f64 * args.tool_secs,
                "ideal_wall_s": (args.tool_steps as f64 * args.tool_secs).max(
                    tool_calls as f64 * args.tool_secs / (count * args.concurrency) as f64
                ),
                "idle_pickup_ms": pickups,
            })
        );
    }
    let _ = std::fs::remove_file(&script);
    let _ = std::fs::remove_file(&quick);
    Ok(())
}
