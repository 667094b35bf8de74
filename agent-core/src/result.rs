//! How a run ends: `ExitReason`, the budget that ran out, and the `RunResult`
//! printed by `agent run` and returned by the engine.

use std::fmt;
use std::str::FromStr;

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::types::ToolCall;

/// Why a run stopped. Each reason has a fixed process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// The strategy accepted a finish; the answer is set.
    Finished,
    /// A bug: a panic or an unexpected error.
    InternalError,
    /// No finish within the step budget.
    MaxStepsExceeded,
    /// The last step's model output was still invalid.
    InvalidModelOutput,
    /// A budget other than steps ran out.
    BudgetExceeded,
    /// The session was cancelled.
    Cancelled,
    /// The model provider failed for good, or a replay diverged.
    ProviderError,
    /// The session waits for a human decision.
    AwaitingApproval,
    /// The session was paused on request (`agent pause`); a resume continues it.
    Paused,
}

impl ExitReason {
    /// The process exit code `agent` uses for this reason.
    pub fn exit_code(self) -> i32 {
        match self {
            Self::Finished => 0,
            Self::InternalError => 1,
            Self::MaxStepsExceeded => 3,
            Self::InvalidModelOutput => 4,
            Self::BudgetExceeded => 5,
            Self::Cancelled => 6,
            Self::ProviderError => 7,
            Self::AwaitingApproval => 10,
            Self::Paused => 11,
        }
    }

    /// The snake_case name used in JSON and traces.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Finished => "finished",
            Self::InternalError => "internal_error",
            Self::MaxStepsExceeded => "max_steps_exceeded",
            Self::InvalidModelOutput => "invalid_model_output",
            Self::BudgetExceeded => "budget_exceeded",
            Self::Cancelled => "cancelled",
            Self::ProviderError => "provider_error",
            Self::AwaitingApproval => "awaiting_approval",
            Self::Paused => "paused",
        }
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which budget ran out, written as `tokens`, `model_calls`, `tool_calls`,
/// `tool_calls:<tool>` or `wall_time`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BudgetKind {
    /// Input plus output tokens of the session.
    Tokens,
    /// Number of model calls.
    ModelCalls,
    /// Number of tool calls in total.
    ToolCalls,
    /// Number of calls of one tool.
    ToolCallsOf(String),
    /// Wall-clock time of the run.
    WallTime,
}

impl fmt::Display for BudgetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tokens => f.write_str("tokens"),
            Self::ModelCalls => f.write_str("model_calls"),
            Self::ToolCalls => f.write_str("tool_calls"),
            Self::ToolCallsOf(tool) => write!(f, "tool_calls:{tool}"),
            Self::WallTime => f.write_str("wall_time"),
        }
    }
}

/// A budget name that is not one of the known kinds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown budget `{0}`: expected tokens, model_calls, tool_calls, tool_calls:<tool> or wall_time"
)]
pub struct UnknownBudget(pub String);

impl FromStr for BudgetKind {
    type Err = UnknownBudget;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "tokens" => Ok(Self::Tokens),
            "model_calls" => Ok(Self::ModelCalls),
            "tool_calls" => Ok(Self::ToolCalls),
            "wall_time" => Ok(Self::WallTime),
            other => match other.strip_prefix("tool_calls:") {
                Some(tool) if !tool.is_empty() => Ok(Self::ToolCallsOf(tool.to_owned())),
                _ => Err(UnknownBudget(other.to_owned())),
            },
        }
    }
}

impl Serialize for BudgetKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for BudgetKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Totals over a whole session, across resumes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunUsage {
    /// Prompt tokens of all model calls.
    pub input_tokens: u64,
    /// Completion tokens of all model calls.
    pub output_tokens: u64,
    /// Model responses received, valid or not.
    pub model_calls: u64,
    /// Tool calls dispatched.
    pub tool_calls: u64,
    /// The model calls and tokens of each model that answered, by the name the
    /// session knows it by (its model spec); left out when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_model: BTreeMap<String, ModelUsage>,
}

/// What one model of a session answered: calls and tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelUsage {
    /// Prompt tokens of its calls.
    pub input_tokens: u64,
    /// Completion tokens of its calls.
    pub output_tokens: u64,
    /// Its responses, valid or not.
    pub model_calls: u64,
}

/// The structured outcome of a run, exactly as `CONTRACT.md` specifies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The session this run belongs to.
    pub session_id: String,
    /// Why the run stopped.
    pub exit_reason: ExitReason,
    /// The answer, set when the run finished.
    pub answer: Option<String>,
    /// Model responses in the whole session, valid or not.
    pub steps_used: u32,
    /// Session totals.
    pub usage: RunUsage,
    /// The budget that ran out, for `budget_exceeded`.
    pub budget: Option<BudgetKind>,
    /// What went wrong, for failures.
    pub error: Option<String>,
    /// Calls that wait for a human decision, for `awaiting_approval`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<ToolCall>,
    /// Set when a limit ended the run and `answer` is what the model wrote from
    /// what it had gathered in one last request (`--on-limit summarise`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// Set when repeated invalid output ended the run and `answer` is the
    /// plain-text answer of one last request without tools.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub degraded: bool,
    /// The finish's answer as JSON that validated against the output schema,
    /// when the session has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The conversation turn this result ends: 1 for the run that started the
    /// session, one more for each follow-up message (`agent send`).
    #[serde(default = "first_turn")]
    pub turn: u32,
}

/// The turn of a result written before turns existed.
fn first_turn() -> u32 {
    1
}

impl RunResult {
    /// The process exit code for this result.
    pub fn exit_code(&self) -> i32 {
        self.exit_reason.exit_code()
    }

    /// The validated output as a `T` (for a session built with
    /// `Engine::builder(..).output::<T>()`); `None` without an output.
    pub fn output_as<T: serde::de::DeserializeOwned>(
        &self,
    ) -> Option<Result<T, serde_json::Error>> {
        self.output.clone().map(serde_json::from_value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_kinds_round_trip_through_their_names() {
        for kind in [
            BudgetKind::Tokens,
            BudgetKind::ModelCalls,
            BudgetKind::ToolCalls,
            BudgetKind::ToolCallsOf("calculator".into()),
            BudgetKind::WallTime,
        ] {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(serde_json::from_str::<BudgetKind>(&json).unwrap(), kind);
        }
        assert!("tool_calls:".parse::<BudgetKind>().is_err());
        assert!("steps".parse::<BudgetKind>().is_err());
    }

    #[test]
    fn run_result_serialises_with_the_contract_fields() {
        let result = RunResult {
            session_id: "s".into(),
            exit_reason: ExitReason::BudgetExceeded,
            answer: None,
            steps_used: 2,
            usage: RunUsage::default(),
            budget: Some(BudgetKind::ToolCallsOf("sleep".into())),
            error: None,
            pending: Vec::new(),
            partial: false,
            degraded: false,
            output: None,
            turn: 1,
        };
        let value = serde_json::to_value(&result).unwrap();
        assert_eq!(value["exit_reason"], "budget_exceeded");
        assert_eq!(value["budget"], "tool_calls:sleep");
        assert!(value.get("pending").is_none());
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "session_id",
                "exit_reason",
                "answer",
                "steps_used",
                "usage",
                "budget",
                "error",
                "turn"
            ]
        );
    }
}
