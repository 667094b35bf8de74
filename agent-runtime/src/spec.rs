//! `AgentSpec`: the one declaration of what a session is configured with —
//! its instructions, model, tools, strategy, budgets and policies. Each field
//! is declared here once, with the doc comment that is its `--flag`'s help,
//! its description in the HTTP API's schema and its line in the README's
//! reference: the CLI flattens it into `run`, `submit`, `send` and `resume`
//! (clap's `Args`), `POST /v1/sessions` flattens it into its body (serde and
//! utoipa's `ToSchema`), and a session records it, resolved
//! ([`SessionConfig`](crate::SessionConfig)). Every field is optional: a field
//! set overrides what a session recorded (or the default, for a new session);
//! a field unset keeps it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// What a session is configured with; every field optional (see the module
/// documentation). Unknown fields are refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, clap::Args, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// The agent's instructions: what it is for and how it works, given to the
    /// model before every request, ahead of the strategy's own (`TEXT`, or
    /// `@FILE` on the command line for a file's text).
    #[arg(long, value_name = "TEXT|@FILE", value_parser = read_instructions)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The model: `scripted:FILE`, `replay:SESSION_ID`, `openai:MODEL[@BASE_URL]`,
    /// `anthropic:MODEL[@BASE_URL]`, `local[:FILE.gguf][?ctx=N&…]` (a GGUF model
    /// run in this process; `local` is the one `agent model pull` fetches) or
    /// `json:<spec>`; keys come from the environment. Required for a new session.
    #[arg(long, value_name = "SPEC")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Models asked, in order, when the one before fails for good (retries
    /// exhausted, 401/403/404, circuit open); `--fallback-model` is repeatable.
    #[arg(long = "fallback-model", value_name = "SPEC")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_models: Option<Vec<String>>,
    /// How the session runs: `react` (default) or `plan-execute`.
    #[arg(long, value_name = "NAME", value_parser = ["react", "plan-execute"])]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// Calls of these tools wait for a human decision (`agent approve` / `agent deny`).
    #[arg(long, value_name = "a,b", value_delimiter = ',')]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve_tools: Option<Vec<String>>,
    /// Tools flagged `needs_approval` whose calls this session runs without a
    /// human decision; recorded, so its resumes and workers obey it too (not
    /// accepted over the HTTP API).
    #[arg(long, value_name = "a,b", value_delimiter = ',')]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waive_approval: Option<Vec<String>>,
    /// Built-in tools the model may call (default: none).
    #[arg(long, value_name = "a,b,c", value_delimiter = ',')]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Root of every file-touching tool (default: the current directory).
    #[arg(long, value_name = "DIR")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub workspace: Option<PathBuf>,
    /// Programs `run_command` may start.
    #[arg(long, value_name = "a,b", value_delimiter = ',')]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_cmd: Option<Vec<String>>,
    /// Environment variables started programs get besides PATH, HOME, LANG and
    /// TMPDIR (run_command, --finish-when, MCP servers).
    #[arg(long, value_name = "a,b", value_delimiter = ',')]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_env: Option<Vec<String>>,
    /// A command that must succeed before a finish is accepted (e.g. "cargo test").
    #[arg(long, value_name = "COMMAND")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_when: Option<String>,
    /// MCP servers started over stdio whose tools are offered ("COMMAND ARGS…";
    /// `--mcp` is repeatable).
    #[arg(long, value_name = "COMMAND")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<Vec<String>>,
    /// Seconds an MCP server may take to start, and a call of its tools to
    /// answer (default 30).
    #[arg(long = "mcp-timeout", value_name = "SECS", value_parser = parse_seconds, allow_negative_numbers = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_timeout_secs: Option<f64>,
    /// Model responses allowed per turn, valid or not (default 10).
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    /// Input plus output tokens allowed per turn.
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Model calls allowed per turn.
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_calls: Option<u64>,
    /// Tool calls allowed per turn.
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u64>,
    /// Count the step, token and call budgets over the whole session instead of
    /// per conversation turn (`agent send` starts a turn).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_budget: Option<bool>,
    /// What a message sent while the session runs does: `enqueue` (default: the
    /// model sees it at its next call), `interrupt` (a model call in flight is
    /// abandoned and asked again with it) or `reject` (refused).
    #[arg(long, value_name = "POLICY", value_parser = ["enqueue", "interrupt", "reject"])]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_message: Option<String>,
    /// Output tokens per model request, sent to the provider (default 1024).
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Wall-time budget of the run in seconds.
    #[arg(long = "timeout", value_name = "SECS", value_parser = parse_seconds, allow_negative_numbers = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<f64>,
    /// Seconds allowed for one provider request (default 120).
    #[arg(long = "request-timeout", value_name = "SECS", value_parser = parse_seconds, allow_negative_numbers = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_timeout_secs: Option<f64>,
    /// Seconds allowed for one tool call, every tool (default 1800).
    #[arg(long = "tool-timeout", value_name = "SECS", value_parser = parse_seconds, allow_negative_numbers = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout_secs: Option<f64>,
    /// Retries of a failed call of an idempotent or MCP tool (default 2, at most 20).
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_retries: Option<u32>,
    /// Run a call again even when an identical earlier call of an idempotent
    /// tool already returned (by default it gets that result back instead).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_repeated_calls: Option<bool>,
    /// What history each model request holds: `keep-all` (default), `last:N`
    /// (the last N turns), `window:TOKENS` (the newest turns that fit) or
    /// `summarise:TOKENS[:KEEP]` (past TOKENS, the model summarises the oldest
    /// turns, keeping the last KEEP, default 4).
    #[arg(long, value_name = "POLICY")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Invalid model outputs in a row after which one last request asks for a
    /// plain-text answer and the run ends with invalid_model_output (default 3;
    /// 0: no such limit).
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_invalid: Option<u32>,
    /// When a step, token, call or wall-time limit ends the run: `summarise`
    /// (default: one last request answers from what was gathered, `partial` in
    /// the result) or `stop`.
    #[arg(long, value_name = "MODE", value_parser = ["stop", "summarise"])]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_limit: Option<String>,
    /// Every N steps the model is asked, in a separate request, whether it is
    /// closer to the goal or going in circles (0: never).
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reflect_every: Option<u32>,
    /// A JSON Schema the final answer must satisfy; the validated JSON is the
    /// result's `output` (on the command line, a file holding the schema; the
    /// schema itself is recorded).
    #[arg(long, value_name = "FILE", value_parser = read_schema_file)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<Value>,
    /// CPU threads of a local model (default 2).
    #[arg(long, value_name = "N")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// Sampling temperature of a local model, 0 to 2 (default 0: greedy,
    /// deterministic).
    #[arg(long, value_name = "T")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Append a JSONL trace of the run to this file.
    #[arg(long, value_name = "FILE")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub trace: Option<PathBuf>,
    /// What the trace writes of texts: `summary` (default: chars and sha256) or
    /// `full`.
    #[arg(long, value_name = "MODE", value_parser = ["summary", "full"])]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_content: Option<String>,
}

