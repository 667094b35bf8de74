//! The projection of events onto trace lines, as `CONTRACT.md` "Trace lines" pins
//! them: flat JSON objects with `run_id`, `step` and `event_type` on every line.

use std::collections::BTreeSet;

use agent_core::event::{ApprovalDecision, Event, EventKind};
use agent_core::result::ExitReason;
use agent_core::types::{Action, ToolCall};
use serde_json::{Map, Value, json};

use crate::summary::ContentMode;

/// The trace lines for one committed event (none for bookkeeping events).
pub fn trace_lines(event: &Event, step: u32, mode: ContentMode) -> Vec<Map<String, Value>> {
    let line = |event_type: &str, fields: Value| {
        let mut line = Map::new();
        line.insert("run_id".into(), json!(event.session_id));
        line.insert("step".into(), json!(step));
        line.insert("event_type".into(), json!(event_type));
        line.insert("seq".into(), json!(event.seq));
        line.insert("at_ms".into(), json!(event.at));
        if let Value::Object(fields) = fields {
            line.extend(fields);
        }
        line
    };
    match &event.kind {
        EventKind::SessionStarted { task, config, .. } => {
            let mut fields = json!({"input_summary": mode.render(task)});
            let recorded = |key: &str| config.get(key).and_then(Value::as_str);
            if let (Some(instructions), Value::Object(fields)) =
                (recorded("instructions"), &mut fields)
            {
                fields.insert("instructions".into(), json!(mode.render(instructions)));
            }
            if let (Some(agent), Value::Object(fields)) = (recorded("agent"), &mut fields) {
                fields.insert("agent".into(), json!(agent));
            }
            vec![line("run_started", fields)]
        }
        EventKind::ModelResponded { actions, usage, .. } => {
            let mut fields = action_fields(actions, mode);
            fields.insert("input_tokens".into(), json!(usage.input_tokens));
            fields.insert("output_tokens".into(), json!(usage.output_tokens));
            vec![line("model_action", Value::Object(fields))]
        }
        EventKind::ModelOutputRejected { error, .. } => {
            vec![line("model_feedback", json!({"error": error}))]
        }
        EventKind::ActionCompleted { observation } => vec![line(
            "observation",
            json!({
                "call_id": observation.call_id,
                "tool_name": observation.tool_name,
                "output": mode.render(&observation.content),
                "is_error": observation.is_error,
            }),
        )],
        EventKind::Finished { .. } => vec![line(
            "run_finished",
            json!({"exit_reason": ExitReason::Finished, "steps_used": step}),
        )],
        EventKind::Failed {
            exit_reason,
            budget,
            error,
        } => {
            let mut lines = Vec::new();
            if *exit_reason == ExitReason::InternalError {
                lines.push(line("internal_error", json!({"error": error})));
            }
            let mut fields = Map::new();
            fields.insert("exit_reason".into(), json!(exit_reason));
            fields.insert("steps_used".into(), json!(step));
            if let Some(budget) = budget {
                fields.insert("budget".into(), json!(budget));
            }
            lines.push(line("run_finished", Value::Object(fields)));
            lines
        }
        EventKind::ContextCompacted {
            from_seq,
            to_seq,
            summary,
            tokens_before,
            tokens_after,
            usage,
        } => vec![line(
            "context_compacted",
            json!({
                "from_seq": from_seq,
                "to_seq": to_seq,
                "summary": mode.render(summary),
                "tokens_before": tokens_before,
                "tokens_after": tokens_after,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
            }),
        )],
        EventKind::Reflection { note, usage, .. } => vec![line(
            "reflection",
            json!({
                "note": mode.render(note),
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
            }),
        )],
        EventKind::LastAnswer {
            kind,
            answer,
            error,
            usage,
        } => {
            let mut fields = Map::new();
            fields.insert("kind".into(), json!(kind));
            if let Some(answer) = answer {
                fields.insert("output".into(), json!(mode.render(answer)));
            }
            if let Some(error) = error {
                fields.insert("error".into(), json!(error));
            }
            fields.insert("input_tokens".into(), json!(usage.input_tokens));
            fields.insert("output_tokens".into(), json!(usage.output_tokens));
            vec![line("last_answer", Value::Object(fields))]
        }
        EventKind::ModelFallback { from, to, reason } => vec![line(
            "model_fallback",
            json!({"from": from, "to": to, "reason": reason}),
        )],
        EventKind::ModelRetried {
            attempt,
            error,
            delay_ms,
        } => vec![line(
            "retry",
            json!({"target": "model", "attempt": attempt, "error": error, "delay_ms": delay_ms}),
        )],
        EventKind::ActionAttemptFailed {
            call_id,
            tool_name,
            attempt,
            error,
            delay_ms,
            ..
        } => vec![line(
            "retry",
            json!({"target": tool_name, "call_id": call_id, "attempt": attempt, "error": error, "delay_ms": delay_ms}),
        )],
        EventKind::RepeatedCallAnswered {
            call_id,
            tool_name,
            earlier_call_id,
        } => vec![line(
            "repeated_call",
            json!({"call_id": call_id, "tool_name": tool_name, "earlier_call_id": earlier_call_id}),
        )],
        EventKind::CircuitChanged { tool_name, state } => vec![line(
            "circuit_changed",
            json!({"tool_name": tool_name, "state": state}),
        )],
        EventKind::ApprovalRequested { calls } => calls
            .iter()
            .map(|call| {
                line(
                    "approval_requested",
                    json!({"call_id": call.id, "tool_name": call.tool_name, "decision": "pending"}),
                )
            })
            .collect(),
        EventKind::ApprovalDecided {
            call_id,
            tool_name,
            decision,
            by,
            ..
        } => {
            let mut lines = vec![line(
                "approval_decided",
                json!({"call_id": call_id, "tool_name": tool_name, "decision": decision.name(), "by": by}),
            )];
            if let ApprovalDecision::Denied { reason } = decision {
                lines.push(line(
                    "observation",
                    json!({
                        "call_id": call_id,
                        "tool_name": tool_name,
                        "output": mode.render(&format!("denied by {by}: {reason}")),
                        "is_error": true,
                    }),
                ));
            }
            lines
        }
        EventKind::Strategy {
            strategy,
            name,
            data,
            usage,
        } => {
            let mut fields = Map::new();
            fields.insert("strategy".into(), json!(strategy));
            fields.insert("data".into(), json!(mode.render(&data.to_string())));
            if let Some(node) = data.get("node").and_then(Value::as_str) {
                fields.insert("node".into(), json!(node));
            }
            if let Some(usage) = usage {
                fields.insert("input_tokens".into(), json!(usage.input_tokens));
                fields.insert("output_tokens".into(), json!(usage.output_tokens));
            }
            vec![line(name, Value::Object(fields))]
        }
        EventKind::ResponseRefused { reason } => {
            vec![line("model_feedback", json!({"error": reason}))]
        }
        EventKind::FinishRejected {
            reason, details, ..
        } => vec![line(
            "model_feedback",
            json!({"error": reason, "output": mode.render(details)}),
        )],
        EventKind::UserMessage { text, turn, .. } => vec![line(
            "user_message",
            json!({"turn": turn, "input_summary": mode.render(text)}),
        )],
        EventKind::Paused { reason } => vec![line("run_paused", json!({"reason": reason}))],
        EventKind::MessageQueued { text, interrupt } => vec![line(
            "user_message",
            json!({"input_summary": mode.render(text), "while_running": true, "interrupt": interrupt}),
        )],
        EventKind::Resumed { reason } => vec![line("run_resumed", json!({"reason": reason}))],
        EventKind::Cancelled { reason } => vec![line(
            "run_finished",
            json!({"exit_reason": ExitReason::Cancelled, "steps_used": step, "reason": reason}),
        )],
        EventKind::ModelRequested { .. }
        | EventKind::PauseRequested { .. }
        | EventKind::MessagesDelivered { .. }
        | EventKind::ActionDispatched { .. }
        | EventKind::Forked { .. }
        | EventKind::Queued { .. }
        | EventKind::ActionsQueued { .. } => Vec::new(),
    }
}

