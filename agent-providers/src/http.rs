//! The HTTP side of providers: one JSON POST with a timeout, and the mapping of
//! what can go wrong onto typed model errors — 429, 5xx, connection errors,
//! timeouts and bodies cut short are transient; other 4xx are fatal; a 5xx whose
//! body says the server could not parse its own model's output is invalid output.
//! Messages name the status and never the key.

use std::sync::Once;
use std::time::{Duration, SystemTime};

use agent_core::model::ModelError;
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::Value;

/// Time allowed for one request when none is configured.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Longest excerpt of an error body kept in a message.
const EXCERPT_CHARS: usize = 300;

/// How to reach a provider's server. `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    /// Model name sent in every request.
    pub model: String,
    /// Base URL of the API (OpenAI: ending before `/chat/completions`; Anthropic:
    /// before `/v1/messages`).
    pub base_url: String,
    /// The key; a server on this machine may need none.
    pub api_key: Option<String>,
    /// Time allowed for one request.
    pub timeout: Duration,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[set]"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// A JSON-over-HTTP client for one provider.
#[derive(Debug, Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    timeout: Duration,
}

impl HttpClient {
    /// A client whose requests time out after `timeout`.
    pub fn new(timeout: Duration) -> Result<Self, String> {
        static CRYPTO: Once = Once::new();
        CRYPTO.call_once(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|err| format!("cannot build the HTTP client: {err}"))?;
        Ok(Self { client, timeout })
    }

    /// POSTs `body` to `url` with `headers`; returns the response JSON and its
    /// text. `secret` is removed from every message. A 5xx whose body says the
    /// server could not parse its own model's output is `InvalidOutput`.
    pub async fn post_json(
        &self,
        url: &str,
        headers: HeaderMap,
        body: &Value,
        secret: Option<&str>,
    ) -> Result<(Value, String), ModelError> {
        let redact = redactor(secret);
        let response = self.send(url, headers, body, &redact).await?;
        self.whole_body(url, response, &redact).await
    }

    /// POSTs `body`, which asks for a streamed response, and folds the
    /// server-sent events that come back with `fold`, handing each piece of
    /// text to `show` as it arrives; returns the complete response as
    /// [`post_json`](Self::post_json) would have. A stream that breaks or ends
    /// before the response is complete is transient, like a body cut short, so
    /// it is retried. A server that ignores the request to stream and answers
    /// with one JSON body is read as such.
    pub async fn post_stream<F: StreamFold>(
        &self,
        url: &str,
        headers: HeaderMap,
        body: &Value,
        secret: Option<&str>,
        mut fold: F,
        show: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(Value, String), ModelError> {
        let redact = redactor(secret);
        let response = self.send(url, headers, body, &redact).await?;
        let is_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if !is_stream {
            return self.whole_body(url, response, &redact).await;
        }
        let mut events = response.bytes_stream().eventsource();
        let cut_short = |why: String| ModelError::Transient {
            message: redact(format!("the event stream from {url} was cut short: {why}")),
            retry_after: None,
        };
        while let Some(event) = events.next().await {
            let event = event.map_err(|err| match err {
                EventStreamError::Transport(err) => cut_short(source_chain(&err)),
                other => ModelError::Fatal {
                    message: redact(format!("the event stream from {url} is malformed: {other}")),
                },
            })?;
            if fold.take(&event.event, &event.data, show)? {
                return fold.finish();
            }
        }
        Err(cut_short(
            "it ended before the response was complete".into(),
        ))
    }

    /// Sends the POST and turns a failure status into its typed error.
    async fn send(
        &self,
        url: &str,
        headers: HeaderMap,
        body: &Value,
        redact: &(dyn Fn(String) -> String + Sync),
    ) -> Result<reqwest::Response, ModelError> {
        let response = self
            .client
            .post(url)
            .headers(headers)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|err| self.transport_error(url, &err, redact))?;
        let status = response.status();
        tracing::debug!(
            url = redact(url.to_owned()).as_str(),
            status = status.as_u16(),
            "provider answered"
        );
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        let text = response
            .text()
            .await
            .map_err(|err| self.transport_error(url, &err, redact))?;
        let message = redact(format!("HTTP {status} from POST {url}: {}", excerpt(&text)));
        if status.is_server_error() && rejects_its_models_output(&text) {
            return Err(ModelError::InvalidOutput {
                message: format!(
                    "the server could not parse its own model's tool call ({message})"
                ),
                raw: redact(excerpt(&text)),
                usage: agent_core::types::Usage::default(),
            });
        }
        Err(if is_transient(status) {
            ModelError::Transient {
                message,
                retry_after,
            }
        } else {
            ModelError::Fatal { message }
        })
    }

