//! The `Model` trait: the unreliable decision core that proposes actions. Providers
//! implement it; the engine only ever talks to a model through it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::history::HistoryItem;
use crate::types::{Action, ToolSpec, Usage};

/// Everything a model is given for one step.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// System instructions from the strategy.
    pub instructions: String,
    /// The task text.
    pub task: String,
    /// What happened so far, in order.
    pub history: Vec<HistoryItem>,
    /// The tools the model may call.
    pub tools: Arc<Vec<ToolSpec>>,
    /// Which response a positional model (scripted, replay) gives, 1-based. In a
    /// loop strategy it is the step the request is for (the log already holds
    /// `step - 1` model responses); a workflow node uses its node's fixed position
    /// among the graph's model nodes, so concurrent nodes stay deterministic.
    pub step: u32,
    /// Cap on output tokens sent to the provider, if any.
    pub max_output_tokens: Option<u32>,
}

/// A model's usable answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// The proposed actions, at least one.
    pub actions: Vec<Action>,
    /// Tokens this call consumed.
    pub usage: Usage,
    /// Free text that came with the actions, if any.
    pub text: Option<String>,
}

/// Why a model call gave no usable answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The output cannot be turned into actions; the model is told and asked again.
    #[error("invalid model output: {message}")]
    InvalidOutput {
        /// The raw output.
        raw: String,
        /// What exactly is wrong.
        message: String,
        /// Tokens the call consumed.
        usage: Usage,
    },
    /// A failure worth retrying (rate limit, 5xx, timeout, connection error).
    #[error("transient provider error: {message}")]
    Transient {
        /// What happened, never containing a key.
        message: String,
        /// How long the provider asked us to wait.
        retry_after: Option<Duration>,
    },
    /// A failure that retrying will not fix (4xx, retries exhausted, diverged replay).
    #[error("provider error: {message}")]
    Fatal {
        /// What happened, never containing a key.
        message: String,
    },
    /// A bug or misconfiguration on our side (for example a script that ran out).
    #[error("{message}")]
    Internal {
        /// What happened.
        message: String,
    },
}

/// One retry a model layer is about to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryNotice {
    /// 1 for the first retry.
    pub attempt: u32,
    /// What failed, never containing a key.
    pub error: String,
    /// How long the layer waits before trying again.
    pub delay: Duration,
}

/// Receives a notice of every retry a model layer makes; the engine records each
/// one as a `ModelRetried` event (a `retry` trace line). Retries are not steps.
pub trait RetryObserver: Send + Sync {
    /// Called before the layer waits and tries again.
    fn retrying(&self, notice: RetryNotice);
}

/// An observer that ignores every notice.
#[derive(Debug, Clone, Copy, Default)]
pub struct IgnoreRetries;

impl RetryObserver for IgnoreRetries {
    fn retrying(&self, _notice: RetryNotice) {}
}

/// A model: given the state of a session, propose the next actions.
#[async_trait]
pub trait Model: Send + Sync {
    /// Asks the model for the next actions.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError>;

    /// Like [`Model::complete`], telling `observer` about every retry. Layers that
    /// retry or wrap another model override it; the engine always calls this one.
    async fn complete_observed(
        &self,
        request: &ModelRequest,
        observer: &dyn RetryObserver,
    ) -> Result<ModelResponse, ModelError> {
        let _ = observer;
        self.complete(request).await
    }
}

/// A shared model is a model, so layers can wrap an `Arc<dyn Model>`.
#[async_trait]
impl<M: Model + ?Sized> Model for Arc<M> {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        (**self).complete(request).await
    }

    async fn complete_observed(
        &self,
        request: &ModelRequest,
        observer: &dyn RetryObserver,
    ) -> Result<ModelResponse, ModelError> {
        (**self).complete_observed(request, observer).await
    }
}
