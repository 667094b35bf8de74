//! `SessionState`: the fold of a session's events, and the status machine that
//! decides which event may follow which. `apply` is the one place state changes;
//! `transition` holds one arm per event kind that checks the event and then
//! changes the state.

mod error;
mod repeats;
mod status;
mod transition;
mod turns;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{ApprovalDecision, Event, EventKind, LastAnswerKind};
use crate::history::HistoryItem;
use crate::result::{BudgetKind, ExitReason, RunResult, RunUsage};
use crate::types::{Observation, PlanStep, ToolCall};

pub use self::error::StateError;
pub use self::status::{PublicStatus, Status, UnknownStatus};
pub use self::turns::Spent;

use self::turns::TurnStart;

/// One call of the current tool turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct TurnCall {
    call: ToolCall,
    dispatched: bool,
    observation: Option<Observation>,
    /// Whether the call waits (or waited) for a human decision.
    #[serde(default)]
    needs_decision: bool,
    #[serde(default)]
    decision: Option<ApprovalDecision>,
    /// Whether the call was handed to the work queue.
    #[serde(default)]
    queued: bool,
}

/// State a strategy recorded, with where the session stood when it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyRecord {
    /// The strategy that wrote it.
    pub strategy: String,
    /// What it records.
    pub name: String,
    /// The record.
    pub data: Value,
    /// Length of the history when it was recorded.
    pub history_len: usize,
    /// Steps used when it was recorded.
    pub steps_used: u32,
}

impl StrategyRecord {
    /// The field `name` of the record's data, if it is there.
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.data.get(name)
    }

    /// The text in field `name` of the record's data (empty when absent).
    pub fn text(&self, name: &str) -> &str {
        self.field(name).and_then(Value::as_str).unwrap_or_default()
    }
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Outcome {
    exit_reason: ExitReason,
    answer: Option<String>,
    budget: Option<BudgetKind>,
    error: Option<String>,
    #[serde(default)]
    output: Option<Value>,
}

/// The last answer asked for after a limit ended the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct LastAnswer {
    kind: LastAnswerKind,
    answer: Option<String>,
}

/// The state of one session: a pure fold of its events. It serialises to JSON so
/// that a snapshot can stand in for the events it folds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    session_id: String,
    task: String,
    strategy: String,
    config: Value,
    status: Status,
    last_seq: u64,
    created_at: u64,
    updated_at: u64,
    steps_used: u32,
    usage: RunUsage,
    calls_per_tool: BTreeMap<String, u64>,
    history: Arc<Vec<HistoryItem>>,
    /// For each history item, the first seq whose facts it holds (a summary: the
    /// first seq it replaced); never decreasing.
    #[serde(default)]
    history_seqs: Vec<u64>,
    /// Ids of every call the model proposed, kept when a summary replaces them.
    #[serde(default)]
    call_ids: BTreeSet<String>,
    /// Where the latest successful result of each distinct call is in the
    /// history, for the repeated-call guard.
    #[serde(default)]
    successes: repeats::ResultIndex,
    /// Summaries recorded so far.
    #[serde(default)]
    compactions: u32,
    turn: Vec<TurnCall>,
    proposed_finish: Option<String>,
    #[serde(default)]
    proposed_plan: Option<Vec<PlanStep>>,
    #[serde(default)]
    records: Vec<StrategyRecord>,
    last_output_rejected: bool,
    /// Model outputs rejected in a row since the last usable one.
    #[serde(default)]
    rejections_in_a_row: u32,
    /// The fallback model that answered the call whose usage comes next.
    #[serde(default)]
    answering: Option<String>,
    #[serde(default)]
    last_answer: Option<LastAnswer>,
    /// The step of the latest reflection (0 when none).
    #[serde(default)]
    reflected_at: u32,
    outcome: Option<Outcome>,
    /// Whether the last event queued the session for a worker.
    #[serde(default)]
    queued: bool,
    /// Whether the session ever went through the work queue.
    #[serde(default)]
    submitted: bool,
    /// Follow-up messages so far (the session is in turn `follow_ups + 1`).
    #[serde(default)]
    follow_ups: u32,
    /// What was spent when the current turn began.
    #[serde(default)]
    turn_start: TurnStart,
    /// Whether someone asked the session to pause and it has not yet.
    #[serde(default)]
    pause_requested: bool,
    /// The status a paused session continues in when it is resumed.
    #[serde(default)]
    paused_from: Option<Status>,
    /// Messages added while the session ran, not yet in the history.
    #[serde(default)]
    pending_messages: Vec<String>,
    /// Tool calls strategy work makes (a workflow's tool nodes) that needed a
    /// human decision, with the decision once made.
    #[serde(default)]
    work_approvals: Vec<WorkApproval>,
    /// While work approvals are awaited: the status the session goes back to
    /// once they are all decided.
    #[serde(default)]
    approved_from: Option<Status>,
}

