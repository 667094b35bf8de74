//! MCP tools against the reference server `@modelcontextprotocol/server-everything`
//! (its `echo` tool) and a fake server that fails, crashes and hangs on purpose.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_core::tool::{ToolContext, ToolError};
use agent_tools::McpServer;
use serde_json::json;

const EVERYTHING: &str = "mcp-server-everything stdio";

fn fake(mode: &str) -> String {
    format!(
        "node {}/tests/fixtures/fake_mcp.mjs {mode}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn ctx() -> ToolContext {
    ToolContext::new("s", "c", Arc::from(Path::new(".")))
}

#[tokio::test]
async fn the_reference_servers_echo_tool_is_listed_and_called() {
    let server = McpServer::start(EVERYTHING, Duration::from_secs(60))
        .await
        .unwrap();
    let echo = server
        .tools()
        .iter()
        .find(|tool| tool.spec().name == "echo")
        .expect("echo is listed");
    assert_eq!(echo.spec().input_schema["type"], "object");
    assert!(
        echo.spec().input_schema["properties"]
            .get("message")
            .is_some()
    );
    let output = echo
        .call(json!({"message": "hello from agent"}), &ctx())
        .await
        .unwrap();
    assert!(
        output.content.contains("hello from agent"),
        "{}",
        output.content
    );
    server.shutdown().await;
}

#[tokio::test]
async fn is_error_is_an_error_and_idempotent_hint_is_kept() {
    let server = McpServer::start(&fake("normal"), Duration::from_secs(10))
        .await
        .unwrap();
    let fail = server
        .tools()
        .iter()
        .find(|t| t.spec().name == "fail")
        .unwrap();
    assert!(fail.spec().idempotent);
    let crash = server
        .tools()
        .iter()
        .find(|t| t.spec().name == "crash")
        .unwrap();
    assert!(!crash.spec().idempotent);
    let err = fail.call(json!({}), &ctx()).await.unwrap_err();
    assert_eq!(err, ToolError::failed("it failed on purpose"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_crash_or_a_hang_during_a_call_is_an_error_within_the_timeout() {
    let server = McpServer::start(&fake("normal"), Duration::from_millis(800))
        .await
        .unwrap();
    let hang = server
        .tools()
        .iter()
        .find(|t| t.spec().name == "hang")
        .unwrap()
        .clone();
    let started = Instant::now();
    let err = hang.call(json!({}), &ctx()).await.unwrap_err();
    assert!(err.to_string().contains("did not answer"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let crash = server
        .tools()
        .iter()
        .find(|t| t.spec().name == "crash")
        .unwrap()
        .clone();
    let err = crash.call(json!({}), &ctx()).await.unwrap_err();
    assert!(matches!(err, ToolError::Failed { .. }), "{err}");
    let err = hang.call(json!({}), &ctx()).await.unwrap_err();
    assert!(
        matches!(err, ToolError::Failed { .. }),
        "a dead server fails fast: {err}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_server_that_hangs_on_start_or_does_not_exist_is_a_clear_error() {
    let started = Instant::now();
    let err = McpServer::start(&fake("hang-on-start"), Duration::from_millis(500))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("no MCP handshake within 0.5s"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let err = McpServer::start("no-such-mcp-server-binary", Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot start"), "{err}");
}
