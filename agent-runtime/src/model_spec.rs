//! From a `--model` spec to a model: scripted files, replays of stored sessions,
//! OpenAI-compatible and Anthropic servers (keys from the environment only, every
//! provider behind the retry layer), the JSON-text adapter, and GGUF models run
//! in-process by llama.cpp (feature `local`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agent_core::context::TokenCounter;
use agent_core::event::{Event, EventKind};
use agent_core::layer::Layer;
use agent_core::model::Model;
use agent_core::store::EventStore;
use agent_layers::{BreakerPolicy, CircuitBreaker, FallbackModel, Retry, RetryPolicy};
use agent_providers::{
    ANTHROPIC_DEFAULT_BASE_URL, Anthropic, DEFAULT_LOCAL_MODEL_FILE, JsonText, ModelSpec,
    OPENAI_DEFAULT_BASE_URL, OpenAi, ProviderConfig, ReplayModel, ScriptedModel, Tiktoken,
    is_local,
};

use crate::error::ConfigError;

/// Where local models live, relative to the directory a command runs in.
pub const LOCAL_MODELS_DIR: &str = ".agent/models";

/// The spec as it is recorded: checked, with a script or model path made
/// absolute (relative to `cwd`), and `local` naming the default model file.
pub fn normalise(spec: &str, cwd: &Path) -> Result<String, ConfigError> {
    let parsed = parse(spec)?;
    Ok(absolute(parsed, cwd)?.to_string())
}

/// The default local model file for commands run in `cwd`.
pub fn default_local_model(cwd: &Path) -> std::path::PathBuf {
    cwd.join(LOCAL_MODELS_DIR).join(DEFAULT_LOCAL_MODEL_FILE)
}

/// `spec` with `--threads` / `--temperature` folded in; they apply only to
/// local models.
pub fn with_local_options(
    spec: &str,
    threads: Option<u32>,
    temperature: Option<f32>,
) -> Result<String, ConfigError> {
    if threads.is_none() && temperature.is_none() {
        return Ok(spec.to_owned());
    }
    let ModelSpec::Local { path, mut options } = parse(spec)? else {
        return Err(ConfigError::new(format!(
            "--threads and --temperature apply only to local models (--model local…), not to `{spec}`"
        )));
    };
    if let Some(threads) = threads {
        if threads == 0 {
            return Err(ConfigError::new("--threads must be at least 1"));
        }
        options.threads = threads;
    }
    if let Some(temperature) = temperature {
        if !(temperature.is_finite() && (0.0..=2.0).contains(&temperature)) {
            return Err(ConfigError::new(format!(
                "--temperature takes a number from 0 to 2, not {temperature}"
            )));
        }
        options.temperature = temperature;
    }
    Ok(ModelSpec::Local { path, options }.to_string())
}

fn parse(spec: &str) -> Result<ModelSpec, ConfigError> {
    ModelSpec::parse(spec).map_err(|err| match ModelSpec::local_options_error(spec) {
        Some(reason) => ConfigError::new(format!("--model `{spec}`: {reason}")),
        None => ConfigError::new(err.to_string()),
    })
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
        ModelSpec::Local { path, options } => {
            let file = match path {
                Some(path) => std::path::absolute(cwd.join(&path)).map_err(|err| {
                    ConfigError::new(format!("--model: bad model path `{path}`: {err}"))
                })?,
                None => default_local_model(cwd),
            };
            Ok(ModelSpec::Local {
                path: Some(file.display().to_string()),
                options,
            })
        }
        other => Ok(other),
    }
}

