//! Pause on the library: a pause requested while tool calls run lets them
//! finish (a non-idempotent call is awaited, never cut), the run ends with
//! `paused` after the step, and a resume continues to the answer; a session
//! whose driver died is paused at once.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::Arc;
use std::time::Duration;

use agent::engine::pause_session;
use agent::event::EventKind;
use agent::id::new_session_id;
use agent::prelude::*;
use agent::state::PublicStatus;
use agent::tools::Typed;
use agent::tools::{AppendLine, Sleep};
use serde_json::{Value, json};

fn script() -> Vec<Value> {
    vec![
        json!({"type": "tool_calls", "calls": [
            {"tool_name": "sleep", "arguments": {"seconds": 0.4}},
            {"tool_name": "append_line", "arguments": {"path": "notes.txt", "line": "once"}}
        ]}),
        json!({"type": "finish", "answer": "done"}),
    ]
}

fn engine(store: Arc<MemoryStore>, workspace: &std::path::Path, model: Arc<dyn Model>) -> Engine {
    let mut registry = ToolRegistry::new();
    registry.register(Typed::<Sleep>::new()).unwrap();
    registry.register(Typed::<AppendLine>::new()).unwrap();
    Engine::builder(model, Arc::new(ReAct::new()))
        .tools(registry.into_toolbox())
        .store(store)
        .workspace(workspace)
        .lease(Duration::from_millis(300), Duration::from_millis(50))
        .build()
}

fn workspace(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("agent-pause-{name}-{}", new_session_id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn wait_for(
    store: &MemoryStore,
    session_id: &str,
    what: impl Fn(&[agent::event::Event]) -> bool,
) {
    for _ in 0..400 {
        if let Ok(events) = store.load(session_id).await
            && what(&events)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting on session {session_id}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_lets_the_running_step_finish_then_a_resume_answers() {
    let store = Arc::new(MemoryStore::new());
    let dir = workspace("step");
    let model: Arc<dyn Model> = Arc::new(ScriptedModel::from_values(script()).unwrap());
    let engine = Arc::new(engine(store.clone(), &dir, model));
    let session_id = new_session_id();
    let run = {
        let engine = Arc::clone(&engine);
        let session_id = session_id.clone();
        tokio::spawn(async move {
            engine
                .run_as(&session_id, "sleep, then note", json!({}))
                .await
        })
    };
    wait_for(&store, &session_id, |events| {
        events
            .iter()
            .any(|event| matches!(&event.kind, EventKind::ActionDispatched { call } if call.tool_name == "sleep"))
    })
    .await;
    let state = pause_session(store.as_ref(), &session_id, "test")
        .await
        .unwrap();
    assert!(
        state.pause_requested(),
        "a live driver is asked, not overruled"
    );
    assert_eq!(state.public_status(), PublicStatus::Running);

    let result = run.await.unwrap().unwrap();
    assert_eq!(result.exit_reason, ExitReason::Paused);
    assert_eq!(result.exit_code(), 11);
    assert_eq!(result.steps_used, 1, "it paused after its step");
    let events = store.load(&session_id).await.unwrap();
    let names: Vec<&str> = events.iter().map(|event| event.kind.name()).collect();
    let requested = names.iter().position(|n| *n == "pause_requested").unwrap();
    let completed = names
        .iter()
        .rposition(|n| *n == "action_completed")
        .unwrap();
    assert!(requested < completed, "{names:?}");
    assert_eq!(names.last(), Some(&"paused"), "{names:?}");
    assert!(
        !events.iter().any(|event| matches!(&event.kind,
            EventKind::ActionCompleted { observation } if observation.is_error)),
        "no call was cut: {names:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "once\n"
    );

    let resumed = engine.resume(&session_id).await.unwrap();
    assert_eq!(resumed.exit_reason, ExitReason::Finished);
    assert_eq!(resumed.answer.as_deref(), Some("done"));
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "once\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Never answers: the run waits in its first model call.
struct Hangs;

#[async_trait::async_trait]
impl Model for Hangs {
    async fn complete(
        &self,
        _request: &agent::model::ModelRequest,
        _ctx: &agent::model::ModelContext,
    ) -> Result<agent::model::ModelResponse, agent::model::ModelError> {
        std::future::pending().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_whose_driver_died_is_paused_at_once_and_ended_ones_refuse() {
    let store = Arc::new(MemoryStore::new());
    let dir = workspace("dead");
    let engine = Arc::new(engine(store.clone(), &dir, Arc::new(Hangs)));
    let session_id = new_session_id();
    let run = {
        let engine = Arc::clone(&engine);
        let session_id = session_id.clone();
        tokio::spawn(async move { engine.run_as(&session_id, "hang", json!({})).await })
    };
    wait_for(&store, &session_id, |events| !events.is_empty()).await;
    run.abort();
    let _ = run.await;
    tokio::time::sleep(Duration::from_millis(400)).await;

    let state = pause_session(store.as_ref(), &session_id, "test")
        .await
        .unwrap();
    assert_eq!(state.public_status(), PublicStatus::Paused);
    let again = pause_session(store.as_ref(), &session_id, "test")
        .await
        .unwrap();
    assert_eq!(
        again.last_seq(),
        state.last_seq(),
        "pausing again writes nothing"
    );

    agent::engine::cancel_session(store.as_ref(), &session_id, "test")
        .await
        .unwrap();
    let err = pause_session(store.as_ref(), &session_id, "test")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("already ended"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
