//! Event streams in process, on a memory store: keep-alive comments on an idle
//! stream, and streams ended by the shutdown signal.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::Arc;
use std::time::Duration;

use agent::cancel::Cancellation;
use agent::event::{Event, EventKind};
use agent::store::{Append, Durability, MemoryStore, Store};
use agent_server::{ServerState, Tokens, router};
use axum::body::Body;
use axum::http::Request;
use futures_util::StreamExt;
use tower::ServiceExt;

const TOKEN: &str = "streams-test-token-0123456789";

async fn running_session(store: &Arc<dyn Store>) -> String {
    let id = agent::id::new_session_id();
    let started = Event::new(
        &id,
        1,
        EventKind::SessionStarted {
            task: "idle".into(),
            strategy: "react".into(),
            config: serde_json::json!({}),
        },
    );
    store
        .append(Append::creating(std::slice::from_ref(&started), Durability::Full).unwrap())
        .await
        .unwrap();
    id
}

fn stream_request(id: &str) -> Request<Body> {
    Request::builder()
        .uri(format!("/v1/sessions/{id}/events"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("accept", "text/event-stream")
        .body(Body::empty())
        .unwrap()
}

#[tokio::test]
async fn an_idle_stream_gets_keep_alive_comments_and_ends_at_shutdown() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let id = running_session(&store).await;
    let shutdown = Cancellation::new();
    let state = ServerState::new(Arc::clone(&store), Tokens::new([TOKEN]).unwrap())
        .with_keep_alive(Duration::from_millis(50))
        .with_shutdown(shutdown.clone());
    let response = router(state.clone())
        .oneshot(stream_request(&id))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.into_body().into_data_stream();
    let first = String::from_utf8(body.next().await.unwrap().unwrap().to_vec()).unwrap();
    assert!(first.contains("event: session_started"), "{first}");
    assert!(first.contains("id: 1"), "{first}");
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
            .await
            .expect("no keep-alive within 5 s")
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(text.starts_with(':'), "a comment, not an event: {text:?}");
    assert_eq!(state.open_streams(), 1);
    shutdown.cancel();
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(chunk) = body.next().await {
            chunk.unwrap();
        }
    })
    .await;
    assert!(rest.is_ok(), "the stream did not end at shutdown");
    drop(body);
    assert_eq!(state.open_streams(), 0);
}

/// Every event sent — in the JSON list and on the stream — carries the public
/// status after it, whether that ends the run, and its one-line description:
/// the server's fold and describer, so no client keeps its own copy.
#[tokio::test]
async fn events_carry_the_status_after_them_and_their_description() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let id = agent::id::new_session_id();
    let log = [
        Event::new(
            &id,
            1,
            EventKind::SessionStarted {
                task: "cancelled".into(),
                strategy: "react".into(),
                config: serde_json::json!({}),
            },
        ),
        Event::new(
            &id,
            2,
            EventKind::Cancelled {
                reason: "by the test".into(),
            },
        ),
    ];
    store
        .append(Append::creating(&log, Durability::Full).unwrap())
        .await
        .unwrap();
    let app = router(ServerState::new(
        Arc::clone(&store),
        Tokens::new([TOKEN]).unwrap(),
    ));
    let list = |after: u64| {
        Request::builder()
            .uri(format!("/v1/sessions/{id}/events?after={after}"))
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(Body::empty())
            .unwrap()
    };
    let response = app.clone().oneshot(list(0)).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let events = listed["events"].as_array().unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["kind"]["type"], "session_started");
    assert_eq!(events[0]["status"], "running");
    assert_eq!(events[0]["ended"], false);
    assert_eq!(events[0]["description"], "strategy react");
    assert_eq!(events[1]["status"], "cancelled");
    assert_eq!(events[1]["ended"], true);
    assert_eq!(events[1]["description"], "cancelled: by the test");
    assert_eq!(events[1]["problem"], false);

    // After a seq, the status still comes from the whole log.
    let response = app.clone().oneshot(list(1)).await.unwrap();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(listed["events"].as_array().unwrap().len(), 1);
    assert_eq!(listed["events"][0]["status"], "cancelled");

    let response = app.oneshot(stream_request(&id)).await.unwrap();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let text = String::from_utf8(body.to_vec()).unwrap();
    let data: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|json| serde_json::from_str(json).unwrap())
        .collect();
    assert_eq!(data.len(), 2, "{text}");
    assert_eq!(data[0]["status"], "running");
    assert_eq!(data[1]["status"], "cancelled");
    assert_eq!(data[1]["ended"], true);
    assert_eq!(data[1]["description"], "cancelled: by the test");
}
