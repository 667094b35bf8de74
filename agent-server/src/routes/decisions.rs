//! Decisions on a stored session, with the CLI's semantics and errors:
//! approve / deny waiting calls, cancel, resume (queue it for a worker) and fork.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use agent_core::result::RunResult;
use agent_core::state::{PublicStatus, SessionState};
use agent_engine::{ControlError, cancel_session, fork_session, pause_session};
use agent_runtime::control::{self, Requeued, queue_again};

use super::JsonBody;
use crate::error::{ApiError, ErrorBody};
use crate::state::ServerState;

/// Who the log records as the decider of calls decided over HTTP.
const DECIDER: &str = "http api";

/// Which waiting calls to approve, and optionally with what arguments.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Approve {
    /// Decide only this call (default: every waiting call).
    pub call: Option<String>,
    /// Run the call with these arguments instead (an object; checked against the
    /// tool's schema; needs `call` when several wait).
    #[schema(value_type = Option<Object>)]
    pub arguments: Option<Value>,
}

/// Which waiting calls to deny, and why.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Deny {
    /// Decide only this call (default: every waiting call).
    pub call: Option<String>,
    /// Why; the model receives it.
    pub reason: String,
}

/// What a decision did.
#[derive(Debug, Serialize, ToSchema)]
pub struct Decided {
    /// The session.
    pub session_id: String,
    /// The decided call ids.
    pub decided: Vec<String>,
    /// Whether the session went back to the work queue (nothing waits any more
    /// and it was submitted); otherwise `POST …/resume` continues it.
    pub queued: bool,
}

/// Approves waiting calls, optionally with edited arguments.
#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/approve",
    tag = "decisions",
    params(("id" = String, Path, description = "The session id")),
    request_body(content = Approve, description = "Optional; an empty body approves every waiting call"),
    responses(
        (status = 200, body = Decided),
        (status = 404, body = ErrorBody, description = "No session has this id"),
        (status = 409, body = ErrorBody, description = "Nothing waits, the call is not waiting, or the session has ended"),
        (status = 422, body = ErrorBody, description = "The edited arguments break the tool's schema")
    )
)]
pub async fn approve(
    State(state): State<ServerState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Approve>,
) -> Result<Json<Decided>, ApiError> {
    let decided = control::approve(
        state.store.as_ref(),
        &id,
        body.call.as_deref(),
        body.arguments,
        DECIDER,
    )
    .await?;
    Ok(Json(Decided {
        session_id: id,
        decided: decided.calls,
        queued: decided.queued,
    }))
}

/// Denies waiting calls; the model receives the reason.
#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/deny",
    tag = "decisions",
    params(("id" = String, Path, description = "The session id")),
    request_body = Deny,
    responses(
        (status = 200, body = Decided),
        (status = 400, body = ErrorBody, description = "No reason given"),
        (status = 404, body = ErrorBody, description = "No session has this id"),
        (status = 409, body = ErrorBody, description = "Nothing waits, the call is not waiting, or the session has ended")
    )
)]
pub async fn deny(
    State(state): State<ServerState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Deny>,
) -> Result<Json<Decided>, ApiError> {
    if body.reason.trim().is_empty() {
        return Err(ApiError::bad_request(
            "`reason` is empty; the model receives it, so say why",
        ));
    }
    let decided = control::deny(
        state.store.as_ref(),
        &id,
        body.call.as_deref(),
        &body.reason,
        DECIDER,
    )
    .await?;
    Ok(Json(Decided {
        session_id: id,
        decided: decided.calls,
        queued: decided.queued,
    }))
}

/// A session's status after a cancel or a resume.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatusOf {
    /// The session.
    pub session_id: String,
    /// Its public status now.
    #[schema(value_type = String)]
    pub status: PublicStatus,
    /// Its RunResult, when it has ended or waits for a decision (a resume then
    /// has nothing to do).
    #[schema(value_type = Option<Object>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<RunResult>,
}

