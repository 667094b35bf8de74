//! The tools of a session: the built-in tools its configuration names and the
//! tools of its MCP servers, each behind the configured layers — a timeout for
//! every tool, and a retry and a circuit breaker for idempotent and MCP tools —
//! and behind argument validation, outermost, so invalid arguments never reach a
//! layer.

use std::sync::Arc;
use std::time::Duration;

use agent_core::layer::Stack;
use agent_core::tool::{Tool, Toolbox};
use agent_layers::{BreakerPolicy, CircuitBreaker, Retry, RetryPolicy, Timeout};
use agent_tools::{
    BUILTIN_TOOLS, BuiltinOptions, ChildPolicy, McpServer, ToolRegistry, builtin_tool,
};

use super::{SessionConfig, seconds_of};
use crate::error::ConfigError;

/// The layers of one tool under `config`'s policy.
fn layered(
    config: &SessionConfig,
    tool: Arc<dyn Tool>,
    from_mcp: bool,
) -> Result<Arc<dyn Tool>, ConfigError> {
    let timeout = seconds_of("--tool-timeout", config.tool_timeout_secs())?;
    let mut stack = Stack::<dyn Tool>::new();
    if tool.spec().idempotent || from_mcp {
        stack = stack
            .layer(CircuitBreaker::new(BreakerPolicy::default()))
            .layer(Retry::new(RetryPolicy {
                max_retries: config.tool_retries() as usize,
                ..RetryPolicy::for_tools()
            }));
    }
    Ok(stack.layer(Timeout::new(timeout)).wrap(tool))
}

/// How `config`'s programs are started: a scrubbed environment plus its
/// `--pass-env`, confined where this process can confine them.
pub fn child_policy(config: &SessionConfig) -> ChildPolicy {
    ChildPolicy::new(config.pass_env().to_vec())
}

/// The built-in tools `config` names, layered and validated.
pub fn builtin_registry(config: &SessionConfig) -> Result<ToolRegistry, ConfigError> {
    let options = BuiltinOptions {
        allowed_commands: config.allow_cmd().to_vec(),
        child: child_policy(config),
    };
    let mut registry = ToolRegistry::new();
    for name in config.tools() {
        let tool = builtin_tool(name, &options).ok_or_else(|| {
            ConfigError::new(format!(
                "unknown tool `{name}` in --tools; built-in tools are: {}",
                BUILTIN_TOOLS.join(", ")
            ))
        })?;
        registry
            .register_shared(layered(config, tool, false)?)
            .map_err(|err| ConfigError::new(format!("--tools: {err}")))?;
    }
    Ok(registry)
}

/// The tools of a session and the MCP servers that serve some of them; stop the
/// servers with [`SessionTools::shutdown`] when the session is done with them.
pub struct SessionTools {
    /// Every tool, by name.
    pub toolbox: Toolbox,
    servers: Vec<McpServer>,
}

impl SessionTools {
    /// Starts `config`'s MCP servers and gathers every tool, with `extra` (tools
    /// registered in code, for example by a worker's user) added to them.
    pub async fn start(
        config: &SessionConfig,
        extra: &[Arc<dyn Tool>],
    ) -> Result<Self, ConfigError> {
        let mut registry = builtin_registry(config)?;
        for tool in extra {
            registry
                .register_shared(Arc::clone(tool))
                .map_err(|err| ConfigError::new(format!("tool `{}`: {err}", tool.spec().name)))?;
        }
        let child = child_policy(config);
        let timeout = Duration::try_from_secs_f64(config.mcp_timeout_secs())
            .map_err(|err| ConfigError::new(format!("--mcp-timeout: {err}")))?;
        let mut servers: Vec<McpServer> = Vec::new();
        for line in config.mcp() {
            let server = match McpServer::start_with(line, timeout, &child).await {
                Ok(server) => server,
                Err(err) => {
                    stop(servers).await;
                    return Err(ConfigError::new(format!("--mcp: {err}")));
                }
            };
            for tool in server.tools() {
                let added = layered(config, Arc::clone(tool), true).and_then(|tool| {
                    registry.register_shared(tool).map(|_| ()).map_err(|err| {
                        ConfigError::new(format!("--mcp `{}`: {err}", server.command()))
                    })
                });
                if let Err(err) = added {
                    servers.push(server);
                    stop(servers).await;
                    return Err(err);
                }
            }
            servers.push(server);
        }
        Ok(Self {
            toolbox: registry.into_toolbox(),
            servers,
        })
    }

    /// Stops every MCP server.
    pub async fn shutdown(self) {
        stop(self.servers).await;
    }
}

async fn stop(servers: Vec<McpServer>) {
    for server in servers {
        server.shutdown().await;
    }
}
