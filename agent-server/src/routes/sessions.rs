//! `POST /v1/sessions` (create and queue), `GET /v1/sessions` (a page, newest
//! first) and `GET /v1/sessions/{id}` (where one stands).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};

use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use agent_core::result::{RunResult, RunUsage};
use agent_core::state::{PublicStatus, SessionState};
use agent_core::store::{SessionCursor, SessionQuery};
use agent_core::types::{ToolCall, ToolSpec};
use agent_runtime::{AgentSpec, SessionConfig, builtin_registry};

use super::JsonBody;
use crate::error::{ApiError, ErrorBody};
use crate::state::ServerState;

/// A new session: the task and the declared agent to run it, with settings
/// on top — the `agent run` flags in snake_case ([`AgentSpec`]): budgets the
/// agent's or lower, and what its definition marks overridable. A server
/// started with `--allow-adhoc` also takes any other setting, and sessions of
/// no agent (`model` then required). Unknown fields are refused.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateSession {
    /// The task for the agent.
    pub task: String,
    /// The declared agent (`GET /v1/agents` lists them).
    #[serde(default)]
    pub agent: Option<String>,
    /// The session's settings.
    #[serde(flatten)]
    pub spec: AgentSpec,
}

impl CreateSession {
    /// The body as a new session; a field that is neither `task` nor a
    /// setting is refused, naming it (the settings are flattened into the
    /// body, which serde cannot check on its own).
    fn from_body(body: Value) -> Result<Self, ApiError> {
        if let Value::Object(fields) = &body {
            let settings = AgentSpec::field_names();
            if let Some(unknown) = fields
                .keys()
                .find(|key| !["task", "agent"].contains(&key.as_str()) && !settings.contains(key))
            {
                return Err(ApiError::bad_request(format!(
                    "the body is not acceptable: unknown field `{}`, expected `task`, `agent` or one of {}",
                    crate::error::quoted_id(unknown),
                    settings.join(", ")
                )));
            }
        }
        serde_json::from_value(body)
            .map_err(|err| ApiError::bad_request(format!("the body is not acceptable: {err}")))
    }
}

/// A session that was recorded and queued.
#[derive(Debug, Serialize, ToSchema)]
pub struct Queued {
    /// Its id.
    pub session_id: String,
    /// `queued`.
    #[schema(value_type = String)]
    pub status: PublicStatus,
}

/// Records a session and queues it for a worker.
#[utoipa::path(
    post,
    path = "/v1/sessions",
    tag = "sessions",
    request_body = CreateSession,
    responses(
        (status = 201, body = Queued, description = "Recorded and queued; `Location` names it"),
        (status = 400, body = ErrorBody, description = "Bad JSON, a missing or unknown field, an unknown agent, or a setting that cannot be used"),
        (status = 403, body = ErrorBody, description = "`adhoc_refused`: a setting the agent's definition does not let a client set (or raise), or no agent, on a server without `--allow-adhoc`")
    )
)]
pub async fn create(
    State(state): State<ServerState>,
    JsonBody(body): JsonBody<Value>,
) -> Result<impl IntoResponse, ApiError> {
    let CreateSession { task, agent, spec } = CreateSession::from_body(body)?;
    if task.trim().is_empty() {
        return Err(ApiError::bad_request("`task` is empty"));
    }
    if spec.waive_approval.is_some() {
        // Waiving a tool's own approval flag is the operator's, not an API
        // client's, to decide.
        return Err(ApiError::bad_request(
            "`waive_approval` is not accepted over the API; the operator sets it (agent run --waive-approval)",
        ));
    }
    let config = match agent {
        Some(name) => {
            let agents = state.agents();
            let definition = agents
                .get(&name)
                .map_err(|err| ApiError::bad_request(err.to_string()))?;
            let refused = definition.refused_settings(&spec);
            if !refused.is_empty() && !state.allow_adhoc {
                return Err(ApiError::adhoc_refused(format!(
                    "agent `{name}` does not let a client set {}: a client may lower its budgets and set what its definition marks `overridable` ({}); a server started with --allow-adhoc takes any setting",
                    refused.join(", "),
                    if definition.overridable.is_empty() {
                        "nothing".to_owned()
                    } else {
                        definition.overridable.join(", ")
                    }
                )));
            }
            SessionConfig::for_agent(definition, &spec, &state.cwd)?
        }
        None if state.allow_adhoc => SessionConfig::resolve(&spec, None, &state.cwd)?,
        None => {
            return Err(ApiError::adhoc_refused(
                "name a declared agent (`agent`; GET /v1/agents lists them): this server runs declared agents only, as free-form settings would give every token holder the rights of the server's user; start it with --allow-adhoc to allow them",
            ));
        }
    };
    let session_id = agent_runtime::submit(&config, state.store.clone(), task).await?;
    let location = format!("/v1/sessions/{session_id}");
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        Json(Queued {
            session_id,
            status: PublicStatus::Queued,
        }),
    ))
}