/// The `model_action` fields describing what the model proposed.
fn action_fields(actions: &[Action], mode: ContentMode) -> Map<String, Value> {
    let calls: Vec<&ToolCall> = actions
        .iter()
        .filter_map(|action| match action {
            Action::ToolCall(call) => Some(call),
            _ => None,
        })
        .collect();
    let mut fields = Map::new();
    let keys: BTreeSet<&str> = calls
        .iter()
        .filter_map(|call| call.arguments.as_object())
        .flat_map(|arguments| arguments.keys().map(String::as_str))
        .collect();
    let plan = actions.iter().find_map(|action| match action {
        Action::Plan { steps } => Some(steps),
        _ => None,
    });
    match calls.as_slice() {
        [] if plan.is_some() => {
            let steps = plan.map(Vec::as_slice).unwrap_or_default();
            fields.insert("action_type".into(), json!("plan"));
            fields.insert("plan_steps".into(), json!(steps.len()));
            fields.insert(
                "output".into(),
                json!(mode.render(&json!(steps).to_string())),
            );
        }
        [] => {
            fields.insert("action_type".into(), json!("finish"));
            let answer = actions.iter().find_map(|action| match action {
                Action::Finish(finish) => Some(finish.answer.as_str()),
                _ => None,
            });
            fields.insert(
                "output".into(),
                json!(mode.render(answer.unwrap_or_default())),
            );
        }
        [call] => {
            fields.insert("action_type".into(), json!("tool_call"));
            fields.insert("tool_name".into(), json!(call.tool_name));
            if mode == ContentMode::Full {
                fields.insert("arguments".into(), json!(call.arguments.to_string()));
            }
        }
        calls => {
            fields.insert("action_type".into(), json!("tool_calls"));
            let names: Vec<&str> = calls.iter().map(|call| call.tool_name.as_str()).collect();
            fields.insert("tool_names".into(), json!(names));
            if mode == ContentMode::Full {
                let arguments: Vec<&Value> = calls.iter().map(|call| &call.arguments).collect();
                fields.insert("arguments".into(), json!(json!(arguments).to_string()));
            }
        }
    }
    fields.insert("argument_keys".into(), json!(keys));
    fields
}

