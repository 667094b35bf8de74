//! `POST /v1/sessions` (create and queue), `GET /v1/sessions` (a page, newest
//! first) and `GET /v1/sessions/{id}` (where one stands).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use agent_core::{
    PublicStatus, RunResult, RunUsage, SessionCursor, SessionQuery, SessionState, ToolCall,
    ToolSpec,
};
use agent_runtime::{RunOptions, SessionConfig, builtin_registry};

use super::JsonBody;
use crate::error::{ApiError, ErrorBody};
use crate::state::ServerState;

/// A new session: the task, and the `agent run` flags in snake_case. Only `task`
/// and `model` are required; unknown fields are refused.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// The task for the agent.
    pub task: String,
    /// `scripted:FILE`, `replay:SESSION_ID`, `openai:MODEL[@BASE_URL]`,
    /// `anthropic:MODEL[@BASE_URL]` or `json:<spec>`; keys come from the server's environment.
    pub model: String,
    /// `react` (default) or `plan-execute`.
    pub strategy: Option<String>,
    /// Built-in tools the model may call.
    pub tools: Option<Vec<String>>,
    /// Calls of these tools wait for a human decision.
    pub approve_tools: Option<Vec<String>>,
    /// Programs `run_command` may start.
    pub allow_cmd: Option<Vec<String>>,
    /// Models asked, in order, when the one before fails for good.
    pub fallback_models: Option<Vec<String>>,
    /// Root of every file-touching tool, on the server (default: its current directory).
    #[schema(value_type = Option<String>)]
    pub workspace: Option<PathBuf>,
    /// A command that must succeed before a finish is accepted.
    pub finish_when: Option<String>,
    /// Environment variables started programs get besides PATH, HOME, LANG and TMPDIR.
    pub pass_env: Option<Vec<String>>,
    /// MCP server command lines, started on the server.
    pub mcp: Option<Vec<String>>,
    /// Seconds an MCP server may take to start or answer.
    pub mcp_timeout_secs: Option<f64>,
    /// Model responses allowed (default 10).
    pub max_steps: Option<u32>,
    /// Input plus output tokens allowed.
    pub max_tokens: Option<u64>,
    /// Model calls allowed.
    pub max_model_calls: Option<u64>,
    /// Tool calls allowed.
    pub max_tool_calls: Option<u64>,
    /// Output tokens per model request (default 1024).
    pub max_output_tokens: Option<u32>,
    /// Wall-time budget in seconds.
    pub timeout_secs: Option<f64>,
    /// Seconds allowed for one provider request (default 120).
    pub request_timeout_secs: Option<f64>,
    /// Seconds allowed for one tool call (default 1800).
    pub tool_timeout_secs: Option<f64>,
    /// Retries of a failed call of an idempotent or MCP tool (default 2).
    pub tool_retries: Option<u32>,
    /// Run a call again even when an identical earlier call of an idempotent
    /// tool already returned (default false: it gets that result back).
    pub allow_repeated_calls: Option<bool>,
    /// What history each model request holds: `keep-all` (default), `last:N`,
    /// `window:TOKENS` or `summarise:TOKENS[:KEEP]`.
    pub context: Option<String>,
    /// Invalid model outputs in a row that end the run after one last request
    /// for a plain-text answer (default 3; 0: no such limit).
    pub max_invalid: Option<u32>,
    /// When a limit ends the run: `summarise` (default: one last request for an
    /// answer from what was gathered, marked `partial`) or `stop`.
    pub on_limit: Option<String>,
    /// Steps between reflections (none by default).
    pub reflect_every: Option<u32>,
    /// A JSON Schema the final answer must satisfy; the result's `output`.
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<Value>,
    /// Whether the budgets count over the whole session instead of per
    /// conversation turn (default: per turn).
    pub session_budget: Option<bool>,
    /// What a message sent while it runs does: `enqueue` (default),
    /// `interrupt` or `reject`.
    pub on_message: Option<String>,
    /// CPU threads of a local model (default 2).
    pub threads: Option<u32>,
    /// Sampling temperature of a local model, 0 to 2 (default 0).
    pub temperature: Option<f32>,
    /// A JSONL trace file on the server.
    #[schema(value_type = Option<String>)]
    pub trace: Option<PathBuf>,
    /// `summary` (default) or `full`.
    pub trace_content: Option<String>,
}

impl CreateSession {
    /// The task and the run options.
    fn into_parts(self) -> (String, RunOptions) {
        let options = RunOptions {
            model: Some(self.model),
            fallback_models: self.fallback_models,
            strategy: self.strategy,
            approve_tools: self.approve_tools,
            // Waiving a tool's own approval flag is the operator's, not an API
            // client's, to decide.
            waive_approval: None,
            tools: self.tools,
            workspace: self.workspace,
            allow_cmd: self.allow_cmd,
            finish_when: self.finish_when,
            pass_env: self.pass_env,
            mcp: self.mcp,
            mcp_timeout_secs: self.mcp_timeout_secs,
            max_steps: self.max_steps,
            max_tokens: self.max_tokens,
            max_model_calls: self.max_model_calls,
            max_tool_calls: self.max_tool_calls,
            max_output_tokens: self.max_output_tokens,
            timeout_secs: self.timeout_secs,
            request_timeout_secs: self.request_timeout_secs,
            tool_timeout_secs: self.tool_timeout_secs,
            tool_retries: self.tool_retries,
            allow_repeated_calls: self.allow_repeated_calls,
            context: self.context,
            max_invalid: self.max_invalid,
            on_limit: self.on_limit,
            reflect_every: self.reflect_every,
            output_schema: self.output_schema,
            session_budget: self.session_budget,
            on_message: self.on_message,
            threads: self.threads,
            temperature: self.temperature,
            trace: self.trace,
            trace_content: self.trace_content,
        };
        (self.task, options)
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
        (status = 400, body = ErrorBody, description = "Bad JSON, a missing or unknown field, or a setting that cannot be used")
    )
)]
pub async fn create(
    State(state): State<ServerState>,
    JsonBody(body): JsonBody<CreateSession>,
) -> Result<impl IntoResponse, ApiError> {
    let (task, options) = body.into_parts();
    if task.trim().is_empty() {
        return Err(ApiError::bad_request("`task` is empty"));
    }
    let config = SessionConfig::resolve(&options, None, &state.cwd)?;
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
    /// Only sessions in this status: queued, running, awaiting_approval, finished, failed or cancelled.
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
        SessionState::from_events(&id, &events).map_err(agent_core::ControlError::from)?;
    Ok(Json(view(&session)))
}

fn view(session: &SessionState) -> SessionView {
    SessionView {
        session_id: session.session_id().to_owned(),
        status: session.public_status(),
        task: session.task().to_owned(),
        strategy: session.strategy().to_owned(),
        model: session
            .config()
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned),
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

    use std::collections::BTreeSet;

    use super::*;

    /// The documented body of `POST /v1/sessions` names exactly the run options
    /// and the task, less those an API client may not set (waiving a tool's
    /// own approval flag is the operator's decision).
    #[test]
    fn the_documented_body_is_the_run_options_and_the_task() {
        let schema =
            serde_json::to_value(<CreateSession as utoipa::PartialSchema>::schema()).unwrap();
        let documented: BTreeSet<String> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let mut accepted: BTreeSet<String> = serde_json::to_value(RunOptions::default())
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        accepted.insert("task".into());
        accepted.remove("waive_approval");
        assert_eq!(documented, accepted);
    }

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
