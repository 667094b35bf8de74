//! Conversations on the library: follow-up messages open turns 2, 3, … of a
//! session with the whole history, each turn ends with its own RunResult, a
//! replay of the conversation answers the same, a fork inside turn 2 carries on
//! from there, and budgets count per turn unless they are session-wide — all
//! on the real engine with the scripted model, read back from the log.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::{Arc, Mutex};

use agent::engine::{EngineError, OnLimit, fork_session};
use agent::event::EventKind;
use agent::history::HistoryItem;
use agent::model::{ModelContext, ModelError, ModelRequest, ModelResponse};
use agent::prelude::*;
use agent::providers::ReplayModel;
use agent::state::SessionState;
use agent::strategy::{Decision, ExecutionStrategy, StrategyError};
use agent::tools::Typed;
use async_trait::async_trait;
use serde_json::{Value, json};

/// Delegates to a model and remembers every request.
struct Recording {
    inner: Arc<dyn Model>,
    requests: Mutex<Vec<ModelRequest>>,
}

#[async_trait]
impl Model for Recording {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.complete(request, ctx).await
    }
}

fn calc(left: i64, right: i64) -> Value {
    json!({"type": "tool_call", "tool_name": "calculator",
           "arguments": {"left": left, "operation": "multiply", "right": right}})
}

fn finish(answer: &str) -> Value {
    json!({"type": "finish", "answer": answer})
}

/// Three turns: 12 × 7 with the calculator, doubled with it, then an answer
/// from the history alone.
fn conversation_script() -> Vec<Value> {
    vec![
        calc(12, 7),
        finish("84"),
        calc(84, 2),
        finish("168"),
        finish("168 minus 100 is 68"),
    ]
}

const MESSAGES: [&str; 2] = ["And doubled?", "And minus 100?"];

struct Chat {
    model: Arc<Recording>,
    store: Arc<MemoryStore>,
    budgets: Budgets,
}

impl Chat {
    fn new(model: Arc<dyn Model>, store: Arc<MemoryStore>) -> Self {
        Self {
            model: Arc::new(Recording {
                inner: model,
                requests: Mutex::new(Vec::new()),
            }),
            store,
            budgets: Budgets::default(),
        }
    }

    fn scripted(script: Vec<Value>) -> Self {
        Self::new(
            Arc::new(ScriptedModel::from_values(script).unwrap()),
            Arc::new(MemoryStore::new()),
        )
    }

    fn engine(&self) -> Engine {
        let mut registry = ToolRegistry::new();
        registry.register(Typed::<Calculator>::new()).unwrap();
        Engine::builder(self.model.clone(), Arc::new(ReAct::new()))
            .tools(registry.into_toolbox())
            .store(self.store.clone())
            .budgets(self.budgets.clone())
            .on_limit(OnLimit::Stop)
            .build()
    }

    /// Runs the task, then sends each message; the result of every turn.
    async fn talk(&self, messages: &[&str]) -> Vec<RunResult> {
        let engine = self.engine();
        let first = engine.run("What is 12 times 7?", json!({})).await.unwrap();
        let mut results = vec![first.clone()];
        for message in messages {
            results.push(engine.send(&first.session_id, message, None).await.unwrap());
        }
        results
    }

    async fn events(&self, session_id: &str) -> Vec<agent::event::Event> {
        self.store.load(session_id).await.unwrap()
    }

    fn requests(&self) -> Vec<ModelRequest> {
        self.model.requests.lock().unwrap().clone()
    }
}

fn answers(results: &[RunResult]) -> Vec<(u32, Option<&str>, u32)> {
    results
        .iter()
        .map(|result| (result.turn, result.answer.as_deref(), result.steps_used))
        .collect()
}

fn names(events: &[agent::event::Event]) -> Vec<&'static str> {
    events.iter().map(|event| event.kind.name()).collect()
}

