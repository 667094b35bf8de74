//! Refusing bodies over the limit cleanly. A request whose `Content-Length` is
//! over [`MAX_BODY`] is answered 413 before any handler runs; its body is read
//! and dropped first (up to [`DRAIN_LIMIT`]), because closing a connection with
//! unread data makes the kernel reset it, and the client would see a broken
//! connection instead of the 413. Bodies without a length are cut at the limit by
//! the body-limit layer behind this one.

use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The largest request body accepted, in bytes (1 MiB); more is a 413.
pub const MAX_BODY: usize = 1 << 20;

/// The most of an oversized body read (and dropped) before answering 413.
pub const DRAIN_LIMIT: usize = 16 << 20;

/// Answers 413 to a request that announces a body over [`MAX_BODY`].
pub async fn refuse_oversized(request: Request, next: Next) -> Response {
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|text| text.parse::<u64>().ok());
    let Some(length) = announced.filter(|length| *length > MAX_BODY as u64) else {
        return next.run(request).await;
    };
    if length <= DRAIN_LIMIT as u64 {
        let _ = axum::body::to_bytes(request.into_body(), DRAIN_LIMIT).await;
    }
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("the request body ({length} bytes) is over the limit of {MAX_BODY} bytes"),
    )
    .into_response()
}