/// The model of `config`: its `model`, or with `fallback_models` a
/// [`FallbackModel`] that asks them in order when one fails for good, each
/// behind a circuit breaker (5 failures in a row skip it for 30 s, then one
/// trial), so a dead provider does not cost a timeout per step.
pub async fn with_fallbacks(
    config: &crate::SessionConfig,
    store: &dyn EventStore,
    request_timeout: Duration,
) -> Result<Arc<dyn Model>, ConfigError> {
    let primary = build(config.model(), store, request_timeout).await?;
    if config.fallback_models().is_empty() {
        return Ok(primary);
    }
    let guarded = |spec: &str, model: Arc<dyn Model>| {
        CircuitBreaker::new(BreakerPolicy::default())
            .named(spec)
            .layer(model)
    };
    let mut chain = FallbackModel::new(config.model(), guarded(config.model(), primary));
    for spec in config.fallback_models() {
        let model = build(spec, store, request_timeout)
            .await
            .map_err(|err| ConfigError::new(format!("--fallback-model {spec}: {err}")))?;
        chain = chain.or(spec.as_str(), guarded(spec, model));
    }
    Ok(Arc::new(chain))
}

/// The model `spec` names. A replay reads its session from `store`.
pub async fn build(
    spec: &str,
    store: &dyn EventStore,
    request_timeout: Duration,
) -> Result<Arc<dyn Model>, ConfigError> {
    let spec = parse(spec)?;
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
        agent_core::store::StoreError::NotFound(_) => ConfigError::new(format!(
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
        ModelSpec::Replay { session_id } => {
            let events = recorded.unwrap_or_default();
            let replay = ReplayModel::from_events(session_id, events);
            Arc::new(match recorded_counter(events) {
                Some(counter) => replay.with_token_counter(counter),
                None => replay,
            })
        }
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
        ModelSpec::Local { path, options } => local(spec, path.as_deref(), *options)?,
    })
}

#[cfg(feature = "local")]
fn local(
    spec: &ModelSpec,
    path: Option<&str>,
    options: agent_providers::LocalOptions,
) -> Result<Arc<dyn Model>, ConfigError> {
    let file = match path {
        Some(path) => std::path::PathBuf::from(path),
        None => default_local_model(&std::env::current_dir().unwrap_or_default()),
    };
    let model = agent_providers::LocalModel::new(file, options)
        .map_err(|err| ConfigError::new(format!("--model {spec}: {err}")))?;
    Ok(Arc::new(model))
}

#[cfg(not(feature = "local"))]
fn local(
    spec: &ModelSpec,
    _path: Option<&str>,
    _options: agent_providers::LocalOptions,
) -> Result<Arc<dyn Model>, ConfigError> {
    Err(ConfigError::new(format!(
        "--model {spec}: this build has no local models; build agent-runtime with its `local` feature"
    )))
}

/// The tokenizer of the model a recorded session ran with, so its replay counts
/// the context as the original did and summarises at the same points.
fn recorded_counter(events: &[Event]) -> Option<Arc<dyn TokenCounter>> {
    let config = events.iter().find_map(|event| match &event.kind {
        EventKind::SessionStarted { config, .. } => Some(config),
        _ => None,
    })?;
    let spec = ModelSpec::parse(config.get("model")?.as_str()?).ok()?;
    counter_of(&spec)
}

/// The tokenizer `spec`'s model counts with, where it is known without a key.
fn counter_of(spec: &ModelSpec) -> Option<Arc<dyn TokenCounter>> {
    match spec {
        ModelSpec::OpenAi { model, .. } => {
            Tiktoken::for_model(model).map(|counter| Arc::new(counter) as Arc<dyn TokenCounter>)
        }
        ModelSpec::JsonText(inner) => counter_of(inner),
        ModelSpec::Local { path, options } => local_counter(path.as_deref(), *options),
        _ => None,
    }
}

#[cfg(feature = "local")]
fn local_counter(
    path: Option<&str>,
    options: agent_providers::LocalOptions,
) -> Option<Arc<dyn TokenCounter>> {
    let file = std::path::PathBuf::from(path?);
    agent_providers::LocalModel::new(file, options)
        .ok()?
        .token_counter()
}

#[cfg(not(feature = "local"))]
fn local_counter(
    _path: Option<&str>,
    _options: agent_providers::LocalOptions,
) -> Option<Arc<dyn TokenCounter>> {
    None
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
