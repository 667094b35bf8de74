//! `agent-bench crash`: the crash harness. Sessions of calculator, `append_line`
//! and `sleep` calls run in real `agent` processes — `agent run` / `agent resume`,
//! then a fleet of `agent worker`s — that get SIGKILL at hundreds of points drawn
//! from `--seed` and aimed by polling the store (after N events, inside a tool
//! call, around a snapshot write or a lease renewal, at a random moment). Every
//! session is then resumed to its end and checked: the right answer, each
//! `append_line` line at most once and none recorded but missing, idempotent
//! calls re-run, gap-free logs, snapshots equal to a full replay, and no event
//! ever read from the store missing later. The last line printed is one JSON
//! object; the exit code is 1 if any guarantee failed.
//!
//! The seed fixes every choice (scripts, aims, jitters); the moments processes
//! reach their aims depend on the machine, so two runs with one seed kill at the
//! same aims, not at the same instructions.

mod check;
mod fleet;
mod model;
mod outage;
mod plan;
mod single;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use serde_json::json;

use crate::{StoreKind, parse_store, remove_db};
use check::{Findings, Observed};
use plan::SessionPlan;

/// Arguments of `agent-bench crash`.
#[derive(Debug, clap::Args)]
pub struct CrashArgs {
    /// SIGKILLs to send in all (single-process and worker phases together).
    #[arg(long, default_value_t = 200)]
    kills: usize,
    /// The seed every choice is drawn from.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// sqlite (a new file in the work directory) or a postgres:// URL of a
    /// database the harness may write sessions to.
    #[arg(long, value_parser = parse_store, default_value = "sqlite")]
    store: StoreKind,
    /// Sessions driven at once in the single-process phase.
    #[arg(long, default_value_t = 6)]
    lanes: usize,
    /// Share of the kills aimed at `agent worker` processes, in percent.
    #[arg(long, default_value_t = 25)]
    worker_percent: usize,
    /// Sessions of the worker phase.
    #[arg(long, default_value_t = 24)]
    worker_sessions: usize,
    /// Worker processes of the worker phase.
    #[arg(long, default_value_t = 3)]
    workers: usize,
    /// The work directory (default: a new one under the temp directory, removed
    /// after a run that passes).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The `agent` binary (default: the one beside this benchmark).
    #[arg(long)]
    agent: Option<PathBuf>,
    /// With a postgres:// store: the directory of the `scripts/pg-cluster.sh`
    /// cluster that serves it; the outage lanes then stop that server mid-run
    /// (`-m fast`, then `-m immediate`) and start it again.
    #[arg(long, value_name = "DIR")]
    pg_cluster: Option<PathBuf>,
    /// The cluster script of `--pg-cluster`.
    #[arg(long, value_name = "FILE", default_value = "scripts/pg-cluster.sh")]
    pg_script: PathBuf,
    /// With the sqlite store: the disk-full lane, on an SQLite file on a small
    /// tmpfs (mounting one needs root) that is filled up mid-run and freed.
    #[arg(long)]
    disk_full: bool,
    /// How long each outage lasts.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    outage_secs: u64,
    /// Sessions of each outage lane.
    #[arg(long, default_value_t = 12)]
    outage_sessions: usize,
}

/// What both phases share: the binary, the store, the seed, where files go.
pub struct Harness {
    /// The `agent` binary.
    pub agent: PathBuf,
    /// The store URL the processes get.
    pub url: String,
    /// The harness's own connection to the store, for polling and checks.
    pub store: std::sync::Arc<dyn agent::store::Store>,
    /// The run's seed.
    pub seed: u64,
    /// The run's tag, in every task.
    pub tag: String,
    /// Where scripts, workspaces and worker logs go.
    pub dir: PathBuf,
    /// The model every session asks.
    pub model: model::ModelServer,
    /// The processes killed so far, by the API key they asked the model with.
    killed: Mutex<BTreeSet<String>>,
}

impl Harness {
    /// Draws session `index` of this run and gives the model its script.
    fn draw(&self, index: usize) -> anyhow::Result<SessionPlan> {
        let plan = SessionPlan::draw(self.seed, &self.tag, index, &self.dir)?;
        self.model.add(&plan)?;
        Ok(plan)
    }

