//! `Agent`: a named agent in code — the unit the agents file declares, with
//! tools of your own beside the built-in ones. Its sessions record the same
//! configuration, name and definition digest as `agent run --agent NAME` and
//! `POST /v1/sessions {"agent": NAME}` record for the same definition, so
//! `agent resume`, `agent show` and a worker (with your tools registered in its
//! toolbox) continue them.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use agent_runtime::Agent;
//!
//! let support = Agent::builder("support")
//!     .instructions("You answer questions about ACME's orders. Be brief.")
//!     .model("openai:gpt-4o-mini")
//!     .builtin_tools(["read_file", "search"])
//!     .build()
//!     .await?;
//! let result = support.run("Where is order 42?").await?;
//! println!("{:?}", result.answer);
//! # Ok(())
//! # }
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use agent_core::result::RunResult;
use agent_core::schema::input_schema_for;
use agent_core::state::SessionState;
use agent_core::store::Store;
use agent_core::tool::Tool;
use agent_engine::{EngineError, load_state};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::agents::AgentDefinition;
use crate::config::SessionConfig;
use crate::control::{Decided, DecisionError};
use crate::error::ConfigError;
use crate::session::{Session, SessionOptions};
use crate::spec::AgentSpec;

/// Why an agent could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Its settings cannot be used together, or a session's recorded ones.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The engine could not drive the session (its store failed, say).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A decision on a waiting call was refused.
    #[error(transparent)]
    Decision(#[from] DecisionError),
    /// The store could not be opened.
    #[error("the store cannot be opened: {0}")]
    Store(String),
    /// A typed run did not end with an answer of the asked type.
    #[error("the run ended {exit_reason} without an answer of the asked type: {why}")]
    Untyped {
        /// How the run ended.
        exit_reason: agent_core::result::ExitReason,
        /// What is missing.
        why: String,
    },
}

/// Builds an [`Agent`]; every setting but the model has a default, as
/// [`AgentSpec`] says.
pub struct AgentBuilder {
    definition: AgentDefinition,
    tools: Vec<Arc<dyn Tool>>,
    store: Option<Arc<dyn Store>>,
}

impl AgentBuilder {
    /// What it is for, for people.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.definition.description = Some(description.into());
        self
    }

    /// Its instructions (see [`AgentSpec::instructions`]).
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.definition.spec.instructions = Some(instructions.into());
        self
    }

    /// Its model spec (see [`AgentSpec::model`]).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.definition.spec.model = Some(model.into());
        self
    }

    /// Built-in tools the model may call, by name.
    pub fn builtin_tools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.definition.spec.tools = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// A tool of your own (`#[derive(Tool)]`, say), offered beside the
    /// built-in ones. A worker that continues the agent's sessions needs it
    /// in its toolbox too ([`WorkerBuilder::tool`](crate::WorkerBuilder::tool)).
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Settings (by field name) an API client may set for its sessions on a
    /// server that declares it, besides lowering its budgets.
    pub fn overridable<I: IntoIterator<Item = S>, S: Into<String>>(mut self, fields: I) -> Self {
        self.definition.overridable = fields.into_iter().map(Into::into).collect();
        self
    }

    /// Every other setting, on top of what was set so far: each setting
    /// `spec` has replaces the builder's.
    pub fn settings(mut self, spec: AgentSpec) -> Self {
        let (Ok(Value::Object(mut mine)), Ok(Value::Object(theirs))) = (
            serde_json::to_value(&self.definition.spec),
            serde_json::to_value(&spec),
        ) else {
            return self;
        };
        mine.extend(theirs);
        if let Ok(merged) = serde_json::from_value(Value::Object(mine)) {
            self.definition.spec = merged;
        }
        self
    }

    /// Where its sessions are stored (default: `sqlite://.agent/agent.db`, as
    /// the `agent` command's).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The agent, its settings checked; opens the default store if none was given.
    pub async fn build(self) -> Result<Agent, AgentError> {
        let store = match self.store {
            Some(store) => store,
            None => agent_store::open_url(agent_store::DEFAULT_STORE_URL, true)
                .await
                .map_err(|err| AgentError::Store(err.to_string()))?,
        };
        let agent = Agent {
            definition: self.definition,
            tools: self.tools,
            store,
        };
        agent.config()?;
        Ok(agent)
    }
}

