//! `HttpChatModel`: a model behind an HTTP chat API, generic over its wire format.
//! Construction, the POST, key handling (sent only in headers, removed from every
//! message) and error mapping are shared; a [`WireFormat`] says where to post,
//! which headers carry the key, how a request is written and how a response is
//! read. [`OpenAi`](crate::OpenAi) and [`Anthropic`](crate::Anthropic) are this
//! model with their formats.

use std::marker::PhantomData;

use agent_core::{Model, ModelContext, ModelError, ModelIdentity, ModelRequest, ModelResponse};
use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::http::{HttpClient, ProviderConfig};

/// How one provider's chat API is spoken.
pub trait WireFormat: Send + Sync + 'static {
    /// `gen_ai.provider.name` of this provider.
    const PROVIDER: &'static str;
    /// The environment variable that holds the key, for messages.
    const KEY_VARIABLE: &'static str;

    /// The endpoint's path under the base URL.
    const PATH: &'static str;

    /// Headers every request carries besides the key.
    const HEADERS: &'static [(&'static str, &'static str)] = &[];

    /// The header that carries `key`, and its value.
    fn key_header(key: &str) -> (HeaderName, String);

    /// The exact request body.
    fn body(model: &str, request: &ModelRequest) -> Value;

    /// Our actions from a response (`text` is the body as received).
    fn parse(body: &Value, text: &str) -> Result<ModelResponse, ModelError>;
}

/// A chat model reached over HTTP with wire format `W`.
pub struct HttpChatModel<W> {
    config: ProviderConfig,
    http: HttpClient,
    format: PhantomData<fn() -> W>,
}

impl<W> std::fmt::Debug for HttpChatModel<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpChatModel")
            .field("config", &self.config)
            .finish()
    }
}

impl<W> Clone for HttpChatModel<W> {
    fn clone(&self) -> Self {
        Self {
            config: self.config.clone(),
            http: self.http.clone(),
            format: PhantomData,
        }
    }
}

impl<W: WireFormat> HttpChatModel<W> {
    /// A model for `config`.
    pub fn new(config: ProviderConfig) -> Result<Self, String> {
        let http = HttpClient::new(config.timeout)?;
        Ok(Self {
            config,
            http,
            format: PhantomData,
        })
    }

    /// Where and as whom this model is reached (`Debug` hides the key).
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }
}

#[async_trait]
impl<W: WireFormat> Model for HttpChatModel<W> {
    async fn complete(
        &self,
        request: &ModelRequest,
        _ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        let key = self.config.api_key.as_deref();
        let headers = headers::<W>(key)?;
        let url = format!("{}{}", self.config.base_url, W::PATH);
        let body = W::body(&self.config.model, request);
        let (response, text) = self.http.post_json(&url, headers, &body, key).await?;
        let mut parsed = W::parse(&response, &text)?;
        parsed.model = response
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok(parsed)
    }

    fn identity(&self) -> ModelIdentity {
        ModelIdentity::new(W::PROVIDER, self.config.model.as_str())
    }
}

/// The unsigned number at `pointer` in a response, 0 when absent.
pub(crate) fn count(body: &Value, pointer: &str) -> u64 {
    body.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// The headers of a request of format `W` with `key`, if any.
fn headers<W: WireFormat>(key: Option<&str>) -> Result<HeaderMap, ModelError> {
    let mut headers = HeaderMap::new();
    for (name, value) in W::HEADERS {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    if let Some(key) = key {
        let (name, value) = W::key_header(key);
        let value = HeaderValue::from_str(&value).map_err(|_| ModelError::Fatal {
            message: format!(
                "{} holds characters that cannot be sent in a header",
                W::KEY_VARIABLE
            ),
        })?;
        headers.insert(name, value);
    }
    Ok(headers)
}
