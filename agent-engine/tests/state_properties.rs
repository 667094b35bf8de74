//! Properties of `SessionState::apply` over random event sequences: it never
//! panics; a refused event is a typed error and changes nothing; after the end
//! only a follow-up message opening the next turn is accepted; folding a log
//! equals loading a snapshot of a prefix plus the events after it; a fork at any
//! seq replays the parent's prefix. Cases: `PROPTEST_CASES` (default 256).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use agent_core::event::{ApprovalDecision, Event, EventKind};
use agent_core::layer::CircuitState;
use agent_core::result::ExitReason;
use agent_core::state::{SessionState, StateError};
use agent_core::store::{Append, Durability, EventLog, SnapshotStore};
use agent_core::types::{Action, Finish, Observation, ToolCall, Usage};
use agent_engine::{fork_session, load_state, snapshot_of};
use agent_store::MemoryStore;
use proptest::prelude::*;
use serde_json::{Value, json};

const SESSION: &str = "s";

fn call(n: u8) -> ToolCall {
    ToolCall {
        id: format!("c{n}"),
        tool_name: if n.is_multiple_of(2) { "t0" } else { "t1" }.into(),
        arguments: json!({"n": n}),
    }
}

fn call_id() -> impl Strategy<Value = u8> {
    0u8..4
}

fn text() -> impl Strategy<Value = String> {
    "[a-z ]{0,6}"
}

fn usage() -> impl Strategy<Value = Usage> {
    (0u64..50, 0u64..50).prop_map(|(input_tokens, output_tokens)| Usage {
        input_tokens,
        output_tokens,
    })
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => call_id().prop_map(|n| Action::ToolCall(call(n))),
        1 => text().prop_map(|answer| Action::Finish(Finish { answer })),
    ]
}

fn exit_reason() -> impl Strategy<Value = ExitReason> {
    prop_oneof![
        Just(ExitReason::InternalError),
        Just(ExitReason::MaxStepsExceeded),
        Just(ExitReason::InvalidModelOutput),
        Just(ExitReason::BudgetExceeded),
        Just(ExitReason::Cancelled),
        Just(ExitReason::ProviderError),
    ]
}

