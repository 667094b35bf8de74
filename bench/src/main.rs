//! `agent-bench`: the peers' calculator workload on the agent runtime, printing one
//! JSON line per run with the fields of `shared/bench/peers` (`steps_per_s`,
//! `us_per_step`, `peak_rss_mb`, `db_bytes`, …) plus `fsyncs`.
//!
//! ```sh
//! cargo run --release -p bench -- run --sessions 200 --tool-steps 4 --store sqlite --concurrency 50
//! cargo run --release -p bench -- resume --events 1000
//! cargo run --release -p bench -- context --steps 200
//! cargo build --release -p agent-cli && cargo run --release -p bench -- workers --store sqlite
//! cargo build --release -p agent-cli && cargo run --release -p bench -- crash --kills 200 --seed 1
//! cargo build --release -p agent-cli && cargo run --release -p bench -- serve --sessions 500
//! cargo build --release -p agent-cli && cargo run --release -p bench -- local-suite --model FILE.gguf
//! ```

mod context;
mod crash;
mod local_suite;
mod serve;
mod workers;
mod workload;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agent::engine::Budgets;
use agent::event::{Event, EventKind};
use agent::prelude::*;
use agent::sink::{EventSink, SinkError};
use agent::store::SnapshotStore;
use agent::store::{CommitStats, PostgresStore, PostgresTarget, SqliteStore};
use anyhow::Context;
use clap::{Parser, Subcommand};
use serde_json::json;
use tokio::sync::Semaphore;

use crate::workload::{Operation, WorkloadModel, expected, task};

/// Benchmarks of the agent runtime.
#[derive(Debug, Parser)]
#[command(name = "agent-bench", about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// N sessions × K calculator steps with a scripted model.
    Run(RunArgs),
    /// Time to resume a session of about `--events` events, with and without snapshots.
    Resume(ResumeArgs),
    /// Sessions whose tool sleeps, run from the work queue by 1, 2, 4 `agent worker` processes.
    Workers(workers::WorkersArgs),
    /// SIGKILL `agent` processes at hundreds of aimed points, resume everything,
    /// check that no result was lost or repeated.
    Crash(crash::CrashArgs),
    /// A real `agent serve`: sessions created and followed over HTTP per second,
    /// and one session's events fanned out to many SSE subscribers.
    Serve(serve::ServeArgs),
    /// Small tool-use tasks on a real local GGUF model, per strategy, with and
    /// without the action grammar and the repeated-call guard.
    LocalSuite(local_suite::LocalSuiteArgs),
    /// Input tokens over one long session per context policy.
    Context(context::ContextArgs),
}

/// Where a benchmark's events go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum StoreKind {
    Memory,
    Sqlite,
    /// A PostgreSQL database, by URL.
    Postgres(String),
}

impl StoreKind {
    fn name(&self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Sqlite => "sqlite",
            Self::Postgres(_) => "postgres",
        }
    }
}

fn parse_store(text: &str) -> Result<StoreKind, String> {
    match text {
        "memory" => Ok(StoreKind::Memory),
        "sqlite" => Ok(StoreKind::Sqlite),
        url if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Ok(StoreKind::Postgres(url.to_owned()))
        }
        other => Err(format!(
            "`{other}` is not a store: use memory, sqlite or postgres://USER@HOST:PORT/DB"
        )),
    }
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Sessions to run.
    #[arg(long, default_value_t = 200)]
    sessions: usize,
    /// Tool steps per session (each session has K+1 steps).
    #[arg(long, default_value_t = 4)]
    tool_steps: usize,
    /// Where events go: memory, sqlite (the file `--db`) or a postgres:// URL.
    #[arg(long, value_parser = parse_store, default_value = "memory")]
    store: StoreKind,
    /// Sessions in flight at once, in one process.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// The SQLite file (deleted at start).
    #[arg(long, default_value = "/tmp/agent-bench.db")]
    db: PathBuf,
    /// How turns combine values: `multiply` is the peers' workload.
    #[arg(long, value_enum, default_value_t = Operation::Multiply)]
    operation: Operation,
    /// Print `ack SESSION SEQ KIND` on stdout for every committed event.
    #[arg(long)]
    ack_log: bool,
    /// Install the CLI's telemetry subscriber (logs at warn, spans kept for them).
    #[arg(long)]
    telemetry: bool,
    /// Also export spans and metrics over OTLP/HTTP to this endpoint.
    #[arg(long, value_name = "URL")]
    otlp_endpoint: Option<String>,
}