    /// Notes that the process that asks the model as `process` was killed.
    fn killed(&self, process: &str) -> anyhow::Result<()> {
        lock(&self.killed)?.insert(process.to_owned());
        Ok(())
    }

    /// What the model's answers say about calls made twice, for `sessions`.
    fn reasked(
        &self,
        sessions: &[(SessionPlan, String, Observed)],
    ) -> anyhow::Result<model::Reasked> {
        let tasks: BTreeSet<&str> = sessions
            .iter()
            .map(|(plan, _, _)| plan.task.as_str())
            .collect();
        let killed = lock(&self.killed)?.clone();
        Ok(model::reasked(&self.model.answers()?, &tasks, &killed))
    }
}

/// The variable an `agent` process reads its model key from; the harness
/// gives each process a key of its own, so the model knows who asked.
pub const KEY_VARIABLE: &str = "OPENAI_API_KEY";

/// What one phase did.
pub struct Phase {
    /// Kills made.
    pub kills: usize,
    /// Kills per kind of aim.
    pub points: BTreeMap<&'static str, usize>,
    /// Each session, its id and what was read of it.
    pub sessions: Vec<(SessionPlan, String, Observed)>,
    /// `agent resume` refused with exit 8 and tried again.
    pub busy_retries: usize,
    /// Processes that exited with an unexpected code.
    pub failures: Vec<String>,
}

/// Locks a mutex, failing instead of panicking on a poisoned one.
fn lock<T>(mutex: &Mutex<T>) -> anyhow::Result<MutexGuard<'_, T>> {
    mutex
        .lock()
        .map_err(|_| anyhow::anyhow!("a lane panicked while holding the board"))
}

/// Runs the harness and prints its report; fails if a guarantee did not hold.
pub async fn crash(args: CrashArgs) -> anyhow::Result<()> {
    let agent = crate::workers::agent_binary(args.agent.as_ref())?;
    let started = Instant::now();
    let tag = format!(
        "{}-{}-{}",
        args.seed,
        std::process::id(),
        agent::event::now_millis()
    );
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("agent-crash-{tag}")),
    };
    std::fs::create_dir_all(&dir)?;
    let url = match &args.store {
        StoreKind::Sqlite => {
            let db = dir.join("crash.db");
            remove_db(&db);
            format!("sqlite://{}", db.display())
        }
        StoreKind::Postgres(url) => url.clone(),
        StoreKind::Memory => anyhow::bail!("the crash harness needs a store processes share"),
    };
    let store = agent::store::open_url(&url, true).await?;
    let worker_kills = args.kills * args.worker_percent.min(100) / 100;
    let harness = std::sync::Arc::new(Harness {
        agent,
        url,
        store: store.clone(),
        seed: args.seed,
        tag,
        dir: dir.clone(),
        model: model::ModelServer::start().await?,
        killed: Mutex::default(),
    });
    let single = single::run(single::Lanes {
        harness: std::sync::Arc::clone(&harness),
        kills: args.kills - worker_kills,
        lanes: args.lanes,
    })
    .await?;
    eprintln!(
        "single-process phase: {} kills over {} sessions",
        single.kills,
        single.sessions.len()
    );
    let workers = fleet::run(fleet::FleetRun {
        harness: std::sync::Arc::clone(&harness),
        kills: worker_kills,
        sessions: args.worker_sessions,
        workers: args.workers,
    })
    .await?;
    eprintln!(
        "worker phase: {} kills over {} sessions",
        workers.kills,
        workers.sessions.len()
    );
    let lanes = outage_lanes(&args, &harness, &store).await?;
    let single_findings = check::check(store.as_ref(), &single.sessions).await?;
    let worker_findings = check::check(store.as_ref(), &workers.sessions).await?;
    let mut total = Findings::default();
    total.add(&single_findings);
    total.add(&worker_findings);
    let single_reasked = harness.reasked(&single.sessions)?;
    let worker_reasked = harness.reasked(&workers.sessions)?;
    let reasked_outside =
        single_reasked.outside_killed_request + worker_reasked.outside_killed_request;
    let kills = single.kills + workers.kills;
    let failures: Vec<&String> = single.failures.iter().chain(&workers.failures).collect();
    let ok = total.ok()
        && reasked_outside == 0
        && failures.is_empty()
        && kills >= args.kills
        && lanes.iter().all(|lane| lane.ok);
    let mut points = single.points.clone();
    for (kind, count) in &workers.points {
        *points.entry(kind).or_default() += count;
    }
    let mut report = json!({
        "bench": "crash",
        "store": args.store.name(),
        "seed": args.seed,
        "kills": kills,
        "kill_points": points,
        "busy_retries": single.busy_retries,
        "unexpected_exits": failures,
        "model_requests": single_reasked.requests + worker_reasked.requests,
        "reasked_in_killed_request": single_reasked.in_killed_request + worker_reasked.in_killed_request,
        "reasked_outside_killed_request": reasked_outside,
        "reasked_problems": single_reasked.problems.iter().chain(&worker_reasked.problems).collect::<Vec<_>>(),
        "phases": {
            "single_process": phase_json(&single, &single_findings, &single_reasked),
            "workers": phase_json(&workers, &worker_findings, &worker_reasked),
        },
        "outage_lanes": lanes.iter().map(|lane| lane.json.clone()).collect::<Vec<_>>(),
        "elapsed_s": started.elapsed().as_secs_f64(),
        "ok": ok,
    });
    if let (Some(fields), serde_json::Value::Object(found)) =
        (report.as_object_mut(), total.to_json())
    {
        for (key, value) in found {
            fields.insert(key, value);
        }
    }
    println!("{report}");
    anyhow::ensure!(
        ok,
        "a guarantee did not hold (see the report above); the work directory {} is kept",
        dir.display()
    );
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// Sessions of the outage lanes are numbered from here on.
const OUTAGE_INDEX: usize = 200_000;