/// Which page of sessions.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only sessions in this status: queued, running, awaiting_approval, paused, finished, failed or cancelled.
    pub status: Option<String>,
    /// Sessions per page, 1 to 500 (default 50).
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// One line of the session list.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionLine {
    /// The session.
    pub session_id: String,
    /// Its public status.
    #[schema(value_type = String)]
    pub status: PublicStatus,
    /// The task.
    pub task: String,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When its last event was committed (RFC 3339).
    pub updated_at: String,
}

/// A page of sessions, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionPage {
    /// The sessions.
    pub sessions: Vec<SessionLine>,
    /// Pass as `cursor` for the next page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// Sessions per page when none is asked for, and the most one may ask for.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 500;

fn cursor_text(cursor: &SessionCursor) -> String {
    format!("{}.{}", cursor.created_at, cursor.session_id)
}

fn cursor_of(text: &str) -> Result<SessionCursor, ApiError> {
    text.split_once('.')
        .and_then(|(created_at, session_id)| {
            Some(SessionCursor {
                created_at: created_at.parse().ok()?,
                session_id: session_id.to_owned(),
            })
        })
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "`cursor` `{text}` is not one this API gave; pass the `next_cursor` of the previous page"
            ))
        })
}

/// Stored sessions, newest first, a page at a time.
#[utoipa::path(
    get,
    path = "/v1/sessions",
    tag = "sessions",
    params(ListQuery),
    responses(
        (status = 200, body = SessionPage),
        (status = 400, body = ErrorBody, description = "An unknown status, a limit out of range or a cursor this API did not give")
    )
)]
pub async fn list(
    State(state): State<ServerState>,
    Query(query): Query<ListQuery>,
) -> Result<Json<SessionPage>, ApiError> {
    let status = query
        .status
        .as_deref()
        .map(str::parse::<PublicStatus>)
        .transpose()
        .map_err(|err| ApiError::bad_request(format!("`status`: {err}")))?;
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "`limit` must be from 1 to {MAX_LIMIT} (got {limit})"
        )));
    }
    let after = query.cursor.as_deref().map(cursor_of).transpose()?;
    let page = state
        .store
        .sessions_page(&SessionQuery {
            status,
            limit: limit + 1,
            after,
        })
        .await?;
    let more = page.len() > limit;
    let sessions: Vec<_> = page.into_iter().take(limit).collect();
    let next_cursor = more
        .then(|| {
            sessions
                .last()
                .map(|last| cursor_text(&SessionCursor::after(last)))
        })
        .flatten();
    Ok(Json(SessionPage {
        sessions: sessions
            .into_iter()
            .map(|summary| SessionLine {
                session_id: summary.session_id,
                status: summary.status,
                task: summary.task,
                created_at: timestamp(summary.created_at),
                updated_at: timestamp(summary.updated_at),
            })
            .collect(),
        next_cursor,
    }))
}

