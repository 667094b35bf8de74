//! Errors of the HTTP API, always as `{"error": {"code": "…", "message": "…"}}`
//! with the status that says what kind of mistake it was: 400 a bad body, query or
//! setting, 404 an unknown id, 409 a decision that conflicts with the session's
//! state, 422 edited arguments that break the tool's schema, 5xx the store. The
//! `uniform_errors` layer gives the same shape to errors raised outside the
//! handlers (unknown routes, body limits, timeouts).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use agent_core::store::StoreError;
use agent_engine::{ControlError, EngineError};
use agent_runtime::control::DecisionError;
use agent_runtime::{ConfigError, SubmitError};

/// A request the API refuses or could not do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable, machine-readable code (`invalid_request`, `not_found`, …).
    pub code: &'static str,
    /// What was wrong and what to do, for people.
    pub message: String,
}

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// The code and message of an error.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable, machine-readable code.
    pub code: String,
    /// What was wrong and what to do.
    pub message: String,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400: the body, a query parameter or a setting is not acceptable.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 403 `adhoc_refused`: free-form session settings on a server that runs
    /// declared agents only.
    pub fn adhoc_refused(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "adhoc_refused", message)
    }

    /// 500: the server failed.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

/// The longest message an error response carries: what a client sent (an id,
/// a field) is quoted in it, and a hostile client must not get its kilobytes
/// echoed back.
const ECHO_LIMIT: usize = 1024;

/// The longest id quoted whole in a message.
const ID_LIMIT: usize = 64;

/// `id` as a message quotes it: whole when short, else its start and its length.
pub fn quoted_id(id: &str) -> String {
    match id.char_indices().nth(ID_LIMIT) {
        Some((end, _)) => format!(
            "{}… ({} characters)",
            id.get(..end).unwrap_or_default(),
            id.chars().count()
        ),
        None => id.to_owned(),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut message = self.message;
        if let Some((end, _)) = message.char_indices().nth(ECHO_LIMIT) {
            message.truncate(end);
            message.push('…');
        }
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message,
            },
        };
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        let message = err.to_string();
        match err {
            StoreError::NotFound(id) => Self::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!(
                    "no session with id `{}`; GET /v1/sessions lists them",
                    quoted_id(&id)
                ),
            ),
            StoreError::Leased { .. } | StoreError::LeaseLost(_) | StoreError::Conflict { .. } => {
                Self::new(StatusCode::CONFLICT, "busy", message)
            }
            StoreError::Corrupt(_) => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "store_damaged",
                format!("{message}; nothing was changed"),
            ),
            StoreError::Unwritable(_) | StoreError::Backend(_) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                message,
            ),
            StoreError::InvalidBatch(_) => Self::internal(message),
        }
    }
}

impl From<ControlError> for ApiError {
    fn from(err: ControlError) -> Self {
        let message = err.to_string();
        match err {
            ControlError::Store(store) => store.into(),
            ControlError::State(_) => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "log_inconsistent",
                format!("the session log is inconsistent: {message}; nothing was changed"),
            ),
            ControlError::Ended { .. } => Self::new(StatusCode::CONFLICT, "ended", message),
            ControlError::NotPausable { .. } => {
                Self::new(StatusCode::CONFLICT, "not_pausable", message)
            }
            ControlError::NothingPending { .. } | ControlError::NotPending { .. } => {
                Self::new(StatusCode::CONFLICT, "not_pending", message)
            }
            ControlError::OutOfRange { .. } => {
                Self::new(StatusCode::BAD_REQUEST, "out_of_range", message)
            }
        }
    }
}

impl From<DecisionError> for ApiError {
    fn from(err: DecisionError) -> Self {
        match err {
            DecisionError::Control(control) => control.into(),
            DecisionError::Store(store) => store.into(),
            DecisionError::InvalidArguments(message) => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_arguments",
                message,
            ),
            refused @ DecisionError::FollowUpRefused { .. } => Self::new(
                StatusCode::CONFLICT,
                "follow_up_refused",
                refused.to_string(),
            ),
            DecisionError::Trace(message) => Self::internal(format!(
                "the decision is recorded, but the session's trace file could not be written: {message}"
            )),
        }
    }
}

impl From<ConfigError> for ApiError {
    fn from(err: ConfigError) -> Self {
        Self::bad_request(err.to_string())
    }
}

impl From<EngineError> for ApiError {
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::Store(store) => store.into(),
            EngineError::State(state) => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "log_inconsistent",
                format!("the session log is inconsistent: {state}; nothing was changed"),
            ),
            invalid @ EngineError::InvalidText { .. } => Self::bad_request(invalid.to_string()),
            other => Self::internal(other.to_string()),
        }
    }
}

impl From<SubmitError> for ApiError {
    fn from(err: SubmitError) -> Self {
        match err {
            SubmitError::Config(config) => config.into(),
            SubmitError::Engine(engine) => engine.into(),
        }
    }
}
