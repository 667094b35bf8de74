//! A durable, observable agent runtime.
//!
//! A model proposes actions; the runtime validates and executes them, records every
//! fact as an event, and ends each run with a structured
//! [`RunResult`](result::RunResult). [`prelude`] holds the names most programs
//! need; everything else has a module named for its concept:
//!
//! | module | holds |
//! |---|---|
//! | [`event`], [`state`], [`result`], [`types`] | events, a session's folded state and status machine, the `RunResult`, the data types |
//! | [`model`], [`delta`], [`providers`] | the `Model` contract, streamed output, the model adapters |
//! | [`tool`], [`schema`], [`tools`] | the `Tool` contract, argument schemas, the registry and built-in tools |
//! | [`strategy`], [`strategies`], [`context`] | the `ExecutionStrategy` contract, the strategies, the context policies |
//! | [`engine`], [`guard`], [`gate`] | the `Engine` with its guards and control functions, the guard and completion-gate contracts |
//! | [`store`] | the store and work-queue contracts and the stores (memory, SQLite, PostgreSQL) |
//! | [`layer`], [`layers`] | the `Layer` contract and the resilience layers |
//! | [`sink`], [`trace`] | event sinks, JSONL traces and telemetry |
//! | [`history`], [`cancel`], [`id`], [`strict_json`] | what a model is shown, cancellation, session ids, strict JSON reading |
//! | `runtime`, `serve` | the runtime library and the HTTP API (features `runtime`, `serve`) |
//!
//! Features pick what is compiled in:
//!
//! | feature | gives |
//! |---|---|
//! | `react` (default) | [`strategies::ReAct`] |
//! | `plan-execute` | [`strategies::PlanExecute`] |
//! | `hitl` | [`strategies::Hitl`] with an [`strategies::ApprovalPolicy`] |
//! | `dag` | workflows: [`strategies::DagBuilder`] |
//! | `scripted` (default) | [`providers::ScriptedModel`] |
//! | `openai` | [`providers::OpenAi`]: Chat Completions and compatible servers |
//! | `anthropic` | [`providers::Anthropic`]: the Messages API |
//! | `replay` (default) | [`providers::ReplayModel`], re-runs a recorded session |
//! | `sqlite` (default) | [`store::SqliteStore`], the durable embedded store |
//! | `postgres` | [`store::PostgresStore`], a store many processes and machines share |
//! | `derive` (default) | `#[derive(Tool)]` ([`tools::Tool`]) |
//! | `mcp` | tools of Model Context Protocol servers ([`tools::McpServer`]) |
//! | `full` | everything above |
//! | `runtime` | [`runtime`]: engines from recorded configurations, human decisions, the `Worker` |
//! | `serve` | [`serve`]: the HTTP API of `agent serve`, as a router to mount (`agent::serve::router(state)`) |
//!
//! ```
//! use std::sync::Arc;
//! use agent::prelude::*;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = ScriptedModel::from_values(vec![
//!     serde_json::json!({"type": "tool_call", "tool_name": "calculator",
//!                        "arguments": {"left": 12, "operation": "multiply", "right": 7}}),
//!     serde_json::json!({"type": "finish", "answer": "84"}),
//! ])?;
//! let mut tools = ToolRegistry::new();
//! tools.register_typed::<Calculator>()?;
//! let engine = Engine::builder(Arc::new(model), Arc::new(ReAct::new()))
//!     .tools(tools.into_toolbox())
//!     .build();
//! let result = engine.run("What is 12 times 7?", serde_json::json!({})).await?;
//! assert_eq!(result.answer.as_deref(), Some("84"));
//! # Ok(()) }
//! ```

//!
//! A tool written with `#[derive(Tool)]`:
//!
//! ```
//! use agent::prelude::*;
//!
//! /// Says hello to someone.
//! #[derive(serde::Deserialize, schemars::JsonSchema, Tool)]
//! #[tool(idempotent)]
//! struct Greet {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! impl Greet {
//!     async fn run(self, _ctx: &ToolContext) -> Result<String, ToolError> {
//!         Ok(format!("hello, {}", self.name))
//!     }
//! }
//!
//! let spec = <Greet as agent::tools::TypedTool>::spec();
//! assert_eq!(spec.name, "greet");
//! assert_eq!(spec.description, "Says hello to someone.");
//! assert_eq!(spec.input_schema["required"], serde_json::json!(["name"]));
//! ```

