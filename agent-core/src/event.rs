//! Events: the facts of a session. A session's log is a gap-free sequence of
//! events numbered 1, 2, 3…; its state is a fold of that log.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::layer::CircuitState;
use crate::result::{BudgetKind, ExitReason};
use crate::types::{Action, Observation, ToolCall, Usage};

/// A human's decision on a call that needed approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run the call, with these arguments instead of the proposed ones if given.
    Approved {
        /// Edited arguments.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<Value>,
    },
    /// Do not run it; the model receives the reason as an error observation.
    Denied {
        /// Why.
        reason: String,
    },
}

impl ApprovalDecision {
    /// `approved` or `denied`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Approved { .. } => "approved",
            Self::Denied { .. } => "denied",
        }
    }
}

/// Why a run that a limit ended asked the model for one last answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LastAnswerKind {
    /// A step, token, call or wall-time limit ended the run (`--on-limit
    /// summarise`): the answer is written from what was gathered.
    Partial,
    /// The model's output was invalid too many times in a row: the answer is
    /// plain text, asked for without tools.
    Degraded,
}

/// Version of the event JSON layout; written on every event.
pub const SCHEMA_VERSION: u32 = 1;

/// One fact in a session's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Layout version of this event.
    pub schema_version: u32,
    /// The session the event belongs to.
    pub session_id: String,
    /// Position in the log: 1 for the first event, no gaps.
    pub seq: u64,
    /// When the event was created, in milliseconds since the Unix epoch.
    pub at: u64,
    /// What happened.
    pub kind: EventKind,
}

