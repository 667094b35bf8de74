//! `Timeout`: an attempt that takes too long fails with `timed out after Ns`
//! (retryable), and the call in flight is dropped.

use std::sync::Arc;
use std::time::Duration;

use agent_core::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use async_trait::async_trait;
use serde_json::Value;

/// Bounds each call of the inner tool.
pub struct Timeout {
    inner: Arc<dyn Tool>,
    limit: Duration,
}

impl Timeout {
    /// Wraps `inner`; calls longer than `limit` fail.
    pub fn new(inner: Arc<dyn Tool>, limit: Duration) -> Self {
        Self { inner, limit }
    }
}

#[async_trait]
impl Tool for Timeout {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        tokio::time::timeout(self.limit, self.inner.call(arguments, ctx))
            .await
            .unwrap_or_else(|_| {
                Err(ToolError::Failed {
                    message: format!("timed out after {}s", self.limit.as_secs_f64()),
                    retryable: true,
                })
            })
    }
}
