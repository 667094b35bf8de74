//! `SessionState`: the fold of a session's events, and the status machine that
//! decides which event may follow which. `apply` is the one place state changes.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{ApprovalDecision, Event, EventKind};
use crate::history::HistoryItem;
use crate::result::{BudgetKind, ExitReason, RunResult, RunUsage};
use crate::types::{Action, Observation, PlanStep, ToolCall};

/// The internal status of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// No event yet.
    New,
    /// Started; no step taken.
    Idle,
    /// A model call is under way, or its finish awaits acceptance.
    Thinking,
    /// The model proposed tool calls that are not all dispatched.
    ActionPending,
    /// Tool calls are running.
    ActionExecuting,
    /// All calls of the last turn have results.
    Observing,
    /// Calls wait for a human decision.
    AwaitingApproval,
    /// Ended with an answer.
    Finished,
    /// Ended without an answer.
    Error,
    /// Ended by cancellation.
    Cancelled,
}

impl Status {
    /// The status users and scripts see.
    pub fn public(self) -> PublicStatus {
        match self {
            Self::Finished => PublicStatus::Finished,
            Self::Error => PublicStatus::Failed,
            Self::Cancelled => PublicStatus::Cancelled,
            Self::AwaitingApproval => PublicStatus::AwaitingApproval,
            Self::New
            | Self::Idle
            | Self::Thinking
            | Self::ActionPending
            | Self::ActionExecuting
            | Self::Observing => PublicStatus::Running,
        }
    }

    /// Whether the session is between steps (nothing half done), where a fork may end.
    pub fn is_step_boundary(self) -> bool {
        matches!(self, Self::Idle | Self::Observing)
    }