impl Event {
    /// A new event stamped with the current time.
    pub fn new(session_id: impl Into<String>, seq: u64, kind: EventKind) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            session_id: session_id.into(),
            seq,
            at: now_millis(),
            kind,
        }
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The kinds of facts a session records. A name is never reused with a new meaning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// The session began. `config` holds everything a resume reuses.
    SessionStarted {
        /// The task text.
        task: String,
        /// Name of the execution strategy.
        strategy: String,
        /// The recorded run configuration (flags, model spec without keys, …).
        config: Value,
    },
    /// The engine asked the model for step `step` (1-based).
    ModelRequested {
        /// The step this request is for.
        step: u32,
        /// Input tokens of the request as the session's context policy counted
        /// them; absent without a policy.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context_tokens: Option<u64>,
    },
    /// The model answered with usable actions.
    ModelResponded {
        /// The proposed actions, in the model's order.
        actions: Vec<Action>,
        /// Tokens this call consumed.
        usage: Usage,
        /// Free text that came with the actions, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// The model's output could not be turned into actions; it becomes feedback.
    ModelOutputRejected {
        /// The raw output.
        raw: String,
        /// What was wrong, as the model will be told.
        error: String,
        /// Tokens this call consumed.
        usage: Usage,
    },
    /// The oldest turns of the history were replaced by a summary the model wrote
    /// (not a step; it counts as a model call and its tokens count).
    ContextCompacted {
        /// The first seq whose history the summary replaces.
        from_seq: u64,
        /// The last seq whose history the summary replaces.
        to_seq: u64,
        /// The summary, which the model sees in place of those turns.
        summary: String,
        /// Tokens of the request before the summary, as the policy counts them.
        tokens_before: u64,
        /// Tokens of the request after it.
        tokens_after: u64,
        /// Tokens the summary request consumed.
        usage: Usage,
    },
    /// The model call went to the next fallback model because `from` failed
    /// for good (not a step).
    ModelFallback {
        /// The model spec that failed.
        from: String,
        /// The model spec asked instead.
        to: String,
        /// Why `from` failed.
        reason: String,
    },
    /// A model layer retried after a transient failure (not a step).
    ModelRetried {
        /// 1 for the first retry.
        attempt: u32,
        /// What failed.
        error: String,
        /// How long it waited before retrying, in milliseconds.
        delay_ms: u64,
    },
    /// A tool call was handed to its tool.
    ActionDispatched {
        /// The call.
        call: ToolCall,
    },
    /// Dispatched calls were handed to the work queue, for workers to run.
    ActionsQueued {
        /// The calls, in proposal order.
        call_ids: Vec<String>,
    },
    /// An attempt of a call failed and a retry follows.
    ActionAttemptFailed {
        /// The call.
        call_id: String,
        /// Its tool.
        tool_name: String,
        /// The attempt that failed, 1 for the first.
        attempt: u32,
        /// Why.
        error: String,
        /// Whether the failure was retryable.
        retryable: bool,
        /// The wait before the next attempt, in milliseconds.
        delay_ms: u64,
    },
    /// A circuit breaker around a tool changed state.
    CircuitChanged {
        /// The tool.
        tool_name: String,
        /// Its new state.
        state: CircuitState,
    },
    /// A tool call has its result (possibly an error observation).
    ActionCompleted {
        /// The result.
        observation: Observation,
    },
    /// Calls that wait for a human decision before they may run.
    ApprovalRequested {
        /// The calls, in proposal order.
        calls: Vec<ToolCall>,
    },
    /// A human decided one call that waited for approval.
    ApprovalDecided {
        /// The call.
        call_id: String,
        /// Its tool.
        tool_name: String,
        /// Approve (possibly with edited arguments) or deny.
        decision: ApprovalDecision,
        /// Who decided.
        by: String,
        /// Calls of the turn still waiting for a decision after this one.
        remaining: u32,
    },
    /// State a strategy owns (a plan, a step's result, a DAG node's output).
    Strategy {
        /// The strategy that wrote it.
        strategy: String,
        /// What it records, such as `plan_created`.
        name: String,
        /// The record.
        data: Value,
        /// Tokens of a model call made for it (such a record counts as a step).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// The strategy refused the model's response (a plan where none fits, an
    /// invalid plan); the model gets the reason as feedback.
    ResponseRefused {
        /// What was wrong.
        reason: String,
    },
    /// A dispatched call repeats an earlier successful call of an idempotent
    /// tool (same tool, same arguments); it is not run, and its observation,
    /// recorded next, quotes the earlier result.
    RepeatedCallAnswered {
        /// The repeating call.
        call_id: String,
        /// Its tool.
        tool_name: String,
        /// The earlier call whose result it got.
        earlier_call_id: String,
    },
    /// A completion gate refused the proposed finish; the model gets the reason.
    FinishRejected {
        /// The answer that was proposed.
        answer: String,
        /// One line saying what failed.
        reason: String,
        /// The evidence (for example the test output).
        details: String,
    },
    /// The session ended with an answer.
    Finished {
        /// The answer.
        answer: String,
        /// The answer as JSON, validated against the session's output schema;
        /// absent without one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
    },
    /// One last request after a limit or repeated invalid output ended the run
    /// (not a step; it counts as a model call, not against the exhausted
    /// budget). Recorded before the `failed` event it precedes.
    LastAnswer {
        /// Why it was asked for.
        kind: LastAnswerKind,
        /// The text the model gave; absent when it gave none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answer: Option<String>,
        /// Why there is no answer, when there is none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Tokens the request consumed.
        usage: Usage,
    },
    /// The model looked back over the steps so far in a separate request
    /// (`--reflect-every`); its note enters the history the next decision sees
    /// (not a step; it counts as a model call).
    Reflection {
        /// The steps answered when it was asked.
        step: u32,
        /// What the model said about its progress.
        note: String,
        /// Tokens the request consumed.
        usage: Usage,
    },
    /// A person added a message to a session whose last turn ended: turn
    /// `turn` begins with the whole history, the previous answer included.
    UserMessage {
        /// The message.
        text: String,
        /// The turn it opens: 2 for the first follow-up.
        turn: u32,
        /// The configuration this turn and later ones run with, when the
        /// sender changed it (another model, tools, budgets); absent: the one
        /// recorded before holds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        config: Option<Value>,
    },
    /// A person added a message to a session while it runs (its `on_message`
    /// policy is `enqueue` or `interrupt`): it waits until the driver delivers
    /// it at its next step boundary, so it never splits a tool call from its
    /// result.
    MessageQueued {
        /// The message.
        text: String,
        /// Whether a model call in flight is abandoned for it (`interrupt`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        interrupt: bool,
    },
    /// The driver put the queued messages into the history, in the order they
    /// came, before its next decision.
    MessagesDelivered {
        /// How many: every message queued so far.
        count: u32,
    },
    /// Someone asked a running session to pause (`agent pause`): the process
    /// driving it pauses it after its current step.
    PauseRequested {
        /// Who asked.
        by: String,
    },
    /// The session stopped on request until a resume continues it from here.
    Paused {
        /// Why, for people.
        reason: String,
    },
    /// A stopped session was picked up again by an engine.
    Resumed {
        /// Why, for people (for example `resume`).
        reason: String,
    },
    /// The session waits in the work queue for a worker to drive it (after
    /// `agent submit`, an approval of a submitted session, `agent resume --detach`).
    Queued {
        /// Why, for people (for example `submitted`).
        reason: String,
    },
    /// This session was forked from another: the events before this one are a copy
    /// of the parent's log up to `at`.
    Forked {
        /// The session it was copied from.
        parent: String,
        /// The last seq copied.
        at: u64,
    },
    /// The session was cancelled; nothing runs after this.
    Cancelled {
        /// Who or what cancelled it.
        reason: String,
    },
    /// The session ended without an answer.
    Failed {
        /// Why it ended.
        exit_reason: ExitReason,
        /// The budget that ran out, for `budget_exceeded`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget: Option<BudgetKind>,
        /// What went wrong.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

impl EventKind {
    /// The snake_case name of this kind, as written in the log.
    pub fn name(&self) -> &'static str {
        match self {
            Self::SessionStarted { .. } => "session_started",
            Self::ModelRequested { .. } => "model_requested",
            Self::ModelResponded { .. } => "model_responded",
            Self::ModelOutputRejected { .. } => "model_output_rejected",
            Self::ContextCompacted { .. } => "context_compacted",
            Self::ModelFallback { .. } => "model_fallback",
            Self::ModelRetried { .. } => "model_retried",
            Self::ActionDispatched { .. } => "action_dispatched",
            Self::ActionsQueued { .. } => "actions_queued",
            Self::ActionAttemptFailed { .. } => "action_attempt_failed",
            Self::CircuitChanged { .. } => "circuit_changed",
            Self::ActionCompleted { .. } => "action_completed",
            Self::ApprovalRequested { .. } => "approval_requested",
            Self::ApprovalDecided { .. } => "approval_decided",
            Self::Strategy { .. } => "strategy",
            Self::ResponseRefused { .. } => "response_refused",
            Self::RepeatedCallAnswered { .. } => "repeated_call_answered",
            Self::FinishRejected { .. } => "finish_rejected",
            Self::Finished { .. } => "finished",
            Self::LastAnswer { .. } => "last_answer",
            Self::Reflection { .. } => "reflection",
            Self::UserMessage { .. } => "user_message",
            Self::MessageQueued { .. } => "message_queued",
            Self::MessagesDelivered { .. } => "messages_delivered",
            Self::PauseRequested { .. } => "pause_requested",
            Self::Paused { .. } => "paused",
            Self::Resumed { .. } => "resumed",
            Self::Queued { .. } => "queued",
            Self::Forked { .. } => "forked",
            Self::Cancelled { .. } => "cancelled",
            Self::Failed { .. } => "failed",
        }
    }
}
