//! The `Tool` trait, what a handler receives and returns, and the `Toolbox` of tools
//! an engine may call.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::types::ToolSpec;

/// What tool layers report while serving a call; the engine records each report as
/// an event (`ActionAttemptFailed`, `CircuitChanged`).
pub trait ToolObserver: Send + Sync {
    /// An attempt failed and another follows after `delay`.
    fn attempt_failed(&self, failure: AttemptFailure);
    /// A circuit breaker around `tool` changed state.
    fn circuit_changed(&self, tool: &str, state: CircuitState);
}

/// One failed attempt of a call that will be retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptFailure {
    /// The attempt that failed, 1 for the first.
    pub attempt: u32,
    /// Why it failed.
    pub error: String,
    /// Whether the failure was retryable (it is, or there would be no retry).
    pub retryable: bool,
    /// The wait before the next attempt.
    pub delay: Duration,
}

/// The state of a circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CircuitState {
    /// Calls go through.
    Closed,
    /// Calls fail fast until the cool-down ends.
    Open,
    /// One trial call goes through.
    HalfOpen,
}

/// An observer that ignores every report.
#[derive(Debug, Clone, Copy, Default)]
pub struct IgnoreToolReports;

impl ToolObserver for IgnoreToolReports {
    fn attempt_failed(&self, _failure: AttemptFailure) {}
    fn circuit_changed(&self, _tool: &str, _state: CircuitState) {}
}

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
    pub observer: Arc<dyn ToolObserver>,
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
            observer: Arc::new(IgnoreToolReports),
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
