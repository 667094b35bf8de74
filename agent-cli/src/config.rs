//! The run configuration: what `agent run` records in a session's first event, built
//! from the flags, and the engine it describes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent::strategies::{ApprovalPolicy, Hitl, PlanExecute, ReAct};
use agent::tools::{
    BUILTIN_TOOLS, BuiltinOptions, CommandGate, DEFAULT_GATE_TIMEOUT, McpServer, ToolRegistry,
    builtin_tool,
};
use agent::trace::{ContentMode, JsonlTrace};
use agent::{
    Budgets, DEFAULT_MAX_STEPS, Engine, EventSink, EventStore, ExecutionStrategy, Toolbox,
};
use serde::{Deserialize, Serialize};

use crate::cli::RunFlags;
use crate::error::CliError;

fn default_strategy() -> String {
    "react".into()
}

fn default_mcp_timeout() -> f64 {
    agent::tools::DEFAULT_MCP_TIMEOUT.as_secs_f64()
}

fn default_request_timeout() -> f64 {
    agent::providers::DEFAULT_REQUEST_TIMEOUT.as_secs_f64()
}

/// Output tokens per request when `--max-output-tokens` is not given.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 1024;

/// Every setting of a run, as recorded in `SessionStarted.config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// The model spec, never with a key; file paths made absolute.
    pub model: String,
    /// `react` or `plan-execute`.
    #[serde(default = "default_strategy")]
    pub strategy: String,
    /// Tools whose calls wait for a human decision.
    #[serde(default)]
    pub approve_tools: Vec<String>,
    /// Built-in tool names.
    pub tools: Vec<String>,
    /// Programs `run_command` may start.
    #[serde(default)]
    pub allow_cmd: Vec<String>,
    /// The completion check, if any.
    #[serde(default)]
    pub finish_when: Option<String>,
    /// MCP server command lines.
    #[serde(default)]
    pub mcp: Vec<String>,
    /// Seconds an MCP server may take to start or answer a call.
    #[serde(default = "default_mcp_timeout")]
    pub mcp_timeout_secs: f64,
    /// Absolute workspace root.
    pub workspace: PathBuf,
    /// Step budget.
    pub max_steps: u32,
    /// Token budget of the session.
    pub max_tokens: Option<u64>,
    /// Model-call budget of the session.
    pub max_model_calls: Option<u64>,
    /// Tool-call budget of the session.
    pub max_tool_calls: Option<u64>,
    /// Per-request output token cap.
    pub max_output_tokens: u32,
    /// Wall-time budget in seconds.
    pub timeout_secs: Option<f64>,
    /// Time allowed for one provider request, in seconds.
    #[serde(default = "default_request_timeout")]
    pub request_timeout_secs: f64,
    /// Trace file (absolute), if any.
    pub trace: Option<PathBuf>,
    /// `summary` or `full`.
    pub trace_content: String,
}

