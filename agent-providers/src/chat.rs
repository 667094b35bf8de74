//! `HttpChatModel`: a model behind an HTTP chat API, generic over its wire format.
//! Construction, the POST, key handling (sent only in headers, removed from every
//! message) and error mapping are shared; a [`WireFormat`] says where to post,
//! which headers carry the key, how a request is written and how a response is
//! read. [`OpenAi`](crate::OpenAi) and [`Anthropic`](crate::Anthropic) are this
//! model with their formats. A format may ask for the JSON-text fallback: a step
//! whose tool call the server could not parse is asked again once with the tools
//! in the prompt (see [`WireFormat::TEXT_FALLBACK`]).

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use agent_core::context::TokenCounter;
use agent_core::delta::ModelDelta;
use agent_core::layer::RetryNotice;
use agent_core::model::{
    Model, ModelContext, ModelError, ModelIdentity, ModelRequest, ModelResponse,
};
use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::http::{HttpClient, ProviderConfig, StreamFold};
use crate::json_text::{actions_from_text, text_request};

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

    /// Whether a step whose tool-call output the server itself could not parse is
    /// asked again with the tools in the prompt and the answer parsed as JSON text
    /// (servers running open models, such as llama.cpp's, answer such a step
    /// with a 500).
    const TEXT_FALLBACK: bool = false;

    /// The exact request body.
    fn body(model: &str, request: &ModelRequest) -> Value;

    /// Our actions from a response (`text` is the body as received).
    fn parse(body: &Value, text: &str) -> Result<ModelResponse, ModelError>;

    /// How this format's streamed response is folded into the body
    /// [`parse`](Self::parse) reads, so a streamed and a whole response of the
    /// same content give the same actions.
    type Fold: StreamFold + Default;

    /// Turns `body` into the request for a streamed response.
    fn ask_to_stream(body: &mut Value) {
        if let Some(fields) = body.as_object_mut() {
            fields.insert("stream".into(), Value::Bool(true));
        }
    }

    /// The tokenizer of `model`, where this provider's is known.
    fn token_counter(model: &str) -> Option<Arc<dyn TokenCounter>> {
        let _ = model;
        None
    }
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

    /// One POST of `body`: the response JSON and its text. A server that rejects its
    /// own model's output answers invalid output (see `HttpClient::post_json`).
    /// When someone watches the call's text, the response is asked for as a
    /// stream and each piece of text reported as it arrives, after a
    /// [`ModelDelta::Started`] that tells the watcher an attempt begins.
    async fn post(&self, body: &Value, ctx: &ModelContext) -> Result<(Value, String), ModelError> {
        let key = self.config.api_key.as_deref();
        let headers = headers::<W>(key)?;
        let url = format!("{}{}", self.config.base_url, W::PATH);
        if !ctx.streams() {
            return self.http.post_json(&url, headers, body, key).await;
        }
        let mut body = body.clone();
        W::ask_to_stream(&mut body);
        ctx.delta(ModelDelta::Started);
        let mut show = |text: &str| {
            if !text.is_empty() {
                ctx.delta(ModelDelta::Text(text.to_owned()));
            }
        };
        self.http
            .post_stream(&url, headers, &body, key, W::Fold::default(), &mut show)
            .await
    }
}

/// Our actions from a response of format `W`, with the model name it reports.
fn parse<W: WireFormat>(response: &Value, text: &str) -> Result<ModelResponse, ModelError> {
    let mut parsed = W::parse(response, text)?;
    parsed.model = response
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(parsed)
}

#[async_trait]
impl<W: WireFormat> Model for HttpChatModel<W> {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        let body = W::body(&self.config.model, request);
        match self.post(&body, ctx).await {
            Err(ModelError::InvalidOutput { message, .. })
                if W::TEXT_FALLBACK && !request.tools.is_empty() =>
            {
                // Recorded as a retry of the step (a `retry` trace line) so the
                // switch is visible in the session's log.
                ctx.observer.retrying(RetryNotice {
                    attempt: 1,
                    error: format!(
                        "{message}; asking again with the tools in the prompt, parsed as JSON text"
                    ),
                    delay: Duration::ZERO,
                });
                let body = W::body(&self.config.model, &text_request(request));
                // Its text is the JSON action format, not words for a person:
                // not streamed.
                let quiet = ModelContext {
                    deltas: None,
                    ..ctx.clone()
                };
                let (response, text) = self.post(&body, &quiet).await?;
                actions_from_text(parse::<W>(&response, &text)?, ctx.step)
            }
            answer => {
                let (response, text) = answer?;
                parse::<W>(&response, &text)
            }
        }
    }

    fn identity(&self) -> ModelIdentity {
        ModelIdentity::new(W::PROVIDER, self.config.model.as_str())
    }

    fn token_counter(&self) -> Option<Arc<dyn TokenCounter>> {
        W::token_counter(&self.config.model)
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