impl AgentSpec {
    /// The name of every field, as its JSON key (a flag is the same with `-`
    /// for `_`, except where the flag says otherwise), from the API schema the
    /// type derives: nothing to keep in step by hand.
    pub fn field_names() -> Vec<String> {
        let schema = <Self as utoipa::PartialSchema>::schema();
        match schema {
            utoipa::openapi::RefOr::T(utoipa::openapi::Schema::Object(object)) => {
                object.properties.keys().cloned().collect()
            }
            _ => Vec::new(),
        }
    }
}

/// `--instructions`: the text itself, or `@FILE` for a file's text.
fn read_instructions(text: &str) -> Result<String, String> {
    match text.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read the instructions file `{path}`: {err}")),
        None => Ok(text.to_owned()),
    }
}

/// `--output-schema FILE`: the JSON Schema in the file.
fn read_schema_file(path: &str) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read the schema file `{path}`: {err}"))?;
    serde_json::from_str(&text).map_err(|err| {
        format!("the schema file `{path}` is not JSON ({err}); give a JSON Schema document")
    })
}

/// A positive number of seconds, at most a year, as the command line gives it.
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if seconds.is_finite() && seconds > 0.0 && seconds <= 31_536_000.0 {
        Ok(seconds)
    } else {
        Err(format!(
            "`{text}` must be a positive number of seconds, at most a year"
        ))
    }
}