/// A tool call of strategy work that waits (or waited) for a human decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct WorkApproval {
    call: ToolCall,
    decision: Option<ApprovalDecision>,
}

impl SessionState {
    /// The state of a session with no events yet.
    pub fn new(session_id: impl Into<String>) -> Self {
        Self {
            session_id: session_id.into(),
            task: String::new(),
            strategy: String::new(),
            config: Value::Null,
            status: Status::New,
            last_seq: 0,
            created_at: 0,
            updated_at: 0,
            steps_used: 0,
            usage: RunUsage::default(),
            calls_per_tool: BTreeMap::new(),
            history: Arc::new(Vec::new()),
            history_seqs: Vec::new(),
            call_ids: BTreeSet::new(),
            successes: repeats::ResultIndex::new(),
            compactions: 0,
            turn: Vec::new(),
            proposed_finish: None,
            proposed_plan: None,
            records: Vec::new(),
            last_output_rejected: false,
            rejections_in_a_row: 0,
            answering: None,
            last_answer: None,
            reflected_at: 0,
            outcome: None,
            queued: false,
            submitted: false,
            follow_ups: 0,
            turn_start: TurnStart::default(),
            pause_requested: false,
            paused_from: None,
            pending_messages: Vec::new(),
            work_approvals: Vec::new(),
            approved_from: None,
        }
    }

    /// Folds a whole log.
    pub fn from_events<'a>(
        session_id: impl Into<String>,
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Result<Self, StateError> {
        let mut state = Self::new(session_id);
        for event in events {
            state.apply(event)?;
        }
        Ok(state)
    }

    /// Applies one event, or rejects it and leaves the state unchanged.
    pub fn apply(&mut self, event: &Event) -> Result<(), StateError> {
        if event.session_id != self.session_id {
            return Err(StateError::WrongSession {
                expected: self.session_id.clone(),
                got: event.session_id.clone(),
            });
        }
        if event.seq != self.last_seq + 1 {
            return Err(StateError::OutOfOrder {
                last: self.last_seq,
                got: event.seq,
            });
        }
        self.transition(&event.kind)?;
        // A pause request or a message does not take a session out of the
        // work queue.
        self.queued = matches!(event.kind, EventKind::Queued { .. })
            || (self.queued
                && matches!(
                    event.kind,
                    EventKind::PauseRequested { .. } | EventKind::MessageQueued { .. }
                ));
        self.submitted |= self.queued;
        self.last_seq = event.seq;
        if event.seq == 1 {
            self.created_at = event.at;
        }
        self.updated_at = event.at;
        Ok(())
    }

    /// The session's id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The task text.
    pub fn task(&self) -> &str {
        &self.task
    }

    /// The strategy name recorded at start.
    pub fn strategy(&self) -> &str {
        &self.strategy
    }

    /// The configuration recorded at start, or the one the latest follow-up
    /// message recorded in its place.
    pub fn config(&self) -> &Value {
        &self.config
    }

    /// The current internal status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The status users and scripts see: the internal status's public name, or
    /// `queued` while the session waits in the work queue.
    pub fn public_status(&self) -> PublicStatus {
        if self.queued && !self.status.is_terminal() {
            PublicStatus::Queued
        } else {
            self.status.public()
        }
    }