#[tokio::test]
async fn three_turns_keep_the_history_and_end_with_their_own_results() {
    let chat = Chat::scripted(conversation_script());
    let results = chat.talk(&MESSAGES).await;
    assert_eq!(
        answers(&results),
        [
            (1, Some("84"), 2),
            (2, Some("168"), 4),
            (3, Some("168 minus 100 is 68"), 5)
        ]
    );
    assert!(results.iter().all(|result| result.exit_code() == 0));
    let session_id = &results[0].session_id;
    assert!(
        results
            .iter()
            .all(|result| &result.session_id == session_id)
    );
    assert_eq!(results[2].usage.tool_calls, 2, "usage is the session's");

    let requests = chat.requests();
    assert_eq!(requests.len(), 5);
    let turn_two = &requests[2].history;
    assert_eq!(
        turn_two[turn_two.len() - 2..],
        [
            HistoryItem::AssistantText { text: "84".into() },
            HistoryItem::UserMessage {
                text: "And doubled?".into()
            }
        ],
        "turn 2 sees the first answer, then the message"
    );
    let turn_three = &requests[4].history;
    let said: Vec<&str> = turn_three
        .iter()
        .filter_map(|item| match item {
            HistoryItem::UserMessage { text } | HistoryItem::AssistantText { text } => {
                Some(text.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(said, ["84", "And doubled?", "168", "And minus 100?"]);
    let results_seen = turn_three
        .iter()
        .filter(|item| matches!(item, HistoryItem::Observation { .. }))
        .count();
    assert_eq!(
        results_seen, 2,
        "both turns' tool results are in the history"
    );

    let events = chat.events(session_id).await;
    let turns: Vec<(u32, &str)> = events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::UserMessage { text, turn, .. } => Some((*turn, text.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(turns, [(2, MESSAGES[0]), (3, MESSAGES[1])]);
    assert_eq!(
        names(&events).iter().filter(|n| **n == "finished").count(),
        3
    );
    let state = SessionState::from_events(session_id, &events).unwrap();
    assert_eq!(state.turn(), 3);
    assert_eq!(state.run_result().unwrap(), results[2]);
}

#[tokio::test]
async fn a_replay_of_the_conversation_answers_the_same() {
    let chat = Chat::scripted(conversation_script());
    let results = chat.talk(&MESSAGES).await;
    let recorded = chat.events(&results[0].session_id).await;

    let replay = Chat::new(
        Arc::new(ReplayModel::from_events(&results[0].session_id, &recorded)),
        Arc::new(MemoryStore::new()),
    );
    let again = replay.talk(&MESSAGES).await;
    assert_eq!(answers(&again), answers(&results));
    let replayed = replay.events(&again[0].session_id).await;
    assert_eq!(names(&replayed), names(&recorded));
}

#[tokio::test]
async fn a_fork_inside_turn_two_carries_on_from_there() {
    let chat = Chat::scripted(conversation_script());
    let results = chat.talk(&MESSAGES).await;
    let session_id = &results[0].session_id;
    let events = chat.events(session_id).await;
    let doubled = events
        .iter()
        .find(|event| {
            matches!(&event.kind, EventKind::ActionDispatched { call }
                if call.arguments["left"] == 84)
        })
        .unwrap()
        .seq;

    let fork = fork_session(chat.store.as_ref(), session_id, doubled)
        .await
        .unwrap();
    assert!(fork.at < doubled, "the fork moves back to the step's start");
    let engine = chat.engine();
    let resumed = engine.resume(&fork.session_id).await.unwrap();
    assert_eq!(
        (resumed.turn, resumed.answer.as_deref()),
        (2, Some("168")),
        "the fork finishes turn 2 as the parent did"
    );
    let next = engine
        .send(&fork.session_id, MESSAGES[1], None)
        .await
        .unwrap();
    assert_eq!(
        (next.turn, next.answer.as_deref()),
        (3, Some("168 minus 100 is 68"))
    );
    let parent = chat.events(session_id).await;
    assert_eq!(parent, events, "the parent is untouched");
}

#[tokio::test]
async fn budgets_count_per_turn_unless_they_are_session_wide() {
    let script = vec![calc(12, 7), finish("84"), calc(84, 2), finish("168")];
    let mut chat = Chat::scripted(script.clone());
    chat.budgets.max_steps = 2;
    let results = chat.talk(&MESSAGES[..1]).await;
    assert_eq!(
        answers(&results),
        [(1, Some("84"), 2), (2, Some("168"), 4)],
        "each turn gets two steps"
    );

    let mut chat = Chat::scripted(script);
    chat.budgets = Budgets {
        max_steps: 2,
        session_wide: true,
        ..Budgets::default()
    };
    let results = chat.talk(&MESSAGES[..1]).await;
    let second = &results[1];
    assert_eq!(second.exit_reason, ExitReason::MaxStepsExceeded);
    assert_eq!((second.turn, second.steps_used), (2, 2));
    assert_eq!(second.error.as_deref(), Some("no finish within 2 steps"));
}

/// ReAct under its own name, without follow-ups (as a plan or a graph is).
struct NoFollowUps(ReAct);

impl ExecutionStrategy for NoFollowUps {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn next(&self, state: &SessionState) -> Result<Decision, StrategyError> {
        self.0.next(state)
    }
}

#[tokio::test]
async fn a_follow_up_is_refused_without_writing_anything() {
    let chat = Chat::scripted(conversation_script());
    let first = chat.talk(&[]).await.remove(0);
    let before = chat.events(&first.session_id).await;

    let no_follow_ups = Engine::builder(chat.model.clone(), Arc::new(NoFollowUps(ReAct::new())))
        .store(chat.store.clone())
        .build();
    let err = no_follow_ups
        .send(&first.session_id, "And doubled?", None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, EngineError::FollowUpRefused { reason, .. } if reason.contains("strategy `react`")),
        "{err}"
    );
    let err = chat
        .engine()
        .send(&first.session_id, "  ", None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("the message is empty"), "{err}");
    assert_eq!(chat.events(&first.session_id).await, before);
}