/// The outage lanes `args` ask for: the PostgreSQL server stopped fast and
/// stopped immediately, or the SQLite disk filled.
async fn outage_lanes(
    args: &CrashArgs,
    harness: &std::sync::Arc<Harness>,
    store: &std::sync::Arc<dyn agent::store::Store>,
) -> anyhow::Result<Vec<outage::LaneReport>> {
    let mut reports = Vec::new();
    let lane =
        |url: String, store: std::sync::Arc<dyn agent::store::Store>, outage, number: usize| {
            outage::Lane {
                harness: std::sync::Arc::clone(harness),
                url,
                store,
                sessions: args.outage_sessions,
                workers: 2,
                outage_secs: args.outage_secs,
                outage,
                first_index: OUTAGE_INDEX + number * 1_000,
            }
        };
    if let Some(cluster) = &args.pg_cluster {
        anyhow::ensure!(
            matches!(args.store, StoreKind::Postgres(_)),
            "--pg-cluster needs a postgres:// --store"
        );
        for (number, mode) in ["fast", "immediate"].into_iter().enumerate() {
            let outage = outage::Outage::Postgres {
                script: args.pg_script.clone(),
                cluster: cluster.clone(),
                mode,
            };
            let report = outage::run(lane(
                harness.url.clone(),
                std::sync::Arc::clone(store),
                outage,
                number,
            ))
            .await?;
            eprintln!("outage lane: {}", report.json);
            reports.push(report);
        }
    }
    if args.disk_full {
        anyhow::ensure!(
            matches!(args.store, StoreKind::Sqlite),
            "--disk-full needs the sqlite --store"
        );
        let disk = agent_testkit::SmallDisk::mount(&harness.dir.join("small-disk"), "48m")?;
        let url = format!("sqlite://{}", disk.dir().join("agent.db").display());
        let lane_store = agent::store::open_url(&url, true).await?;
        let outage = outage::Outage::DiskFull {
            filler: disk.dir().join("filler"),
        };
        let report = outage::run(lane(url, lane_store, outage, 2)).await?;
        eprintln!("outage lane: {}", report.json);
        reports.push(report);
    }
    Ok(reports)
}

fn phase_json(phase: &Phase, findings: &Findings, reasked: &model::Reasked) -> serde_json::Value {
    let mut value = findings.to_json();
    if let Some(fields) = value.as_object_mut() {
        fields.insert("kills".into(), json!(phase.kills));
        fields.insert("kill_points".into(), json!(phase.points));
        fields.insert("model_requests".into(), json!(reasked.requests));
        fields.insert(
            "reasked_outside_killed_request".into(),
            json!(reasked.outside_killed_request),
        );
        fields.remove("problems");
    }
    value
}