#[cfg(test)]
mod tests {
    use agent_core::result::BudgetKind;
    use agent_core::types::{Finish, Observation, Usage};

    use super::*;

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: format!("id-{name}"),
            tool_name: name.into(),
            arguments,
        }
    }

    fn lines_of(kind: EventKind, mode: ContentMode) -> Vec<Map<String, Value>> {
        trace_lines(&Event::new("run-1", 4, kind), 2, mode)
    }

    #[test]
    fn a_tool_call_lists_sorted_keys_but_never_values_in_summary_mode() {
        let kind = EventKind::ModelResponded {
            actions: vec![Action::ToolCall(call(
                "calculator",
                json!({"right": 7, "left": "SECRET", "operation": "multiply"}),
            ))],
            usage: Usage {
                input_tokens: 10,
                output_tokens: 4,
            },
            text: None,
        };
        let lines = lines_of(kind.clone(), ContentMode::Summary);
        let line = &lines[0];
        assert_eq!(line["event_type"], "model_action");
        assert_eq!(line["run_id"], "run-1");
        assert_eq!(line["step"], 2);
        assert_eq!(line["action_type"], "tool_call");
        assert_eq!(line["tool_name"], "calculator");
        assert_eq!(line["argument_keys"], json!(["left", "operation", "right"]));
        assert_eq!(line["input_tokens"], 10);
        assert!(!Value::Object(line.clone()).to_string().contains("SECRET"));
        let full = lines_of(kind, ContentMode::Full);
        let arguments: Value =
            serde_json::from_str(full[0]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(
            arguments["left"], "SECRET",
            "full mode writes arguments as JSON text"
        );
    }

    #[test]
    fn parallel_calls_and_finishes_have_their_own_action_types() {
        let lines = lines_of(
            EventKind::ModelResponded {
                actions: vec![
                    Action::ToolCall(call("a", json!({"x": 1}))),
                    Action::ToolCall(call("b", json!({"y": 1}))),
                ],
                usage: Usage::default(),
                text: None,
            },
            ContentMode::Summary,
        );
        assert_eq!(lines[0]["action_type"], "tool_calls");
        assert_eq!(lines[0]["tool_names"], json!(["a", "b"]));
        assert_eq!(lines[0]["argument_keys"], json!(["x", "y"]));
        let lines = lines_of(
            EventKind::ModelResponded {
                actions: vec![Action::Finish(Finish {
                    answer: "84".into(),
                })],
                usage: Usage::default(),
                text: None,
            },
            ContentMode::Summary,
        );
        assert_eq!(lines[0]["action_type"], "finish");
        assert!(
            lines[0]["output"]
                .as_str()
                .unwrap()
                .starts_with("chars=2;sha256=")
        );
    }

    #[test]
    fn observations_and_endings() {
        let observation = Observation::success(&call("calculator", json!({})), "84");
        let lines = lines_of(
            EventKind::ActionCompleted { observation },
            ContentMode::Full,
        );
        assert_eq!(lines[0]["output"], "84");
        assert_eq!(lines[0]["is_error"], false);
        assert_eq!(lines[0]["call_id"], "id-calculator");
        let lines = lines_of(
            EventKind::Failed {
                exit_reason: ExitReason::InternalError,
                budget: None,
                error: Some("boom".into()),
            },
            ContentMode::Summary,
        );
        let types: Vec<&Value> = lines.iter().map(|l| &l["event_type"]).collect();
        assert_eq!(types, ["internal_error", "run_finished"]);
        assert_eq!(lines[1]["exit_reason"], "internal_error");
        assert_eq!(lines[1]["steps_used"], 2);
        let lines = lines_of(
            EventKind::Failed {
                exit_reason: ExitReason::BudgetExceeded,
                budget: Some(BudgetKind::WallTime),
                error: None,
            },
            ContentMode::Summary,
        );
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["budget"], "wall_time");
        assert!(
            lines_of(
                EventKind::ModelRequested {
                    step: 1,
                    context_tokens: None
                },
                ContentMode::Full
            )
            .is_empty()
        );
    }
}
