//! Numbers of a trace, per run and per tool: calls, errors, retries, latency
//! percentiles, tokens, model calls, wall time, steps to finish. Computed from
//! trace lines — a JSONL trace file, or a stored log projected the same way
//! ([`lines_of_events`]) — so both give the same figures.

use std::collections::BTreeMap;

use agent_core::event::Event;
use agent_core::state::SessionState;
use serde_json::{Map, Value, json};

use crate::lines::trace_lines;
use crate::summary::ContentMode;

/// The figures of one tool in one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolStats {
    /// Results received.
    pub calls: u64,
    /// Results that are errors.
    pub errors: u64,
    /// Retries of its calls.
    pub retries: u64,
    /// Milliseconds from the model's proposal to each result, sorted.
    pub latencies_ms: Vec<u64>,
}

/// The figures of one run (a session's trace lines).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunStats {
    /// The session.
    pub run_id: String,
    /// How it ended, if it did.
    pub exit_reason: Option<String>,
    /// Steps used when it ended.
    pub steps: Option<u64>,
    /// Model responses, valid or rejected.
    pub model_calls: u64,
    /// Retries of model calls.
    pub model_retries: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// From the first line to the last, in milliseconds.
    pub wall_ms: u64,
    /// Per tool, by name.
    pub tools: BTreeMap<String, ToolStats>,
    first_ms: Option<u64>,
    last_ms: u64,
    proposed_ms: u64,
}

/// The figures of every run of a trace, in the order they first appear.
pub fn stats(lines: &[Value]) -> Vec<RunStats> {
    let mut runs: Vec<RunStats> = Vec::new();
    for line in lines {
        let Some(run_id) = line.get("run_id").and_then(Value::as_str) else {
            continue;
        };
        let index = match runs.iter().position(|run| run.run_id == run_id) {
            Some(index) => index,
            None => {
                runs.push(RunStats {
                    run_id: run_id.to_owned(),
                    ..RunStats::default()
                });
                runs.len() - 1
            }
        };
        if let Some(run) = runs.get_mut(index) {
            run.add(line);
        }
    }
    for run in &mut runs {
        run.wall_ms = run
            .last_ms
            .saturating_sub(run.first_ms.unwrap_or(run.last_ms));
        for tool in run.tools.values_mut() {
            tool.latencies_ms.sort_unstable();
        }
    }
    runs
}

/// The trace lines of a stored log, as `agent run --trace` writes them.
pub fn lines_of_events(session_id: &str, events: &[Event]) -> Vec<Value> {
    let mut state = SessionState::new(session_id);
    let mut lines = Vec::new();
    for event in events {
        if state.apply(event).is_err() {
            break;
        }
        lines.extend(
            trace_lines(event, state.steps_used(), ContentMode::Summary)
                .into_iter()
                .map(Value::Object),
        );
    }
    lines
}

fn number(line: &Value, key: &str) -> u64 {
    line.get(key).and_then(Value::as_u64).unwrap_or(0)
}

