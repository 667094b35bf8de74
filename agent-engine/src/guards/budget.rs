//! Budgets: the limits a run must stay within. [`Budgets`] is the guard that
//! counts (steps, tokens, calls) before each model call and each dispatch;
//! [`WallTime`] is the guard whose deadline ends a run that takes too long.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use agent_core::event::EventKind;
use agent_core::guard::{Checkpoint, Deadline, Guard, GuardContext, Verdict};
use agent_core::result::{BudgetKind, ExitReason};
use agent_core::state::{SessionState, Spent};
use agent_core::types::ToolCall;

/// Step count used when none is configured.
pub const DEFAULT_MAX_STEPS: u32 = 10;

/// Invalid model outputs in a row that end a run, when none is configured.
pub const DEFAULT_MAX_INVALID: u32 = 3;

/// Limits of one session. `None` means unlimited. The step, token and call
/// limits count per conversation turn (a session with no follow-up message
/// has one turn), or over the whole session when `session_wide` is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budgets {
    /// Model responses (valid or not).
    pub max_steps: u32,
    /// Input plus output tokens.
    pub max_tokens: Option<u64>,
    /// Model calls.
    pub max_model_calls: Option<u64>,
    /// Tool calls.
    pub max_tool_calls: Option<u64>,
    /// Tool calls per tool name.
    pub max_calls_per_tool: BTreeMap<String, u64>,
    /// Wall time of one `run` or `resume`.
    pub timeout: Option<Duration>,
    /// Invalid model outputs in a row after which the run ends with
    /// `invalid_model_output`; 0 means no such limit.
    pub max_invalid: u32,
    /// Whether the limits count over the whole session instead of per turn
    /// (`--session-budget`).
    pub session_wide: bool,
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            max_steps: DEFAULT_MAX_STEPS,
            max_tokens: None,
            max_model_calls: None,
            max_tool_calls: None,
            max_calls_per_tool: BTreeMap::new(),
            timeout: None,
            max_invalid: DEFAULT_MAX_INVALID,
            session_wide: false,
        }
    }
}

/// What a run that a limit ends does first: stop at once, or ask the model
/// for one last answer from what it has gathered (`partial` in the result).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnLimit {
    /// End the run with no answer.
    Stop,
    /// One last request, not counted against the exhausted budget.
    #[default]
    Summarise,
}

impl OnLimit {
    /// `stop` or `summarise`, as the flag spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Summarise => "summarise",
        }
    }
}

/// An `--on-limit` value that is neither `stop` nor `summarise`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown --on-limit `{0}`: expected stop or summarise")]
pub struct UnknownOnLimit(pub String);

impl std::str::FromStr for OnLimit {
    type Err = UnknownOnLimit;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "stop" => Ok(Self::Stop),
            "summarise" | "summarize" => Ok(Self::Summarise),
            other => Err(UnknownOnLimit(other.to_owned())),
        }
    }
}

/// A budget check that ends the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exhausted {
    /// `max_steps_exceeded`, `invalid_model_output` or `budget_exceeded`.
    pub exit_reason: ExitReason,
    /// The budget, for `budget_exceeded`.
    pub budget: Option<BudgetKind>,
    /// A sentence saying which limit was reached.
    pub error: String,
}

impl Exhausted {
    /// The `failed` event that ends the run.
    pub fn into_event(self) -> EventKind {
        EventKind::Failed {
            exit_reason: self.exit_reason,
            budget: self.budget,
            error: Some(self.error),
        }
    }

    fn budget(kind: BudgetKind, error: String) -> Self {
        Self {
            exit_reason: ExitReason::BudgetExceeded,
            budget: Some(kind),
            error,
        }
    }
}

