//! Plan-and-Execute: the model first writes a plan (checked: at least one step,
//! each with a goal; an invalid plan becomes feedback). Each step then runs as a
//! bounded ReAct sub-loop whose finish is the step's result. A step that runs out
//! of its steps triggers one replan that keeps the completed steps. A last model
//! call composes the answer from the step results. The plan and every step result
//! are strategy events, so a resume continues at the step where it stopped.

use std::sync::Arc;

use agent_core::state::{SessionState, Status};
use agent_core::strategy::{Decision, ExecutionStrategy, ModelCall, StrategyError};
use agent_core::strict_json;
use agent_core::types::PlanStep;
use serde_json::{Value, json};

const PLAN_CREATED: &str = "plan_created";
const STEP_COMPLETED: &str = "step_completed";
const STEP_FAILED: &str = "step_failed";

/// Model responses a step may take before it fails, when none is configured.
pub const DEFAULT_STEPS_PER_PLAN_STEP: u32 = 5;

/// The Plan-and-Execute strategy.
#[derive(Debug, Clone)]
pub struct PlanExecute {
    steps_per_plan_step: u32,
    replans: usize,
}

impl Default for PlanExecute {
    fn default() -> Self {
        Self {
            steps_per_plan_step: DEFAULT_STEPS_PER_PLAN_STEP,
            replans: 1,
        }
    }
}

impl PlanExecute {
    /// Plan-and-Execute with the defaults (5 model responses per step, one replan).
    pub fn new() -> Self {
        Self::default()
    }

    /// Model responses a step may take before it fails.
    pub fn steps_per_plan_step(mut self, steps: u32) -> Self {
        self.steps_per_plan_step = steps.max(1);
        self
    }
}

/// Where a session stands, derived from its strategy records.
struct Progress {
    plan: Vec<PlanStep>,
    results: Vec<String>,
    failures: usize,
    last_failure: Option<String>,
    phase_history: usize,
    phase_steps: u32,
}

impl Progress {
    fn of(state: &SessionState) -> Self {
        let mut progress = Self {
            plan: Vec::new(),
            results: Vec::new(),
            failures: 0,
            last_failure: None,
            phase_history: 0,
            phase_steps: 0,
        };
        for record in state.records() {
            match record.name.as_str() {
                PLAN_CREATED => {
                    let kept = record.field("kept").and_then(Value::as_u64).unwrap_or(0) as usize;
                    let steps: Vec<PlanStep> = record
                        .field("steps")
                        .and_then(|steps| serde_json::from_value(steps.clone()).ok())
                        .unwrap_or_default();
                    progress.plan.truncate(kept);
                    progress.plan.extend(steps);
                    progress.last_failure = None;
                }
                STEP_COMPLETED => {
                    progress.results.push(record.text("result").to_owned());
                }
                STEP_FAILED => {
                    progress.failures += 1;
                    progress.last_failure = Some(record.text("error").to_owned());
                }
                _ => continue,
            }
            progress.phase_history = record.history_len;
            progress.phase_steps = record.steps_used;
        }
        progress
    }

    fn planning(&self) -> bool {
        self.plan.is_empty() || self.last_failure.is_some()
    }

