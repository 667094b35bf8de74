//! What the crash harness checks once every session has ended: right answers,
//! at-most-once side effects with none lost, idempotent calls re-run, gap-free
//! logs that fold, snapshots equal to a full replay, and no event that anyone
//! ever read missing from the final log.

use std::collections::{BTreeMap, HashMap};

use agent::engine::{INTERRUPTED, load_state, snapshot_of};
use agent::event::{Event, EventKind};
use agent::state::SessionState;
use agent::store::Store;
use agent::types::ToolCall;
use serde_json::{Value, json};

use super::plan::{EFFECTS_FILE, SessionPlan, calculated};

/// The logs read of one session while it ran: each read must extend the last.
#[derive(Debug, Default)]
pub struct Observed {
    last: Vec<Event>,
    /// Events of an earlier read that a later read lacked or changed.
    pub lost: usize,
    /// Idempotent calls that were in flight when a process was killed.
    pub idempotent_in_flight: Vec<String>,
    /// Kills that hit this session.
    pub kills: usize,
}

impl Observed {
    /// Records a read of the whole log.
    pub fn saw(&mut self, events: Vec<Event>) {
        self.lost += lost_between(&self.last, &events);
        if events.len() >= self.last.len() {
            self.last = events;
        }
    }

    /// Takes in what another observer of the same session read.
    pub fn merge(&mut self, other: Self) {
        self.lost += other.lost;
        self.saw(other.last);
    }

    /// Records a kill and the log right after it.
    pub fn killed(&mut self, events: Vec<Event>) {
        self.kills += 1;
        if let Ok(state) = SessionState::from_events(
            events.first().map_or("", |e| e.session_id.as_str()),
            &events,
        ) {
            for call in state.in_flight_calls() {
                if is_idempotent(&call) && !self.idempotent_in_flight.contains(&call.id) {
                    self.idempotent_in_flight.push(call.id.clone());
                }
            }
        }
        self.saw(events);
    }
}

/// Whether the log ends the session.
pub fn is_ended(events: &[Event]) -> bool {
    matches!(
        events.last().map(|event| &event.kind),
        Some(EventKind::Finished { .. } | EventKind::Failed { .. } | EventKind::Cancelled { .. })
    )
}

fn is_idempotent(call: &ToolCall) -> bool {
    call.tool_name != "append_line"
}

/// Events of `earlier` that `later` does not hold unchanged at the same place.
fn lost_between(earlier: &[Event], later: &[Event]) -> usize {
    earlier
        .iter()
        .enumerate()
        .filter(|(index, event)| later.get(*index) != Some(*event))
        .count()
}

/// The findings over a set of sessions; all the counters but the first few must
/// be zero.
#[derive(Debug, Default, Clone)]
pub struct Findings {
    /// Sessions checked.
    pub sessions: usize,
    /// Sessions killed at least once that ended with the right answer.
    pub resumed_ok: usize,
    /// Sessions that did not finish with the right answer, or whose calculator
    /// results were wrong.
    pub wrong_answers: usize,
    /// `append_line` lines written more than once (extra copies).
    pub duplicated_effects: usize,
    /// `append_line` calls recorded as done whose line is not in the file.
    pub lost_effects: usize,
    /// Lines in a file that no call of the log wrote.
    pub phantom_effects: usize,
    /// Non-idempotent calls cut by a kill and reported `interrupted: outcome unknown`.
    pub unknown_outcomes: usize,
    /// Events once read from the store and later missing or changed.
    pub lost_events: usize,
    /// Breaks in a log's seq numbering.
    pub gaps: usize,
    /// Logs that do not fold.
    pub inconsistent_logs: usize,
    /// Snapshots compared with a full replay.
    pub snapshots_checked: usize,
    /// Snapshots (or snapshot-based loads) that differ from a full replay.
    pub snapshot_mismatches: usize,
    /// Idempotent calls in flight at a kill.
    pub idempotent_in_flight_at_kill: usize,
    /// Idempotent calls that were not re-run to a real result.
    pub idempotent_not_rerun: usize,
    /// What went wrong, for people (the first few).
    pub problems: Vec<String>,
}