impl RunConfig {
    /// The configuration `flags` describe on top of `recorded` (what a session
    /// recorded at start, for a resume), checked: the model spec parses, every tool
    /// exists, the workspace is a directory.
    pub fn from_flags(flags: &RunFlags, recorded: Option<&RunConfig>) -> Result<Self, CliError> {
        let model = match (&flags.model, recorded) {
            (Some(spec), _) => crate::model::normalise(spec)?,
            (None, Some(recorded)) => recorded.model.clone(),
            (None, None) => {
                return Err(CliError::Usage(
                    "--model is required, for example --model scripted:script.json".into(),
                ));
            }
        };
        let tools = match (&flags.tools, recorded) {
            (Some(tools), _) => tools
                .iter()
                .map(|name| name.trim().to_owned())
                .filter(|name| !name.is_empty())
                .collect(),
            (None, Some(recorded)) => recorded.tools.clone(),
            (None, None) => Vec::new(),
        };
        let workspace = match (&flags.workspace, recorded) {
            (Some(dir), _) => absolute_dir(dir)?,
            (None, Some(recorded)) => absolute_dir(&recorded.workspace)?,
            (None, None) => absolute_dir(&std::env::current_dir().map_err(|err| {
                CliError::Usage(format!("cannot read the current directory: {err}"))
            })?)?,
        };
        let trace = match (&flags.trace, recorded) {
            (Some(path), _) => Some(absolute_file(path)?),
            (None, Some(recorded)) => recorded.trace.clone(),
            (None, None) => None,
        };
        let base = recorded.cloned().unwrap_or_else(|| Self {
            model: String::new(),
            strategy: default_strategy(),
            approve_tools: Vec::new(),
            tools: Vec::new(),
            allow_cmd: Vec::new(),
            finish_when: None,
            mcp: Vec::new(),
            mcp_timeout_secs: default_mcp_timeout(),
            workspace: PathBuf::new(),
            max_steps: DEFAULT_MAX_STEPS,
            max_tokens: None,
            max_model_calls: None,
            max_tool_calls: None,
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
            timeout_secs: None,
            request_timeout_secs: default_request_timeout(),
            trace: None,
            trace_content: "summary".into(),
        });
        let mcp = if flags.mcp.is_empty() {
            base.mcp.clone()
        } else {
            flags.mcp.clone()
        };
        let config = Self {
            model,
            strategy: flags
                .strategy
                .clone()
                .unwrap_or_else(|| base.strategy.clone()),
            approve_tools: flags
                .approve_tools
                .clone()
                .unwrap_or_else(|| base.approve_tools.clone()),
            tools,
            allow_cmd: flags
                .allow_cmd
                .clone()
                .unwrap_or_else(|| base.allow_cmd.clone()),
            finish_when: flags
                .finish_when
                .clone()
                .or_else(|| base.finish_when.clone()),
            mcp,
            mcp_timeout_secs: flags.mcp_timeout.unwrap_or(base.mcp_timeout_secs),
            workspace,
            max_steps: flags.max_steps.unwrap_or(base.max_steps),
            max_tokens: flags.max_tokens.or(base.max_tokens),
            max_model_calls: flags.max_model_calls.or(base.max_model_calls),
            max_tool_calls: flags.max_tool_calls.or(base.max_tool_calls),
            max_output_tokens: flags.max_output_tokens.unwrap_or(base.max_output_tokens),
            timeout_secs: flags.timeout.or(base.timeout_secs),
            request_timeout_secs: flags.request_timeout.unwrap_or(base.request_timeout_secs),
            trace,
            trace_content: flags.trace_content.clone().unwrap_or(base.trace_content),
        };
        for tool in &config.approve_tools {
            if !config.tools.contains(tool) && config.mcp.is_empty() {
                return Err(CliError::Usage(format!(
                    "--approve-tools names `{tool}`, which is not among --tools"
                )));
            }
        }
        config.tool_registry()?;
        Ok(config)
    }

    /// The configuration a session recorded in its first event.
    pub fn recorded(config: &serde_json::Value) -> Result<Self, CliError> {
        serde_json::from_value(config.clone()).map_err(|err| {
            CliError::Usage(format!(
                "the session's recorded configuration cannot be used by this build: {err}"
            ))
        })
    }

    fn budgets(&self) -> Budgets {
        Budgets {
            max_steps: self.max_steps,
            max_tokens: self.max_tokens,
            max_model_calls: self.max_model_calls,
            max_tool_calls: self.max_tool_calls,
            max_calls_per_tool: Default::default(),
            timeout: self
                .timeout_secs
                .and_then(|secs| Duration::try_from_secs_f64(secs).ok()),
        }
    }

    fn builtin_options(&self) -> BuiltinOptions {
        BuiltinOptions {
            allowed_commands: self.allow_cmd.clone(),
        }
    }

    fn tool_registry(&self) -> Result<ToolRegistry, CliError> {
        let mut registry = ToolRegistry::new();
        for name in &self.tools {
            let tool = builtin_tool(name, &self.builtin_options()).ok_or_else(|| {
                CliError::Usage(format!(
                    "unknown tool `{name}` in --tools; built-in tools are: {}",
                    BUILTIN_TOOLS.join(", ")
                ))
            })?;
            registry
                .register_shared(tool)
                .map_err(|err| CliError::Usage(format!("--tools: {err}")))?;
        }
        Ok(registry)
    }