/// Every kind of event, over a few call ids, so that random sequences often line
/// up into legal runs.
fn kind() -> impl Strategy<Value = EventKind> {
    prop_oneof![
        25 => text().prop_map(|task| EventKind::SessionStarted {
            task,
            strategy: "react".into(),
            config: json!({}),
        }),
        200 => (0u32..4).prop_map(|step| EventKind::ModelRequested { step, context_tokens: None }),
        200 => (prop::collection::vec(action(), 0..3), usage()).prop_map(|(actions, usage)| {
            EventKind::ModelResponded { actions, usage, text: None }
        }),
        25 => (text(), usage()).prop_map(|(raw, usage)| EventKind::ModelOutputRejected {
            raw,
            error: "bad".into(),
            usage,
        }),
        25 => (1u32..3).prop_map(|attempt| EventKind::ModelRetried {
            attempt,
            error: "e".into(),
            delay_ms: 1,
        }),
        200 => call_id().prop_map(|n| EventKind::ActionDispatched { call: call(n) }),
        25 => prop::collection::vec(call_id(), 0..3).prop_map(|ids| EventKind::ActionsQueued {
            call_ids: ids.into_iter().map(|n| call(n).id).collect(),
        }),
        25 => call_id().prop_map(|n| EventKind::ActionAttemptFailed {
            call_id: call(n).id,
            tool_name: call(n).tool_name,
            attempt: 1,
            error: "e".into(),
            retryable: true,
            delay_ms: 1,
        }),
        25 => prop_oneof![
            Just(CircuitState::Open),
            Just(CircuitState::Closed),
            Just(CircuitState::HalfOpen)
        ]
        .prop_map(|state| EventKind::CircuitChanged { tool_name: "t0".into(), state }),
        200 => (call_id(), any::<bool>()).prop_map(|(n, failed)| EventKind::ActionCompleted {
            observation: if failed {
                Observation::error(&call(n), "no")
            } else {
                Observation::success(&call(n), "yes")
            },
        }),
        25 => prop::collection::vec(call_id(), 1..3).prop_map(|ids| EventKind::ApprovalRequested {
            calls: ids.into_iter().map(call).collect(),
        }),
        25 => (call_id(), any::<bool>(), 0u32..2).prop_map(|(n, approved, remaining)| {
            EventKind::ApprovalDecided {
                call_id: call(n).id,
                tool_name: call(n).tool_name,
                decision: if approved {
                    ApprovalDecision::Approved { arguments: None }
                } else {
                    ApprovalDecision::Denied { reason: "no".into() }
                },
                by: "me".into(),
                remaining,
            }
        }),
        25 => text().prop_map(|name| EventKind::Strategy {
            strategy: "react".into(),
            name,
            data: Value::Null,
            usage: None,
        }),
        25 => text().prop_map(|reason| EventKind::ResponseRefused { reason }),
        25 => text().prop_map(|answer| EventKind::FinishRejected {
            answer,
            reason: "gate".into(),
            details: String::new(),
        }),
        1 => text().prop_map(|answer| EventKind::Finished { answer, output: None }),
        5 => (1u32..4, text()).prop_map(|(turn, text)| EventKind::UserMessage {
            text,
            turn,
            config: None,
        }),
        10 => text().prop_map(|by| EventKind::PauseRequested { by }),
        10 => (text(), any::<bool>()).prop_map(|(text, interrupt)| EventKind::MessageQueued { text, interrupt }),
        10 => (0u32..3).prop_map(|count| EventKind::MessagesDelivered { count }),
        10 => text().prop_map(|reason| EventKind::Paused { reason }),
        25 => text().prop_map(|reason| EventKind::Resumed { reason }),
        25 => text().prop_map(|reason| EventKind::Queued { reason }),
        25 => (0u64..5).prop_map(|at| EventKind::Forked { parent: "p".into(), at }),
        1 => exit_reason().prop_map(|exit_reason| EventKind::Failed {
            exit_reason,
            budget: None,
            error: Some("e".into()),
        }),
        1 => text().prop_map(|reason| EventKind::Cancelled { reason }),
    ]
}

/// An event as a hostile log could hold it: usually the next seq of this
/// session, sometimes another seq or another session.
fn raw_event() -> impl Strategy<Value = (u8, EventKind)> {
    (0u8..20, kind())
}

fn place(state: &SessionState, (skew, kind): (u8, EventKind)) -> Event {
    let next = state.last_seq() + 1;
    match skew {
        0 => Event::new(SESSION, next + 1, kind),
        1 => Event::new(SESSION, state.last_seq(), kind),
        2 => Event::new("other", next, kind),
        _ => Event::new(SESSION, next, kind),
    }
}

/// A legal log: the random events the state machine accepted, in order, after
/// a start.
fn legal_log(kinds: Vec<EventKind>) -> Vec<Event> {
    let mut state = SessionState::new(SESSION);
    let mut log = Vec::new();
    let start = EventKind::SessionStarted {
        task: "t".into(),
        strategy: "react".into(),
        config: json!({}),
    };
    for kind in std::iter::once(start).chain(kinds) {
        let event = Event::new(SESSION, state.last_seq() + 1, kind);
        if state.apply(&event).is_ok() {
            log.push(event);
        }
    }
    log
}

