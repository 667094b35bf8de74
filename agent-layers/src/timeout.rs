//! `Timeout`: an attempt that takes too long is dropped and fails — a tool with
//! the retryable failure `timed out after Ns`, a model with a transient error —
//! so a retry layer outside it may try again.

use std::time::Duration;

use agent_core::model::{
    Model, ModelContext, ModelError, ModelIdentity, ModelRequest, ModelResponse,
};
use agent_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use agent_core::types::ToolSpec;
use async_trait::async_trait;
use serde_json::Value;

use crate::{Layered, wraps_tools_and_models};

/// The layer: bounds every attempt by `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeout {
    limit: Duration,
}

impl Timeout {
    /// Attempts longer than `limit` fail.
    pub fn new(limit: Duration) -> Self {
        Self { limit }
    }
}

/// A tool or model whose attempts are bounded.
pub type TimeoutService<S> = Layered<S, Timeout>;

wraps_tools_and_models!(Timeout);

#[async_trait]
impl Tool for TimeoutService<dyn Tool> {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::timeout(self.layer.limit, self.inner.call(arguments, ctx))
            .await
            .unwrap_or_else(|_| {
                Err(ToolError::Failed {
                    message: format!("timed out after {}s", self.layer.limit.as_secs_f64()),
                    retryable: true,
                })
            })
    }
}

#[async_trait]
impl Model for TimeoutService<dyn Model> {
    fn identity(&self) -> ModelIdentity {
        self.inner.identity()
    }

    fn token_counter(&self) -> Option<std::sync::Arc<dyn agent_core::context::TokenCounter>> {
        self.inner.token_counter()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        tokio::time::timeout(self.layer.limit, self.inner.complete(request, ctx))
            .await
            .unwrap_or_else(|_| {
                Err(ModelError::Transient {
                    message: format!("no answer within {}s", self.layer.limit.as_secs_f64()),
                    retry_after: None,
                })
            })
    }
}
