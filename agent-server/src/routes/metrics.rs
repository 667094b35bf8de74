//! `GET /metrics`: Prometheus text about the whole store (every process that
//! shares it), read when scraped: sessions by status, steps, tool calls, tool
//! errors, queue depth; and this server's open event streams.

use std::fmt::Write;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use agent_core::state::PublicStatus;

use crate::error::{ApiError, ErrorBody};
use crate::state::ServerState;

/// Event kinds that are a step: a model response, valid or not.
const STEP_KINDS: [&str; 3] = [
    "model_responded",
    "model_output_rejected",
    "response_refused",
];

/// Metrics in the Prometheus text format (token required).
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "meta",
    responses(
        (status = 200, description = "Prometheus text exposition format", content_type = "text/plain"),
        (status = 503, body = ErrorBody, description = "The store does not answer")
    )
)]
pub async fn metrics(State(state): State<ServerState>) -> Result<impl IntoResponse, ApiError> {
    let counts = state.store.counts().await?;
    let queue = state.store.queue_view().await?;
    let event = |kind: &str| counts.events.get(kind).copied().unwrap_or(0);
    let mut text = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(String, u64)]| {
        let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(text, "{name}{labels} {value}");
        }
    };
    let by_status: Vec<(String, u64)> = PublicStatus::ALL
        .iter()
        .map(|status| {
            (
                format!("{{status=\"{status}\"}}"),
                counts.sessions.get(status).copied().unwrap_or(0),
            )
        })
        .collect();
    metric(
        "agent_sessions",
        "gauge",
        "Sessions in the store by status.",
        &by_status,
    );
    metric(
        "agent_steps_total",
        "counter",
        "Model responses received, valid or not.",
        &[(
            String::new(),
            STEP_KINDS.iter().map(|kind| event(kind)).sum(),
        )],
    );
    metric(
        "agent_tool_calls_total",
        "counter",
        "Tool calls with a result.",
        &[(String::new(), event("action_completed"))],
    );
    metric(
        "agent_tool_errors_total",
        "counter",
        "Tool calls whose result is an error.",
        &[(String::new(), counts.tool_errors)],
    );
    let waiting = |claimed: bool, of: &mut dyn Iterator<Item = bool>| {
        u64::try_from(of.filter(|is_claimed| *is_claimed == claimed).count()).unwrap_or(u64::MAX)
    };
    let sessions = |claimed| {
        waiting(
            claimed,
            &mut queue.sessions.iter().map(|s| s.claimed_by.is_some()),
        )
    };
    let actions = |claimed| {
        waiting(
            claimed,
            &mut queue.actions.iter().map(|a| a.claimed_by.is_some()),
        )
    };
    metric(
        "agent_queue_depth",
        "gauge",
        "Work in the queue: sessions to drive and tool calls to run, waiting or claimed by a worker.",
        &[
            (
                "{kind=\"session\",state=\"waiting\"}".into(),
                sessions(false),
            ),
            (
                "{kind=\"session\",state=\"claimed\"}".into(),
                sessions(true),
            ),
            ("{kind=\"action\",state=\"waiting\"}".into(), actions(false)),
            ("{kind=\"action\",state=\"claimed\"}".into(), actions(true)),
        ],
    );
    let mut by_kind: Vec<(String, u64)> = counts
        .events
        .iter()
        .map(|(kind, count)| (format!("{{kind=\"{kind}\"}}"), *count))
        .collect();
    by_kind.sort();
    metric(
        "agent_events_total",
        "counter",
        "Committed events by kind.",
        &by_kind,
    );
    metric(
        "agent_event_streams",
        "gauge",
        "Event streams (SSE) this server has open.",
        &[(String::new(), state.open_streams())],
    );
    metric(
        "agent_followed_sessions",
        "gauge",
        "Sessions this server reads for its open event streams.",
        &[(
            String::new(),
            u64::try_from(state.tails.followed()).unwrap_or(u64::MAX),
        )],
    );
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    ))
}