impl Findings {
    /// Whether every guarantee held.
    pub fn ok(&self) -> bool {
        self.wrong_answers == 0
            && self.duplicated_effects == 0
            && self.lost_effects == 0
            && self.phantom_effects == 0
            && self.lost_events == 0
            && self.gaps == 0
            && self.inconsistent_logs == 0
            && self.snapshot_mismatches == 0
            && self.idempotent_not_rerun == 0
    }

    fn problem(&mut self, text: String) {
        if self.problems.len() < 20 {
            self.problems.push(text);
        }
    }

    /// The findings as JSON fields.
    pub fn to_json(&self) -> Value {
        json!({
            "sessions": self.sessions,
            "resumed_ok": self.resumed_ok,
            "wrong_answers": self.wrong_answers,
            "duplicated_effects": self.duplicated_effects,
            "lost_effects": self.lost_effects,
            "phantom_effects": self.phantom_effects,
            "unknown_outcomes": self.unknown_outcomes,
            "lost_events": self.lost_events,
            "gaps": self.gaps,
            "inconsistent_logs": self.inconsistent_logs,
            "snapshots_checked": self.snapshots_checked,
            "snapshot_mismatches": self.snapshot_mismatches,
            "idempotent_in_flight_at_kill": self.idempotent_in_flight_at_kill,
            "idempotent_not_rerun": self.idempotent_not_rerun,
            "problems": self.problems,
        })
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Self) {
        self.sessions += other.sessions;
        self.resumed_ok += other.resumed_ok;
        self.wrong_answers += other.wrong_answers;
        self.duplicated_effects += other.duplicated_effects;
        self.lost_effects += other.lost_effects;
        self.phantom_effects += other.phantom_effects;
        self.unknown_outcomes += other.unknown_outcomes;
        self.lost_events += other.lost_events;
        self.gaps += other.gaps;
        self.inconsistent_logs += other.inconsistent_logs;
        self.snapshots_checked += other.snapshots_checked;
        self.snapshot_mismatches += other.snapshot_mismatches;
        self.idempotent_in_flight_at_kill += other.idempotent_in_flight_at_kill;
        self.idempotent_not_rerun += other.idempotent_not_rerun;
        for problem in &other.problems {
            self.problem(problem.clone());
        }
    }
}

/// Checks every session of `plans` (with its id and what was read of it).
pub async fn check(
    store: &dyn Store,
    sessions: &[(SessionPlan, String, Observed)],
) -> anyhow::Result<Findings> {
    let mut findings = Findings::default();
    for (plan, id, observed) in sessions {
        findings.sessions += 1;
        check_session(store, plan, id, observed, &mut findings).await?;
    }
    Ok(findings)
}

async fn check_session(
    store: &dyn Store,
    plan: &SessionPlan,
    id: &str,
    observed: &Observed,
    findings: &mut Findings,
) -> anyhow::Result<()> {
    let events = store.load(id).await?;
    let lost = observed.lost + lost_between(&observed.last, &events);
    if lost > 0 {
        findings.lost_events += lost;
        findings.problem(format!(
            "{id}: {lost} event(s) once read are gone or changed"
        ));
    }
    let gaps = events
        .iter()
        .zip(1u64..)
        .filter(|(event, seq)| event.seq != *seq)
        .count();
    if gaps > 0 {
        findings.gaps += gaps;
        findings.problem(format!("{id}: the log's seqs are not 1, 2, 3, …"));
    }
    let state = match SessionState::from_events(id, &events) {
        Ok(state) => state,
        Err(err) => {
            findings.inconsistent_logs += 1;
            findings.problem(format!("{id}: the log does not fold: {err}"));
            return Ok(());
        }
    };
    check_snapshots(store, id, &events, &state, findings).await?;
    let right = state
        .run_result()
        .is_some_and(|result| result.answer.as_deref() == Some(plan.answer().as_str()));
    let calculations_right = calculations_are_right(&events);
    if right && calculations_right {
        if observed.kills > 0 {
            findings.resumed_ok += 1;
        }
    } else {
        findings.wrong_answers += 1;
        findings.problem(format!(
            "{id}: ended {} with {:?}{}",
            state.public_status(),
            state.run_result().and_then(|result| result.answer),
            if calculations_right {
                ""
            } else {
                " and a wrong calculator result"
            }
        ));
    }
    check_calls(plan, id, &events, observed, findings);
    Ok(())
}