/// A named agent: its definition, its own tools and its store.
pub struct Agent {
    definition: AgentDefinition,
    tools: Vec<Arc<dyn Tool>>,
    store: Arc<dyn Store>,
}

impl Agent {
    /// Starts building the agent called `name`; relative paths in its
    /// settings are taken from the current directory.
    pub fn builder(name: impl Into<String>) -> AgentBuilder {
        AgentBuilder {
            definition: AgentDefinition {
                name: name.into(),
                description: None,
                spec: AgentSpec::default(),
                overridable: Vec::new(),
                dir: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            },
            tools: Vec::new(),
            store: None,
        }
    }

    /// The agent an agents file declares (see [`Agents`](crate::Agents)), to
    /// add tools of your own to; build it for the same sessions `agent run
    /// --agent NAME` starts.
    pub fn declared(definition: &AgentDefinition) -> AgentBuilder {
        AgentBuilder {
            definition: definition.clone(),
            tools: Vec::new(),
            store: None,
        }
    }

    /// Its definition (name, description, settings, digest).
    pub fn definition(&self) -> &AgentDefinition {
        &self.definition
    }

    /// The configuration a new session of it records.
    fn config(&self) -> Result<SessionConfig, ConfigError> {
        SessionConfig::for_agent(
            &self.definition,
            &AgentSpec::default(),
            &self.definition.dir,
        )
    }

    fn options(&self) -> SessionOptions {
        SessionOptions {
            extra_tools: self.tools.clone(),
            ..SessionOptions::default()
        }
    }

    /// Runs `task` in a new session to its end (or until it waits for a
    /// human: then the result says which calls wait).
    pub async fn run(&self, task: impl Into<String>) -> Result<RunResult, AgentError> {
        self.run_with(task.into(), self.config()?).await
    }

    /// Runs `task` asking for an answer of type `T`: the answer must satisfy
    /// `T`'s JSON Schema (a finish that does not is refused with feedback), and
    /// comes back as a `T`.
    pub async fn run_typed<T: JsonSchema + DeserializeOwned>(
        &self,
        task: impl Into<String>,
    ) -> Result<T, AgentError> {
        let mut config = self.config()?;
        config.spec.output_schema = Some(input_schema_for::<T>());
        let result = self.run_with(task.into(), config).await?;
        match result.output_as::<T>() {
            Some(Ok(output)) => Ok(output),
            Some(Err(err)) => Err(AgentError::Untyped {
                exit_reason: result.exit_reason,
                why: err.to_string(),
            }),
            None => Err(AgentError::Untyped {
                exit_reason: result.exit_reason,
                why: result
                    .error
                    .unwrap_or_else(|| "the run has no validated output".into()),
            }),
        }
    }

    async fn run_with(&self, task: String, config: SessionConfig) -> Result<RunResult, AgentError> {
        let session = Session::open(&config, self.store.clone(), self.options()).await?;
        let result = session.engine.run(task, config.to_value()).await;
        session.shutdown().await;
        Ok(result?)
    }

    /// Continues a stored session of it (after a crash, a decision, a pause)
    /// with the configuration it recorded.
    pub async fn resume(&self, session_id: &str) -> Result<RunResult, AgentError> {
        let state: SessionState = load_state(self.store.as_ref(), session_id).await?;
        let config = SessionConfig::recorded(state.config())?;
        let session = Session::open(&config, self.store.clone(), self.options()).await?;
        let result = session.engine.resume(session_id).await;
        session.shutdown().await;
        Ok(result?)
    }

    /// Approves the waiting calls of a session (`call` alone, or all of
    /// them), with `arguments` instead of the proposed ones if given; resume
    /// it to run them.
    pub async fn approve(
        &self,
        session_id: &str,
        call: Option<&str>,
        arguments: Option<Value>,
    ) -> Result<Decided, AgentError> {
        let by = format!("agent {}", self.definition.name);
        Ok(crate::control::approve(self.store.as_ref(), session_id, call, arguments, &by).await?)
    }

    /// Denies the waiting calls of a session; the model hears `reason`.
    pub async fn deny(
        &self,
        session_id: &str,
        call: Option<&str>,
        reason: &str,
    ) -> Result<Decided, AgentError> {
        let by = format!("agent {}", self.definition.name);
        Ok(crate::control::deny(self.store.as_ref(), session_id, call, reason, &by).await?)
    }
}