#[derive(Debug, clap::Args)]
struct ResumeArgs {
    /// Events in the session to resume.
    #[arg(long, default_value_t = 1000)]
    events: u64,
    /// The SQLite file (deleted at start).
    #[arg(long, default_value = "/tmp/agent-bench-resume.db")]
    db: PathBuf,
}

/// Prints every committed event: what callers were told is durable.
struct AckLog(Mutex<std::io::Stdout>);

impl EventSink for AckLog {
    fn publish(&self, event: &Event, _step: u32) -> Result<(), SinkError> {
        let out = self
            .0
            .lock()
            .map_err(|_| SinkError("ack log poisoned".into()))?;
        let mut out = out.lock();
        writeln!(
            out,
            "ack {} {} {}",
            event.session_id,
            event.seq,
            event.kind.name()
        )
        .and_then(|()| out.flush())
        .map_err(|err| SinkError(err.to_string()))
    }
}

fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(file));
    }
}

fn db_bytes(path: &Path) -> u64 {
    ["", "-wal"]
        .iter()
        .map(|suffix| {
            let mut file = path.as_os_str().to_owned();
            file.push(suffix);
            std::fs::metadata(PathBuf::from(file)).map_or(0, |m| m.len())
        })
        .sum()
}

/// Peak resident set size of this process in MiB (`VmHWM`).
fn peak_rss_mb() -> f64 {
    vm_hwm_mb("/proc/self/status").unwrap_or(0.0)
}

/// The peak resident set size (`VmHWM`) in MiB that a `/proc/PID/status` file shows.
fn vm_hwm_mb(status_file: &str) -> Option<f64> {
    std::fs::read_to_string(status_file)
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<f64>()
                        .ok()
                })
        })
        .map(|kib| kib / 1024.0)
}

