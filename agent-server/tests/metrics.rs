//! `/metrics` in process, on a memory store.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use agent::state::PublicStatus;
use agent::store::{MemoryStore, Store};
use agent_server::{ServerState, Tokens, router};
use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;

const TOKEN: &str = "metrics-test-token-0123456789";

/// Every public status has its `agent_sessions` line, even with no session in
/// it (a regression: `paused` was missing from the list the metrics kept).
#[tokio::test]
async fn every_status_has_a_sessions_line() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let response = router(ServerState::new(store, Tokens::new([TOKEN]).unwrap()))
        .oneshot(
            Request::builder()
                .uri("/metrics")
                .header("authorization", format!("Bearer {TOKEN}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    let text = String::from_utf8(body.to_vec()).unwrap();
    for status in PublicStatus::ALL {
        assert!(
            text.contains(&format!("agent_sessions{{status=\"{status}\"}} 0\n")),
            "no line for {status}:\n{text}"
        );
    }
}