    fn summary(&self) -> String {
        self.plan
            .iter()
            .enumerate()
            .map(|(index, step)| match self.results.get(index) {
                Some(result) => format!("{}. {} → done: {result}", index + 1, step.goal),
                None => format!("{}. {}", index + 1, step.goal),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

const PLAN_FORMAT: &str = r#"{"type":"plan","steps":[{"goal":"what this step achieves","tool":"a tool it will use (optional)"}, ...]}"#;

/// The plan in a planning response: a plan action, or JSON text holding one.
fn plan_of(state: &SessionState) -> Result<Vec<PlanStep>, String> {
    if let Some(steps) = state.proposed_plan() {
        return check(steps.to_vec());
    }
    let text = state.proposed_finish().unwrap_or_default();
    let value = strict_json::from_str(text.trim())
        .map_err(|err| format!("write the plan as JSON first ({err}): {PLAN_FORMAT}"))?;
    let steps = value.get("steps").cloned().unwrap_or(Value::Null);
    let steps: Vec<PlanStep> = serde_json::from_value(steps)
        .map_err(|err| format!("the plan's `steps` are not valid ({err}): {PLAN_FORMAT}"))?;
    check(steps)
}

fn check(steps: Vec<PlanStep>) -> Result<Vec<PlanStep>, String> {
    if steps.is_empty() {
        return Err(format!("a plan needs at least one step: {PLAN_FORMAT}"));
    }
    if let Some(index) = steps.iter().position(|step| step.goal.trim().is_empty()) {
        return Err(format!(
            "step {} of the plan has no goal: {PLAN_FORMAT}",
            index + 1
        ));
    }
    Ok(steps)
}

impl PlanExecute {
    fn call(&self, state: &SessionState, progress: &Progress, instructions: String) -> Decision {
        let history = match progress.phase_history {
            0 => state.shared_history(),
            start => Arc::new(state.history().get(start..).unwrap_or_default().to_vec()),
        };
        Decision::CallModel(ModelCall {
            instructions,
            history,
        })
    }

    fn plan(&self, state: &SessionState, progress: &Progress) -> Decision {
        if state.status() == Status::Thinking {
            return match plan_of(state) {
                Ok(steps) => Decision::Record {
                    name: PLAN_CREATED.into(),
                    data: json!({"steps": steps, "kept": progress.results.len()}),
                },
                Err(reason) => Decision::Refuse { reason },
            };
        }
        let mut instructions = format!(
            "Plan how to complete the user's task with the available tools. Answer with the plan only, as one JSON object: {PLAN_FORMAT}"
        );
        if let Some(failure) = &progress.last_failure {
            instructions.push_str(&format!(
                "\n\nA step of the previous plan failed: {failure}\nSteps done so far (they stay done; plan only what remains):\n{}",
                progress.summary()
            ));
        }
        self.call(state, progress, instructions)
    }

    fn step(
        &self,
        state: &SessionState,
        progress: &Progress,
        index: usize,
    ) -> Result<Decision, StrategyError> {
        let Some(step) = progress.plan.get(index) else {
            return Err(StrategyError {
                strategy: self.name().to_owned(),
                message: format!("the plan has no step {}", index + 1),
            });
        };
        if state.status() == Status::Thinking {
            return Ok(match (state.proposed_finish(), state.proposed_plan()) {
                (Some(result), _) => Decision::Record {
                    name: STEP_COMPLETED.into(),
                    data: json!({"index": index, "result": result}),
                },
                (None, _) => Decision::Refuse {
                    reason: format!(
                        "you are carrying out step {} of the plan; use tools, then finish with its result",
                        index + 1
                    ),
                },
            });
        }
        if state.steps_used().saturating_sub(progress.phase_steps) >= self.steps_per_plan_step {
            if progress.failures >= self.replans {
                return Ok(Decision::Fail {
                    exit_reason: agent_core::result::ExitReason::MaxStepsExceeded,
                    error: format!(
                        "step {} of the plan did not finish within {} model responses, even after replanning",
                        index + 1,
                        self.steps_per_plan_step
                    ),
                });
            }
            return Ok(Decision::Record {
                name: STEP_FAILED.into(),
                data: json!({"index": index, "error": format!(
                    "step {} ({}) did not finish within {} model responses",
                    index + 1, step.goal, self.steps_per_plan_step
                )}),
            });
        }
        let tool = step
            .tool
            .as_deref()
            .map(|tool| format!(" (the plan suggests the `{tool}` tool)"))
            .unwrap_or_default();
        let instructions = format!(
            "You are carrying out one step of a plan for the user's task.\nThe plan:\n{}\n\nNow do step {}: {}{tool}. Use tools as needed, then finish with the result of this step only.",
            progress.summary(),
            index + 1,
            step.goal
        );
        Ok(self.call(state, progress, instructions))
    }

    fn compose(&self, state: &SessionState, progress: &Progress) -> Decision {
        if state.status() == Status::Thinking {
            return match (state.proposed_finish(), state.proposed_plan()) {
                (Some(answer), _) => Decision::Finish {
                    answer: answer.to_owned(),
                },
                (None, _) => Decision::Refuse {
                    reason: "every step is done; finish with the final answer".into(),
                },
            };
        }
        let instructions = format!(
            "Every step of the plan is done:\n{}\n\nCompose the final answer to the user's task from these results and finish with it.",
            progress.summary()
        );
        self.call(state, progress, instructions)
    }
}

impl ExecutionStrategy for PlanExecute {
    fn name(&self) -> &str {
        "plan-execute"
    }

    fn next(&self, state: &SessionState) -> Result<Decision, StrategyError> {
        match state.status() {
            Status::ActionPending => return Ok(Decision::Dispatch(state.undispatched_calls())),
            Status::Idle | Status::Observing | Status::Thinking => {}
            status => {
                return Err(StrategyError {
                    strategy: self.name().into(),
                    message: format!("nothing to decide in status `{status}`"),
                });
            }
        }
        let progress = Progress::of(state);
        if progress.planning() {
            Ok(self.plan(state, &progress))
        } else if progress.results.len() < progress.plan.len() {
            self.step(state, &progress, progress.results.len())
        } else {
            Ok(self.compose(state, &progress))
        }
    }
}