/// Cancels a session that has not ended (also one whose process died); the
/// process driving it stops within a lease renewal.
#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/cancel",
    tag = "decisions",
    params(("id" = String, Path, description = "The session id")),
    responses(
        (status = 200, body = StatusOf),
        (status = 404, body = ErrorBody, description = "No session has this id"),
        (status = 409, body = ErrorBody, description = "The session has ended already")
    )
)]
pub async fn cancel(
    State(state): State<ServerState>,
    Path(id): Path<String>,
) -> Result<Json<StatusOf>, ApiError> {
    let session = cancel_session(state.store.as_ref(), &id, "cancelled over the HTTP API").await?;
    Ok(Json(StatusOf {
        session_id: id,
        status: session.public_status(),
        result: None,
    }))
}

/// Pauses a running session after its current step (`agent pause`): the
/// worker or process driving it pauses it at its next step boundary; one whose
/// process died is paused at once. `POST …/resume` continues it.
#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/pause",
    tag = "decisions",
    params(("id" = String, Path, description = "The session id")),
    responses(
        (status = 200, body = StatusOf, description = "`paused`, or `running` while its driver finishes the step"),
        (status = 404, body = ErrorBody, description = "No session has this id"),
        (status = 409, body = ErrorBody, description = "The session has ended, or waits for a decision")
    )
)]
pub async fn pause(
    State(state): State<ServerState>,
    Path(id): Path<String>,
) -> Result<Json<StatusOf>, ApiError> {
    let session = pause_session(state.store.as_ref(), &id, "the HTTP API").await?;
    Ok(Json(StatusOf {
        session_id: id,
        status: session.public_status(),
        result: None,
    }))
}

/// Queues a session for a worker to continue with the flags it recorded (`agent
/// resume --detach`). One that has ended or waits for a decision is left as it
/// is and its RunResult returned.
#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/resume",
    tag = "decisions",
    params(("id" = String, Path, description = "The session id")),
    responses(
        (status = 202, body = StatusOf, description = "Queued for a worker"),
        (status = 200, body = StatusOf, description = "Nothing to continue: it has ended or waits for a decision"),
        (status = 404, body = ErrorBody, description = "No session has this id")
    )
)]
pub async fn resume(
    State(state): State<ServerState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(
        match queue_again(state.store.as_ref(), &id, "resumed over the HTTP API").await? {
            Requeued::Queued => (
                StatusCode::ACCEPTED,
                Json(StatusOf {
                    session_id: id,
                    status: PublicStatus::Queued,
                    result: None,
                }),
            )
                .into_response(),
            Requeued::Stopped(result) => {
                let events = state.store.load(&id).await?;
                let session =
                    SessionState::from_events(&id, &events).map_err(ControlError::from)?;
                Json(StatusOf {
                    status: session.public_status(),
                    session_id: id,
                    result: Some(*result),
                })
                .into_response()
            }
        },
    )
}

/// Where to fork.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkAt {
    /// The last seq to copy (moved back to the start of its step if it falls inside one).
    pub at: u64,
}

/// The new session a fork made.
#[derive(Debug, Serialize, ToSchema)]
pub struct Forked {
    /// The new session.
    pub session_id: String,
    /// The session it copies.
    pub parent: String,
    /// The last seq copied.
    pub at: u64,
}

/// Copies a session's log up to a seq into a new session; continue it with
/// `POST /v1/sessions/{new id}/resume`.
#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/fork",
    tag = "decisions",
    params(("id" = String, Path, description = "The session id")),
    request_body = ForkAt,
    responses(
        (status = 201, body = Forked, description = "Forked; `Location` names the new session"),
        (status = 400, body = ErrorBody, description = "`at` is missing or past the end of the log"),
        (status = 404, body = ErrorBody, description = "No session has this id")
    )
)]
pub async fn fork(
    State(state): State<ServerState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ForkAt>,
) -> Result<impl IntoResponse, ApiError> {
    let fork = fork_session(state.store.as_ref(), &id, body.at).await?;
    let location = format!("/v1/sessions/{}", fork.session_id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(Forked {
            session_id: fork.session_id,
            parent: fork.parent,
            at: fork.at,
        }),
    ))
}
