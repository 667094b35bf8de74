//! From a session configuration to a running engine: the model its spec names
//! (and its fallbacks),
//! its tools, its strategy (behind Human-in-the-Loop when any call may need
//! approval), its context policy, its budgets, its completion gate and its
//! trace file.

use std::sync::Arc;
use std::time::Duration;

use agent_core::context::EstimatedTokens;
use agent_core::delta::DeltaSink;
use agent_core::sink::EventSink;
use agent_core::store::EventStore;
use agent_core::store::queue::WorkQueue;
use agent_core::strategy::ExecutionStrategy;
use agent_core::tool::{Tool, Toolbox};
use agent_engine::Engine;
use agent_strategies::{ApprovalPolicy, Hitl, PlanExecute, ReAct};
use agent_tools::{CommandGate, DEFAULT_GATE_TIMEOUT};
use agent_trace::{ContentMode, JsonlTrace};

use crate::config::SessionConfig;
use crate::config::tools::SessionTools;
use crate::error::ConfigError;

/// What a session is run with besides its configuration.
#[derive(Clone, Default)]
pub struct SessionOptions {
    /// Observers of committed events besides the configured trace file (a console).
    pub sinks: Vec<Arc<dyn EventSink>>,
    /// Tools registered in code, offered beside the configured ones.
    pub extra_tools: Vec<Arc<dyn Tool>>,
    /// The work queue, for `submit` and for drives that hand tool calls to workers.
    pub queue: Option<Arc<dyn WorkQueue>>,
    /// Where each step's text goes while it is written; with one, models that
    /// can stream do (see [`EngineBuilder::deltas`](agent_engine::EngineBuilder::deltas)).
    pub deltas: Option<Arc<dyn DeltaSink>>,
    /// How long a commit the store cannot take is retried before the run
    /// stops (default: [`agent_engine::DEFAULT_STORE_PATIENCE`]; a person at a
    /// terminal wants to hear sooner than a worker).
    pub store_patience: Option<Duration>,
}

/// An engine built from a session configuration, and the MCP servers whose tools
/// it offers; call [`Session::shutdown`] when the run ends.
pub struct Session {
    /// The engine.
    pub engine: Engine,
    tools: Option<SessionTools>,
}

impl Session {
    /// Builds the engine `config` describes on `store`, starting its tools.
    pub async fn open(
        config: &SessionConfig,
        store: Arc<dyn EventStore>,
        options: SessionOptions,
    ) -> Result<Self, ConfigError> {
        let tools = SessionTools::start(config, &options.extra_tools).await?;
        let toolbox = tools.toolbox.clone();
        match Self::assemble(config, store, options, &toolbox).await {
            Ok(engine) => Ok(Self {
                engine,
                tools: Some(tools),
            }),
            Err(err) => {
                tools.shutdown().await;
                Err(err)
            }
        }
    }

    /// Builds the engine `config` describes on `store` with tools started
    /// already (`config`'s, kept running by the caller — a worker serving many
    /// sessions of one configuration).
    pub async fn with_toolbox(
        config: &SessionConfig,
        store: Arc<dyn EventStore>,
        options: SessionOptions,
        toolbox: &Toolbox,
    ) -> Result<Self, ConfigError> {
        Ok(Self {
            engine: Self::assemble(config, store, options, toolbox).await?,
            tools: None,
        })
    }

