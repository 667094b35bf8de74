//! The agent runtime as a library: what turns a recorded session configuration
//! into a running engine, shared by the `agent` command, its workers and its HTTP
//! server (and by programs of your own).
//!
//! - [`AgentSpec`]: the one declaration of a session's settings — the CLI's
//!   flags, the HTTP API's fields; [`SessionConfig`]: a spec resolved and
//!   recorded in a session's first event (versioned).
//! - [`Session`]: the engine a configuration describes — model, tools (with the
//!   configured timeout, retry and circuit breaker), MCP servers, strategy,
//!   budgets, completion gate, trace file.
//! - [`control`]: human decisions on stored sessions.
//! - [`model_files`]: fetching and listing local GGUF model files (the
//!   model spec parser, which builds a model from `--model`, is
//!   [`build_model`]).
//! - [`DeltaHub`]: the text of responses being written, by session, for live
//!   listeners in this process.
//! - [`Worker`]: claims queued sessions and tool calls from a store and does
//!   them, on as many processes and machines as the store reaches.

mod agent;
mod agents;
mod config;
pub mod control;
mod deltas;
mod error;
pub mod model_files;
mod model_spec;
mod session;
mod spec;
mod worker;

pub use agent::{Agent, AgentBuilder, AgentError};
pub use agents::{AGENTS_FILE_VARIABLE, AgentDefinition, AgentView, Agents, DEFAULT_AGENTS_FILE};
pub use config::tools::{SessionTools, builtin_registry};
pub use config::{
    CONFIG_VERSION, DEFAULT_MAX_OUTPUT_TOKENS, DEFAULT_TOOL_RETRIES, DEFAULT_TOOL_TIMEOUT,
    OnMessage, SessionConfig,
};
pub use deltas::{DeltaHub, SessionDelta};
pub use error::ConfigError;
pub use model_spec::{
    LOCAL_MODELS_DIR, build as build_model, default_local_model, normalise as normalise_model,
};
pub use session::{Session, SessionOptions, SubmitError, submit, trace_sink};
pub use spec::{AgentSpec, parse_seconds};
pub use worker::{
    DEFAULT_CLAIM_TTL, DEFAULT_DRAIN, Worker, WorkerBuilder, WorkerLog, WorkerReport,
    default_worker_name,
};