fn folded(events: &[Event]) -> Value {
    snapshot_of(&SessionState::from_events(SESSION, events).unwrap()).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

async fn stored(log: &[Event]) -> MemoryStore {
    let store = MemoryStore::new();
    store
        .append(Append::creating(log, Durability::Full).unwrap())
        .await
        .unwrap();
    store
}

proptest! {
    #[test]
    fn random_sequences_never_panic_and_a_refused_event_changes_nothing(
        events in prop::collection::vec(raw_event(), 0..60)
    ) {
        let mut state = SessionState::new(SESSION);
        for raw in events {
            let event = place(&state, raw);
            let before = snapshot_of(&state).unwrap();
            match state.apply(&event) {
                Ok(()) => prop_assert_eq!(state.last_seq(), event.seq),
                Err(err) => {
                    prop_assert_eq!(snapshot_of(&state).unwrap(), before);
                    let typed = matches!(
                        err,
                        StateError::IllegalTransition { .. }
                            | StateError::OutOfOrder { .. }
                            | StateError::WrongSession { .. }
                            | StateError::UnexpectedCall { .. }
                            | StateError::FollowUp { .. }
                    );
                    prop_assert!(typed);
                    prop_assert!(!err.to_string().is_empty());
                }
            }
        }
    }

    #[test]
    fn an_event_after_the_end_is_refused_unless_it_opens_the_next_turn(kinds in prop::collection::vec(kind(), 0..80), extra in kind()) {
        let log = legal_log(kinds);
        let state = SessionState::from_events(SESSION, &log).unwrap();
        if state.status().is_terminal() {
            let mut after = state.clone();
            let event = Event::new(SESSION, state.last_seq() + 1, extra);
            let forked = matches!(event.kind, EventKind::Forked { .. });
            let follow_up = matches!(&event.kind, EventKind::UserMessage { turn, .. } if *turn == state.turn() + 1)
                && state.check_follow_up().is_ok();
            if !forked {
                prop_assert_eq!(after.apply(&event).is_ok(), follow_up);
            }
        }
    }

    #[test]
    fn loading_a_snapshot_plus_the_rest_equals_folding_the_log(
        kinds in prop::collection::vec(kind(), 0..400),
        cut in any::<prop::sample::Index>(),
    ) {
        let log = legal_log(kinds);
        let at = cut.index(log.len() + 1);
        let whole = folded(&log);
        let loaded = runtime().block_on(async {
            let store = stored(&log).await;
            if at > 0 {
                let prefix = SessionState::from_events(SESSION, &log[..at]).unwrap();
                store
                    .save_snapshot(SESSION, prefix.last_seq(), &snapshot_of(&prefix).unwrap())
                    .await
                    .unwrap();
            }
            snapshot_of(&load_state(&store, SESSION).await.unwrap()).unwrap()
        });
        prop_assert_eq!(loaded, whole);
    }

    #[test]
    fn a_fork_at_any_seq_replays_the_parents_prefix(
        kinds in prop::collection::vec(kind(), 0..400),
        cut in any::<prop::sample::Index>(),
    ) {
        let log = legal_log(kinds);
        let at = u64::try_from(cut.index(log.len()) + 1).unwrap();
        let (fork, copy) = runtime().block_on(async {
            let store = stored(&log).await;
            let fork = fork_session(&store, SESSION, at).await.unwrap();
            let copy = store.load(&fork.session_id).await.unwrap();
            prop_assert_eq!(store.load(SESSION).await.unwrap(), log.clone(), "the parent is untouched");
            Ok((fork, copy))
        })?;
        prop_assert!(fork.at <= at);
        let kept = usize::try_from(fork.at).unwrap();
        prop_assert_eq!(copy.len(), kept + 1);
        for (copied, original) in copy.iter().zip(&log[..kept]) {
            prop_assert_eq!(&copied.kind, &original.kind);
            prop_assert_eq!(copied.seq, original.seq);
        }
        let ends_forked = matches!(copy[kept].kind, EventKind::Forked { .. });
        prop_assert!(ends_forked, "the copy ends with its Forked event");
        let replayed = SessionState::from_events(&fork.session_id, &copy[..kept]).unwrap();
        let prefix = SessionState::from_events(SESSION, &log[..kept]).unwrap();
        prop_assert_eq!(replayed.status(), prefix.status());
        prop_assert_eq!(replayed.steps_used(), prefix.steps_used());
        prop_assert_eq!(replayed.run_result().map(|r| r.answer), prefix.run_result().map(|r| r.answer));
        prop_assert!(replayed.status().is_step_boundary() || kept == 0);
    }
}
