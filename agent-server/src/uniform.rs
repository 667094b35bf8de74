//! One error shape for every response: error responses that a layer or the
//! router made (an unknown route, a body over the limit, a timeout) are given
//! the API's `{"error": {"code", "message"}}` body, keeping their status.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::limits::MAX_BODY;

/// The code of an error response that a layer or the router made, by status.
fn code_of(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "invalid_request",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::NOT_FOUND => "no_route",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::REQUEST_TIMEOUT | StatusCode::SERVICE_UNAVAILABLE => "timeout",
        _ if status.is_server_error() => "internal",
        _ => "invalid_request",
    }
}

/// The longest error text of a layer kept as the message.
const MESSAGE_LIMIT: usize = 4096;

/// Gives error responses that are not JSON already (from the router, body limits,
/// timeouts) the API's error shape, keeping their status and text.
pub async fn uniform_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if status.as_u16() < 400 || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, MESSAGE_LIMIT)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_owned())
        .unwrap_or_default();
    let message = match (status, text.is_empty()) {
        (StatusCode::NOT_FOUND, _) => "no such route; GET /v1/openapi.json lists them".to_owned(),
        (StatusCode::PAYLOAD_TOO_LARGE, _) => {
            format!("the request body is over the limit of {} bytes", MAX_BODY)
        }
        (_, true) => status
            .canonical_reason()
            .unwrap_or("request failed")
            .to_owned(),
        (_, false) => text,
    };
    let body = serde_json::json!({"error": {"code": code_of(status), "message": message}});
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body.to_string()))
}