    /// Whether no event may follow.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Finished | Self::Error | Self::Cancelled)
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Idle => "idle",
            Self::Thinking => "thinking",
            Self::ActionPending => "action_pending",
            Self::ActionExecuting => "action_executing",
            Self::Observing => "observing",
            Self::Finished => "finished",
            Self::Error => "error",
            Self::Cancelled => "cancelled",
            Self::AwaitingApproval => "awaiting_approval",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The status shown by `agent sessions` and `agent show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PublicStatus {
    /// In progress, or its driving process died.
    Running,
    /// Paused until a human decides on its pending calls.
    AwaitingApproval,
    /// Ended with an answer.
    Finished,
    /// Ended with an error exit reason.
    Failed,
    /// Ended by cancellation.
    Cancelled,
}

impl PublicStatus {
    /// The snake_case name shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::AwaitingApproval => "awaiting_approval",
            Self::Finished => "finished",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The public status a session has right after an event of `kind`.
    pub fn after(kind: &EventKind) -> Self {
        match kind {
            EventKind::Finished { .. } => Self::Finished,
            EventKind::Failed { .. } => Self::Failed,
            EventKind::Cancelled { .. } => Self::Cancelled,
            EventKind::ApprovalRequested { .. } => Self::AwaitingApproval,
            EventKind::ApprovalDecided { remaining, .. } if *remaining > 0 => {
                Self::AwaitingApproval
            }
            _ => Self::Running,
        }
    }
}

impl fmt::Display for PublicStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status name that is not a public status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown status `{0}`: expected running, awaiting_approval, finished, failed or cancelled")]
pub struct UnknownStatus(pub String);

impl std::str::FromStr for PublicStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "running" => Ok(Self::Running),
            "awaiting_approval" => Ok(Self::AwaitingApproval),
            "finished" => Ok(Self::Finished),
            "failed" => Ok(Self::Failed),
            "cancelled" => Ok(Self::Cancelled),
            other => Err(UnknownStatus(other.to_owned())),
        }
    }
}

/// Why an event could not be applied. The state is unchanged when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// The event is not allowed in the current status.
    #[error("event `{event}` is not allowed in status `{status}`")]
    IllegalTransition {
        /// The rejected event's kind.
        event: &'static str,
        /// The status the session was in.
        status: Status,
    },
    /// The event's seq does not follow the last applied one.
    #[error("event seq {got} does not follow seq {last}")]
    OutOfOrder {
        /// Last applied seq.
        last: u64,
        /// Seq of the rejected event.
        got: u64,
    },
    /// The event belongs to another session.
    #[error("event of session `{got}` applied to session `{expected}`")]
    WrongSession {
        /// This state's session.
        expected: String,
        /// The event's session.
        got: String,
    },
    /// A dispatch or completion names a call that is not pending.
    #[error("event `{event}` names call `{call_id}`, which is not pending in this turn")]
    UnexpectedCall {
        /// The rejected event's kind.
        event: &'static str,
        /// The call id it named.
        call_id: String,
    },
}

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

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Outcome {
    exit_reason: ExitReason,
    answer: Option<String>,
    budget: Option<BudgetKind>,
    error: Option<String>,
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
    history: Vec<HistoryItem>,
    turn: Vec<TurnCall>,
    proposed_finish: Option<String>,
    #[serde(default)]
    proposed_plan: Option<Vec<PlanStep>>,
    #[serde(default)]
    records: Vec<StrategyRecord>,
    last_output_rejected: bool,
    outcome: Option<Outcome>,
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
            history: Vec::new(),
            turn: Vec::new(),
            proposed_finish: None,
            proposed_plan: None,
            records: Vec::new(),
            last_output_rejected: false,
            outcome: None,
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
        self.check(&event.kind)?;
        self.change(&event.kind);
        self.last_seq = event.seq;
        if event.seq == 1 {
            self.created_at = event.at;
        }
        self.updated_at = event.at;
        Ok(())
    }

    /// Whether `kind` may follow in the current status, without changing anything.
    fn check(&self, kind: &EventKind) -> Result<(), StateError> {
        let illegal = || StateError::IllegalTransition {
            event: kind.name(),
            status: self.status,
        };
        let allowed = match kind {
            EventKind::SessionStarted { .. } => self.status == Status::New,
            EventKind::ModelRequested { .. } => {
                matches!(self.status, Status::Idle | Status::Observing)
            }
            EventKind::ModelResponded { .. }
            | EventKind::ModelOutputRejected { .. }
            | EventKind::ModelRetried { .. } => self.status == Status::Thinking,
            EventKind::ActionDispatched { call } => {
                if !matches!(self.status, Status::ActionPending | Status::ActionExecuting) {
                    return Err(illegal());
                }
                if !self.turn.iter().any(|pending| {
                    pending.call.id == call.id
                        && !pending.dispatched
                        && (!pending.needs_decision
                            || matches!(pending.decision, Some(ApprovalDecision::Approved { .. })))
                }) {
                    return Err(StateError::UnexpectedCall {
                        event: kind.name(),
                        call_id: call.id.clone(),
                    });
                }
                true
            }
            EventKind::ActionAttemptFailed { call_id, .. } => {
                if self.status != Status::ActionExecuting {
                    return Err(illegal());
                }
                if !self
                    .turn
                    .iter()
                    .any(|p| &p.call.id == call_id && p.dispatched && p.observation.is_none())
                {
                    return Err(StateError::UnexpectedCall {
                        event: kind.name(),
                        call_id: call_id.clone(),
                    });
                }
                true
            }
            EventKind::CircuitChanged { .. } => self.status == Status::ActionExecuting,
            EventKind::ActionCompleted { observation } => {
                if self.status != Status::ActionExecuting {
                    return Err(illegal());
                }
                if !self.turn.iter().any(|pending| {
                    pending.call.id == observation.call_id
                        && pending.dispatched
                        && pending.observation.is_none()
                }) {
                    return Err(StateError::UnexpectedCall {
                        event: kind.name(),
                        call_id: observation.call_id.clone(),
                    });
                }
                true
            }
            EventKind::FinishRejected { .. } => {
                self.status == Status::Thinking && self.proposed_finish.is_some()
            }
            EventKind::Finished { .. } => match self.status {
                Status::Thinking => self.proposed_finish.is_some(),
                Status::Idle | Status::Observing => !self.records.is_empty(),
                _ => false,
            },
            EventKind::ResponseRefused { .. } => {
                self.status == Status::Thinking
                    && (self.proposed_finish.is_some() || self.proposed_plan.is_some())
            }
            EventKind::Strategy { .. } => {
                matches!(
                    self.status,
                    Status::Idle | Status::Thinking | Status::Observing
                )
            }
            EventKind::ApprovalRequested { calls } => {
                if self.status != Status::ActionPending || calls.is_empty() {
                    return Err(illegal());
                }
                if let Some(call) = calls.iter().find(|call| {
                    !self
                        .turn
                        .iter()
                        .any(|p| p.call.id == call.id && !p.dispatched && !p.needs_decision)
                }) {
                    return Err(StateError::UnexpectedCall {
                        event: kind.name(),
                        call_id: call.id.clone(),
                    });
                }
                true
            }
            EventKind::ApprovalDecided {
                call_id, remaining, ..
            } => {
                if self.status != Status::AwaitingApproval {
                    return Err(illegal());
                }
                let waiting = self.undecided_calls();
                if !waiting.iter().any(|call| &call.id == call_id) {
                    return Err(StateError::UnexpectedCall {
                        event: kind.name(),
                        call_id: call_id.clone(),
                    });
                }
                *remaining as usize + 1 == waiting.len()
            }
            EventKind::Failed { .. }
            | EventKind::Cancelled { .. }
            | EventKind::Resumed { .. }
            | EventKind::Forked { .. } => !self.status.is_terminal() && self.status != Status::New,
        };
        if allowed { Ok(()) } else { Err(illegal()) }
    }

    /// Changes the state for an event that `check` accepted.
    fn change(&mut self, kind: &EventKind) {
        match kind {
            EventKind::SessionStarted {
                task,
                strategy,
                config,
            } => {
                self.task.clone_from(task);
                self.strategy.clone_from(strategy);
                self.config = config.clone();
                self.status = Status::Idle;
            }
            EventKind::ModelRequested { .. } => {
                self.status = Status::Thinking;
                self.proposed_finish = None;
                self.proposed_plan = None;
            }
            EventKind::ModelResponded {
                actions,
                usage,
                text,
            } => {
                self.count_response(*usage);
                self.last_output_rejected = false;
                let calls: Vec<ToolCall> = actions
                    .iter()
                    .filter_map(|action| match action {
                        Action::ToolCall(call) => Some(call.clone()),
                        _ => None,
                    })
                    .collect();
                if calls.is_empty() {
                    self.proposed_finish = actions.iter().find_map(|action| match action {
                        Action::Finish(finish) => Some(finish.answer.clone()),
                        _ => None,
                    });
                    self.proposed_plan = actions.iter().find_map(|action| match action {
                        Action::Plan { steps } => Some(steps.clone()),
                        _ => None,
                    });
                } else {
                    self.history.push(HistoryItem::ToolCalls {
                        calls: calls.clone(),
                        text: text.clone(),
                    });
                    self.turn = calls
                        .into_iter()
                        .map(|call| TurnCall {
                            call,
                            dispatched: false,
                            observation: None,
                            needs_decision: false,
                            decision: None,
                        })
                        .collect();
                    self.status = Status::ActionPending;
                }
            }
            EventKind::ModelOutputRejected { error, usage, .. } => {
                self.count_response(*usage);
                self.last_output_rejected = true;
                self.history.push(HistoryItem::Feedback {
                    message: error.clone(),
                });
                self.status = Status::Observing;
            }
            EventKind::ActionDispatched { call } => {
                if let Some(pending) = self.turn.iter_mut().find(|p| p.call.id == call.id) {
                    pending.dispatched = true;
                }
                self.usage.tool_calls += 1;
                *self
                    .calls_per_tool
                    .entry(call.tool_name.clone())
                    .or_default() += 1;
                self.status = Status::ActionExecuting;
            }
            EventKind::ActionCompleted { observation } => {
                if let Some(pending) = self
                    .turn
                    .iter_mut()
                    .find(|p| p.call.id == observation.call_id)
                {
                    pending.observation = Some(observation.clone());
                }
                self.close_turn_if_complete();
            }
            EventKind::ApprovalRequested { calls } => {
                for pending in &mut self.turn {
                    if calls.iter().any(|call| call.id == pending.call.id) {
                        pending.needs_decision = true;
                    }
                }
                self.status = Status::AwaitingApproval;
            }
            EventKind::ApprovalDecided {
                call_id,
                decision,
                by,
                remaining,
                ..
            } => {
                self.decide(call_id, decision, by);
                if *remaining == 0 {
                    self.status = Status::ActionPending;
                    self.close_turn_if_complete();
                }
            }
            EventKind::Strategy {
                strategy,
                name,
                data,
                usage,
            } => {
                if let Some(usage) = usage {
                    self.count_response(*usage);
                    self.last_output_rejected = false;
                }
                self.records.push(StrategyRecord {
                    strategy: strategy.clone(),
                    name: name.clone(),
                    data: data.clone(),
                    history_len: self.history.len(),
                    steps_used: self.steps_used,
                });
                if self.status == Status::Thinking {
                    self.proposed_finish = None;
                    self.proposed_plan = None;
                    self.status = Status::Observing;
                }
            }
            EventKind::ResponseRefused { reason } => {
                self.proposed_finish = None;
                self.proposed_plan = None;
                self.history.push(HistoryItem::Feedback {
                    message: reason.clone(),
                });
                self.status = Status::Observing;
            }
            EventKind::FinishRejected {
                reason, details, ..
            } => {
                self.proposed_finish = None;
                self.history.push(HistoryItem::Feedback {
                    message: format!("{reason}\n{details}").trim_end().to_owned(),
                });
                self.status = Status::Observing;
            }
            EventKind::Finished { answer } => {
                self.outcome = Some(Outcome {
                    exit_reason: ExitReason::Finished,
                    answer: Some(answer.clone()),
                    budget: None,
                    error: None,
                });
                self.status = Status::Finished;
            }
            EventKind::Resumed { .. }
            | EventKind::Forked { .. }
            | EventKind::ModelRetried { .. }
            | EventKind::ActionAttemptFailed { .. }
            | EventKind::CircuitChanged { .. } => {}
            EventKind::Cancelled { reason } => {
                self.outcome = Some(Outcome {
                    exit_reason: ExitReason::Cancelled,
                    answer: None,
                    budget: None,
                    error: Some(reason.clone()),
                });
                self.status = Status::Cancelled;
            }
            EventKind::Failed {
                exit_reason,
                budget,
                error,
            } => {
                self.outcome = Some(Outcome {
                    exit_reason: *exit_reason,
                    answer: None,
                    budget: budget.clone(),
                    error: error.clone(),
                });
                self.status = Status::Error;
            }
        }
    }

    /// Moves a turn whose calls all have results into the history, in proposal order.
    fn close_turn_if_complete(&mut self) {
        if self.turn.iter().all(|p| p.observation.is_some()) {
            let turn = std::mem::take(&mut self.turn);
            self.history.extend(
                turn.into_iter()
                    .filter_map(|p| p.observation)
                    .map(|observation| HistoryItem::Observation { observation }),
            );
            self.status = Status::Observing;
        }
    }

    /// Applies a human decision to a waiting call: edited arguments replace the
    /// proposed ones (in the history too), a denial becomes its error observation.
    fn decide(&mut self, call_id: &str, decision: &ApprovalDecision, by: &str) {
        let Some(pending) = self.turn.iter_mut().find(|p| p.call.id == call_id) else {
            return;
        };
        pending.decision = Some(decision.clone());
        match decision {
            ApprovalDecision::Approved {
                arguments: Some(arguments),
            } => {
                pending.call.arguments = arguments.clone();
                if let Some(HistoryItem::ToolCalls { calls, .. }) = self
                    .history
                    .iter_mut()
                    .rev()
                    .find(|item| matches!(item, HistoryItem::ToolCalls { .. }))
                    && let Some(call) = calls.iter_mut().find(|call| call.id == call_id)
                {
                    call.arguments = arguments.clone();
                }
            }
            ApprovalDecision::Approved { arguments: None } => {}
            ApprovalDecision::Denied { reason } => {
                pending.observation = Some(Observation::error(
                    &pending.call,
                    format!("denied by {by}: {reason}"),
                ));
            }
        }
    }

    fn count_response(&mut self, usage: crate::types::Usage) {
        self.steps_used += 1;
        self.usage.model_calls += 1;
        self.usage.input_tokens += usage.input_tokens;
        self.usage.output_tokens += usage.output_tokens;
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

    /// The configuration recorded at start.
    pub fn config(&self) -> &Value {
        &self.config
    }

    /// The current internal status.
    pub fn status(&self) -> Status {
        self.status
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
    pub fn usage(&self) -> RunUsage {
        self.usage
    }

    /// Calls dispatched to `tool` so far.
    pub fn calls_of(&self, tool: &str) -> u64 {
        self.calls_per_tool.get(tool).copied().unwrap_or(0)
    }

    /// What the model has seen so far, in order.
    pub fn history(&self) -> &[HistoryItem] {
        &self.history
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

    /// Calls dispatched but without a result, in proposal order.
    pub fn in_flight_calls(&self) -> Vec<ToolCall> {
        self.turn
            .iter()
            .filter(|p| p.dispatched && p.observation.is_none())
            .map(|p| p.call.clone())
            .collect()
    }

    /// Whether `call_id` names a call of this session's past or current turns.
    pub fn knows_call(&self, call_id: &str) -> bool {
        self.turn.iter().any(|p| p.call.id == call_id)
            || self.history.iter().any(|item| match item {
                HistoryItem::ToolCalls { calls, .. } => calls.iter().any(|c| c.id == call_id),
                _ => false,
            })
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

    /// Calls of the current turn that need a decision and have none, in proposal order.
    pub fn undecided_calls(&self) -> Vec<ToolCall> {
        self.turn
            .iter()
            .filter(|p| p.needs_decision && p.decision.is_none())
            .map(|p| p.call.clone())
            .collect()
    }

    /// Whether a call of the current turn has been decided (approved or denied).
    pub fn is_decided(&self, call_id: &str) -> bool {
        self.turn
            .iter()
            .any(|p| p.call.id == call_id && p.decision.is_some())
    }

    /// The result to report while calls wait for approval; `None` otherwise.
    pub fn awaiting_result(&self) -> Option<RunResult> {
        let pending = self.undecided_calls();
        (self.status == Status::AwaitingApproval && !pending.is_empty()).then(|| RunResult {
            session_id: self.session_id.clone(),
            exit_reason: ExitReason::AwaitingApproval,
            answer: None,
            steps_used: self.steps_used,
            usage: self.usage,
            budget: None,
            error: None,
            pending,
        })
    }

    /// Whether the last model output was rejected.
    pub fn last_output_rejected(&self) -> bool {
        self.last_output_rejected
    }

    /// The result of an ended session; `None` while it runs.
    pub fn run_result(&self) -> Option<RunResult> {
        let outcome = self.outcome.as_ref()?;
        Some(RunResult {
            session_id: self.session_id.clone(),
            exit_reason: outcome.exit_reason,
            answer: outcome.answer.clone(),
            steps_used: self.steps_used,
            usage: self.usage,
            budget: outcome.budget.clone(),
            error: outcome.error.clone(),
            pending: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::types::{Finish, Usage};

    fn event(seq: u64, kind: EventKind) -> Event {
        Event::new("s1", seq, kind)
    }

    fn started() -> EventKind {
        EventKind::SessionStarted {
            task: "t".into(),
            strategy: "react".into(),
            config: json!({}),
        }
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            tool_name: "calculator".into(),
            arguments: json!({}),
        }
    }

    fn responded(actions: Vec<Action>) -> EventKind {
        EventKind::ModelResponded {
            actions,
            usage: Usage {
                input_tokens: 3,
                output_tokens: 2,
            },
            text: None,
        }
    }

    fn apply_all(kinds: Vec<EventKind>) -> Result<SessionState, StateError> {
        let events: Vec<Event> = kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| event(i as u64 + 1, kind))
            .collect();
        SessionState::from_events("s1", &events)
    }

    #[test]
    fn a_tool_turn_then_a_finish_walks_the_status_machine() {
        let state = apply_all(vec![
            started(),
            EventKind::ModelRequested { step: 1 },
            responded(vec![
                Action::ToolCall(call("a")),
                Action::ToolCall(call("b")),
            ]),
            EventKind::ActionDispatched { call: call("a") },
            EventKind::ActionDispatched { call: call("b") },
            EventKind::ActionCompleted {
                observation: Observation::success(&call("b"), "2"),
            },
            EventKind::ActionCompleted {
                observation: Observation::success(&call("a"), "1"),
            },
            EventKind::ModelRequested { step: 2 },
            responded(vec![Action::Finish(Finish {
                answer: "done".into(),
            })]),
            EventKind::Finished {
                answer: "done".into(),
            },
        ])
        .unwrap();
        assert_eq!(state.status(), Status::Finished);
        assert_eq!(state.steps_used(), 2);
        assert_eq!(state.usage().tool_calls, 2);
        assert_eq!(state.usage().input_tokens, 6);
        let contents: Vec<&str> = state
            .history()
            .iter()
            .filter_map(|item| match item {
                HistoryItem::Observation { observation } => Some(observation.content.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(contents, ["1", "2"], "observations keep proposal order");
        let result = state.run_result().unwrap();
        assert_eq!(result.answer.as_deref(), Some("done"));
    }

    #[test]
    fn an_illegal_event_names_the_event_and_the_status_and_changes_nothing() {
        let mut state = apply_all(vec![started()]).unwrap();
        let before = state.clone();
        let err = state
            .apply(&event(2, EventKind::Finished { answer: "x".into() }))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "event `finished` is not allowed in status `idle`"
        );
        assert_eq!(state, before);
    }

    #[test]
    fn gaps_other_sessions_and_unknown_calls_are_rejected() {
        let mut state = apply_all(vec![started()]).unwrap();
        assert!(matches!(
            state.apply(&event(3, EventKind::ModelRequested { step: 1 })),
            Err(StateError::OutOfOrder { last: 1, got: 3 })
        ));
        let foreign = Event::new("other", 2, EventKind::ModelRequested { step: 1 });
        assert!(matches!(
            state.apply(&foreign),
            Err(StateError::WrongSession { .. })
        ));
        let mut state = apply_all(vec![
            started(),
            EventKind::ModelRequested { step: 1 },
            responded(vec![Action::ToolCall(call("a"))]),
        ])
        .unwrap();
        assert!(matches!(
            state.apply(&event(4, EventKind::ActionDispatched { call: call("zz") })),
            Err(StateError::UnexpectedCall { .. })
        ));
    }

    #[test]
    fn nothing_follows_a_terminal_event() {
        let mut state = apply_all(vec![
            started(),
            EventKind::Failed {
                exit_reason: ExitReason::MaxStepsExceeded,
                budget: None,
                error: None,
            },
        ])
        .unwrap();
        assert_eq!(state.status().public(), PublicStatus::Failed);
        assert!(matches!(
            state.apply(&event(
                3,
                EventKind::Failed {
                    exit_reason: ExitReason::Cancelled,
                    budget: None,
                    error: None
                }
            )),
            Err(StateError::IllegalTransition { .. })
        ));
    }

    #[test]
    fn rejected_output_becomes_feedback_and_counts_as_a_step() {
        let state = apply_all(vec![
            started(),
            EventKind::ModelRequested { step: 1 },
            EventKind::ModelOutputRejected {
                raw: "nope".into(),
                error: "not JSON".into(),
                usage: Usage::default(),
            },
        ])
        .unwrap();
        assert_eq!(state.status(), Status::Observing);
        assert_eq!(state.steps_used(), 1);
        assert!(state.last_output_rejected());
        assert_eq!(
            state.history(),
            [HistoryItem::Feedback {
                message: "not JSON".into()
            }]
        );
    }
}
