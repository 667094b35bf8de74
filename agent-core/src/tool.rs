//! The `Tool` trait, what a handler receives and returns, and the `Toolbox` of tools
//! an engine may call.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::cancel::Cancellation;
use crate::layer::{IgnoreReports, LayerObserver};
use crate::types::ToolSpec;

/// What a tool handler knows about the call it serves.
#[derive(Clone)]
pub struct ToolContext {
    /// The session making the call.
    pub session_id: String,
    /// The call being served.
    pub call_id: String,
    /// 1 for the first attempt, 2 for the first retry, …
    pub attempt: u32,
    /// Root directory that every file-touching tool is confined to.
    pub workspace: Arc<Path>,
    /// Where layers report retries and breaker changes.
    pub observer: Arc<dyn LayerObserver>,
    /// Raised when the engine gives up on the call (its wall time ran out, the
    /// session was cancelled); work outside the handler's future should stop.
    pub cancel: Cancellation,
}

impl ToolContext {
    /// A context for a first attempt whose reports are ignored.
    pub fn new(
        session_id: impl Into<String>,
        call_id: impl Into<String>,
        workspace: impl Into<Arc<Path>>,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            call_id: call_id.into(),
            attempt: 1,
            workspace: workspace.into(),
            observer: Arc::new(IgnoreReports),
            cancel: Cancellation::new(),
        }
    }
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("session_id", &self.session_id)
            .field("call_id", &self.call_id)
            .field("attempt", &self.attempt)
            .field("workspace", &self.workspace)
            .finish()
    }
}

/// A tool's successful result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The text the model will see.
    pub content: String,
}

impl From<String> for ToolOutput {
    fn from(content: String) -> Self {
        Self { content }
    }
}

impl From<&str> for ToolOutput {
    fn from(content: &str) -> Self {
        Self {
            content: content.to_owned(),
        }
    }
}

/// Why a tool call gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the schema; the message names the field.
    /// The model receives it as an error observation.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// An expected failure (division by zero, file not found, a timeout); the model
    /// receives it as an error observation. Only `retryable` failures are retried.
    #[error("{message}")]
    Failed {
        /// What went wrong, for the model.
        message: String,
        /// Whether trying again may succeed.
        retryable: bool,
    },
    /// A bug in the tool; the run ends with `internal_error`.
    #[error("internal tool error: {0}")]
    Internal(String),
}

impl ToolError {
    /// An expected, non-retryable failure.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed {
            message: message.into(),
            retryable: false,
        }
    }
}

/// A tool the model can call: a serialisable spec plus an async handler.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The spec the model sees.
    fn spec(&self) -> &ToolSpec;

    /// Runs one call with arguments already validated against `spec().input_schema`
    /// (when the tool was registered through a validating registry).
    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
}

/// Two tools were registered under one name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a tool named `{0}` is already registered; tool names must be unique")]
pub struct DuplicateTool(pub String);

/// The tools an engine may call, by unique name.
#[derive(Clone, Default)]
pub struct Toolbox {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    specs: Arc<Vec<ToolSpec>>,
}

impl Toolbox {
    /// An empty toolbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; fails if its name is taken.
    pub fn insert(&mut self, tool: Arc<dyn Tool>) -> Result<(), DuplicateTool> {
        let name = tool.spec().name.clone();
        if self.tools.contains_key(&name) {
            return Err(DuplicateTool(name));
        }
        self.tools.insert(name, tool);
        self.specs = Arc::new(self.tools.values().map(|t| t.spec().clone()).collect());
        Ok(())
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// All specs, sorted by name.
    pub fn specs(&self) -> Arc<Vec<ToolSpec>> {
        Arc::clone(&self.specs)
    }

    /// All tool names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}
