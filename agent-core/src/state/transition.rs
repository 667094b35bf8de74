//! One arm per event kind: each checks that the event may follow in the current
//! status (returning the error and changing nothing when it may not), then
//! changes the state.

use std::ops::Range;
use std::sync::Arc;

use super::{
    LastAnswer, Outcome, SessionState, StateError, Status, StrategyRecord, TurnCall, WorkApproval,
};
use crate::event::{ApprovalDecision, EventKind};
use crate::history::HistoryItem;
use crate::result::ExitReason;
use crate::types::{Action, Observation, ToolCall, Usage};

impl SessionState {
    /// Checks `kind` against the current status and applies it; on error nothing
    /// has changed.
    pub(super) fn transition(&mut self, kind: &EventKind) -> Result<(), StateError> {
        let illegal = || StateError::IllegalTransition {
            event: kind.name(),
            status: self.status,
        };
        let require = |allowed: bool| if allowed { Ok(()) } else { Err(illegal()) };
        let unexpected = |call_id: &str| StateError::UnexpectedCall {
            event: kind.name(),
            call_id: call_id.to_owned(),
        };
        let seq = self.last_seq + 1;
        match kind {
            EventKind::SessionStarted {
                task,
                strategy,
                config,
            } => {
                require(self.status == Status::New)?;
                self.task.clone_from(task);
                self.strategy.clone_from(strategy);
                self.config = config.clone();
                self.status = Status::Idle;
            }
            EventKind::ModelRequested { .. } => {
                require(matches!(self.status, Status::Idle | Status::Observing))?;
                self.status = Status::Thinking;
                self.proposed_finish = None;
                self.proposed_plan = None;
            }
            EventKind::ModelResponded {
                actions,
                usage,
                text,
            } => {
                require(self.status == Status::Thinking)?;
                self.count_response(*usage);
                self.respond(actions, text.as_ref(), seq);
            }
            EventKind::ModelOutputRejected { error, usage, .. } => {
                require(self.status == Status::Thinking)?;
                self.count_response(*usage);
                self.last_output_rejected = true;
                self.rejections_in_a_row += 1;
                self.feedback(error.clone(), seq);
            }
            EventKind::ModelRetried { .. } => require(matches!(
                self.status,
                Status::Thinking | Status::Idle | Status::Observing
            ))?,
            EventKind::ModelFallback { to, .. } => {
                self.require_open(illegal)?;
                self.answering = Some(to.clone());
            }
            EventKind::LastAnswer {
                kind,
                answer,
                usage,
                ..
            } => {
                self.require_open(illegal)?;
                require(self.last_answer.is_none())?;
                self.count_call(*usage);
                self.last_answer = Some(LastAnswer {
                    kind: *kind,
                    answer: answer.clone(),
                });
            }
            EventKind::Reflection { step, note, usage } => {
                require(matches!(self.status, Status::Idle | Status::Observing))?;
                self.count_call(*usage);
                self.reflected_at = *step;
                self.feedback(format!("Reflection after step {step}: {note}"), seq);
            }
            EventKind::ContextCompacted {
                from_seq,
                to_seq,
                summary,
                usage,
                ..
            } => {
                require(matches!(self.status, Status::Idle | Status::Observing))?;
                let range = self.replaced_range(*from_seq, *to_seq)?;
                self.count_call(*usage);
                self.compact(range, summary.clone(), *from_seq);
            }
            EventKind::ActionDispatched { call } => {
                require(matches!(
                    self.status,
                    Status::ActionPending | Status::ActionExecuting
                ))?;
                let pending = self
                    .turn
                    .iter_mut()
                    .find(|pending| {
                        pending.call.id == call.id
                            && !pending.dispatched
                            && (!pending.needs_decision
                                || matches!(
                                    pending.decision,
                                    Some(ApprovalDecision::Approved { .. })
                                ))
                    })
                    .ok_or_else(|| unexpected(&call.id))?;
                pending.dispatched = true;
                self.usage.tool_calls += 1;
                *self
                    .calls_per_tool
                    .entry(call.tool_name.clone())
                    .or_default() += 1;
                self.status = Status::ActionExecuting;
            }
            EventKind::ActionsQueued { call_ids } => {
                require(self.status == Status::ActionExecuting)?;
                for call_id in call_ids {
                    self.in_flight(call_id).ok_or_else(|| unexpected(call_id))?;
                }
                for pending in &mut self.turn {
                    if call_ids.contains(&pending.call.id) {
                        pending.queued = true;
                    }
                }
            }
            EventKind::ActionAttemptFailed { call_id, .. } => {
                require(self.status == Status::ActionExecuting)?;
                self.in_flight(call_id).ok_or_else(|| unexpected(call_id))?;
            }
            EventKind::CircuitChanged { .. } => require(self.status == Status::ActionExecuting)?,
            EventKind::RepeatedCallAnswered { call_id, .. } => {
                require(self.status == Status::ActionExecuting)?;
                if !self
                    .turn
                    .iter()
                    .any(|pending| &pending.call.id == call_id && pending.dispatched)
                {
                    return Err(unexpected(call_id));
                }
            }
            EventKind::ActionCompleted { observation } => {
                require(self.status == Status::ActionExecuting)?;
                let pending = self
                    .in_flight(&observation.call_id)
                    .ok_or_else(|| unexpected(&observation.call_id))?;
                pending.observation = Some(observation.clone());
                self.close_turn_if_complete(seq);
            }
            EventKind::ApprovalRequested { calls }
                if matches!(self.status, Status::Idle | Status::Observing) =>
            {
                // Tool calls of strategy work, which are not part of a turn.
                require(!calls.is_empty())?;
                if let Some(call) = calls.iter().find(|call| {
                    self.work_approvals.iter().any(|w| w.call.id == call.id)
                        || self.turn.iter().any(|p| p.call.id == call.id)
                }) {
                    return Err(unexpected(&call.id));
                }
                self.work_approvals
                    .extend(calls.iter().map(|call| WorkApproval {
                        call: call.clone(),
                        decision: None,
                    }));
                self.approved_from = Some(self.status);
                self.status = Status::AwaitingApproval;
            }
            EventKind::ApprovalRequested { calls } => {
                require(self.status == Status::ActionPending && !calls.is_empty())?;
                if let Some(call) = calls.iter().find(|call| {
                    !self
                        .turn
                        .iter()
                        .any(|p| p.call.id == call.id && !p.dispatched && !p.needs_decision)
                }) {
                    return Err(unexpected(&call.id));
                }
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
                require(self.status == Status::AwaitingApproval)?;
                let waiting = self.undecided_calls();
                if !waiting.iter().any(|call| &call.id == call_id) {
                    return Err(unexpected(call_id));
                }
                require(*remaining as usize + 1 == waiting.len())?;
                if let Some(work) = self
                    .work_approvals
                    .iter_mut()
                    .find(|w| &w.call.id == call_id)
                {
                    work.decision = Some(decision.clone());
                } else {
                    self.decide(call_id, decision, by);
                }
                if *remaining == 0 {
                    match self.approved_from.take() {
                        Some(status) => self.status = status,
                        None => {
                            self.status = Status::ActionPending;
                            self.close_turn_if_complete(seq);
                        }
                    }
                }
            }
            EventKind::Strategy {
                strategy,
                name,
                data,
                usage,
            } => {
                require(matches!(
                    self.status,
                    Status::Idle | Status::Thinking | Status::Observing
                ))?;
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
                require(
                    self.status == Status::Thinking
                        && (self.proposed_finish.is_some() || self.proposed_plan.is_some()),
                )?;
                self.proposed_finish = None;
                self.proposed_plan = None;
                self.feedback(reason.clone(), seq);
            }
            EventKind::FinishRejected {
                reason, details, ..
            } => {
                require(self.status == Status::Thinking && self.proposed_finish.is_some())?;
                self.proposed_finish = None;
                self.feedback(format!("{reason}\n{details}").trim_end().to_owned(), seq);
            }
            EventKind::Finished { answer, output } => {
                require(match self.status {
                    Status::Thinking => self.proposed_finish.is_some(),
                    Status::Idle | Status::Observing => !self.records.is_empty(),
                    _ => false,
                })?;
                self.end(
                    Status::Finished,
                    Outcome {
                        exit_reason: ExitReason::Finished,
                        answer: Some(answer.clone()),
                        budget: None,
                        error: None,
                        output: output.clone(),
                    },
                );
            }
            EventKind::UserMessage { text, turn, config } => {
                let refused = |reason: String| StateError::FollowUp {
                    turn: *turn,
                    reason,
                };
                self.check_follow_up().map_err(refused)?;
                if *turn != self.turn() + 1 {
                    return Err(refused(format!("is in turn {}", self.turn())));
                }
                self.open_turn(text, seq);
                if let Some(config) = config {
                    self.config = config.clone();
                }
            }
            EventKind::MessageQueued { text, .. } => {
                require(self.pausable())?;
                self.pending_messages.push(text.clone());
            }
            EventKind::MessagesDelivered { count } => {
                require(
                    self.status.is_step_boundary()
                        && *count > 0
                        && *count as usize == self.pending_messages.len(),
                )?;
                for text in std::mem::take(&mut self.pending_messages) {
                    self.push_history(HistoryItem::UserMessage { text }, seq);
                }
            }
            EventKind::PauseRequested { .. } => {
                self.require_open(illegal)?;
                require(self.pausable())?;
                self.pause_requested = true;
            }
            EventKind::Paused { .. } => {
                require(self.pausable())?;
                self.paused_from = Some(self.status);
                self.pause_requested = false;
                self.status = Status::Paused;
            }
            EventKind::Resumed { .. } | EventKind::Forked { .. } | EventKind::Queued { .. } => {
                self.require_open(illegal)?;
                if matches!(kind, EventKind::Resumed { .. }) {
                    self.pause_requested = false;
                }
                if let Some(status) = self.paused_from.take() {
                    self.status = status;
                }
            }
            EventKind::Cancelled { reason } => {
                self.require_open(illegal)?;
                self.end(
                    Status::Cancelled,
                    Outcome {
                        exit_reason: ExitReason::Cancelled,
                        answer: None,
                        budget: None,
                        error: Some(reason.clone()),
                        output: None,
                    },
                );
            }
            EventKind::Failed {
                exit_reason,
                budget,
                error,
            } => {
                self.require_open(illegal)?;
                self.end(
                    Status::Error,
                    Outcome {
                        exit_reason: *exit_reason,
                        answer: None,
                        budget: budget.clone(),
                        error: error.clone(),
                        output: None,
                    },
                );
            }
        }
        Ok(())
    }

