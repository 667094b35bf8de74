//! The single-process phase: every session is driven by an `agent run` process,
//! then by `agent resume` after each kill, several sessions at once. A process
//! chosen for a kill gets SIGKILL at its aimed point, found by polling the store.

use std::collections::{BTreeMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent::event::{Event, EventKind};
use agent::store::Store;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use super::check::{Observed, is_ended};
use super::plan::{Aim, Rng, SessionPlan, expected_events};
use super::{Harness, Phase, lock};

/// What every lane shares.
pub struct Lanes {
    /// What the phases share.
    pub harness: Arc<Harness>,
    /// Kills to make.
    pub kills: usize,
    /// Sessions in flight at once.
    pub lanes: usize,
}

struct Slot {
    plan: SessionPlan,
    id: Option<String>,
    observed: Observed,
    attempts: u64,
}

impl Board {
    /// Adds a new session to draw from and to run.
    fn add_session(&mut self, harness: &Harness) -> anyhow::Result<()> {
        let index = self.slots.len();
        self.slots.push(Slot {
            plan: harness.draw(index)?,
            id: None,
            observed: Observed::default(),
            attempts: 0,
        });
        self.pending.push_back(index);
        Ok(())
    }
}

#[derive(Default)]
struct Board {
    slots: Vec<Slot>,
    pending: VecDeque<usize>,
    running: usize,
    kills: usize,
    reserved: usize,
    points: BTreeMap<&'static str, usize>,
    busy_retries: usize,
    failures: Vec<String>,
}

enum Ended {
    /// The process exited by itself with this code and stdout.
    Exited(Option<i32>, String, String),
    /// It was killed at this aim.
    Killed(Aim),
}

/// Runs the phase to the end: every session finished, `kills` kills made.
pub async fn run(lanes: Lanes) -> anyhow::Result<Phase> {
    let lanes = Arc::new(lanes);
    let board = Arc::new(Mutex::new(Board::default()));
    let first = lanes.lanes.max(1) * 2;
    for _ in 0..first {
        lock(&board)?.add_session(&lanes.harness)?;
    }
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..lanes.lanes.max(1) {
        tasks.spawn(lane(Arc::clone(&lanes), Arc::clone(&board)));
    }
    while let Some(joined) = tasks.join_next().await {
        joined??;
    }
    let board = std::mem::take(&mut *lock(&board)?);
    let mut sessions = Vec::with_capacity(board.slots.len());
    for slot in board.slots {
        let id = slot
            .id
            .ok_or_else(|| anyhow::anyhow!("session `{}` never started", slot.plan.task))?;
        sessions.push((slot.plan, id, slot.observed));
    }
    Ok(Phase {
        kills: board.kills,
        points: board.points,
        sessions,
        busy_retries: board.busy_retries,
        failures: board.failures,
    })
}

/// Takes sessions from the board and runs one attempt at a time until nothing is
/// left to do.
async fn lane(lanes: Arc<Lanes>, board: Arc<Mutex<Board>>) -> anyhow::Result<()> {
    loop {
        let job = {
            let mut board = lock(&board)?;
            if board.pending.is_empty() && board.kills + board.reserved < lanes.kills {
                board.add_session(&lanes.harness)?;
            }
            match board.pending.pop_front() {
                Some(index) => {
                    let kill = board.kills + board.reserved < lanes.kills;
                    if kill {
                        board.reserved += 1;
                    }
                    board.running += 1;
                    let slot = board
                        .slots
                        .get_mut(index)
                        .ok_or_else(|| anyhow::anyhow!("no slot {index}"))?;
                    slot.attempts += 1;
                    Some((
                        index,
                        slot.plan.clone(),
                        slot.id.clone(),
                        slot.attempts,
                        kill,
                    ))
                }
                None if board.running == 0 => return Ok(()),
                None => None,
            }
        };
        let Some((index, plan, id, attempt, kill)) = job else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let mut observed = Observed::default();
        let (ended, id) = attempt_once(&lanes, &plan, id, attempt, kill, &mut observed).await?;
        let after = match &id {
            Some(id) => Some(lanes.harness.store.load(id).await?),
            None => None,
        };
        let mut board = lock(&board)?;
        board.running -= 1;
        if kill {
            board.reserved -= 1;
        }
        let requeue = match &ended {
            Ended::Killed(aim) => {
                board.kills += 1;
                *board.points.entry(aim.kind()).or_default() += 1;
                after.as_deref().is_none_or(|events| !is_ended(events))
            }
            Ended::Exited(Some(0), _, _) => false,
            Ended::Exited(Some(8), _, _) => {
                board.busy_retries += 1;
                true
            }
            Ended::Exited(code, stdout, stderr) => {
                let text = format!(
                    "{} (attempt {attempt}) exited {code:?}: {stdout} {stderr}",
                    plan.task
                );
                board.failures.push(text);
                false
            }
        };
        let slot = board
            .slots
            .get_mut(index)
            .ok_or_else(|| anyhow::anyhow!("no slot {index}"))?;
        slot.id = id;
        slot.observed.merge(observed);
        match (&ended, after) {
            (Ended::Killed(_), Some(events)) => slot.observed.killed(events),
            (_, Some(events)) => slot.observed.saw(events),
            (_, None) => {}
        }
        if requeue {
            board.pending.push_back(index);
        }
    }
}

/// One `agent run` (no id yet) or `agent resume` process, killed at a drawn aim
/// when `kill` is set; returns how it ended and the session's id if it has one.
async fn attempt_once(
    lanes: &Lanes,
    plan: &SessionPlan,
    mut id: Option<String>,
    attempt: u64,
    kill: bool,
    observed: &mut Observed,
) -> anyhow::Result<(Ended, Option<String>)> {
    let mut rng = Rng::new(lanes.harness.seed, (plan.index as u64) * 1_000 + attempt);
    if id.is_none() {
        id = find_session(lanes.harness.store.as_ref(), &plan.task).await?;
    }
    let events_now = match &id {
        Some(id) => lanes.harness.store.load(id).await?.len(),
        None => 0,
    };
    let aim = kill.then(|| {
        Aim::draw(
            &mut rng,
            events_now,
            expected_events(plan),
            plan.steps.len() > 20,
        )
    });
    let process = format!("run-{}-{attempt}", plan.index);
    let mut command = Command::new(&lanes.harness.agent);
    command.env(super::KEY_VARIABLE, &process);
    match &id {
        None => command
            .args(["run", &plan.task])
            .args(plan.run_flags(&lanes.harness.model.spec(), &lanes.harness.url)),
        Some(id) => command.args(["resume", id, "--store", &lanes.harness.url, "--json"]),
    };
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let started = Instant::now();
    let mut polls: u64 = 0;
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if id.is_none() && polls.is_multiple_of(8) {
            id = find_session(lanes.harness.store.as_ref(), &plan.task).await?;
        }
        polls += 1;
        let events = match &id {
            Some(id) => lanes.harness.store.load(id).await.unwrap_or_default(),
            None => Vec::new(),
        };
        if let Some(aim) = aim
            && hit(aim, &events, started.elapsed())
        {
            tokio::time::sleep(Duration::from_millis(jitter(aim))).await;
            observed.saw(events);
            if child.try_wait()?.is_some() {
                break;
            }
            child.start_kill()?;
            child.wait().await?;
            lanes.harness.killed(&process)?;
            if id.is_none() {
                tokio::time::sleep(COMMIT_AFTER_KILL).await;
                id = find_session(lanes.harness.store.as_ref(), &plan.task).await?;
            }
            return Ok((Ended::Killed(aim), id));
        }
        observed.saw(events);
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let status = child.wait().await?;
    let stdout = read_all(child.stdout.take()).await;
    let stderr = read_all(child.stderr.take()).await;
    if id.is_none() {
        id = find_session(lanes.harness.store.as_ref(), &plan.task).await?;
    }
    Ok((Ended::Exited(status.code(), stdout, stderr), id))
}

async fn read_all(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let mut text = String::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_string(&mut text).await;
    }
    text
}