/// Where a session stands.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionView {
    /// The session.
    pub session_id: String,
    /// Its public status.
    #[schema(value_type = String)]
    pub status: PublicStatus,
    /// The task.
    pub task: String,
    /// The strategy (`react`, `plan-execute`, `hitl(react)`, `dag:…`).
    pub strategy: String,
    /// The model spec it runs with.
    pub model: Option<String>,
    /// The declared agent it runs, if it was started from one.
    pub agent: Option<String>,
    /// The agent's instructions, if it has any.
    pub instructions: Option<String>,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When its last event was committed (RFC 3339).
    pub updated_at: String,
    /// The seq of its last event.
    pub last_seq: u64,
    /// Model responses so far.
    pub steps_used: u32,
    /// Tokens and calls so far.
    #[schema(value_type = Object)]
    pub usage: RunUsage,
    /// Calls waiting for a human decision.
    #[schema(value_type = Vec<Object>)]
    pub pending: Vec<ToolCall>,
    /// The specs of its built-in tools (name, description, input schema), for
    /// checking edited arguments before they are sent; tools of MCP servers are
    /// not listed (their servers would have to be started).
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<ToolSpec>,
    /// The RunResult (as `agent run --json` prints it), once the session has ended.
    #[schema(value_type = Option<Object>)]
    pub result: Option<RunResult>,
}

/// Status, task, usage, waiting calls and, once ended, the RunResult.
#[utoipa::path(
    get,
    path = "/v1/sessions/{id}",
    tag = "sessions",
    params(("id" = String, Path, description = "The session id")),
    responses(
        (status = 200, body = SessionView),
        (status = 404, body = ErrorBody, description = "No session has this id")
    )
)]
pub async fn get(
    State(state): State<ServerState>,
    Path(id): Path<String>,
) -> Result<Json<SessionView>, ApiError> {
    let events = state.store.load(&id).await?;
    let session =
        SessionState::from_events(&id, &events).map_err(agent_engine::ControlError::from)?;
    Ok(Json(view(&session)))
}

fn view(session: &SessionState) -> SessionView {
    SessionView {
        session_id: session.session_id().to_owned(),
        status: session.public_status(),
        task: session.task().to_owned(),
        strategy: session.strategy().to_owned(),
        model: recorded(session, "model"),
        agent: recorded(session, "agent"),
        instructions: recorded(session, "instructions"),
        created_at: timestamp(session.created_at()),
        updated_at: timestamp(session.updated_at()),
        last_seq: session.last_seq(),
        steps_used: session.steps_used(),
        usage: session.usage().clone(),
        pending: session.undecided_calls(),
        tools: builtin_specs(session),
        result: session.run_result(),
    }
}

/// The text setting `key` of the configuration `session` recorded.
fn recorded(session: &SessionState, key: &str) -> Option<String> {
    session
        .config()
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The specs of the built-in tools `session` recorded; none when its recorded
/// configuration cannot be read by this build (the rest of the view still can).
fn builtin_specs(session: &SessionState) -> Vec<ToolSpec> {
    SessionConfig::recorded(session.config())
        .and_then(|config| builtin_registry(&config))
        .map(|registry| registry.into_toolbox().specs().as_ref().clone())
        .unwrap_or_default()
}

/// Milliseconds since the Unix epoch as RFC 3339 text.
pub(crate) fn timestamp(millis: u64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(millis);
    humantime::format_rfc3339_millis(time).to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    #[test]
    fn cursors_round_trip_and_bad_ones_are_refused() {
        let cursor = SessionCursor {
            created_at: 1700,
            session_id: "0193-ab.cd".into(),
        };
        assert_eq!(cursor_of(&cursor_text(&cursor)).unwrap(), cursor);
        assert_eq!(
            cursor_of("nope").unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
    }
}
