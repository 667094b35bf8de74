//! `GET /healthz`: whether the server can read and write its store; open to
//! everyone.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use agent_core::store::SessionQuery;

use crate::error::{ApiError, ErrorBody};
use crate::state::ServerState;

/// The server is up and its store answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: &'static str,
}

/// Whether the server and its store answer (no token needed).
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "meta",
    security(()),
    responses(
        (status = 200, body = Health),
        (status = 503, description = "The store does not answer or cannot be written (a full disk, a read-only file)", body = ErrorBody)
    )
)]
pub async fn healthz(State(state): State<ServerState>) -> Result<Json<Health>, ApiError> {
    state
        .store
        .sessions_page(&SessionQuery {
            status: None,
            limit: 1,
            after: None,
        })
        .await?;
    state.store.check_writable().await?;
    Ok(Json(Health { status: "ok" }))
}