    /// A successful response's body as JSON, and as text.
    async fn whole_body(
        &self,
        url: &str,
        response: reqwest::Response,
        redact: &(dyn Fn(String) -> String + Sync),
    ) -> Result<(Value, String), ModelError> {
        let text = response
            .text()
            .await
            .map_err(|err| self.transport_error(url, &err, redact))?;
        let json = serde_json::from_str(&text).map_err(|err| {
            if err.is_eof() {
                ModelError::Transient {
                    message: format!("the response body from {url} was cut short ({err})"),
                    retry_after: None,
                }
            } else {
                ModelError::Fatal {
                    message: redact(format!(
                        "the response from {url} is not JSON ({err}): {}",
                        excerpt(&text)
                    )),
                }
            }
        })?;
        Ok((json, text))
    }

    fn transport_error(
        &self,
        url: &str,
        err: &reqwest::Error,
        redact: &(dyn Fn(String) -> String + Sync),
    ) -> ModelError {
        let what = if err.is_timeout() {
            format!(
                "no response from {url} within {}s",
                self.timeout.as_secs_f64()
            )
        } else if err.is_connect() {
            format!("cannot connect to {url}: {}", source_chain(err))
        } else if err.is_body() || err.is_decode() {
            format!(
                "the response body from {url} was cut short: {}",
                source_chain(err)
            )
        } else {
            format!("request to {url} failed: {}", source_chain(err))
        };
        ModelError::Transient {
            message: redact(what),
            retry_after: None,
        }
    }
}

/// Folds a provider's server-sent events into the response body its
/// non-streaming API would have returned, so one parser reads both.
pub trait StreamFold: Send {
    /// Takes one event (`event` is its type, `message` when it names none);
    /// hands each piece of text to `show`; returns whether the response is
    /// complete. An event that reports a failure is its typed error.
    fn take(
        &mut self,
        event: &str,
        data: &str,
        show: &mut (dyn FnMut(&str) + Send),
    ) -> Result<bool, ModelError>;

    /// The complete response: its JSON and that JSON as text.
    fn finish(self) -> Result<(Value, String), ModelError>;
}

/// A function removing `secret` from a message, if there is one.
fn redactor(secret: Option<&str>) -> impl Fn(String) -> String + Sync + '_ {
    move |text: String| match secret.filter(|secret| !secret.is_empty()) {
        Some(secret) => text.replace(secret, "[redacted]"),
        None => text,
    }
}

/// Whether an error body says the server's own parser rejected what its model
/// generated (llama.cpp's `llama-server` answers such a step with a 500): asking
/// again the same way mostly fails the same way, so it is invalid output, not a
/// transient fault.
fn rejects_its_models_output(body: &str) -> bool {
    let body = body.to_lowercase();
    [
        "failed to parse tool call",
        "failed to parse input at pos",
        "does not match the expected format",
    ]
    .iter()
    .any(|phrase| body.contains(phrase))
}

fn is_transient(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
        || status.is_server_error()
}

/// `Retry-After` as seconds or an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

fn excerpt(text: &str) -> String {
    let trimmed = text.trim();
    if trimmed.chars().count() <= EXCERPT_CHARS {
        trimmed.to_owned()
    } else {
        let cut: String = trimmed.chars().take(EXCERPT_CHARS).collect();
        format!("{cut}…")
    }
}

fn source_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Whether `url` points at this machine, where a server may need no key.
pub fn is_local(url: &str) -> bool {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(host, _)| host),
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1" | "0.0.0.0") || host.starts_with("127.")
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(10));
        headers.insert(RETRY_AFTER, HeaderValue::from_str(&later).unwrap());
        let parsed = retry_after(&headers).unwrap();
        assert!(
            parsed > Duration::from_secs(8) && parsed <= Duration::from_secs(10),
            "{parsed:?}"
        );
        headers.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn a_server_rejecting_its_models_output_is_told_from_other_failures() {
        for body in [
            r#"{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON: parse error at line 1"}}"#,
            r#"{"error":{"code":500,"message":"Failed to parse input at pos 395: <|tool_call_start|>"}}"#,
            "the model produced output that does not match the expected format",
        ] {
            assert!(rejects_its_models_output(body), "{body}");
        }
        for body in [
            r#"{"error":{"code":500,"message":"Failed to parse tools: type must be string"}}"#,
            "internal server error",
        ] {
            assert!(!rejects_its_models_output(body), "{body}");
        }
    }

    #[test]
    fn local_urls_are_recognised() {
        for url in [
            "http://127.0.0.1:8080/v1",
            "http://localhost/v1",
            "http://[::1]:9/v1",
        ] {
            assert!(is_local(url), "{url}");
        }
        for url in ["https://api.openai.com/v1", "http://10.0.0.1/v1"] {
            assert!(!is_local(url), "{url}");
        }
    }
}
