//! Messages: `POST /v1/sessions/{id}/messages` opens the next turn of a
//! session whose last turn ended and queues it for a worker, as `agent send`
//! runs it in the foreground; to a running session it adds the message as the
//! session's `on_message` policy says.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use agent_core::state::PublicStatus;
use agent_runtime::control::{MessageSent, send_message};

use super::JsonBody;
use crate::error::{ApiError, ErrorBody};
use crate::state::ServerState;

/// A follow-up message.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// What the person says next; the model sees it after the previous answer.
    pub text: String,
}

/// The turn a message opened.
#[derive(Debug, Serialize, ToSchema)]
pub struct TurnOpened {
    /// The session.
    pub session_id: String,
    /// The turn the message opened (2 for the first follow-up), or the turn
    /// that runs and gets it.
    pub turn: u32,
    /// `queued`: a worker runs the new turn; `running`: the session's driver
    /// delivers the message at its next step. Follow it on the event stream.
    #[schema(value_type = String)]
    pub status: PublicStatus,
}

/// Adds a follow-up message to a session whose last turn ended and queues the
/// next turn for a worker; its events and RunResult come as the first turn's do.
#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/messages",
    tag = "sessions",
    params(("id" = String, Path, description = "The session id")),
    request_body = Message,
    responses(
        (status = 202, body = TurnOpened, description = "Recorded; a worker runs the turn"),
        (status = 400, body = ErrorBody, description = "The message is empty"),
        (status = 404, body = ErrorBody, description = "No session has this id"),
        (status = 409, body = ErrorBody, description = "The session cannot take a message now: it runs and its policy is `reject`, it waits for a decision, was cancelled, or its strategy takes none")
    )
)]
pub async fn send(
    State(state): State<ServerState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Message>,
) -> Result<(StatusCode, Json<TurnOpened>), ApiError> {
    if body.text.trim().is_empty() {
        return Err(ApiError::bad_request(
            "`text` is empty; send what the person says next",
        ));
    }
    let (turn, status) = match send_message(state.store.as_ref(), &id, &body.text).await? {
        MessageSent::TurnQueued { turn } => (turn, PublicStatus::Queued),
        MessageSent::Delivering { turn, .. } => (turn, PublicStatus::Running),
    };
    Ok((
        StatusCode::ACCEPTED,
        Json(TurnOpened {
            session_id: id,
            turn,
            status,
        }),
    ))
}