    /// The engine this configuration describes, with `console` (if any) and the
    /// trace file as sinks, and the MCP servers it started.
    pub async fn engine(
        &self,
        store: Arc<dyn EventStore>,
        console: Option<Arc<dyn EventSink>>,
    ) -> Result<Session, CliError> {
        let timeout = Duration::try_from_secs_f64(self.request_timeout_secs)
            .map_err(|err| CliError::Usage(format!("--request-timeout: {err}")))?;
        let model = crate::model::build(&self.model, store.as_ref(), timeout).await?;
        let mut registry = self.tool_registry()?;
        let servers = self.start_mcp_servers().await?;
        for server in &servers {
            for tool in server.tools() {
                if let Err(err) = registry.register_shared(Arc::clone(tool)) {
                    let message = format!("--mcp `{}`: {err}", server.command());
                    Session::stop(servers).await;
                    return Err(CliError::Usage(message));
                }
            }
        }
        let toolbox = registry.into_toolbox();
        let strategy = self.strategy(&toolbox)?;
        let mut builder = Engine::builder(model, strategy)
            .store(store)
            .tools(toolbox)
            .budgets(self.budgets())
            .workspace(self.workspace.clone())
            .max_output_tokens(Some(self.max_output_tokens));
        if let Some(line) = &self.finish_when {
            let gate = CommandGate::new(line, DEFAULT_GATE_TIMEOUT)
                .map_err(|err| CliError::Usage(format!("--finish-when: {err}")))?;
            builder = builder.completion_gate(Arc::new(gate));
        }
        if let Some(path) = &self.trace {
            let mode: ContentMode = self
                .trace_content
                .parse()
                .map_err(|err| CliError::Usage(format!("--trace-content: {err}")))?;
            let trace = JsonlTrace::open(path, mode).map_err(|err| {
                CliError::Usage(format!(
                    "--trace: cannot open `{}` for appending: {err}",
                    path.display()
                ))
            })?;
            builder = builder.sink(Arc::new(trace));
        }
        if let Some(console) = console {
            builder = builder.sink(console);
        }
        Ok(Session {
            engine: builder.build(),
            servers,
        })
    }

    /// The strategy: ReAct or Plan-and-Execute, behind Human-in-the-Loop when any
    /// call may need approval.
    fn strategy(&self, toolbox: &Toolbox) -> Result<Arc<dyn ExecutionStrategy>, CliError> {
        let specs = toolbox.specs();
        let policy = ApprovalPolicy::new()
            .tools(self.approve_tools.clone())
            .flagged(&specs);
        let needs_hitl =
            !self.approve_tools.is_empty() || specs.iter().any(|spec| spec.needs_approval);
        Ok(match (self.strategy.as_str(), needs_hitl) {
            ("react", false) => Arc::new(ReAct::new()),
            ("react", true) => Arc::new(Hitl::new(ReAct::new(), policy)),
            ("plan-execute", false) => Arc::new(PlanExecute::new()),
            ("plan-execute", true) => Arc::new(Hitl::new(PlanExecute::new(), policy)),
            (other, _) => {
                return Err(CliError::Usage(format!(
                    "--strategy `{other}` is not known; use react or plan-execute"
                )));
            }
        })
    }

    async fn start_mcp_servers(&self) -> Result<Vec<McpServer>, CliError> {
        let timeout = Duration::try_from_secs_f64(self.mcp_timeout_secs)
            .map_err(|err| CliError::Usage(format!("--mcp-timeout: {err}")))?;
        let mut servers = Vec::new();
        for line in &self.mcp {
            match McpServer::start(line, timeout).await {
                Ok(server) => servers.push(server),
                Err(err) => {
                    Session::stop(servers).await;
                    return Err(CliError::Usage(format!("--mcp: {err}")));
                }
            }
        }
        Ok(servers)
    }
}

/// An engine and the MCP servers whose tools it offers; stop it when the run ends.
pub struct Session {
    /// The engine.
    pub engine: Engine,
    servers: Vec<McpServer>,
}

impl Session {
    /// Drops the engine and stops every MCP server.
    pub async fn shutdown(self) {
        drop(self.engine);
        Self::stop(self.servers).await;
    }

    async fn stop(servers: Vec<McpServer>) {
        for server in servers {
            server.shutdown().await;
        }
    }
}

fn absolute_dir(dir: &Path) -> Result<PathBuf, CliError> {
    let canonical = dir.canonicalize().map_err(|err| {
        CliError::Usage(format!(
            "--workspace `{}` is not usable: {err}",
            dir.display()
        ))
    })?;
    if canonical.is_dir() {
        Ok(canonical)
    } else {
        Err(CliError::Usage(format!(
            "--workspace `{}` is not a directory",
            dir.display()
        )))
    }
}

fn absolute_file(file: &Path) -> Result<PathBuf, CliError> {
    std::path::absolute(file)
        .map_err(|err| CliError::Usage(format!("--trace `{}`: {err}", file.display())))
}
