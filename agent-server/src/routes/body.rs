//! Request bodies: JSON read whatever the `Content-Type` says (so `curl -d` works),
//! with duplicate keys refused, unknown fields refused by the target type, and an
//! empty body read as `{}`.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON request body of type `T`.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                let status = rejection.status();
                let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
                    "payload_too_large"
                } else {
                    "invalid_request"
                };
                ApiError::new(status, code, rejection.body_text())
            })?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|err| ApiError::bad_request(format!("the body is not UTF-8: {err}")))?;
        let text = if text.trim().is_empty() { "{}" } else { text };
        let value = agent_core::strict_json::from_str(text).map_err(|err| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_json",
                format!("the body is not valid JSON: {err}"),
            )
        })?;
        serde_json::from_value(value)
            .map(JsonBody)
            .map_err(|err| ApiError::bad_request(format!("the body is not acceptable: {err}")))
    }
}
