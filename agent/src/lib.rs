//! A durable, observable agent runtime.
//!
//! A model proposes actions; the runtime validates and executes them, records every
//! fact as an event, and ends each run with a structured [`RunResult`]. This crate
//! re-exports the `agent-*` crates; features pick what is compiled in:
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
//! let spec = <Greet as TypedTool>::spec();
//! assert_eq!(spec.name, "greet");
//! assert_eq!(spec.description, "Says hello to someone.");
//! assert_eq!(spec.input_schema["required"], serde_json::json!(["name"]));
//! ```

pub use agent_core::Spent;
pub use agent_core::{
    Action, Append, ApprovalDecision, BudgetKind, CallPurpose, Cancellation, Checkpoint,
    CircuitState, Compaction, CompletionGate, ContextInput, ContextPolicy, Deadline, Decision,
    DuplicateTool, Durability, EstimatedTokens, Event, EventKind, EventLog, EventSink, EventStore,
    ExecutionStrategy, ExitReason, Finish, GateRefusal, Guard, GuardContext, HistoryItem,
    IgnoreReports, Layer, LayerObserver, LeaseStore, Model, ModelCall, ModelContext, ModelError,
    ModelRequest, ModelResponse, Observation, PlanStep, PublicStatus, RetryNotice, RunResult,
    RunUsage, SCHEMA_VERSION, SessionIndex, SessionState, SessionSummary, SinkError, SnapshotStore,
    Stack, StateError, Status, Store, StoreError, StrategyError, StrategyRecord, StrategyWork,
    TokenCounter, Tool, ToolCall, ToolContext, ToolError, ToolOutput, ToolSpec, Toolbox,
    UnknownBudget, UnknownStatus, Usage, Verdict, Work, WorkContext, WorkRecord, new_session_id,
    now_millis, strict_json,
};
pub use agent_core::{
    ActionClaim, QueueView, QueuedAction, QueuedActionView, QueuedSessionView, SessionClaim,
    SessionCursor, SessionQuery, StoreCounts, WorkQueue,
};
pub use agent_core::{
    DeltaSink, IgnoreDeltas, LastAnswerKind, ModelDelta, ModelUsage, reflection_digest,
};
pub use agent_engine::{
    Budgets, CallObserver, ControlError, DEFAULT_LEASE_RENEWAL, DEFAULT_LEASE_TTL,
    DEFAULT_MAX_INVALID, DEFAULT_MAX_STEPS, DEFAULT_SNAPSHOT_EVERY, Drive, Engine, EngineBuilder,
    EngineError, Exhausted, FinishGate, Fork, INTERRUPTED, ModelRateLimit, OnLimit, OutputGuard,
    OutputSchema, Timed, UnknownOnLimit, WallTime, call_result_event, cancel_session,
    decide_approval, fork_session, load_state, pause_session, snapshot_of,
};
pub use agent_store::MemoryStore;

/// Resilience layers for tools and models: timeout, retry, circuit breaker.
pub mod layers {
    pub use agent_layers::*;
}

/// Tools: the validating registry and the built-in tools.
pub mod tools {
    pub use agent_tools::*;
}

/// Durable event stores.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub mod store {
    pub use agent_core::store::support;
    pub use agent_store::*;
}

/// Model adapters.
pub mod providers {
    pub use agent_providers::*;
}

/// What of the history each model request holds: the
/// [`ContextPolicy`](context::ContextPolicy) contract, token counting, and the
/// shipped policies with their `--context` spec ([`ContextSpec`](context::ContextSpec)).
pub mod context {
    pub use agent_core::context::*;
    pub use agent_engine::context::*;
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

/// The names most programs need.
pub mod prelude {
    pub use agent_core::{
        EventLog, EventStore, ExitReason, LeaseStore, Model, RunResult, SessionIndex,
        SnapshotStore, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
    };
    pub use agent_engine::{Budgets, Engine};
    #[cfg(feature = "scripted")]
    pub use agent_providers::ScriptedModel;
    #[cfg(feature = "runtime")]
    pub use agent_runtime::{Agent, AgentSpec, Agents};
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
    pub use agent_tools::{Calculator, ToolRegistry, Typed, TypedTool};
    pub use agent_trace::{ContentMode, JsonlTrace};
}