fn engine(
    store: Arc<dyn EventStore>,
    tool_steps: usize,
    operation: Operation,
    ack_log: bool,
) -> anyhow::Result<Engine> {
    let mut tools = ToolRegistry::new();
    tools.register_typed::<Calculator>()?;
    let budgets = Budgets {
        max_steps: u32::try_from(tool_steps + 2)?,
        ..Budgets::default()
    };
    let mut builder = Engine::builder(
        Arc::new(WorkloadModel {
            tool_steps,
            operation,
        }),
        Arc::new(ReAct::new()),
    )
    .tools(tools.into_toolbox())
    .store(store)
    .budgets(budgets);
    if ack_log {
        builder = builder.sink(Arc::new(AckLog(Mutex::new(std::io::stdout()))));
    }
    Ok(builder.build())
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let (mut sqlite, mut postgres) = (None, None);
    let store: Arc<dyn EventStore> = match &args.store {
        StoreKind::Memory => Arc::new(MemoryStore::new()),
        StoreKind::Sqlite => {
            remove_db(&args.db);
            let store = Arc::new(SqliteStore::open(&args.db)?);
            sqlite = Some(Arc::clone(&store));
            store
        }
        StoreKind::Postgres(url) => {
            let target = PostgresTarget::parse(url)?;
            let store = Arc::new(PostgresStore::connect(target, true).await?);
            postgres = Some(Arc::clone(&store));
            store
        }
    };
    let engine = Arc::new(engine(
        store,
        args.tool_steps,
        args.operation,
        args.ack_log,
    )?);
    let permits = Arc::new(Semaphore::new(args.concurrency.max(1)));
    let started = Instant::now();
    let sessions = args.sessions;
    // A session starts once it has a slot, so the ones waiting for a slot hold
    // no engine state; the launcher runs on the runtime's workers, like the
    // sessions whose slots it waits for.
    let launcher = tokio::spawn(async move {
        let mut tasks = Vec::with_capacity(sessions);
        for i in 0..sessions {
            let permit = Arc::clone(&permits).acquire_owned().await?;
            let engine = Arc::clone(&engine);
            tasks.push(tokio::spawn(async move {
                let _permit = permit;
                let result = engine.run(task(i), json!({"bench": true})).await?;
                anyhow::Ok(result)
            }));
        }
        anyhow::Ok(tasks)
    });
    let tasks = launcher.await??;
    let mut wrong_answers = 0;
    for (i, handle) in tasks.into_iter().enumerate() {
        let result = handle.await??;
        if result.answer.as_deref() != Some(expected(i, args.tool_steps, args.operation).as_str()) {
            wrong_answers += 1;
        }
    }
    let wall_s = started.elapsed().as_secs_f64();
    let steps_total = args.sessions * (args.tool_steps + 1);
    let stats = sqlite
        .as_ref()
        .map(|store| store.stats())
        .or_else(|| postgres.as_ref().map(|store| store.stats()));
    let fsyncs = stats.map(CommitStats::durable_commits);
    let commits = stats.map(CommitStats::commits);
    let bytes = match &sqlite {
        Some(store) => {
            store.checkpoint().await?;
            db_bytes(&args.db)
        }
        None => 0,
    };
    let line = json!({
        "peer": "agent-rs",
        "version": env!("CARGO_PKG_VERSION"),
        "store": args.store.name(),
        "durability": "full",
        "telemetry": match (&args.otlp_endpoint, args.telemetry) {
            (Some(_), _) => "otlp",
            (None, true) => "subscriber",
            (None, false) => "none",
        },
        "concurrency": args.concurrency,
        "sessions": args.sessions,
        "tool_steps": args.tool_steps,
        "operation": format!("{:?}", args.operation).to_lowercase(),
        "steps_total": steps_total,
        "wall_s": wall_s,
        "steps_per_s": steps_total as f64 / wall_s,
        "us_per_step": wall_s * 1e6 / steps_total as f64,
        "peak_rss_mb": peak_rss_mb(),
        "db_bytes": bytes,
        "db_bytes_per_step": bytes as f64 / steps_total as f64,
        "fsyncs": fsyncs,
        "fsyncs_per_step": fsyncs.map(|f| f as f64 / steps_total as f64),
        "commits": commits,
        "commits_per_step": commits.map(|c| c as f64 / steps_total as f64),
        "wrong_answers": wrong_answers,
    });
    println!("{line}");
    anyhow::ensure!(
        wrong_answers == 0,
        "{wrong_answers} sessions gave a wrong answer"
    );
    Ok(())
}