    async fn assemble(
        config: &SessionConfig,
        store: Arc<dyn EventStore>,
        options: SessionOptions,
        toolbox: &Toolbox,
    ) -> Result<Engine, ConfigError> {
        let timeout = Duration::try_from_secs_f64(config.request_timeout_secs())
            .map_err(|err| ConfigError::new(format!("--request-timeout: {err}")))?;
        let model = crate::model_spec::with_fallbacks(config, store.as_ref(), timeout).await?;
        let sinks = trace_sink(config)?.into_iter().chain(options.sinks);
        let gate = match config.finish_when() {
            Some(line) => Some(
                CommandGate::new(line, DEFAULT_GATE_TIMEOUT)
                    .map_err(|err| ConfigError::new(format!("--finish-when: {err}")))?
                    .with_child_policy(crate::config::tools::child_policy(config)),
            ),
            None => None,
        };
        let strategy = strategy(config)?;
        let counter = model
            .token_counter()
            .unwrap_or_else(|| Arc::new(EstimatedTokens));
        let context = config.context_spec()?.policy(counter);
        let mut builder = Engine::builder(model, strategy)
            .store(store)
            .tools(toolbox.clone())
            .budgets(config.budgets())
            .workspace(config.workspace())
            .max_output_tokens(Some(config.max_output_tokens()))
            .record_content(config.full_content())
            .refuse_repeated_calls(!config.allow_repeated_calls())
            .on_limit(config.on_limit()?)
            .reflect_every(config.reflect_every());
        if let Some(schema) = config.output()? {
            builder = builder.output_schema(schema);
        }
        if let Some(instructions) = config.instructions() {
            builder = builder.instructions(instructions);
        }
        if let Some(queue) = options.queue {
            builder = builder.queue(queue);
        }
        if let Some(deltas) = options.deltas {
            builder = builder.deltas(deltas);
        }
        if let Some(patience) = options.store_patience {
            builder = builder.store_patience(patience);
        }
        if let Some(context) = context {
            builder = builder.context(context);
        }
        if let Some(gate) = gate {
            builder = builder.completion_gate(Arc::new(gate));
        }
        for sink in sinks {
            builder = builder.sink(sink);
        }
        Ok(builder.build())
    }

    /// Drops the engine and stops every MCP server it started.
    pub async fn shutdown(self) {
        drop(self.engine);
        if let Some(tools) = self.tools {
            tools.shutdown().await;
        }
    }
}

/// Why [`submit`] did not queue a session.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The configuration cannot be turned into an engine.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The session could not be recorded or queued.
    #[error(transparent)]
    Engine(#[from] agent_engine::EngineError),
}

/// Records a session for `task` with `config` (checked as `agent run` checks it:
/// its model, its tools, its MCP servers start) and queues it for a worker;
/// returns its id. To submit many sessions of one configuration, open one
/// [`Session`] with the queue and call `engine.submit` for each.
pub async fn submit(
    config: &SessionConfig,
    store: Arc<dyn agent_core::store::Store>,
    task: impl Into<String>,
) -> Result<String, SubmitError> {
    let options = SessionOptions {
        queue: Some(store.clone()),
        ..SessionOptions::default()
    };
    let session = Session::open(config, store, options).await?;
    let submitted = session.engine.submit(task, config.to_value()).await;
    session.shutdown().await;
    Ok(submitted?)
}

/// The JSONL trace sink of `config`, if it names a trace file.
pub fn trace_sink(config: &SessionConfig) -> Result<Option<Arc<dyn EventSink>>, ConfigError> {
    let Some(path) = config.trace() else {
        return Ok(None);
    };
    let mode = if config.full_content() {
        ContentMode::Full
    } else {
        ContentMode::Summary
    };
    let trace = JsonlTrace::open(path, mode).map_err(|err| {
        ConfigError::new(format!(
            "--trace: cannot open `{}` for appending: {err}",
            path.display()
        ))
    })?;
    Ok(Some(Arc::new(trace)))
}

/// The strategy: ReAct or Plan-and-Execute, behind Human-in-the-Loop when
/// `--approve-tools` names tools. Tools flagged `needs_approval` need no
/// wrapper: the engine holds their calls for a decision under any strategy.
fn strategy(config: &SessionConfig) -> Result<Arc<dyn ExecutionStrategy>, ConfigError> {
    let policy = ApprovalPolicy::new().tools(config.approve_tools().to_vec());
    let needs_hitl = !config.approve_tools().is_empty();
    Ok(match (config.strategy(), needs_hitl) {
        ("react", false) => Arc::new(ReAct::new()),
        ("react", true) => Arc::new(Hitl::new(ReAct::new(), policy)),
        ("plan-execute", false) => Arc::new(PlanExecute::new()),
        ("plan-execute", true) => Arc::new(Hitl::new(PlanExecute::new(), policy)),
        (other, _) => {
            return Err(ConfigError::new(format!(
                "--strategy `{other}` is not known; use react or plan-execute"
            )));
        }
    })
}