/// Whether every calculator result in the log is the right number.
fn calculations_are_right(events: &[Event]) -> bool {
    let mut calls: HashMap<&str, &ToolCall> = HashMap::new();
    for event in events {
        match &event.kind {
            EventKind::ActionDispatched { call } => {
                calls.insert(call.id.as_str(), call);
            }
            EventKind::ActionCompleted { observation } if observation.tool_name == "calculator" => {
                let Some(call) = calls.get(observation.call_id.as_str()) else {
                    return false;
                };
                let arguments = &call.arguments;
                let expected = calculated(
                    arguments
                        .get("left")
                        .and_then(Value::as_i64)
                        .unwrap_or(i64::MIN),
                    arguments
                        .get("operation")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    arguments
                        .get("right")
                        .and_then(Value::as_i64)
                        .unwrap_or(i64::MIN),
                );
                if observation.is_error
                    || expected.map(|n| n.to_string()) != Some(observation.content.clone())
                {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// The newest snapshot equals the fold of the events it covers, and loading
/// through it equals folding the whole log.
async fn check_snapshots(
    store: &dyn Store,
    id: &str,
    events: &[Event],
    state: &SessionState,
    findings: &mut Findings,
) -> anyhow::Result<()> {
    let Some((seq, snapshot)) = store.load_snapshot(id).await? else {
        return Ok(());
    };
    findings.snapshots_checked += 1;
    let covered: Vec<Event> = events.iter().filter(|e| e.seq <= seq).cloned().collect();
    let replayed = SessionState::from_events(id, &covered)
        .ok()
        .map(|s| snapshot_of(&s));
    let loaded = load_state(store, id).await.ok().map(|s| snapshot_of(&s));
    let full = Some(snapshot_of(state));
    let same_snapshot = matches!(&replayed, Some(Ok(value)) if *value == snapshot);
    let same_load = match (&loaded, &full) {
        (Some(Ok(a)), Some(Ok(b))) => a == b,
        _ => false,
    };
    if !(same_snapshot && same_load) {
        findings.snapshot_mismatches += 1;
        findings.problem(format!(
            "{id}: the snapshot at seq {seq} differs from a full replay"
        ));
    }
    Ok(())
}

/// `append_line` at most once and never lost; idempotent calls re-run.
fn check_calls(
    plan: &SessionPlan,
    id: &str,
    events: &[Event],
    observed: &Observed,
    findings: &mut Findings,
) {
    let mut idempotent = Vec::new();
    let mut lines_of: HashMap<String, String> = HashMap::new();
    let mut outcome: HashMap<String, (bool, String)> = HashMap::new();
    for event in events {
        match &event.kind {
            EventKind::ActionDispatched { call } if call.tool_name == "append_line" => {
                let line = call
                    .arguments
                    .get("line")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                lines_of.insert(call.id.clone(), line);
            }
            EventKind::ActionDispatched { call } => idempotent.push(call.id.clone()),
            EventKind::ActionCompleted { observation } => {
                outcome.insert(
                    observation.call_id.clone(),
                    (observation.is_error, observation.content.clone()),
                );
            }
            _ => {}
        }
    }
    let text = std::fs::read_to_string(plan.workspace.join(EFFECTS_FILE)).unwrap_or_default();
    let mut written: BTreeMap<&str, usize> = BTreeMap::new();
    for line in text.lines() {
        *written.entry(line).or_default() += 1;
    }
    for (line, count) in &written {
        if *count > 1 {
            findings.duplicated_effects += count - 1;
            findings.problem(format!("{id}: `{line}` was written {count} times"));
        }
        if !plan.lines().contains(line) || !lines_of.values().any(|l| l == line) {
            findings.phantom_effects += 1;
            findings.problem(format!("{id}: `{line}` was written by no call of the log"));
        }
    }
    for (call_id, line) in &lines_of {
        match outcome.get(call_id) {
            Some((false, _)) if !written.contains_key(line.as_str()) => {
                findings.lost_effects += 1;
                findings.problem(format!(
                    "{id}: `{line}` is recorded as written but is not in the file"
                ));
            }
            Some((true, content)) if content == INTERRUPTED => findings.unknown_outcomes += 1,
            _ => {}
        }
    }
    findings.idempotent_in_flight_at_kill += observed.idempotent_in_flight.len();
    let cut = observed.idempotent_in_flight.iter();
    for call_id in idempotent.iter().chain(cut) {
        match outcome.get(call_id) {
            Some((_, content)) if content != INTERRUPTED => {}
            other => {
                findings.idempotent_not_rerun += 1;
                findings.problem(format!(
                    "{id}: idempotent call {call_id} ended as {other:?}, not re-run"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use agent::types::Observation;
    use serde_json::json;

    use super::*;

    fn call(id: &str, tool: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: id.into(),
            tool_name: tool.into(),
            arguments,
        }
    }

    fn event(seq: u64, kind: EventKind) -> Event {
        Event::new("s", seq, kind)
    }

    fn appended(plan: &SessionPlan, outcome: &str) -> Vec<Event> {
        let line = plan.lines().first().copied().unwrap_or("none").to_owned();
        let append = call(
            "c1",
            "append_line",
            json!({"path": EFFECTS_FILE, "line": line}),
        );
        let sleep = call("c2", "sleep", json!({"seconds": 0.1}));
        vec![
            event(
                1,
                EventKind::ActionDispatched {
                    call: append.clone(),
                },
            ),
            event(
                2,
                EventKind::ActionCompleted {
                    observation: Observation::success(&append, "ok"),
                },
            ),
            event(
                3,
                EventKind::ActionDispatched {
                    call: sleep.clone(),
                },
            ),
            event(
                4,
                EventKind::ActionCompleted {
                    observation: Observation::error(&sleep, outcome),
                },
            ),
        ]
    }

    fn plan_with_a_line(dir: &std::path::Path) -> SessionPlan {
        (0..200)
            .map(|index| SessionPlan::draw(5, "t", index, dir).unwrap())
            .find(|plan| !plan.lines().is_empty())
            .unwrap()
    }

    #[test]
    fn a_line_written_twice_or_not_at_all_and_an_idempotent_call_not_rerun_are_caught() {
        let dir = std::env::temp_dir().join(format!("agent-crash-check-{}", std::process::id()));
        let plan = plan_with_a_line(&dir);
        let line = plan.lines()[0].to_owned();
        let effects = plan.workspace.join(EFFECTS_FILE);

        std::fs::write(&effects, format!("{line}\n{line}\n")).unwrap();
        let mut twice = Findings::default();
        check_calls(
            &plan,
            "s",
            &appended(&plan, "slept"),
            &Observed::default(),
            &mut twice,
        );
        assert_eq!(twice.duplicated_effects, 1);

        std::fs::write(&effects, "").unwrap();
        let mut missing = Findings::default();
        check_calls(
            &plan,
            "s",
            &appended(&plan, INTERRUPTED),
            &Observed::default(),
            &mut missing,
        );
        assert_eq!(missing.lost_effects, 1);
        assert_eq!(missing.idempotent_not_rerun, 1);
        assert!(!missing.ok());

        std::fs::write(&effects, format!("{line}\n")).unwrap();
        let mut fine = Findings::default();
        check_calls(
            &plan,
            "s",
            &appended(&plan, "slept"),
            &Observed::default(),
            &mut fine,
        );
        assert!(fine.ok(), "{:?}", fine.problems);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_event_read_once_and_later_changed_or_gone_is_lost() {
        let first = vec![event(1, EventKind::Cancelled { reason: "a".into() })];
        let mut observed = Observed::default();
        observed.saw(first.clone());
        observed.saw(first.clone());
        assert_eq!(observed.lost, 0);
        observed.saw(vec![event(1, EventKind::Cancelled { reason: "b".into() })]);
        assert_eq!(observed.lost, 1);
        assert_eq!(lost_between(&first, &[]), 1);
    }
}