    /// Whether the session ever went through the work queue (so a decision on it
    /// queues it again for a worker).
    pub fn is_submitted(&self) -> bool {
        self.submitted
    }

    /// Seq of the last applied event (0 when none).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Time of the first event, in Unix milliseconds.
    pub fn created_at(&self) -> u64 {
        self.created_at
    }

    /// Time of the last event, in Unix milliseconds.
    pub fn updated_at(&self) -> u64 {
        self.updated_at
    }

    /// Model responses so far, valid or not.
    pub fn steps_used(&self) -> u32 {
        self.steps_used
    }

    /// Session totals.
    pub fn usage(&self) -> &RunUsage {
        &self.usage
    }

    /// Calls dispatched to `tool` so far.
    pub fn calls_of(&self, tool: &str) -> u64 {
        self.calls_per_tool.get(tool).copied().unwrap_or(0)
    }

    /// What the model has seen so far, in order.
    pub fn history(&self) -> &[HistoryItem] {
        &self.history
    }

    /// The history, shared: a model request holds it without copying it.
    pub fn shared_history(&self) -> Arc<Vec<HistoryItem>> {
        Arc::clone(&self.history)
    }

    /// Calls of the current turn that are not dispatched yet and have no result
    /// (a denied call has its result), in proposal order.
    pub fn undispatched_calls(&self) -> Vec<ToolCall> {
        self.turn
            .iter()
            .filter(|p| !p.dispatched && p.observation.is_none())
            .map(|p| p.call.clone())
            .collect()
    }

    /// Whether the dispatched call `call_id` of this turn was handed to the work
    /// queue (a worker may be running it).
    pub fn is_queued(&self, call_id: &str) -> bool {
        self.turn.iter().any(|p| p.call.id == call_id && p.queued)
    }

    /// Calls dispatched but without a result, in proposal order.
    pub fn in_flight_calls(&self) -> Vec<ToolCall> {
        self.turn
            .iter()
            .filter(|p| p.dispatched && p.observation.is_none())
            .map(|p| p.call.clone())
            .collect()
    }

    /// Whether `call_id` names a call of this session's past or current turns
    /// (summarised ones included).
    pub fn knows_call(&self, call_id: &str) -> bool {
        self.call_ids.contains(call_id)
    }

    /// Whether `history` is this session's whole history (not a part a strategy
    /// chose), so a summary of its oldest turns can replace them.
    pub fn is_whole_history(&self, history: &Arc<Vec<HistoryItem>>) -> bool {
        Arc::ptr_eq(&self.history, history)
    }

    /// The seq range the first `items` history items hold, `(first, last)`, for
    /// a summary that replaces them; `None` when there are not that many.
    pub fn seqs_of_leading(&self, items: usize) -> Option<(u64, u64)> {
        let first = *self.history_seqs.first()?;
        let last = *self.history_seqs.get(items.checked_sub(1)?)?;
        Some((first, last))
    }

    /// Summaries recorded so far (`context_compacted` events).
    pub fn compactions(&self) -> u32 {
        self.compactions
    }

    /// The answer of a finish the model proposed in the current step, if any.
    pub fn proposed_finish(&self) -> Option<&str> {
        self.proposed_finish.as_deref()
    }

    /// The plan the model proposed in the current step, if any.
    pub fn proposed_plan(&self) -> Option<&[PlanStep]> {
        self.proposed_plan.as_deref()
    }

    /// Everything strategies recorded, in log order.
    pub fn records(&self) -> &[StrategyRecord] {
        &self.records
    }

    /// Calls that need a decision and have none, in the order they were asked
    /// for: those of the current turn, or those of strategy work.
    pub fn undecided_calls(&self) -> Vec<ToolCall> {
        self.turn
            .iter()
            .filter(|p| p.needs_decision && p.decision.is_none())
            .map(|p| p.call.clone())
            .chain(
                self.work_approvals
                    .iter()
                    .filter(|w| w.decision.is_none())
                    .map(|w| w.call.clone()),
            )
            .collect()
    }

