//! The OpenAPI document matches the router: every documented operation is
//! routed, and the documented operations are the API's.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::collections::BTreeSet;
use std::sync::Arc;

use agent::store::{MemoryStore, Store};
use agent_server::{ServerState, Tokens, openapi, router};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;

const TOKEN: &str = "openapi-test-token-0123456789";

fn documented() -> BTreeSet<(String, String)> {
    let document = serde_json::to_value(openapi()).unwrap();
    document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(|method| (method.to_uppercase(), path.clone()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_document_is_openapi_3_1_with_bearer_auth_and_names_every_route() {
    let document = serde_json::to_value(openapi()).unwrap();
    assert!(document["openapi"].as_str().unwrap().starts_with("3.1"));
    assert_eq!(
        document["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let expected: BTreeSet<(String, String)> = [
        ("POST", "/v1/sessions"),
        ("GET", "/v1/sessions"),
        ("GET", "/v1/sessions/{id}"),
        ("GET", "/v1/sessions/{id}/events"),
        ("POST", "/v1/sessions/{id}/approve"),
        ("POST", "/v1/sessions/{id}/deny"),
        ("POST", "/v1/sessions/{id}/cancel"),
        ("POST", "/v1/sessions/{id}/pause"),
        ("POST", "/v1/sessions/{id}/resume"),
        ("POST", "/v1/sessions/{id}/fork"),
        ("POST", "/v1/sessions/{id}/messages"),
        ("GET", "/metrics"),
        ("GET", "/healthz"),
        ("GET", "/v1/openapi.json"),
        ("GET", "/v1/agents"),
        ("GET", "/v1/agents/{name}"),
    ]
    .into_iter()
    .map(|(method, path)| (method.to_owned(), path.to_owned()))
    .collect();
    assert_eq!(documented(), expected);
}

#[tokio::test]
async fn every_documented_operation_is_routed_and_others_are_not() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let app = router(ServerState::new(store, Tokens::new([TOKEN]).unwrap()));
    let call = |method: &str, path: &str| {
        let request = Request::builder()
            .method(method)
            .uri(path.replace("{id}", "no-such-session"))
            .header("authorization", format!("Bearer {TOKEN}"))
            .body(Body::from("{}"))
            .unwrap();
        let app = app.clone();
        async move {
            let response = app.oneshot(request).await.unwrap();
            let status = response.status();
            let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .unwrap();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            (status, body)
        }
    };
    for (method, path) in documented() {
        let (status, body) = call(&method, &path).await;
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        assert_ne!(body["error"]["code"], "no_route", "{method} {path}: {body}");
    }
    let (status, body) = call("DELETE", "/v1/sessions/{id}").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(body["error"]["code"], "method_not_allowed");
    let (status, body) = call("GET", "/v1/undocumented").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "no_route");
}

#[tokio::test]
async fn mounted_under_a_prefix_the_api_keeps_its_auth_and_open_health() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let api = router(ServerState::new(store, Tokens::new([TOKEN]).unwrap()));
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "mine" }))
        .nest("/agent", api);
    let status = |path: &'static str, token: bool| {
        let app = app.clone();
        async move {
            let mut request = Request::builder().uri(path);
            if token {
                request = request.header("authorization", format!("Bearer {TOKEN}"));
            }
            app.oneshot(request.body(Body::empty()).unwrap())
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(status("/", false).await, StatusCode::OK);
    assert_eq!(status("/agent/healthz", false).await, StatusCode::OK);
    assert_eq!(
        status("/agent/v1/sessions", false).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(status("/agent/v1/sessions", true).await, StatusCode::OK);
}
