//! The worker phase: sessions submitted with `agent submit` and run by a fleet of
//! `agent worker` processes, one of which gets SIGKILL at each aimed point — while
//! tool calls wait in the queue or run, or at a random moment — and is replaced
//! by a new worker at once.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent::event::EventKind;
use agent::store::Store;
use tokio::process::{Child, Command};

use super::check::{Observed, is_ended};
use super::plan::{Rng, SessionPlan};
use super::{Harness, Phase};

/// How long the fleet gets to finish everything after the last kill.
const FINISH_WITHIN: Duration = Duration::from_secs(300);

/// The phase's parameters.
pub struct FleetRun {
    /// What the phases share.
    pub harness: Arc<Harness>,
    /// Kills to make.
    pub kills: usize,
    /// Sessions to submit.
    pub sessions: usize,
    /// Worker processes.
    pub workers: usize,
}

/// Session numbers of this phase start here, apart from the single-process ones.
const FIRST_INDEX: usize = 100_000;

struct Fleet {
    agent: PathBuf,
    url: String,
    logs: PathBuf,
    /// Each worker and the name it asks the model as.
    workers: Vec<(Child, String)>,
    started: usize,
}

impl Fleet {
    fn spawn(&mut self) -> anyhow::Result<(Child, String)> {
        let name = format!("crash-w{}", self.started);
        self.started += 1;
        let log = std::fs::File::create(self.logs.join(format!("{name}.log")))?;
        let child = Command::new(&self.agent)
            .args(["worker", "--store", &self.url, "--name", &name])
            .args(["--concurrency", "4", "--lease-secs", "2", "--drain", "5"])
            .env(super::KEY_VARIABLE, &name)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()?;
        Ok((child, name))
    }

    /// Stops every worker with SIGTERM and waits for it to drain and exit.
    async fn stop(mut self) -> anyhow::Result<()> {
        for (child, _) in &self.workers {
            if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
                let pid = rustix::process::Pid::from_raw(pid)
                    .ok_or_else(|| anyhow::anyhow!("worker pid {pid} is not a pid"))?;
                rustix::process::kill_process(pid, rustix::process::Signal::TERM)?;
            }
        }
        for (child, _) in &mut self.workers {
            let status = child.wait().await?;
            anyhow::ensure!(status.success(), "a worker exited with {status} on SIGTERM");
        }
        Ok(())
    }
}

/// Runs the phase: submits, kills `kills` times, waits for every session to end.
pub async fn run(run: FleetRun) -> anyhow::Result<Phase> {
    let logs = run.harness.dir.join("worker-logs");
    std::fs::create_dir_all(&logs)?;
    let mut sessions = Vec::with_capacity(run.sessions);
    submit_batch(&run, &mut sessions).await?;
    let mut fleet = Fleet {
        agent: run.harness.agent.clone(),
        url: run.harness.url.clone(),
        logs,
        workers: Vec::new(),
        started: 0,
    };
    for _ in 0..run.workers.max(1) {
        let child = fleet.spawn()?;
        fleet.workers.push(child);
    }
    let mut rng = Rng::new(run.harness.seed, 77);
    let mut points: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut kills = 0;
    while kills < run.kills {
        if all_ended(run.harness.store.as_ref(), &mut sessions).await? {
            submit_batch(&run, &mut sessions).await?;
        }
        let kind = if rng.percent(50) {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline
                && !any_call_in_flight(run.harness.store.as_ref(), &mut sessions).await?
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(Duration::from_millis(rng.between(0, 150))).await;
            "worker_with_calls_in_flight"
        } else {
            tokio::time::sleep(Duration::from_millis(rng.between(30, 500))).await;
            "worker_at_random_time"
        };
        let slot = usize::try_from(rng.between(0, fleet.workers.len() as u64 - 1)).unwrap_or(0);
        let replacement = fleet.spawn()?;
        let Some(victim) = fleet.workers.get_mut(slot) else {
            continue;
        };
        let (mut victim, name) = std::mem::replace(victim, replacement);
        victim.start_kill()?;
        victim.wait().await?;
        run.harness.killed(&name)?;
        kills += 1;
        *points.entry(kind).or_default() += 1;
        for (_, id, observed) in &mut sessions {
            let events = run.harness.store.load(id).await?;
            if !is_ended(&events) {
                observed.killed(events);
            } else {
                observed.saw(events);
            }
        }
    }
    let deadline = Instant::now() + FINISH_WITHIN;
    while !all_ended(run.harness.store.as_ref(), &mut sessions).await? {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the fleet did not end every session within {FINISH_WITHIN:?}; worker logs are in {}",
            run.harness.dir.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    fleet.stop().await?;
    Ok(Phase {
        kills,
        points,
        sessions,
        busy_retries: 0,
        failures: Vec::new(),
    })
}

/// Submits `run.sessions` more sessions.
async fn submit_batch(
    run: &FleetRun,
    sessions: &mut Vec<(SessionPlan, String, Observed)>,
) -> anyhow::Result<()> {
    let first = FIRST_INDEX + sessions.len();
    for index in first..first + run.sessions.max(1) {
        let plan = run.harness.draw(index)?;
        let id = submit(&run.harness, &run.harness.url, &plan).await?;
        sessions.push((plan, id, Observed::default()));
    }
    Ok(())
}

/// `agent submit` of `plan` to the store at `url`; its session id.
pub async fn submit(harness: &Harness, url: &str, plan: &SessionPlan) -> anyhow::Result<String> {
    let output = Command::new(&harness.agent)
        .args(["submit", &plan.task])
        .args(plan.run_flags(&harness.model.spec(), url))
        .stdin(Stdio::null())
        .output()
        .await?;
    anyhow::ensure!(
        output.status.success(),
        "agent submit failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let reply: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    reply
        .get("session_id")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("agent submit printed no session id: {reply}"))
}

/// Reads every session's log (recording it) and says whether all have ended.
async fn all_ended(
    store: &dyn Store,
    sessions: &mut [(SessionPlan, String, Observed)],
) -> anyhow::Result<bool> {
    let mut ended = true;
    for (_, id, observed) in sessions.iter_mut() {
        let events = store.load(id).await?;
        ended &= is_ended(&events);
        observed.saw(events);
    }
    Ok(ended)
}

/// Whether some session waits for tool calls that are queued or running.
async fn any_call_in_flight(
    store: &dyn Store,
    sessions: &mut [(SessionPlan, String, Observed)],
) -> anyhow::Result<bool> {
    for (_, id, observed) in sessions.iter_mut() {
        let events = store.load(id).await?;
        let waiting = matches!(
            events.last().map(|event| &event.kind),
            Some(EventKind::ActionsQueued { .. } | EventKind::ActionDispatched { .. })
        );
        observed.saw(events);
        if waiting {
            return Ok(true);
        }
    }
    Ok(false)
}