    /// Whether a call of the current turn has been decided (approved or denied).
    pub fn is_decided(&self, call_id: &str) -> bool {
        self.turn
            .iter()
            .any(|p| p.call.id == call_id && p.decision.is_some())
    }

    /// The human decision on a tool call of strategy work (a workflow's tool
    /// node), once it was asked for and made.
    pub fn work_decision(&self, call_id: &str) -> Option<&ApprovalDecision> {
        self.work_approvals
            .iter()
            .find(|w| w.call.id == call_id)
            .and_then(|w| w.decision.as_ref())
    }

    /// The result to report while calls wait for approval; `None` otherwise.
    pub fn awaiting_result(&self) -> Option<RunResult> {
        let pending = self.undecided_calls();
        (self.status == Status::AwaitingApproval && !pending.is_empty()).then(|| RunResult {
            session_id: self.session_id.clone(),
            exit_reason: ExitReason::AwaitingApproval,
            answer: None,
            steps_used: self.steps_used,
            usage: self.usage.clone(),
            budget: None,
            error: None,
            pending,
            partial: false,
            degraded: false,
            output: None,
            turn: self.turn(),
        })
    }

    /// The result to report while the session is paused; `None` otherwise.
    pub fn paused_result(&self) -> Option<RunResult> {
        (self.status == Status::Paused).then(|| RunResult {
            session_id: self.session_id.clone(),
            exit_reason: ExitReason::Paused,
            answer: None,
            steps_used: self.steps_used,
            usage: self.usage.clone(),
            budget: None,
            error: None,
            pending: Vec::new(),
            partial: false,
            degraded: false,
            output: None,
            turn: self.turn(),
        })
    }

    /// Messages added while the session ran that the history does not hold
    /// yet, in the order they came.
    pub fn pending_messages(&self) -> &[String] {
        &self.pending_messages
    }

    /// Whether someone asked the session to pause and it has not paused yet.
    pub fn pause_requested(&self) -> bool {
        self.pause_requested
    }

    /// Whether the last model output was rejected.
    pub fn last_output_rejected(&self) -> bool {
        self.last_output_rejected
    }

    /// Model outputs rejected in a row since the last usable one.
    pub fn rejections_in_a_row(&self) -> u32 {
        self.rejections_in_a_row
    }

    /// Whether the last answer after a limit was already asked for (a
    /// `last_answer` event is in the log).
    pub fn has_last_answer(&self) -> bool {
        self.last_answer.is_some()
    }

    /// The step of the latest reflection (0 when none).
    pub fn reflected_at(&self) -> u32 {
        self.reflected_at
    }

    /// The result of an ended session; `None` while it runs. A run a limit
    /// ended carries the last answer it asked for, marked `partial` or
    /// `degraded`.
    pub fn run_result(&self) -> Option<RunResult> {
        let outcome = self.outcome.as_ref()?;
        let last_answer = self
            .last_answer
            .as_ref()
            .filter(|_| outcome.answer.is_none() && outcome.exit_reason != ExitReason::Finished)
            .and_then(|last| Some((last.kind, last.answer.clone()?)));
        let (answer, partial, degraded) = match last_answer {
            Some((kind, answer)) => (
                Some(answer),
                kind == LastAnswerKind::Partial,
                kind == LastAnswerKind::Degraded,
            ),
            None => (outcome.answer.clone(), false, false),
        };
        Some(RunResult {
            session_id: self.session_id.clone(),
            exit_reason: outcome.exit_reason,
            answer,
            steps_used: self.steps_used,
            usage: self.usage.clone(),
            budget: outcome.budget.clone(),
            error: outcome.error.clone(),
            pending: Vec::new(),
            partial,
            degraded,
            output: outcome.output.clone(),
            turn: self.turn(),
        })
    }

    /// The name usage is counted under when no fallback answered: the
    /// recorded `model` of the session's configuration, else `model`.
    fn primary_model(&self) -> String {
        self.config
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("model")
            .to_owned()
    }
}

#[cfg(test)]
mod tests;
