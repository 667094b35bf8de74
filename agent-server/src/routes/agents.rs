//! `GET /v1/agents` (the declared agents) and `GET /v1/agents/{name}` (one
//! definition): what a new session may name.

use axum::Json;
use axum::extract::{Path, State};
use serde::Serialize;
use utoipa::ToSchema;

use agent_runtime::{AgentDefinition, AgentView};

use crate::error::{ApiError, ErrorBody};
use crate::state::ServerState;

/// The declared agents.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentList {
    /// Each agent, by name.
    pub agents: Vec<AgentView>,
}

/// The agents this server runs.
#[utoipa::path(
    get,
    path = "/v1/agents",
    tag = "agents",
    responses((status = 200, body = AgentList))
)]
pub async fn list(State(state): State<ServerState>) -> Json<AgentList> {
    Json(AgentList {
        agents: state.agents().iter().map(AgentDefinition::view).collect(),
    })
}

/// One agent's definition and digest.
#[utoipa::path(
    get,
    path = "/v1/agents/{name}",
    tag = "agents",
    params(("name" = String, Path, description = "The agent's name")),
    responses(
        (status = 200, body = AgentView),
        (status = 404, body = ErrorBody, description = "No agent has this name")
    )
)]
pub async fn get(
    State(state): State<ServerState>,
    Path(name): Path<String>,
) -> Result<Json<AgentView>, ApiError> {
    let agents = state.agents();
    agents
        .get(&name)
        .map(|agent| Json(agent.view()))
        .map_err(|err| {
            ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                "not_found",
                err.to_string(),
            )
        })
}
