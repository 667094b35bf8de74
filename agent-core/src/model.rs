//! The `Model` trait: the unreliable decision core that proposes actions. Providers
//! implement it; the engine only ever talks to a model through it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::cancel::Cancellation;
use crate::context::TokenCounter;
use crate::delta::{DeltaSink, ModelDelta};
use crate::history::HistoryItem;
use crate::layer::{IgnoreReports, LayerObserver};
use crate::types::{Action, ToolSpec, Usage};

/// Everything a model is given for one step.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// System instructions from the strategy.
    pub instructions: String,
    /// The task text.
    pub task: String,
    /// What happened so far, in order; shared with the session's state, not copied.
    pub history: Arc<Vec<HistoryItem>>,
    /// The tools the model may call.
    pub tools: Arc<Vec<ToolSpec>>,
    /// Cap on output tokens sent to the provider, if any.
    pub max_output_tokens: Option<u32>,
    /// The JSON Schema a finish's answer must satisfy, if the session has one;
    /// a provider that supports it sends it as a response format, the engine
    /// also states it in the instructions.
    pub output_schema: Option<Arc<Value>>,
}

/// What a model call knows about where it runs, parallel to
/// [`ToolContext`](crate::tool::ToolContext): the step, where layers report retries,
/// and the flag the engine raises when it abandons the call.
#[derive(Clone)]
pub struct ModelContext {
    /// The session asking.
    pub session_id: String,
    /// Which response a positional model (scripted, replay) gives, 1-based. In a
    /// loop strategy it is the step the request is for (the log already holds
    /// `step - 1` model responses); a workflow node uses its node's fixed position
    /// among the graph's model nodes, so concurrent nodes stay deterministic.
    pub step: u32,
    /// Where layers report retries.
    pub observer: Arc<dyn LayerObserver>,
    /// Raised when the engine gives up on this call.
    pub cancel: Cancellation,
    /// What the call is for: a step, or a summary a context policy asked for.
    pub purpose: CallPurpose,
    /// Where a provider that can stream reports the text as it is generated;
    /// `None`: nobody watches, so the call is not streamed.
    pub deltas: Option<Arc<dyn DeltaSink>>,
}

/// What a model call is for. A positional model (scripted, replay) answers a
/// summary from its own list, so summaries never shift the responses of steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallPurpose {
    /// The next decision of step [`ModelContext::step`].
    Step,
    /// A summary of the oldest turns of the history, which the request holds;
    /// the answer is a finish whose text is the summary.
    Summary {
        /// Which summary of the session this is, 1-based.
        index: u32,
    },
    /// The one last answer after a limit or repeated invalid output ended the
    /// run; the request offers no tools. A scripted model answers it with the
    /// script's next response, like a step.
    LastAnswer,
    /// A look back over the steps so far (`--reflect-every`), which the request
    /// holds; the answer is a finish (or text) whose text is the note.
    Reflection {
        /// Which reflection of the session this is, 1-based.
        index: u32,
    },
}

impl ModelContext {
    /// A context for `step` whose reports are ignored.
    pub fn new(session_id: impl Into<String>, step: u32) -> Self {
        Self {
            session_id: session_id.into(),
            step,
            observer: Arc::new(IgnoreReports),
            cancel: Cancellation::new(),
            purpose: CallPurpose::Step,
            deltas: None,
        }
    }

    /// This context with `sink` watching the response's text.
    pub fn with_deltas(mut self, sink: Arc<dyn DeltaSink>) -> Self {
        self.deltas = Some(sink);
        self
    }

    /// Whether someone watches this call's text, so a provider that can
    /// stream should.
    pub fn streams(&self) -> bool {
        self.deltas.is_some()
    }

    /// Reports `delta` of this call's response to its sink, if any.
    pub fn delta(&self, delta: ModelDelta) {
        if let Some(sink) = &self.deltas {
            sink.delta(&self.session_id, self.step, delta);
        }
    }
}

impl std::fmt::Debug for ModelContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelContext")
            .field("session_id", &self.session_id)
            .field("step", &self.step)
            .field("purpose", &self.purpose)
            .field("streams", &self.streams())
            .field("cancelled", &self.cancel.is_cancelled())
            .finish()
    }
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
    /// The model that answered, as the provider reported it (for telemetry).
    pub model: Option<String>,
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

/// A model: given the state of a session, propose the next actions.
#[async_trait]
pub trait Model: Send + Sync {
    /// Asks the model for the next actions.
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError>;

    /// The provider and model asked, for telemetry (`unknown` unless a model says).
    fn identity(&self) -> ModelIdentity {
        ModelIdentity::default()
    }

    /// The model's own tokenizer, where it is known (context policies count
    /// with it; without one they estimate). Layers pass it through.
    fn token_counter(&self) -> Option<Arc<dyn TokenCounter>> {
        None
    }
}

/// Who a model call goes to, as telemetry names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelIdentity {
    /// `gen_ai.provider.name`: `openai`, `anthropic`, `scripted`, …
    pub provider: String,
    /// `gen_ai.request.model`: the model asked for.
    pub model: String,
}

impl ModelIdentity {
    /// The provider and model names.
    pub fn new(provider: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            model: model.into(),
        }
    }
}

impl Default for ModelIdentity {
    fn default() -> Self {
        Self::new("unknown", "unknown")
    }
}

/// A shared model is a model, so layers can wrap an `Arc<dyn Model>`.
#[async_trait]
impl<M: Model + ?Sized> Model for Arc<M> {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        (**self).complete(request, ctx).await
    }

    fn identity(&self) -> ModelIdentity {
        (**self).identity()
    }

    fn token_counter(&self) -> Option<Arc<dyn TokenCounter>> {
        (**self).token_counter()
    }
}

/// A request's instructions: the agent's, if it has any, ahead of `own` (the
/// strategy's, or the engine's for this kind of request).
pub fn agent_instructions(agent: Option<&str>, own: String) -> String {
    match agent {
        Some(agent) => format!("{agent}\n\n{own}"),
        None => own,
    }
}
