use serde_json::json;

use super::*;
use crate::event::EventKind;
use crate::types::{Action, Finish, Usage};

fn event(seq: u64, kind: EventKind) -> Event {
    Event::new("s1", seq, kind)
}

fn started() -> EventKind {
    EventKind::SessionStarted {
        task: "t".into(),
        strategy: "react".into(),
        config: json!({}),
    }
}

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        tool_name: "calculator".into(),
        arguments: json!({}),
    }
}

fn responded(actions: Vec<Action>) -> EventKind {
    EventKind::ModelResponded {
        actions,
        usage: Usage {
            input_tokens: 3,
            output_tokens: 2,
        },
        text: None,
    }
}

fn apply_all(kinds: Vec<EventKind>) -> Result<SessionState, StateError> {
    let events: Vec<Event> = kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| event(i as u64 + 1, kind))
        .collect();
    SessionState::from_events("s1", &events)
}

#[test]
fn a_tool_turn_then_a_finish_walks_the_status_machine() {
    let state = apply_all(vec![
        started(),
        EventKind::ModelRequested {
            step: 1,
            context_tokens: None,
        },
        responded(vec![
            Action::ToolCall(call("a")),
            Action::ToolCall(call("b")),
        ]),
        EventKind::ActionDispatched { call: call("a") },
        EventKind::ActionDispatched { call: call("b") },
        EventKind::ActionCompleted {
            observation: Observation::success(&call("b"), "2"),
        },
        EventKind::ActionCompleted {
            observation: Observation::success(&call("a"), "1"),
        },
        EventKind::ModelRequested {
            step: 2,
            context_tokens: None,
        },
        responded(vec![Action::Finish(Finish {
            answer: "done".into(),
        })]),
        EventKind::Finished {
            answer: "done".into(),
            output: None,
        },
    ])
    .unwrap();
    assert_eq!(state.status(), Status::Finished);
    assert_eq!(state.steps_used(), 2);
    assert_eq!(state.usage().tool_calls, 2);
    assert_eq!(state.usage().input_tokens, 6);
    let contents: Vec<&str> = state
        .history()
        .iter()
        .filter_map(|item| match item {
            HistoryItem::Observation { observation } => Some(observation.content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(contents, ["1", "2"], "observations keep proposal order");
    let result = state.run_result().unwrap();
    assert_eq!(result.answer.as_deref(), Some("done"));
}

#[test]
fn an_illegal_event_names_the_event_and_the_status_and_changes_nothing() {
    let mut state = apply_all(vec![started()]).unwrap();
    let before = state.clone();
    let err = state
        .apply(&event(
            2,
            EventKind::Finished {
                answer: "x".into(),
                output: None,
            },
        ))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "event `finished` is not allowed in status `idle`"
    );
    assert_eq!(state, before);
}

#[test]
fn gaps_other_sessions_and_unknown_calls_are_rejected() {
    let mut state = apply_all(vec![started()]).unwrap();
    assert!(matches!(
        state.apply(&event(
            3,
            EventKind::ModelRequested {
                step: 1,
                context_tokens: None
            }
        )),
        Err(StateError::OutOfOrder { last: 1, got: 3 })
    ));
    let foreign = Event::new(
        "other",
        2,
        EventKind::ModelRequested {
            step: 1,
            context_tokens: None,
        },
    );
    assert!(matches!(
        state.apply(&foreign),
        Err(StateError::WrongSession { .. })
    ));
    let mut state = apply_all(vec![
        started(),
        EventKind::ModelRequested {
            step: 1,
            context_tokens: None,
        },
        responded(vec![Action::ToolCall(call("a"))]),
    ])
    .unwrap();
    assert!(matches!(
        state.apply(&event(4, EventKind::ActionDispatched { call: call("zz") })),
        Err(StateError::UnexpectedCall { .. })
    ));
}

#[test]
fn nothing_follows_a_terminal_event() {
    let mut state = apply_all(vec![
        started(),
        EventKind::Failed {
            exit_reason: ExitReason::MaxStepsExceeded,
            budget: None,
            error: None,
        },
    ])
    .unwrap();
    assert_eq!(state.status().public(), PublicStatus::Failed);
    assert!(matches!(
        state.apply(&event(
            3,
            EventKind::Failed {
                exit_reason: ExitReason::Cancelled,
                budget: None,
                error: None
            }
        )),
        Err(StateError::IllegalTransition { .. })
    ));
}

#[test]
fn rejected_output_becomes_feedback_and_counts_as_a_step() {
    let state = apply_all(vec![
        started(),
        EventKind::ModelRequested {
            step: 1,
            context_tokens: None,
        },
        EventKind::ModelOutputRejected {
            raw: "nope".into(),
            error: "not JSON".into(),
            usage: Usage::default(),
        },
    ])
    .unwrap();
    assert_eq!(state.status(), Status::Observing);
    assert_eq!(state.steps_used(), 1);
    assert!(state.last_output_rejected());
    assert_eq!(
        state.history(),
        [HistoryItem::Feedback {
            message: "not JSON".into()
        }]
    );
}

fn requested(step: u32) -> EventKind {
    EventKind::ModelRequested {
        step,
        context_tokens: None,
    }
}

fn finish(answer: &str) -> Vec<EventKind> {
    vec![
        responded(vec![Action::Finish(Finish {
            answer: answer.into(),
        })]),
        EventKind::Finished {
            answer: answer.into(),
            output: None,
        },
    ]
}

fn message(text: &str, turn: u32) -> EventKind {
    EventKind::UserMessage {
        text: text.into(),
        turn,
        config: None,
    }
}

#[test]
fn a_follow_up_opens_the_next_turn_with_the_previous_answer_and_fresh_turn_budgets() {
    let mut kinds = vec![started(), requested(1)];
    kinds.extend(finish("84"));
    kinds.push(message("And doubled?", 2));
    let state = apply_all(kinds.clone()).unwrap();
    assert_eq!(state.status(), Status::Idle);
    assert_eq!(state.turn(), 2);
    assert!(state.run_result().is_none(), "turn 2 has not ended");
    assert_eq!(
        state.history(),
        [
            HistoryItem::AssistantText { text: "84".into() },
            HistoryItem::UserMessage {
                text: "And doubled?".into()
            }
        ]
    );
    assert_eq!(state.session_spent().steps, 1);
    assert_eq!(state.turn_spent().steps, 0);
    assert_eq!(state.turn_spent().tokens, 0);

    kinds.push(requested(2));
    kinds.extend(finish("168"));
    let state = apply_all(kinds).unwrap();
    let result = state.run_result().unwrap();
    assert_eq!(
        (result.turn, result.answer.as_deref(), result.steps_used),
        (2, Some("168"), 2)
    );
    assert_eq!(state.turn_spent().steps, 1);
    assert_eq!(state.turn_spent().tokens, 5);
}

#[test]
fn a_follow_up_is_refused_while_running_after_a_cancel_and_with_the_wrong_turn() {
    let running = apply_all(vec![started(), requested(1)]).unwrap();
    let err = running
        .clone()
        .apply(&event(3, message("hi", 2)))
        .unwrap_err();
    assert!(err.to_string().contains("still running"), "{err}");

    let cancelled = apply_all(vec![
        started(),
        EventKind::Cancelled {
            reason: "user".into(),
        },
    ])
    .unwrap();
    assert!(
        cancelled
            .check_follow_up()
            .unwrap_err()
            .contains("cancelled")
    );

    let mut kinds = vec![started(), requested(1)];
    kinds.extend(finish("84"));
    let mut finished = apply_all(kinds).unwrap();
    let before = finished.clone();
    let err = finished.apply(&event(5, message("hi", 3))).unwrap_err();
    assert_eq!(
        err.to_string(),
        "user_message cannot open turn 3: the session is in turn 1"
    );
    assert_eq!(finished, before);
}

#[test]
fn a_follow_up_after_a_refused_dispatch_closes_the_unrun_calls_with_errors() {
    let state = apply_all(vec![
        started(),
        requested(1),
        responded(vec![Action::ToolCall(call("a"))]),
        EventKind::Failed {
            exit_reason: ExitReason::BudgetExceeded,
            budget: None,
            error: Some("tool call budget".into()),
        },
        message("try without tools", 2),
    ])
    .unwrap();
    assert_eq!(state.status(), Status::Idle);
    assert!(state.undispatched_calls().is_empty());
    assert!(matches!(
        state.history(),
        [
            HistoryItem::ToolCalls { .. },
            HistoryItem::Observation { observation },
            HistoryItem::UserMessage { .. },
        ] if observation.is_error && observation.content.contains("budget_exceeded")
    ));
}

#[test]
fn a_pause_holds_the_status_it_came_from_and_a_resume_returns_to_it() {
    let mut kinds = vec![
        started(),
        requested(1),
        responded(vec![Action::ToolCall(call("a"))]),
        EventKind::ActionDispatched { call: call("a") },
        EventKind::PauseRequested { by: "me".into() },
    ];
    let state = apply_all(kinds.clone()).unwrap();
    assert!(state.pause_requested());
    assert_eq!(
        state.status(),
        Status::ActionExecuting,
        "a request changes no status"
    );
    kinds.push(EventKind::ActionCompleted {
        observation: Observation::success(&call("a"), "1"),
    });
    kinds.push(EventKind::Paused {
        reason: "asked".into(),
    });
    let paused = apply_all(kinds.clone()).unwrap();
    assert_eq!(paused.public_status(), PublicStatus::Paused);
    assert!(!paused.pause_requested());
    let result = paused.paused_result().unwrap();
    assert_eq!(
        (result.exit_reason, result.exit_code()),
        (ExitReason::Paused, 11)
    );
    assert!(paused.run_result().is_none(), "a pause is not an end");
    assert!(
        paused
            .clone()
            .apply(&event(paused.last_seq() + 1, requested(2)))
            .is_err(),
        "nothing runs while paused"
    );
    kinds.push(EventKind::Resumed {
        reason: "resume".into(),
    });
    let resumed = apply_all(kinds).unwrap();
    assert_eq!(resumed.status(), Status::Observing);
    assert!(resumed.paused_result().is_none());
}

#[test]
fn nothing_pauses_once_ended_or_while_it_waits_for_a_decision() {
    let mut kinds = vec![started(), requested(1)];
    kinds.extend(finish("84"));
    let mut finished = apply_all(kinds).unwrap();
    assert!(
        finished
            .apply(&event(5, EventKind::PauseRequested { by: "me".into() }))
            .is_err()
    );
    let mut waiting = apply_all(vec![
        started(),
        requested(1),
        responded(vec![Action::ToolCall(call("a"))]),
        EventKind::ApprovalRequested {
            calls: vec![call("a")],
        },
    ])
    .unwrap();
    assert!(
        waiting
            .apply(&event(5, EventKind::Paused { reason: "x".into() }))
            .is_err()
    );
}

fn multiply(id: &str, left: i64) -> ToolCall {
    ToolCall {
        id: id.into(),
        tool_name: "calculator".into(),
        arguments: json!({"left": left, "operation": "multiply", "right": 7}),
    }
}

/// One step that calls `calls` and gets `results` (content, is_error), at step `step`.
fn tool_turn(step: u32, calls: &[ToolCall], results: &[(&str, bool)]) -> Vec<EventKind> {
    let mut kinds = vec![
        EventKind::ModelRequested {
            step,
            context_tokens: None,
        },
        responded(calls.iter().cloned().map(Action::ToolCall).collect()),
    ];
    kinds.extend(
        calls
            .iter()
            .map(|call| EventKind::ActionDispatched { call: call.clone() }),
    );
    kinds.extend(
        calls
            .iter()
            .zip(results)
            .map(|(call, (content, is_error))| EventKind::ActionCompleted {
                observation: if *is_error {
                    Observation::error(call, *content)
                } else {
                    Observation::success(call, *content)
                },
            }),
    );
    kinds
}

#[test]
fn an_identical_earlier_call_with_a_result_is_found_by_tool_and_arguments() {
    let mut kinds = vec![started()];
    kinds.extend(tool_turn(1, &[multiply("call_1_1", 12)], &[("84", false)]));
    kinds.extend(tool_turn(
        2,
        &[multiply("call_2_1", 12)],
        &[("84 again", false)],
    ));
    let state = apply_all(kinds).unwrap();
    let reordered = ToolCall {
        arguments: json!({"right": 7, "operation": "multiply", "left": 12}),
        ..multiply("call_3_1", 0)
    };
    assert_eq!(
        state.earlier_success(&reordered),
        Some(("call_2_1", "84 again"))
    );
    assert_eq!(state.earlier_success(&multiply("call_3_1", 13)), None);
}

#[test]
fn errors_unanswered_calls_and_the_call_itself_are_not_earlier_results() {
    let mut kinds = vec![started()];
    kinds.extend(tool_turn(
        1,
        &[multiply("call_1_1", 12), multiply("call_1_2", 13)],
        &[("division by zero", true), ("91", false)],
    ));
    let state = apply_all(kinds).unwrap();
    assert_eq!(state.earlier_success(&multiply("call_2_1", 12)), None);
    assert_eq!(state.earlier_success(&multiply("call_1_2", 13)), None);
    assert_eq!(
        state.earlier_success(&multiply("call_2_1", 13)),
        Some(("call_1_2", "91"))
    );
}

#[test]
fn a_summary_hides_the_results_it_replaced_and_keeps_later_ones() {
    let mut kinds = vec![started()];
    kinds.extend(tool_turn(1, &[multiply("call_1_1", 1)], &[("7", false)]));
    kinds.extend(tool_turn(2, &[multiply("call_2_1", 2)], &[("14", false)]));
    kinds.extend(tool_turn(3, &[multiply("call_3_1", 3)], &[("21", false)]));
    kinds.push(EventKind::ContextCompacted {
        from_seq: 3,
        to_seq: 10,
        summary: "multiplied 1 and 2 by 7".into(),
        tokens_before: 100,
        tokens_after: 40,
        usage: Usage::default(),
    });
    let state = apply_all(kinds).unwrap();
    assert!(matches!(
        state.history().first(),
        Some(HistoryItem::Summary { .. })
    ));
    assert_eq!(state.earlier_success(&multiply("call_4_1", 1)), None);
    assert_eq!(state.earlier_success(&multiply("call_4_1", 2)), None);
    assert_eq!(
        state.earlier_success(&multiply("call_4_1", 3)),
        Some(("call_3_1", "21"))
    );
}
