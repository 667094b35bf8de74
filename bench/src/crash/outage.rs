//! The outage lanes: `agent worker`s and `agent serve` run sessions on a store
//! that goes away in the middle of them — a PostgreSQL server stopped with
//! `pg_ctl stop -m fast` or `-m immediate`, or the disk under an SQLite file
//! filled up — for `--outage-secs`, then comes back. Nobody restarts or resumes
//! anything: every session must end on its own within [`FINISH_AFTER_RETURN`]
//! of the store's return, with the checks of the kill phases (right answers, no
//! duplicated or lost effect or event) and no model call asked twice (nobody was
//! killed, so none may be) — except after `-m immediate`: that is a crash of
//! the database server, which loses what was written but not yet fsynced
//! (steps committed with `synchronous_commit` off), as a power loss would, so
//! such a step is asked again; those are counted, not failed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent::store::Store;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use super::check::{self, Observed, is_ended};
use super::plan::SessionPlan;
use super::{Harness, KEY_VARIABLE};

/// The bound, stated in the report: every session ends within this time after
/// the store is back.
pub const FINISH_AFTER_RETURN: Duration = Duration::from_secs(120);

/// How long the lane waits for the sessions to be under way before the outage.
const UNDER_WAY_WITHIN: Duration = Duration::from_secs(60);

/// What goes away.
pub enum Outage {
    /// A PostgreSQL server stopped with `pg_ctl stop -m MODE` through
    /// `scripts/pg-cluster.sh halt`, started again with `restart`.
    Postgres {
        /// The cluster script.
        script: PathBuf,
        /// The cluster's directory.
        cluster: PathBuf,
        /// `fast` or `immediate`.
        mode: &'static str,
    },
    /// The disk under an SQLite store, filled up by a file that is then removed.
    DiskFull {
        /// The file that fills it.
        filler: PathBuf,
    },
}

impl Outage {
    /// Whether the outage loses writes that were not fsynced, as a crash of
    /// the store's machine would.
    fn loses_unsynced_writes(&self) -> bool {
        matches!(
            self,
            Self::Postgres {
                mode: "immediate",
                ..
            }
        )
    }

    fn name(&self) -> String {
        match self {
            Self::Postgres { mode, .. } => format!("postgres stopped -m {mode}"),
            Self::DiskFull { .. } => "sqlite disk full".into(),
        }
    }

    async fn begin(&self) -> anyhow::Result<()> {
        match self {
            Self::Postgres {
                script,
                cluster,
                mode,
            } => run_script(script, &["halt", &cluster.display().to_string(), mode]).await,
            Self::DiskFull { filler } => {
                let filler = filler.clone();
                tokio::task::spawn_blocking(move || fill(&filler)).await?
            }
        }
    }

    async fn end(&self) -> anyhow::Result<()> {
        match self {
            Self::Postgres {
                script, cluster, ..
            } => run_script(script, &["restart", &cluster.display().to_string()]).await,
            Self::DiskFull { filler } => Ok(std::fs::remove_file(filler)?),
        }
    }
}

async fn run_script(script: &Path, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new(script).args(args).status().await?;
    anyhow::ensure!(status.success(), "{} {args:?} failed", script.display());
    Ok(())
}

/// Writes `filler` until the disk under it is full.
fn fill(filler: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    let mut file = std::fs::File::create(filler)?;
    let block = vec![0u8; 256 * 1024];
    while file.write_all(&block).is_ok() {}
    let _ = file.sync_all();
    Ok(())
}

/// One lane.
pub struct Lane {
    /// What the phases share.
    pub harness: Arc<Harness>,
    /// The store the lane's processes use (the SQLite lane's is on its own disk).
    pub url: String,
    /// The harness's own connection to it.
    pub store: Arc<dyn Store>,
    /// Sessions to run through the outage.
    pub sessions: usize,
    /// Worker processes (besides one `agent serve` with one in-process worker).
    pub workers: usize,
    /// How long the store is away.
    pub outage_secs: u64,
    /// What goes away.
    pub outage: Outage,
    /// Its sessions' numbers start here.
    pub first_index: usize,
}

/// What a lane did and found.
pub struct LaneReport {
    /// Whether every guarantee held.
    pub ok: bool,
    /// The report's JSON.
    pub json: Value,
}

/// The processes of a lane, stopped with SIGTERM at the end.
struct Processes(Vec<(Child, String)>);

impl Processes {
    fn start(lane: &Lane, logs: &Path) -> anyhow::Result<Self> {
        let mut children = Vec::new();
        for n in 0..lane.workers.max(1) {
            let name = format!("outage-w{}-{n}", lane.first_index);
            let args = [
                "worker",
                "--name",
                &name,
                "--concurrency",
                "4",
                "--lease-secs",
                "5",
            ];
            children.push(spawn(lane, logs, name.clone(), &args)?);
        }
        let name = format!("outage-serve-{}", lane.first_index);
        let args = ["serve", "--listen", "127.0.0.1:0", "--workers", "1"];
        children.push(spawn(lane, logs, name, &args)?);
        Ok(Self(children))
    }

