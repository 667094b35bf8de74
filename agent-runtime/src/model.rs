//! From a `--model` spec to a model: scripted files, replays of stored sessions,
//! OpenAI-compatible and Anthropic servers (keys from the environment only, every
//! provider behind the retry layer), and the JSON-text adapter.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agent_core::{Event, EventStore, Layer, Model};
use agent_layers::{Retry, RetryPolicy};
use agent_providers::{
    ANTHROPIC_DEFAULT_BASE_URL, Anthropic, JsonText, ModelSpec, OPENAI_DEFAULT_BASE_URL, OpenAi,
    ProviderConfig, ReplayModel, ScriptedModel, is_local,
};

use crate::error::ConfigError;

/// The spec as it is recorded: checked, with a script path made absolute
/// (relative to `cwd`).
pub fn normalise(spec: &str, cwd: &Path) -> Result<String, ConfigError> {
    let parsed = ModelSpec::parse(spec).map_err(|err| ConfigError::new(err.to_string()))?;
    Ok(absolute(parsed, cwd)?.to_string())
}

fn absolute(spec: ModelSpec, cwd: &Path) -> Result<ModelSpec, ConfigError> {
    match spec {
        ModelSpec::Scripted { path } => {
            let absolute = std::path::absolute(cwd.join(&path)).map_err(|err| {
                ConfigError::new(format!("--model: bad script path `{path}`: {err}"))
            })?;
            Ok(ModelSpec::Scripted {
                path: absolute.display().to_string(),
            })
        }
        ModelSpec::JsonText(inner) => Ok(ModelSpec::JsonText(Box::new(absolute(*inner, cwd)?))),
        other => Ok(other),
    }
}

/// The model `spec` names. A replay reads its session from `store`.
pub async fn build(
    spec: &str,
    store: &dyn EventStore,
    request_timeout: Duration,
) -> Result<Arc<dyn Model>, ConfigError> {
    let spec = ModelSpec::parse(spec).map_err(|err| ConfigError::new(err.to_string()))?;
    let recorded = match &spec {
        ModelSpec::Replay { session_id } => Some(replayed(store, session_id).await?),
        ModelSpec::JsonText(inner) => match inner.as_ref() {
            ModelSpec::Replay { session_id } => Some(replayed(store, session_id).await?),
            _ => None,
        },
        _ => None,
    };
    instantiate(&spec, recorded.as_deref(), request_timeout)
}

async fn replayed(store: &dyn EventStore, session_id: &str) -> Result<Vec<Event>, ConfigError> {
    store.load(session_id).await.map_err(|err| match err {
        agent_core::StoreError::NotFound(_) => ConfigError::new(format!(
            "--model replay:{session_id}: no session with that id in this store"
        )),
        other => ConfigError::new(format!(
            "--model replay:{session_id}: the session cannot be read: {other}"
        )),
    })
}

fn instantiate(
    spec: &ModelSpec,
    recorded: Option<&[Event]>,
    timeout: Duration,
) -> Result<Arc<dyn Model>, ConfigError> {
    let provider_error = |err: String| ConfigError::new(format!("--model {spec}: {err}"));
    Ok(match spec {
        ModelSpec::Scripted { path } => Arc::new(
            ScriptedModel::from_file(path)
                .map_err(|err| ConfigError::new(format!("--model: {err}")))?,
        ),
        ModelSpec::Replay { session_id } => Arc::new(ReplayModel::from_events(
            session_id,
            recorded.unwrap_or_default(),
        )),
        ModelSpec::OpenAi { model, base_url } => {
            let config = provider_config(
                spec,
                model,
                base_url,
                "OPENAI",
                OPENAI_DEFAULT_BASE_URL,
                timeout,
            )?;
            retried(Arc::new(OpenAi::new(config).map_err(provider_error)?))
        }
        ModelSpec::Anthropic { model, base_url } => {
            let config = provider_config(
                spec,
                model,
                base_url,
                "ANTHROPIC",
                ANTHROPIC_DEFAULT_BASE_URL,
                timeout,
            )?;
            retried(Arc::new(Anthropic::new(config).map_err(provider_error)?))
        }
        ModelSpec::JsonText(inner) => {
            Arc::new(JsonText::new(instantiate(inner, recorded, timeout)?))
        }
    })
}

/// A provider behind the retry layer.
fn retried(provider: Arc<dyn Model>) -> Arc<dyn Model> {
    Retry::new(RetryPolicy::for_models()).layer(provider)
}

/// Where a provider is and its key: the base URL from the spec, else
/// `{PREFIX}_BASE_URL`, else `default_base`; the key from `{PREFIX}_API_KEY`.
fn provider_config(
    spec: &ModelSpec,
    model: &str,
    base_url: &Option<String>,
    prefix: &str,
    default_base: &str,
    timeout: Duration,
) -> Result<ProviderConfig, ConfigError> {
    let base_url = base_url
        .clone()
        .or_else(|| env(&format!("{prefix}_BASE_URL")))
        .unwrap_or_else(|| default_base.into());
    let api_key = key(&format!("{prefix}_API_KEY"), &base_url, spec)?;
    Ok(ProviderConfig {
        model: model.to_owned(),
        base_url: base_url.trim_end_matches('/').to_owned(),
        api_key,
        timeout,
    })
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

/// The key in `variable`; only a server on this machine may go without one.
fn key(variable: &str, base_url: &str, spec: &ModelSpec) -> Result<Option<String>, ConfigError> {
    match env(variable) {
        Some(key) => Ok(Some(key)),
        None if is_local(base_url) => Ok(None),
        None => Err(ConfigError::new(format!(
            "--model {spec}: {variable} is not set; export it, or point the spec at a local server (MODEL@http://127.0.0.1:PORT/...)"
        ))),
    }
}
