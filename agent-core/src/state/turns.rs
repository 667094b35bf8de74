//! Conversation turns: a follow-up message opens turn N + 1 of a session whose
//! last turn ended, with the whole history and the previous answer; budgets
//! count from where the turn began unless they are session-wide.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{SessionState, Status};
use crate::history::HistoryItem;
use crate::types::Observation;

/// What the session had spent when the current turn began.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct TurnStart {
    steps_used: u32,
    model_calls: u64,
    tokens: u64,
    tool_calls: u64,
    calls_per_tool: BTreeMap<String, u64>,
}

/// What a session, or its current turn, has spent, as budgets count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spent<'a> {
    /// Model responses, valid or not.
    pub steps: u32,
    /// Model calls (steps, summaries, reflections, last answers).
    pub model_calls: u64,
    /// Input plus output tokens.
    pub tokens: u64,
    /// Tool calls dispatched.
    pub tool_calls: u64,
    calls_per_tool: &'a BTreeMap<String, u64>,
    before: Option<&'a BTreeMap<String, u64>>,
}

impl Spent<'_> {
    /// Calls dispatched to `tool`.
    pub fn calls_of(&self, tool: &str) -> u64 {
        let now = self.calls_per_tool.get(tool).copied().unwrap_or(0);
        let before = self
            .before
            .and_then(|before| before.get(tool).copied())
            .unwrap_or(0);
        now.saturating_sub(before)
    }
}

impl SessionState {
    /// The conversation turn the session is in: 1, then one more for each
    /// follow-up message.
    pub fn turn(&self) -> u32 {
        self.follow_ups + 1
    }

    /// What the whole session has spent.
    pub fn session_spent(&self) -> Spent<'_> {
        Spent {
            steps: self.steps_used,
            model_calls: self.usage.model_calls,
            tokens: self.usage.input_tokens + self.usage.output_tokens,
            tool_calls: self.usage.tool_calls,
            calls_per_tool: &self.calls_per_tool,
            before: None,
        }
    }

    /// What the current turn has spent (the whole session in turn 1).
    pub fn turn_spent(&self) -> Spent<'_> {
        let session = self.session_spent();
        let start = &self.turn_start;
        Spent {
            steps: session.steps.saturating_sub(start.steps_used),
            model_calls: session.model_calls.saturating_sub(start.model_calls),
            tokens: session.tokens.saturating_sub(start.tokens),
            tool_calls: session.tool_calls.saturating_sub(start.tool_calls),
            calls_per_tool: &self.calls_per_tool,
            before: Some(&start.calls_per_tool),
        }
    }

    /// Whether a follow-up message may open the next turn: the last turn must
    /// have ended with a result, not been cancelled, and left no tool call
    /// running. The error says why not and what to do instead.
    pub fn check_follow_up(&self) -> Result<(), String> {
        match self.status {
            Status::Finished => Ok(()),
            Status::Error => match self.turn.iter().find(|p| p.dispatched && p.observation.is_none()) {
                Some(running) => Err(format!(
                    "its last turn ended while call `{}` of `{}` had no result; fork the session before that call to continue",
                    running.call.id, running.call.tool_name
                )),
                None => Ok(()),
            },
            Status::Cancelled => Err(
                "it was cancelled; fork it (`agent fork`) to continue from an earlier point".into(),
            ),
            Status::AwaitingApproval => Err(
                "it waits for an approval; approve or deny its calls (`agent approve`, `agent deny`) and resume it first".into(),
            ),
            Status::Paused => Err(
                "it is paused in the middle of a turn; resume it (`agent resume`) first".into(),
            ),
            Status::New => Err("it has not started".into()),
            Status::Idle
            | Status::Thinking
            | Status::ActionPending
            | Status::ActionExecuting
            | Status::Observing => Err(
                "it is still running; wait for its result (`agent wait`) or cancel it".into(),
            ),
        }
    }

    /// Opens the next turn with `text`: calls the last turn left unrun get an
    /// error observation, the previous answer, messages that came while the
    /// last turn ran and were not delivered, and the message enter the history,
    /// and the turn's budgets start from what was spent so far.
    pub(super) fn open_turn(&mut self, text: &str, seq: u64) {
        let previous = self.run_result();
        let ended_as = previous
            .as_ref()
            .map_or("ended", |result| result.exit_reason.as_str());
        if !self.turn.is_empty() {
            let note = format!("not run: the turn ended ({ended_as}) before this call ran");
            for pending in &mut self.turn {
                if pending.observation.is_none() {
                    pending.observation = Some(Observation::error(&pending.call, note.clone()));
                }
            }
            self.close_turn_if_complete(seq);
        }
        if let Some(answer) = previous.and_then(|result| result.answer) {
            self.push_history(HistoryItem::AssistantText { text: answer }, seq);
        }
        for text in std::mem::take(&mut self.pending_messages) {
            self.push_history(HistoryItem::UserMessage { text }, seq);
        }
        self.push_history(
            HistoryItem::UserMessage {
                text: text.to_owned(),
            },
            seq,
        );
        let spent = self.session_spent();
        self.turn_start = TurnStart {
            steps_used: spent.steps,
            model_calls: spent.model_calls,
            tokens: spent.tokens,
            tool_calls: spent.tool_calls,
            calls_per_tool: self.calls_per_tool.clone(),
        };
        self.follow_ups += 1;
        self.outcome = None;
        self.last_answer = None;
        self.proposed_finish = None;
        self.proposed_plan = None;
        self.last_output_rejected = false;
        self.rejections_in_a_row = 0;
        self.answering = None;
        self.status = Status::Idle;
    }
}
