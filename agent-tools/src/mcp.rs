//! MCP client tools (feature `mcp`): start a Model Context Protocol server over
//! stdio, list its tools, and call them as ordinary tools. `inputSchema` becomes the
//! tool's input schema, `idempotentHint` its idempotence, `isError` an error
//! observation. A server that crashes, hangs on start or hangs on a call gives a
//! clear error or error observation within a timeout, never a hung run.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::confine::ChildPolicy;
use agent_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use agent_core::types::ToolSpec;
use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::TokioChildProcess;
use serde_json::Value;

/// Time a server may take to start, and a call to answer, when none is configured.
pub const DEFAULT_MCP_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a server could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP server `{command}`: {message}")]
pub struct McpError {
    /// The command line that started it.
    pub command: String,
    /// What went wrong.
    pub message: String,
}

type Client = RunningService<RoleClient, ()>;

/// A running MCP server and the tools it offers.
pub struct McpServer {
    command: String,
    client: Arc<Client>,
    tools: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("command", &self.command)
            .finish()
    }
}

impl McpServer {
    /// Starts `command_line` (split like a shell splits words), completes the
    /// handshake and lists its tools, each within `timeout`.
    pub async fn start(command_line: &str, timeout: Duration) -> Result<Self, McpError> {
        Self::start_with(command_line, timeout, &ChildPolicy::default()).await
    }

    /// [`McpServer::start`] with the environment `child` gives (a scrubbed one
    /// plus what `--pass-env` names); servers are never Landlock-confined.
    pub async fn start_with(
        command_line: &str,
        timeout: Duration,
        child: &ChildPolicy,
    ) -> Result<Self, McpError> {
        let error = |message: String| McpError {
            command: command_line.to_owned(),
            message,
        };
        let words = shlex::split(command_line)
            .ok_or_else(|| error("the command line has an unclosed quote".into()))?;
        let (program, args) = words
            .split_first()
            .ok_or_else(|| error("the command line is empty".into()))?;
        let workspace = std::env::current_dir().unwrap_or_else(|_| "/".into());
        let command = child
            .command(program, args, &workspace, false)
            .map_err(error)?;
        let (transport, _) = TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()
            .map_err(|err| error(format!("cannot start `{program}`: {err}")))?;
        let client = tokio::time::timeout(timeout, ().serve(transport))
            .await
            .map_err(|_| {
                error(format!(
                    "no MCP handshake within {}s",
                    timeout.as_secs_f64()
                ))
            })?
            .map_err(|err| error(format!("the MCP handshake failed: {err}")))?;
        let listed = tokio::time::timeout(timeout, client.list_all_tools())
            .await
            .map_err(|_| error(format!("no tool list within {}s", timeout.as_secs_f64())))?
            .map_err(|err| error(format!("listing its tools failed: {err}")))?;
        let client = Arc::new(client);
        let tools = listed
            .into_iter()
            .map(|tool| {
                let spec = ToolSpec {
                    name: tool.name.to_string(),
                    description: tool
                        .description
                        .as_deref()
                        .map(str::to_owned)
                        .or_else(|| tool.title.clone())
                        .unwrap_or_else(|| format!("the `{}` tool of an MCP server", tool.name)),
                    input_schema: Value::Object((*tool.input_schema).clone()),
                    output_description: None,
                    error_description: None,
                    idempotent: tool
                        .annotations
                        .as_ref()
                        .and_then(|annotations| annotations.idempotent_hint)
                        .unwrap_or(false),
                    needs_approval: false,
                };
                Arc::new(McpTool {
                    spec,
                    server: command_line.to_owned(),
                    client: Arc::clone(&client),
                    timeout,
                }) as Arc<dyn Tool>
            })
            .collect();
        Ok(Self {
            command: command_line.to_owned(),
            client,
            tools,
        })
    }

    /// The command line that started the server.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Its tools, under the server's own names.
    pub fn tools(&self) -> &[Arc<dyn Tool>] {
        &self.tools
    }

    /// Ends the session and the server process.
    pub async fn shutdown(self) {
        drop(self.tools);
        if let Ok(client) = Arc::try_unwrap(self.client) {
            let _ = client.cancel().await;
        }
    }
}

/// One tool of an MCP server.
struct McpTool {
    spec: ToolSpec,
    server: String,
    client: Arc<Client>,
    timeout: Duration,
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Value::Object(arguments) = arguments else {
            return Err(ToolError::InvalidArguments(
                "the arguments must be a JSON object".into(),
            ));
        };
        let mut params = CallToolRequestParams::new(self.spec.name.clone());
        params.arguments = Some(arguments);
        let result = tokio::time::timeout(self.timeout, self.client.call_tool(params))
            .await
            .map_err(|_| {
                ToolError::failed(format!(
                    "the MCP server `{}` did not answer the call within {}s",
                    self.server,
                    self.timeout.as_secs_f64()
                ))
            })?
            .map_err(|err| {
                ToolError::failed(format!("the MCP server `{}` failed: {err}", self.server))
            })?;
        output_of(&result)
    }
}

/// The tool output of an MCP `tools/call` result as a server sent it: its text
/// blocks (other blocks as their JSON) joined by newlines, or its structured
/// content when it has no blocks; an error result is a failed call with that text.
pub fn output_of(result: &CallToolResult) -> Result<ToolOutput, ToolError> {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.clone(),
            other => serde_json::to_string(other).unwrap_or_default(),
        })
        .collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let content = parts.join("\n");
    if result.is_error.unwrap_or(false) {
        Err(ToolError::failed(content))
    } else {
        Ok(content.into())
    }
}
