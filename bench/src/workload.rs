//! The peers' workload: session `i` starts at `x0 = i % 7 + 2` and has K factors
//! `f_j = (i + j) % 5 + 2`; on each turn the model reads the last observation and
//! asks the calculator to combine it with the next factor, then finishes with the
//! result. The model derives `i` from the task text, so one model serves every session,
//! and the turn from the step number.

use agent::history::HistoryItem;
use agent::model::{Model, ModelContext, ModelError, ModelRequest, ModelResponse};
use agent::types::{Action, Finish, ToolCall, Usage};
use async_trait::async_trait;
use serde_json::json;

/// How each turn combines the previous value with the next factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Operation {
    /// The peers' workload (values grow fast: keep K small).
    Multiply,
    /// Bounded values, for long sessions.
    Add,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Self::Multiply => "multiply",
            Self::Add => "add",
        }
    }

    fn apply(self, left: f64, right: f64) -> f64 {
        match self {
            Self::Multiply => left * right,
            Self::Add => left + right,
        }
    }
}

/// The task text of session `i`.
pub fn task(i: usize) -> String {
    format!("workload session {i}")
}

fn session_of(task: &str) -> Option<usize> {
    task.strip_prefix("workload session ")?.parse().ok()
}

fn start(i: usize) -> f64 {
    (i % 7 + 2) as f64
}

fn factor(i: usize, j: usize) -> f64 {
    ((i + j) % 5 + 2) as f64
}

/// The answer session `i` must reach after `k` turns.
pub fn expected(i: usize, k: usize, operation: Operation) -> String {
    let value = (0..k).fold(start(i), |value, j| operation.apply(value, factor(i, j)));
    agent::tools::calculator::format_number(value)
}

/// The workload's model.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadModel {
    /// Tool turns per session.
    pub tool_steps: usize,
    /// How turns combine values.
    pub operation: Operation,
}

#[async_trait]
impl Model for WorkloadModel {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        let i = session_of(&request.task).ok_or_else(|| ModelError::Internal {
            message: format!("`{}` is not a workload task", request.task),
        })?;
        // The last observation, found from the end, and the turns so far (one
        // call per step): constant work per step, so a long session measures the
        // runtime rather than this model.
        let last = request.history.iter().rev().find_map(|item| match item {
            HistoryItem::Observation { observation } => Some(observation.content.as_str()),
            _ => None,
        });
        let previous = match last {
            Some(text) => text.parse::<f64>().map_err(|_| ModelError::Internal {
                message: format!("observation `{text}` is not a number"),
            })?,
            None => start(i),
        };
        let n = ctx.step.saturating_sub(1) as usize;
        let action = if n < self.tool_steps {
            Action::ToolCall(ToolCall {
                id: format!("call_{}_1", ctx.step),
                tool_name: "calculator".into(),
                arguments: json!({"left": previous, "operation": self.operation.name(), "right": factor(i, n)}),
            })
        } else {
            Action::Finish(Finish {
                answer: agent::tools::calculator::format_number(previous),
            })
        };
        Ok(ModelResponse {
            actions: vec![action],
            usage: Usage::default(),
            text: None,
            model: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_answers_follow_the_peers_formula() {
        assert_eq!(
            expected(0, 4, Operation::Multiply),
            (2 * 2 * 3 * 4 * 5).to_string()
        );
        assert_eq!(expected(3, 2, Operation::Add), (5 + 5 + 6).to_string());
    }
}