impl Budgets {
    /// What the limits count against: the current turn, or the whole session.
    fn spent<'a>(&self, state: &'a SessionState) -> Spent<'a> {
        if self.session_wide {
            state.session_spent()
        } else {
            state.turn_spent()
        }
    }

    /// Where the limits count, for messages: empty in a session's first turn.
    fn scope(&self, state: &SessionState) -> String {
        if self.session_wide || state.turn() == 1 {
            String::new()
        } else {
            format!(" in turn {}", state.turn())
        }
    }

    /// Whether another model call is allowed.
    pub fn before_model_call(&self, state: &SessionState) -> Option<Exhausted> {
        let spent = self.spent(state);
        let scope = self.scope(state);
        if spent.steps >= self.max_steps {
            let (exit_reason, error) = if state.last_output_rejected() {
                (
                    ExitReason::InvalidModelOutput,
                    format!(
                        "the model's output was still invalid at step {}, the last of {} allowed{scope}",
                        state.steps_used(),
                        self.max_steps
                    ),
                )
            } else {
                (
                    ExitReason::MaxStepsExceeded,
                    format!("no finish within {} steps{scope}", self.max_steps),
                )
            };
            return Some(Exhausted {
                exit_reason,
                budget: None,
                error,
            });
        }
        let rejected = state.rejections_in_a_row();
        if self.max_invalid > 0 && rejected >= self.max_invalid {
            return Some(Exhausted {
                exit_reason: ExitReason::InvalidModelOutput,
                budget: None,
                error: format!(
                    "the model's output was invalid {rejected} times in a row (the limit is {})",
                    self.max_invalid
                ),
            });
        }
        if let Some(max) = self.max_model_calls.filter(|max| spent.model_calls >= *max) {
            return Some(Exhausted::budget(
                BudgetKind::ModelCalls,
                format!("model call budget of {max} used up{scope}"),
            ));
        }
        let tokens = spent.tokens;
        if let Some(max) = self.max_tokens.filter(|max| tokens >= *max) {
            return Some(Exhausted::budget(
                BudgetKind::Tokens,
                format!("token budget of {max} used up{scope} ({tokens} tokens)"),
            ));
        }
        None
    }

    /// Whether all of `calls` may be dispatched. A response that pushed the
    /// session past its token budget has its calls refused.
    pub fn before_dispatch(&self, state: &SessionState, calls: &[ToolCall]) -> Option<Exhausted> {
        let spent = self.spent(state);
        let scope = self.scope(state);
        let tokens = spent.tokens;
        if let Some(max) = self.max_tokens.filter(|max| tokens > *max) {
            return Some(Exhausted::budget(
                BudgetKind::Tokens,
                format!("token budget of {max} exceeded{scope} ({tokens} tokens)"),
            ));
        }
        let used = spent.tool_calls;
        let wanted = calls.len() as u64;
        if let Some(max) = self.max_tool_calls.filter(|max| used + wanted > *max) {
            return Some(Exhausted::budget(
                BudgetKind::ToolCalls,
                format!(
                    "tool call budget of {max} would be exceeded{scope} by {wanted} more call(s) after {used}"
                ),
            ));
        }
        for (tool, max) in &self.max_calls_per_tool {
            let wanted = calls.iter().filter(|call| &call.tool_name == tool).count() as u64;
            let used = spent.calls_of(tool);
            if wanted > 0 && used + wanted > *max {
                return Some(Exhausted::budget(
                    BudgetKind::ToolCallsOf(tool.clone()),
                    format!("budget of {max} call(s) of `{tool}` would be exceeded{scope}"),
                ));
            }
        }
        None
    }
}

#[async_trait]
impl Guard for Budgets {
    async fn check(&self, checkpoint: Checkpoint<'_>, ctx: &GuardContext<'_>) -> Verdict {
        let exhausted = match checkpoint {
            Checkpoint::ModelCall | Checkpoint::Work(_) => self.before_model_call(ctx.state),
            Checkpoint::Dispatch(calls) => self.before_dispatch(ctx.state, calls),
            Checkpoint::Finish(_) => None,
        };
        exhausted.map_or(Verdict::Proceed, |exhausted| {
            Verdict::Intervene(exhausted.into_event())
        })
    }
}

/// The wall-time budget of one `run` or `resume`: past it the run ends with
/// `budget_exceeded` (`wall_time`), cancelling a model or tool call in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallTime(pub Duration);

impl WallTime {
    fn exceeded(self) -> EventKind {
        EventKind::Failed {
            exit_reason: ExitReason::BudgetExceeded,
            budget: Some(BudgetKind::WallTime),
            error: Some(format!(
                "the run exceeded its wall-time budget of {}s",
                self.0.as_secs_f64()
            )),
        }
    }
}

#[async_trait]
impl Guard for WallTime {
    async fn check(&self, _checkpoint: Checkpoint<'_>, ctx: &GuardContext<'_>) -> Verdict {
        if ctx.started.elapsed() >= self.0 {
            Verdict::Intervene(self.exceeded())
        } else {
            Verdict::Proceed
        }
    }

    fn deadline(&self, started: Instant) -> Option<Deadline> {
        Some(Deadline {
            at: started.checked_add(self.0)?,
            event: self.exceeded(),
        })
    }
}