    /// Stops every process with SIGTERM; the names of those that did not exit 0.
    async fn stop(mut self) -> anyhow::Result<Vec<String>> {
        for (child, _) in &self.0 {
            if let Some(pid) = child
                .id()
                .and_then(|pid| i32::try_from(pid).ok())
                .and_then(rustix::process::Pid::from_raw)
            {
                rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
            }
        }
        let mut failed = Vec::new();
        for (child, name) in &mut self.0 {
            let status = child.wait().await?;
            if !status.success() {
                failed.push(format!("{name} exited with {status} on SIGTERM"));
            }
        }
        Ok(failed)
    }
}

/// Starts `agent ARGS… --drain 10 --store URL` of the lane, asking the model
/// as `name`, its stderr in `logs/NAME.log`.
fn spawn(lane: &Lane, logs: &Path, name: String, args: &[&str]) -> anyhow::Result<(Child, String)> {
    let log = std::fs::File::create(logs.join(format!("{name}.log")))?;
    let child = Command::new(&lane.harness.agent)
        .args(args)
        .args(["--drain", "10", "--store", &lane.url])
        .env(KEY_VARIABLE, &name)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?;
    Ok((child, name))
}

/// Runs the lane: submits, starts the processes, takes the store away once
/// the sessions are under way, brings it back, and checks.
pub async fn run(lane: Lane) -> anyhow::Result<LaneReport> {
    let logs = lane
        .harness
        .dir
        .join(format!("outage-logs-{}", lane.first_index));
    std::fs::create_dir_all(&logs)?;
    let mut sessions = Vec::with_capacity(lane.sessions);
    for index in lane.first_index..lane.first_index + lane.sessions.max(1) {
        let plan = lane.harness.draw(index)?;
        let id = super::fleet::submit(&lane.harness, &lane.url, &plan).await?;
        sessions.push((plan, id, Observed::default()));
    }
    let processes = Processes::start(&lane, &logs)?;
    let started = Instant::now();
    while !under_way(lane.store.as_ref(), &mut sessions).await? {
        anyhow::ensure!(
            started.elapsed() < UNDER_WAY_WITHIN,
            "the sessions did not get under way; logs in {}",
            logs.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ended_before = count_ended(lane.store.as_ref(), &mut sessions).await?;
    lane.outage.begin().await?;
    tokio::time::sleep(Duration::from_secs(lane.outage_secs)).await;
    lane.outage.end().await?;
    let back = Instant::now();
    let finished = loop {
        // The harness's own connection may need a moment to reconnect.
        if let Ok(count) = count_ended(lane.store.as_ref(), &mut sessions).await
            && count == sessions.len()
        {
            break Some(back.elapsed());
        }
        if back.elapsed() > FINISH_AFTER_RETURN {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let unclean = processes.stop().await?;
    let findings = check::check(lane.store.as_ref(), &sessions).await?;
    let reasked = lane.harness.reasked(&sessions)?;
    let reasks_allowed = lane.outage.loses_unsynced_writes();
    let ok = finished.is_some()
        && findings.ok()
        && (reasks_allowed || reasked.outside_killed_request == 0)
        && unclean.is_empty();
    let mut json = json!({
        "lane": lane.outage.name(),
        "sessions": sessions.len(),
        "ended_before_the_outage": ended_before,
        "outage_s": lane.outage_secs,
        "all_ended_after_return_s": finished.map(|took| took.as_secs_f64()),
        "bound_s": FINISH_AFTER_RETURN.as_secs(),
        "model_requests": reasked.requests,
        "reasked": reasked.outside_killed_request,
        "reasks_allowed": reasks_allowed,
        "reasked_problems": reasked.problems,
        "unclean_exits": unclean,
        "logs": logs.display().to_string(),
        "ok": ok,
    });
    if let (Some(fields), Value::Object(found)) = (json.as_object_mut(), findings.to_json()) {
        for (key, value) in found {
            fields.insert(key, value);
        }
    }
    Ok(LaneReport { ok, json })
}

/// Whether at least a third of the sessions are past their first step, so the
/// store goes away while they run.
async fn under_way(
    store: &dyn Store,
    sessions: &mut [(SessionPlan, String, Observed)],
) -> anyhow::Result<bool> {
    let mut stepped = 0;
    for (_, id, observed) in sessions.iter_mut() {
        let events = store.load(id).await?;
        if events.len() > 4 {
            stepped += 1;
        }
        observed.saw(events);
    }
    Ok(stepped * 3 >= sessions.len())
}

/// How many sessions have ended (each log read is recorded).
async fn count_ended(
    store: &dyn Store,
    sessions: &mut [(SessionPlan, String, Observed)],
) -> anyhow::Result<usize> {
    let mut ended = 0;
    for (_, id, observed) in sessions.iter_mut() {
        let events = store.load(id).await?;
        if is_ended(&events) {
            ended += 1;
        }
        observed.saw(events);
    }
    Ok(ended)
}