/// How long a killed process's last transaction may still take to land: a
/// PostgreSQL server commits a `COMMIT` it received even when the client dies
/// before the reply, so a session can appear just after its first process is gone.
const COMMIT_AFTER_KILL: Duration = Duration::from_millis(250);

/// The id of the session whose task is `task`, once its first event is stored.
/// A second session with the same task means an attempt started `agent run`
/// again for a session it had lost sight of; that is an error of the harness,
/// named here rather than checked against the wrong session later.
async fn find_session(store: &dyn Store, task: &str) -> anyhow::Result<Option<String>> {
    let mut matching = store
        .sessions()
        .await?
        .into_iter()
        .filter(|summary| summary.task == task)
        .map(|summary| summary.session_id);
    let first = matching.next();
    if let Some(second) = matching.next() {
        anyhow::bail!(
            "two sessions run the task `{task}` ({} and {second}): the harness lost track of one",
            first.unwrap_or_default()
        );
    }
    Ok(first)
}

/// Whether the process should be killed now.
fn hit(aim: Aim, events: &[Event], elapsed: Duration) -> bool {
    let millis = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    match aim {
        Aim::AfterEvents { events: n, .. } | Aim::AroundSnapshot { events: n, .. } => {
            events.len() >= n
        }
        Aim::InToolCall { .. } => matches!(
            events.last().map(|event| &event.kind),
            Some(EventKind::ActionDispatched { .. })
        ),
        Aim::AtRandomTime { millis: at } | Aim::AroundLeaseRenewal { millis: at } => millis >= at,
    }
}

/// The pause between seeing the aim and killing.
fn jitter(aim: Aim) -> u64 {
    match aim {
        Aim::AfterEvents { jitter_ms, .. }
        | Aim::InToolCall { jitter_ms }
        | Aim::AroundSnapshot { jitter_ms, .. } => jitter_ms,
        Aim::AtRandomTime { .. } | Aim::AroundLeaseRenewal { .. } => 0,
    }
}
