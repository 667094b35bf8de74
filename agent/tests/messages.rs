//! Messages to a running session on the library: a queued message is seen at
//! the next model call (never between a tool call and its result), a finish
//! proposed before the model saw it is refused with feedback, and a message
//! that interrupts abandons a model call in flight — each recorded in the log
//! in the order it took effect.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent::event::{Event, EventKind};
use agent::history::HistoryItem;
use agent::id::new_session_id;
use agent::model::{ModelContext, ModelError, ModelRequest, ModelResponse};
use agent::prelude::*;
use agent::state::SessionState;
use agent::store::{Append, Durability};
use agent::tools::Sleep;
use agent::tools::Typed;
use async_trait::async_trait;
use serde_json::{Value, json};

/// Answers with `answer(step, request)` after `delay(step, request)`, and
/// remembers every request.
struct Paced {
    delay: fn(u32, &ModelRequest) -> Duration,
    answer: fn(u32, &ModelRequest) -> Value,
    requests: Mutex<Vec<ModelRequest>>,
}

#[async_trait]
impl Model for Paced {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        self.requests.lock().unwrap().push(request.clone());
        tokio::time::sleep((self.delay)(ctx.step, request)).await;
        ScriptedModel::from_values(vec![(self.answer)(ctx.step, request)])
            .unwrap()
            .complete(request, &ModelContext::new(&ctx.session_id, 1))
            .await
    }
}

fn sees_message(request: &ModelRequest) -> bool {
    request
        .history
        .iter()
        .any(|item| matches!(item, HistoryItem::UserMessage { text } if text == "also: say hi"))
}

struct Fixture {
    model: Arc<Paced>,
    store: Arc<MemoryStore>,
    engine: Arc<Engine>,
}

impl Fixture {
    fn new(model: Paced) -> Self {
        let model = Arc::new(model);
        let store = Arc::new(MemoryStore::new());
        let mut registry = ToolRegistry::new();
        registry.register(Typed::<Sleep>::new()).unwrap();
        let engine = Engine::builder(model.clone(), Arc::new(ReAct::new()))
            .tools(registry.into_toolbox())
            .store(store.clone())
            .lease(Duration::from_secs(5), Duration::from_millis(30))
            .build();
        Self {
            model,
            store,
            engine: Arc::new(engine),
        }
    }

    /// Runs the task in the background; waits until it is at `ready`, then
    /// appends a message as another process would.
    async fn run_then_message(&self, interrupt: bool, ready: Ready) -> (String, RunResult) {
        let session_id = new_session_id();
        let run = {
            let engine = Arc::clone(&self.engine);
            let session_id = session_id.clone();
            tokio::spawn(async move { engine.run_as(&session_id, "greet", json!({})).await })
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let events = self.store.load(&session_id).await.unwrap_or_default();
            let at = match ready {
                Ready::SleepDispatched => events
                    .iter()
                    .any(|event| matches!(event.kind, EventKind::ActionDispatched { .. })),
                Ready::InFirstModelCall => !self.requests().is_empty(),
            };
            if at {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the run never got to {ready:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.append(
            &session_id,
            EventKind::MessageQueued {
                text: "also: say hi".into(),
                interrupt,
            },
        )
        .await;
        let result = run.await.unwrap().unwrap();
        (session_id, result)
    }

    async fn append(&self, session_id: &str, kind: EventKind) {
        let events = self.store.load(session_id).await.unwrap();
        let mut state = SessionState::from_events(session_id, &events).unwrap();
        let event = Event::new(session_id, state.last_seq() + 1, kind);
        state.apply(&event).unwrap();
        self.store
            .append(Append::after(&state, &[event], Durability::Full))
            .await
            .unwrap();
    }

    async fn names(&self, session_id: &str) -> Vec<&'static str> {
        self.store
            .load(session_id)
            .await
            .unwrap()
            .iter()
            .map(|event| event.kind.name())
            .collect()
    }

    fn requests(&self) -> Vec<ModelRequest> {
        self.model.requests.lock().unwrap().clone()
    }
}

/// Where the run is when the message arrives.
#[derive(Debug, Clone, Copy)]
enum Ready {
    /// Its sleep call runs (the dispatch is written before the call starts).
    SleepDispatched,
    /// Its first model call is under way.
    InFirstModelCall,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_queued_during_a_tool_call_is_seen_at_the_next_model_call() {
    let fixture = Fixture::new(Paced {
        delay: |_, _| Duration::ZERO,
        answer: |step, request| match step {
            1 => json!({"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": 0.3}}),
            _ if sees_message(request) => json!({"type": "finish", "answer": "slept; hi"}),
            _ => json!({"type": "finish", "answer": "slept"}),
        },
        requests: Mutex::new(Vec::new()),
    });
    let (session_id, result) = fixture
        .run_then_message(false, Ready::SleepDispatched)
        .await;
    assert_eq!(result.answer.as_deref(), Some("slept; hi"));
    let requests = fixture.requests();
    assert_eq!(requests.len(), 2);
    let history = &requests[1].history;
    assert!(
        matches!(
            &history[..],
            [
                HistoryItem::ToolCalls { .. },
                HistoryItem::Observation { .. },
                HistoryItem::UserMessage { .. }
            ]
        ),
        "the message follows the call's result: {history:?}"
    );
    let names = fixture.names(&session_id).await;
    let queued = names.iter().position(|n| *n == "message_queued").unwrap();
    let delivered = names
        .iter()
        .position(|n| *n == "messages_delivered")
        .unwrap();
    let completed = names.iter().position(|n| *n == "action_completed").unwrap();
    assert!(queued < completed && completed < delivered, "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_proposed_before_the_model_saw_a_message_is_refused() {
    let fixture = Fixture::new(Paced {
        delay: |step, _| Duration::from_millis(if step == 1 { 300 } else { 0 }),
        answer: |_, request| {
            if sees_message(request) {
                json!({"type": "finish", "answer": "hello, and hi"})
            } else {
                json!({"type": "finish", "answer": "hello"})
            }
        },
        requests: Mutex::new(Vec::new()),
    });
    let (session_id, result) = fixture
        .run_then_message(false, Ready::InFirstModelCall)
        .await;
    assert_eq!(result.answer.as_deref(), Some("hello, and hi"));
    assert_eq!(result.steps_used, 2);
    let names = fixture.names(&session_id).await;
    assert!(names.contains(&"response_refused"), "{names:?}");
    let events = fixture.store.load(&session_id).await.unwrap();
    assert!(events.iter().any(|event| matches!(&event.kind,
        EventKind::ResponseRefused { reason } if reason.contains("new message"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_interrupts_abandons_the_model_call_in_flight() {
    let fixture = Fixture::new(Paced {
        delay: |_, request| {
            if sees_message(request) {
                Duration::ZERO
            } else {
                Duration::from_secs(30)
            }
        },
        answer: |_, _| json!({"type": "finish", "answer": "hi"}),
        requests: Mutex::new(Vec::new()),
    });
    let begun = std::time::Instant::now();
    let (session_id, result) = fixture
        .run_then_message(true, Ready::InFirstModelCall)
        .await;
    assert!(
        begun.elapsed() < Duration::from_secs(20),
        "the slow call was abandoned"
    );
    assert_eq!(result.answer.as_deref(), Some("hi"));
    assert_eq!(result.steps_used, 1, "the abandoned call is no step");
    assert_eq!(fixture.requests().len(), 2);
    let names = fixture.names(&session_id).await;
    assert!(names.contains(&"messages_delivered"), "{names:?}");
}
