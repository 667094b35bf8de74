//! Budgets: the limits a run must stay within, and the checks the engine makes
//! before each model call and each dispatch.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::result::{BudgetKind, ExitReason};
use crate::state::SessionState;
use crate::types::ToolCall;

/// Step count used when none is configured.
pub const DEFAULT_MAX_STEPS: u32 = 10;

/// Limits of one session. `None` means unlimited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budgets {
    /// Model responses (valid or not) in the whole session.
    pub max_steps: u32,
    /// Input plus output tokens in the whole session.
    pub max_tokens: Option<u64>,
    /// Model calls in the whole session.
    pub max_model_calls: Option<u64>,
    /// Tool calls in the whole session.
    pub max_tool_calls: Option<u64>,
    /// Tool calls per tool name in the whole session.
    pub max_calls_per_tool: BTreeMap<String, u64>,
    /// Wall time of one `run` or `resume`.
    pub timeout: Option<Duration>,
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
    fn budget(kind: BudgetKind, error: String) -> Self {
        Self {
            exit_reason: ExitReason::BudgetExceeded,
            budget: Some(kind),
            error,
        }
    }
}

impl Budgets {
    /// Whether another model call is allowed.
    pub fn before_model_call(&self, state: &SessionState) -> Option<Exhausted> {
        let usage = state.usage();
        if state.steps_used() >= self.max_steps {
            let exit_reason = if state.last_output_rejected() {
                ExitReason::InvalidModelOutput
            } else {
                ExitReason::MaxStepsExceeded
            };
            let error = if state.last_output_rejected() {
                format!(
                    "the model's output was still invalid at step {}, the last of {} allowed",
                    state.steps_used(),
                    self.max_steps
                )
            } else {
                format!("no finish within {} steps", self.max_steps)
            };
            return Some(Exhausted {
                exit_reason,
                budget: None,
                error,
            });
        }
        if let Some(max) = self.max_model_calls.filter(|max| usage.model_calls >= *max) {
            return Some(Exhausted::budget(
                BudgetKind::ModelCalls,
                format!("model call budget of {max} used up"),
            ));
        }
        let tokens = usage.input_tokens + usage.output_tokens;
        if let Some(max) = self.max_tokens.filter(|max| tokens >= *max) {
            return Some(Exhausted::budget(
                BudgetKind::Tokens,
                format!("token budget of {max} used up ({tokens} tokens)"),
            ));
        }
        None
    }

    /// Whether all of `calls` may be dispatched. A response that pushed the
    /// session past its token budget has its calls refused.
    pub fn before_dispatch(&self, state: &SessionState, calls: &[ToolCall]) -> Option<Exhausted> {
        let usage = state.usage();
        let tokens = usage.input_tokens + usage.output_tokens;
        if let Some(max) = self.max_tokens.filter(|max| tokens > *max) {
            return Some(Exhausted::budget(
                BudgetKind::Tokens,
                format!("token budget of {max} exceeded ({tokens} tokens)"),
            ));
        }
        let used = state.usage().tool_calls;
        let wanted = calls.len() as u64;
        if let Some(max) = self.max_tool_calls.filter(|max| used + wanted > *max) {
            return Some(Exhausted::budget(
                BudgetKind::ToolCalls,
                format!(
                    "tool call budget of {max} would be exceeded by {wanted} more call(s) after {used}"
                ),
            ));
        }
        for (tool, max) in &self.max_calls_per_tool {
            let wanted = calls.iter().filter(|call| &call.tool_name == tool).count() as u64;
            let used = state.calls_of(tool);
            if wanted > 0 && used + wanted > *max {
                return Some(Exhausted::budget(
                    BudgetKind::ToolCallsOf(tool.clone()),
                    format!("budget of {max} call(s) of `{tool}` would be exceeded"),
                ));
            }
        }
        None
    }
}
