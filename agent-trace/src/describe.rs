//! One description per event kind, for people: what an event says beyond its
//! kind's name, on one line. The live console of `agent run` and the timeline of
//! `agent show` both print it, so an event reads the same everywhere.

use agent_core::event::{ApprovalDecision, EventKind, LastAnswerKind};
use agent_core::types::Action;

/// What `kind` says, on one line (parallel calls are joined with `; `).
pub fn describe(kind: &EventKind) -> String {
    match kind {
        EventKind::SessionStarted { strategy, .. } => format!("strategy {strategy}"),
        EventKind::ModelRequested {
            step,
            context_tokens: Some(tokens),
        } => format!("step {step} ({tokens} tokens of context)"),
        EventKind::ModelRequested { step, .. } => format!("step {step}"),
        EventKind::ContextCompacted {
            from_seq,
            to_seq,
            summary,
            tokens_before,
            tokens_after,
            ..
        } => format!(
            "compacted seq {from_seq}–{to_seq}: {tokens_before} → {tokens_after} tokens; summary: {summary}"
        ),
        EventKind::ModelResponded { actions, .. } => actions
            .iter()
            .map(|action| match action {
                Action::ToolCall(call) => {
                    format!("{} {} [{}]", call.tool_name, call.arguments, call.id)
                }
                Action::Finish(finish) => format!("finish: {}", finish.answer),
                Action::Plan { steps } => format!(
                    "plan: {}",
                    steps
                        .iter()
                        .map(|step| step.goal.as_str())
                        .collect::<Vec<_>>()
                        .join(" | ")
                ),
            })
            .collect::<Vec<_>>()
            .join("; "),
        EventKind::ModelOutputRejected { error, .. } => format!("invalid model output: {error}"),
        EventKind::ModelFallback { from, to, reason } => {
            format!("{from} failed for good ({reason}); asking {to}")
        }
        EventKind::ModelRetried {
            attempt,
            error,
            delay_ms,
        } => format!("retry {attempt} of the model call in {delay_ms} ms: {error}"),
        EventKind::ActionDispatched { call } => {
            format!("{} {} [{}]", call.tool_name, call.arguments, call.id)
        }
        EventKind::ActionsQueued { call_ids } => {
            format!("queued for workers: {}", call_ids.join(", "))
        }
        EventKind::ActionAttemptFailed {
            call_id,
            tool_name,
            attempt,
            error,
            delay_ms,
            ..
        } => format!("retry {attempt} of {tool_name} [{call_id}] in {delay_ms} ms: {error}"),
        EventKind::RepeatedCallAnswered {
            call_id,
            tool_name,
            earlier_call_id,
        } => format!(
            "{tool_name} [{call_id}] repeats [{earlier_call_id}]: not run again, its result sent back"
        ),
        EventKind::CircuitChanged { tool_name, state } => {
            format!("circuit of {tool_name} is now {state:?}")
        }
        EventKind::ActionCompleted { observation } => format!(
            "{}{} ({}) [{}]",
            if observation.is_error { "error: " } else { "" },
            observation.content,
            observation.tool_name,
            observation.call_id
        ),
        EventKind::ApprovalRequested { calls } => calls
            .iter()
            .map(|call| {
                format!(
                    "awaiting approval: {} {} [{}]",
                    call.tool_name, call.arguments, call.id
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        EventKind::ApprovalDecided {
            call_id,
            tool_name,
            decision,
            by,
            remaining,
        } => {
            let how = match decision {
                ApprovalDecision::Approved {
                    arguments: Some(arguments),
                } => format!(" with edited arguments {arguments}"),
                ApprovalDecision::Approved { arguments: None } => String::new(),
                ApprovalDecision::Denied { reason } => format!("; reason: {reason}"),
            };
            let waiting = if *remaining > 0 {
                format!(" ({remaining} call(s) still waiting)")
            } else {
                String::new()
            };
            format!(
                "{tool_name} [{call_id}] {} by {by}{how}{waiting}",
                decision.name()
            )
        }
        EventKind::Strategy { name, data, .. } => format!("{name}: {data}"),
        EventKind::ResponseRefused { reason } => format!("refused: {reason}"),
        EventKind::FinishRejected { reason, .. } => format!("finish refused: {reason}"),
        EventKind::Finished {
            answer,
            output: Some(_),
        } => format!("{answer} (matches the output schema)"),
        EventKind::Finished { answer, .. } => answer.clone(),
        EventKind::LastAnswer {
            kind,
            answer: Some(answer),
            ..
        } => format!("{} answer: {answer}", last_answer_name(*kind)),
        EventKind::LastAnswer { kind, error, .. } => format!(
            "no {} answer: {}",
            last_answer_name(*kind),
            error.as_deref().unwrap_or("")
        ),
        EventKind::Reflection { step, note, .. } => format!("after step {step}: {note}"),
        EventKind::Failed {
            exit_reason, error, ..
        } => format!("{exit_reason}: {}", error.as_deref().unwrap_or("")),
        EventKind::Cancelled { reason } => format!("cancelled: {reason}"),
        EventKind::UserMessage { text, turn, .. } => format!("turn {turn}: {text}"),
        EventKind::PauseRequested { by } => format!("pause requested by {by}"),
        EventKind::Paused { reason } => format!("paused: {reason}"),
        EventKind::MessageQueued { text, interrupt } => format!(
            "message while running{}: {text}",
            if *interrupt { " (interrupts)" } else { "" }
        ),
        EventKind::MessagesDelivered { count } => format!("{count} message(s) put in the history"),
        EventKind::Resumed { reason } => format!("resumed: {reason}"),
        EventKind::Queued { reason } => format!("queued: {reason}"),
        EventKind::Forked { parent, at } => format!("copy of {parent} up to seq {at}"),
    }
}

/// Whether `kind` reports something that went wrong — a failure, a refused
/// or invalid response, a failed attempt or an error result — so that views
/// can mark it.
pub fn is_problem(kind: &EventKind) -> bool {
    match kind {
        EventKind::Failed { .. }
        | EventKind::ModelOutputRejected { .. }
        | EventKind::ResponseRefused { .. }
        | EventKind::FinishRejected { .. }
        | EventKind::ActionAttemptFailed { .. } => true,
        EventKind::ActionCompleted { observation } => observation.is_error,
        EventKind::Strategy { name, .. } => name.ends_with("failed"),
        _ => false,
    }
}

fn last_answer_name(kind: LastAnswerKind) -> &'static str {
    match kind {
        LastAnswerKind::Partial => "partial",
        LastAnswerKind::Degraded => "degraded",
    }
}

#[cfg(test)]
mod tests {
    use agent_core::types::{Observation, ToolCall};
    use serde_json::json;

    use super::*;

    #[test]
    fn a_result_reads_content_first_and_names_its_call() {
        let call = ToolCall {
            id: "c1".into(),
            tool_name: "calculator".into(),
            arguments: json!({"left": 1}),
        };
        assert_eq!(
            describe(&EventKind::ActionCompleted {
                observation: Observation::success(&call, "84")
            }),
            "84 (calculator) [c1]"
        );
        assert_eq!(
            describe(&EventKind::ActionCompleted {
                observation: Observation::error(&call, "division by zero")
            }),
            "error: division by zero (calculator) [c1]"
        );
        assert_eq!(
            describe(&EventKind::ActionDispatched { call: call.clone() }),
            r#"calculator {"left":1} [c1]"#
        );
        assert!(is_problem(&EventKind::ActionCompleted {
            observation: Observation::error(&call, "division by zero")
        }));
        assert!(!is_problem(&EventKind::ActionCompleted {
            observation: Observation::success(&call, "84")
        }));
    }

    #[test]
    fn a_decision_says_what_was_decided_and_why() {
        let decided = |decision, remaining| EventKind::ApprovalDecided {
            call_id: "c1".into(),
            tool_name: "calculator".into(),
            decision,
            by: "alice".into(),
            remaining,
        };
        assert_eq!(
            describe(&decided(
                ApprovalDecision::Approved {
                    arguments: Some(json!({"left": 12}))
                },
                0
            )),
            r#"calculator [c1] approved by alice with edited arguments {"left":12}"#
        );
        assert_eq!(
            describe(&decided(
                ApprovalDecision::Denied {
                    reason: "not today".into()
                },
                2
            )),
            "calculator [c1] denied by alice; reason: not today (2 call(s) still waiting)"
        );
    }
}