pub use agent_core::{
    cancel, delta, event, gate, guard, history, id, layer, model, result, schema, sink, state,
    strategy, strict_json, tool, types,
};

/// The engine: [`Engine`](engine::Engine) and its builder, the shipped guards
/// ([`engine::guards`]), control of stored sessions ([`engine::control`]:
/// approve, deny, cancel, pause, fork), snapshots and the context policies.
pub mod engine {
    pub use agent_engine::*;
}

/// What of the history each model request holds: the
/// [`ContextPolicy`](context::ContextPolicy) contract, token counting, and the
/// shipped policies with their `--context` spec ([`ContextSpec`](context::ContextSpec)).
pub mod context {
    pub use agent_core::context::*;
    pub use agent_engine::context::*;
}

/// Stores: the contracts ([`EventStore`](store::EventStore) and the traits it
/// is made of, the work queue in [`store::queue`]) and the stores themselves:
/// [`MemoryStore`](store::MemoryStore), and with features `sqlite` and
/// `postgres` the durable ones.
pub mod store {
    pub use agent_core::store::*;
    pub use agent_store::*;
}

/// Resilience layers for tools and models: timeout, retry, circuit breaker.
pub mod layers {
    pub use agent_layers::*;
}

/// Tools: the validating registry and the built-in tools.
pub mod tools {
    pub use agent_tools::*;
}

/// Model adapters.
pub mod providers {
    pub use agent_providers::*;
}

/// Execution strategies.
#[cfg(any(
    feature = "react",
    feature = "plan-execute",
    feature = "hitl",
    feature = "dag"
))]
pub mod strategies {
    pub use agent_strategies::*;
}

/// The runtime as a library: named agents ([`Agent`](runtime::Agent), the
/// agents file), the one declaration of a session's settings
/// ([`AgentSpec`](runtime::AgentSpec)), the recorded session configuration,
/// the engine it describes, human decisions on stored sessions, and the
/// workers.
#[cfg(feature = "runtime")]
pub mod runtime {
    pub use agent_runtime::*;
}

/// The HTTP API of `agent serve`: [`router`](serve::router) to mount in an axum
/// application of your own, [`serve`](serve::serve) for the whole server.
#[cfg(feature = "serve")]
pub mod serve {
    pub use agent_server::*;
}

/// JSONL traces.
pub mod trace {
    pub use agent_trace::*;
}

/// The names most programs need: an engine with its model, strategy, tools and
/// store, and the traits whose methods they call.
pub mod prelude {
    pub use agent_core::model::Model;
    pub use agent_core::result::{ExitReason, RunResult};
    pub use agent_core::store::{EventLog, EventStore};
    pub use agent_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
    pub use agent_engine::{Budgets, Engine};
    #[cfg(feature = "scripted")]
    pub use agent_providers::ScriptedModel;
    #[cfg(feature = "runtime")]
    pub use agent_runtime::{Agent, AgentSpec};
    pub use agent_store::MemoryStore;
    #[cfg(feature = "sqlite")]
    pub use agent_store::SqliteStore;
    #[cfg(feature = "plan-execute")]
    pub use agent_strategies::PlanExecute;
    #[cfg(feature = "react")]
    pub use agent_strategies::ReAct;
    #[cfg(feature = "hitl")]
    pub use agent_strategies::{ApprovalPolicy, Hitl};
    #[cfg(feature = "dag")]
    pub use agent_strategies::{Dag, DagBuilder, Node};
    #[cfg(feature = "derive")]
    pub use agent_tools::Tool;
    pub use agent_tools::{Calculator, ToolRegistry};
    pub use agent_trace::{ContentMode, JsonlTrace};
}