    /// Whether the session runs (or its driver died) and may pause: not
    /// before it starts, not while it waits for a decision, not once ended.
    fn pausable(&self) -> bool {
        matches!(
            self.status,
            Status::Idle
                | Status::Thinking
                | Status::ActionPending
                | Status::ActionExecuting
                | Status::Observing
        )
    }

    /// Fails unless the session has started and not ended.
    fn require_open(&self, illegal: impl Fn() -> StateError) -> Result<(), StateError> {
        if self.status.is_terminal() || self.status == Status::New {
            Err(illegal())
        } else {
            Ok(())
        }
    }

    /// The dispatched call `call_id` of this turn, if it has no result yet.
    fn in_flight(&mut self, call_id: &str) -> Option<&mut TurnCall> {
        self.turn
            .iter_mut()
            .find(|p| p.call.id == call_id && p.dispatched && p.observation.is_none())
    }

    /// A usable response: tool calls open a turn; otherwise it proposes a finish
    /// or a plan for the strategy to accept.
    fn respond(&mut self, actions: &[Action], text: Option<&String>, seq: u64) {
        self.last_output_rejected = false;
        self.rejections_in_a_row = 0;
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
            return;
        }
        self.call_ids
            .extend(calls.iter().map(|call| call.id.clone()));
        self.push_history(
            HistoryItem::ToolCalls {
                calls: calls.clone(),
                text: text.cloned(),
            },
            seq,
        );
        self.turn = calls
            .into_iter()
            .map(|call| TurnCall {
                call,
                dispatched: false,
                observation: None,
                needs_decision: false,
                decision: None,
                queued: false,
            })
            .collect();
        self.status = Status::ActionPending;
    }

    /// What the model is told about output the runtime could not use; the step is over.
    fn feedback(&mut self, message: String, seq: u64) {
        self.push_history(HistoryItem::Feedback { message }, seq);
        self.status = Status::Observing;
    }

    pub(super) fn push_history(&mut self, item: HistoryItem, seq: u64) {
        Arc::make_mut(&mut self.history).push(item);
        self.history_seqs.push(seq);
    }

    /// The history items a summary of seqs `from_seq..=to_seq` replaces: at
    /// least one, whole turns only.
    fn replaced_range(&self, from_seq: u64, to_seq: u64) -> Result<Range<usize>, StateError> {
        let bad = |reason| StateError::BadCompaction {
            from_seq,
            to_seq,
            reason,
        };
        let start = self.history_seqs.partition_point(|seq| *seq < from_seq);
        let end = self.history_seqs.partition_point(|seq| *seq <= to_seq);
        if from_seq > to_seq || start >= end {
            return Err(bad("holds no history item"));
        }
        if self.history_seqs.get(start) != Some(&from_seq) {
            return Err(bad("does not start where a history item starts"));
        }
        let splits = |index: usize| {
            matches!(
                self.history.get(index),
                Some(HistoryItem::Observation { .. })
            )
        };
        if splits(start) || splits(end) {
            return Err(bad("would separate a tool call from its result"));
        }
        Ok(start..end)
    }

    /// Puts `summary` in place of the history items in `range`; strategy records
    /// that point into the history keep pointing at the same items.
    fn compact(&mut self, range: Range<usize>, summary: String, from_seq: u64) {
        let removed = range.len() - 1;
        Arc::make_mut(&mut self.history)
            .splice(range.clone(), [HistoryItem::Summary { text: summary }]);
        self.history_seqs.splice(range.clone(), [from_seq]);
        super::repeats::reindex_after_summary(&mut self.successes, &range);
        for record in &mut self.records {
            if record.history_len >= range.end {
                record.history_len -= removed;
            } else if record.history_len > range.start {
                record.history_len = range.start;
            }
        }
        self.compactions += 1;
    }

    /// Ends the session in `status` with `outcome`.
    fn end(&mut self, status: Status, outcome: Outcome) {
        self.outcome = Some(outcome);
        self.status = status;
    }

    /// Moves a turn whose calls all have results into the history, in proposal order.
    pub(super) fn close_turn_if_complete(&mut self, seq: u64) {
        if self.turn.iter().all(|p| p.observation.is_some()) {
            let turn = std::mem::take(&mut self.turn);
            let before = self.history.len();
            let results = turn
                .iter()
                .filter_map(|p| Some((&p.call, p.observation.as_ref()?)));
            for (position, (call, observation)) in (before..).zip(results) {
                if !observation.is_error {
                    self.successes
                        .insert(super::repeats::call_key(call), position);
                }
            }
            Arc::make_mut(&mut self.history).extend(
                turn.into_iter()
                    .filter_map(|p| p.observation)
                    .map(|observation| HistoryItem::Observation { observation }),
            );
            let added = self.history.len() - before;
            self.history_seqs.extend(std::iter::repeat_n(seq, added));
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
                if let Some(HistoryItem::ToolCalls { calls, .. }) = Arc::make_mut(&mut self.history)
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

    fn count_response(&mut self, usage: Usage) {
        self.steps_used += 1;
        self.count_call(usage);
    }

    /// A model call that is not a step (a summary): its call and tokens count.
    /// The call is counted under the fallback model that answered it, if one
    /// did, else under the session's model.
    fn count_call(&mut self, usage: Usage) {
        self.usage.model_calls += 1;
        self.usage.input_tokens += usage.input_tokens;
        self.usage.output_tokens += usage.output_tokens;
        let model = self
            .answering
            .take()
            .unwrap_or_else(|| self.primary_model());
        let by_model = self.usage.by_model.entry(model).or_default();
        by_model.model_calls += 1;
        by_model.input_tokens += usage.input_tokens;
        by_model.output_tokens += usage.output_tokens;
    }
}