/// Writes a session of `events` events that stops between steps, as a crash would
/// leave it, with or without the snapshots a running engine would have written.
async fn stopped_session(
    store: &SqliteStore,
    session_id: &str,
    events: u64,
    snapshots: bool,
) -> anyhow::Result<u64> {
    let steps = events.saturating_sub(1) / 4;
    let mut state = agent::state::SessionState::new(session_id);
    let mut log = Vec::new();
    let mut push =
        |kind: EventKind, state: &mut agent::state::SessionState| -> anyhow::Result<()> {
            let event = Event::new(session_id, state.last_seq() + 1, kind);
            state.apply(&event)?;
            log.push(event);
            Ok(())
        };
    push(
        EventKind::SessionStarted {
            task: task(1),
            strategy: "react".into(),
            config: json!({}),
        },
        &mut state,
    )?;
    let mut value = 3.0;
    let mut snapshot = None;
    for step in 1..=steps {
        let call = agent::types::ToolCall {
            id: format!("call_{step}_1"),
            tool_name: "calculator".into(),
            arguments: json!({"left": value, "operation": "add", "right": 1}),
        };
        value += 1.0;
        push(
            EventKind::ModelRequested {
                step: u32::try_from(step)?,
                context_tokens: None,
            },
            &mut state,
        )?;
        push(
            EventKind::ModelResponded {
                actions: vec![agent::types::Action::ToolCall(call.clone())],
                usage: agent::types::Usage::default(),
                text: None,
            },
            &mut state,
        )?;
        push(
            EventKind::ActionDispatched { call: call.clone() },
            &mut state,
        )?;
        push(
            EventKind::ActionCompleted {
                observation: agent::types::Observation::success(
                    &call,
                    agent::tools::calculator::format_number(value),
                ),
            },
            &mut state,
        )?;
        if snapshots
            && state.last_seq() / agent::engine::DEFAULT_SNAPSHOT_EVERY
                != (state.last_seq() - 4) / agent::engine::DEFAULT_SNAPSHOT_EVERY
        {
            snapshot = Some((state.last_seq(), agent::engine::snapshot_of(&state)?));
        }
    }
    store
        .append(agent::store::Append::creating(
            &log,
            agent::store::Durability::Full,
        )?)
        .await?;
    if let Some((seq, snapshot)) = snapshot {
        store.save_snapshot(session_id, seq, &snapshot).await?;
    }
    Ok(steps)
}

async fn resume(args: ResumeArgs) -> anyhow::Result<()> {
    remove_db(&args.db);
    let mut lines = Vec::new();
    for snapshots in [true, false] {
        let session_id = format!("resume-{snapshots}");
        {
            let store = SqliteStore::open(&args.db)?;
            stopped_session(&store, &session_id, args.events, snapshots).await?;
        }
        let steps = (args.events.saturating_sub(1) / 4) as usize;
        let store: Arc<dyn EventStore> = Arc::new(SqliteStore::open(&args.db)?);
        let events = store.load(&session_id).await?.len();
        let snapshot_seq = store.load_snapshot(&session_id).await?.map(|(seq, _)| seq);
        let engine = engine(Arc::clone(&store), steps, Operation::Add, false)?;
        let started = Instant::now();
        let loaded = agent::engine::load_state(store.as_ref(), &session_id).await?;
        let load_ms = started.elapsed().as_secs_f64() * 1e3;
        let started = Instant::now();
        let result = engine.resume(&session_id).await.context("resume")?;
        let resume_ms = started.elapsed().as_secs_f64() * 1e3;
        anyhow::ensure!(
            result.exit_reason == ExitReason::Finished,
            "resume did not finish: {result:?}"
        );
        lines.push(json!({
            "peer": "agent-rs",
            "bench": "resume",
            "store": "sqlite",
            "snapshots": snapshots,
            "events": events,
            "events_after_snapshot": snapshot_seq.map(|seq| loaded.last_seq() - seq),
            "load_ms": load_ms,
            "resume_ms": resume_ms,
        }));
    }
    for line in lines {
        println!("{line}");
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let telemetry = match &cli.command {
        Command::Run(args) if args.telemetry || args.otlp_endpoint.is_some() => {
            Some(agent::trace::telemetry::Telemetry::install(
                &agent::trace::telemetry::TelemetryConfig {
                    otlp_endpoint: args.otlp_endpoint.clone(),
                    ..Default::default()
                },
            )?)
        }
        _ => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(execute(cli));
    drop(runtime);
    if let Some(telemetry) = telemetry {
        telemetry.shutdown();
    }
    outcome
}

async fn execute(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Run(args) => run(args).await,
        Command::Resume(args) => resume(args).await,
        Command::Workers(args) => workers::workers(args).await,
        Command::Crash(args) => crash::crash(args).await,
        Command::Serve(args) => serve::serve(args).await,
        Command::LocalSuite(args) => local_suite::local_suite(args),
        Command::Context(args) => context::context(args).await,
    }
}