impl RunStats {
    fn add(&mut self, line: &Value) {
        let at = number(line, "at_ms");
        self.first_ms.get_or_insert(at);
        self.last_ms = self.last_ms.max(at);
        match line.get("event_type").and_then(Value::as_str) {
            Some("model_action") => {
                self.model_calls += 1;
                self.input_tokens += number(line, "input_tokens");
                self.output_tokens += number(line, "output_tokens");
                self.proposed_ms = at;
            }
            Some("model_feedback") => {
                self.model_calls += 1;
                self.input_tokens += number(line, "input_tokens");
                self.output_tokens += number(line, "output_tokens");
            }
            Some("observation") => {
                let name = line.get("tool_name").and_then(Value::as_str).unwrap_or("?");
                let tool = self.tools.entry(name.to_owned()).or_default();
                tool.calls += 1;
                if line.get("is_error").and_then(Value::as_bool) == Some(true) {
                    tool.errors += 1;
                }
                tool.latencies_ms.push(at.saturating_sub(self.proposed_ms));
            }
            Some("retry") => match line.get("target").and_then(Value::as_str) {
                Some("model") | None => self.model_retries += 1,
                Some(tool) => self.tools.entry(tool.to_owned()).or_default().retries += 1,
            },
            Some("run_finished") => {
                self.exit_reason = line
                    .get("exit_reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                self.steps = line.get("steps_used").and_then(Value::as_u64);
            }
            _ => {}
        }
    }

    /// The figures as JSON (`agent trace stats --json`).
    pub fn to_json(&self) -> Value {
        let tools: Map<String, Value> = self
            .tools
            .iter()
            .map(|(name, tool)| {
                (
                    name.clone(),
                    json!({
                        "calls": tool.calls,
                        "errors": tool.errors,
                        "retries": tool.retries,
                        "latency_ms_p50": percentile(&tool.latencies_ms, 50),
                        "latency_ms_p95": percentile(&tool.latencies_ms, 95),
                        "latency_ms_max": tool.latencies_ms.last().copied().unwrap_or(0),
                    }),
                )
            })
            .collect();
        json!({
            "run_id": self.run_id,
            "exit_reason": self.exit_reason,
            "steps_to_finish": self.steps,
            "model_calls": self.model_calls,
            "model_retries": self.model_retries,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "wall_ms": self.wall_ms,
            "tools": tools,
        })
    }

    /// The figures as a table for people.
    pub fn render(&self) -> String {
        let mut text = format!(
            "run {}  {}  steps {}  model calls {} ({} retries)  tokens {} in / {} out  wall {} ms\n",
            self.run_id,
            self.exit_reason.as_deref().unwrap_or("not ended"),
            self.steps
                .map_or_else(|| "-".to_owned(), |steps| steps.to_string()),
            self.model_calls,
            self.model_retries,
            self.input_tokens,
            self.output_tokens,
            self.wall_ms
        );
        if self.tools.is_empty() {
            text.push_str("  no tool calls\n");
            return text;
        }
        text.push_str(&format!(
            "  {:<20} {:>6} {:>7} {:>8} {:>8} {:>8} {:>8}\n",
            "tool", "calls", "errors", "retries", "p50 ms", "p95 ms", "max ms"
        ));
        for (name, tool) in &self.tools {
            text.push_str(&format!(
                "  {:<20} {:>6} {:>7} {:>8} {:>8} {:>8} {:>8}\n",
                name,
                tool.calls,
                tool.errors,
                tool.retries,
                percentile(&tool.latencies_ms, 50),
                percentile(&tool.latencies_ms, 95),
                tool.latencies_ms.last().copied().unwrap_or(0)
            ));
        }
        text
    }
}

/// The `share`th percentile of sorted values (nearest rank), 0 for none.
fn percentile(sorted: &[u64], share: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (sorted.len() * share).div_ceil(100).max(1);
    sorted.get(rank - 1).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing, clippy::unwrap_used)]

    use super::*;

    #[test]
    fn runs_and_tools_are_counted_from_trace_lines() {
        let lines = vec![
            json!({"run_id": "r", "step": 0, "event_type": "run_started", "at_ms": 1000}),
            json!({"run_id": "r", "step": 1, "event_type": "model_action", "at_ms": 1010,
                   "input_tokens": 10, "output_tokens": 2}),
            json!({"run_id": "r", "step": 1, "event_type": "retry", "target": "fetch", "at_ms": 1020}),
            json!({"run_id": "r", "step": 1, "event_type": "observation", "tool_name": "fetch",
                   "is_error": true, "at_ms": 1050}),
            json!({"run_id": "r", "step": 2, "event_type": "model_feedback", "at_ms": 1060}),
            json!({"run_id": "r", "step": 3, "event_type": "model_action", "at_ms": 1070,
                   "input_tokens": 5, "output_tokens": 1}),
            json!({"run_id": "r", "step": 3, "event_type": "observation", "tool_name": "fetch",
                   "is_error": false, "at_ms": 1080}),
            json!({"run_id": "r", "step": 4, "event_type": "run_finished", "exit_reason": "finished",
                   "steps_used": 4, "at_ms": 1100}),
        ];
        let runs = stats(&lines);
        assert_eq!(runs.len(), 1);
        let run = &runs[0];
        assert_eq!(run.model_calls, 3);
        assert_eq!((run.input_tokens, run.output_tokens), (15, 3));
        assert_eq!(run.wall_ms, 100);
        assert_eq!(run.steps, Some(4));
        let fetch = &run.tools["fetch"];
        assert_eq!((fetch.calls, fetch.errors, fetch.retries), (2, 1, 1));
        assert_eq!(fetch.latencies_ms, [10, 40]);
        let json = run.to_json();
        assert_eq!(json["tools"]["fetch"]["latency_ms_p50"], 10);
        assert_eq!(json["tools"]["fetch"]["latency_ms_max"], 40);
        assert!(run.render().contains("fetch"));
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&values, 50), 50);
        assert_eq!(percentile(&values, 95), 95);
        assert_eq!(percentile(&[], 95), 0);
        assert_eq!(percentile(&[7], 95), 7);
    }
}
