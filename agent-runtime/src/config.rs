//! The session configuration: everything a run is given, recorded in the
//! session's first event (`SessionStarted.config`) so that a resume, a worker on
//! another machine or the HTTP server rebuilds the same engine. It is a
//! persistence format, versioned; fields added later have defaults, so an old
//! session's configuration still reads.
//!
//! [`RunOptions`] are what a caller asks for (the `agent run` flags, the HTTP API's
//! fields): each one set overrides the recorded value, each one unset keeps it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_core::{Budgets, DEFAULT_MAX_INVALID, DEFAULT_MAX_STEPS, OnLimit, OutputSchema};
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// Version of the recorded configuration this build writes.
pub const CONFIG_VERSION: u32 = 1;

/// Output tokens per request when none is asked for.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 1024;

/// Time allowed for one tool call (every attempt) when none is asked for.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(1800);

/// Retries of a failed call of an idempotent or MCP tool when none are asked for.
pub const DEFAULT_TOOL_RETRIES: u32 = 2;

/// Most retries a session may ask for per tool call.
pub const TOOL_RETRIES_LIMIT: u32 = 20;

/// Most steps a session may be given (`--max-steps`; also the bound of
/// `--max-invalid` and `--reflect-every`).
pub const MAX_STEPS_LIMIT: u32 = 1_000_000;

/// Most output tokens a request may ask for.
pub const MAX_OUTPUT_TOKENS_LIMIT: u32 = 1_000_000;

fn version() -> u32 {
    CONFIG_VERSION
}

fn default_strategy() -> String {
    "react".into()
}

fn default_mcp_timeout() -> f64 {
    agent_tools::DEFAULT_MCP_TIMEOUT.as_secs_f64()
}

fn default_request_timeout() -> f64 {
    agent_providers::DEFAULT_REQUEST_TIMEOUT.as_secs_f64()
}

fn default_tool_timeout() -> f64 {
    DEFAULT_TOOL_TIMEOUT.as_secs_f64()
}

fn default_tool_retries() -> u32 {
    DEFAULT_TOOL_RETRIES
}

fn default_trace_content() -> String {
    "summary".into()
}

fn default_context() -> String {
    "keep-all".into()
}

fn default_max_invalid() -> u32 {
    DEFAULT_MAX_INVALID
}

fn default_on_limit() -> String {
    OnLimit::default().as_str().into()
}

fn default_on_message() -> String {
    "enqueue".into()
}

/// What a message sent to a running session does (`--on-message`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMessage {
    /// The model sees it at its next call; a finish proposed before it saw it
    /// is refused with feedback, so it is always answered.
    Enqueue,
    /// As `enqueue`, and a model call in flight is abandoned and asked again
    /// with it (tool calls in flight are awaited, never cut).
    Interrupt,
    /// Refused (exit 2, HTTP 409) while the session runs.
    Reject,
}

/// Every setting of a session, as recorded in `SessionStarted.config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionConfig {
    /// Layout version ([`CONFIG_VERSION`]).
    #[serde(default = "version")]
    pub version: u32,
    /// The model spec, never with a key; file paths made absolute.
    pub model: String,
    /// Models asked, in order, when the one before failed for good
    /// (`--fallback-model`), recorded as `model` is.
    #[serde(default)]
    pub fallback_models: Vec<String>,
    /// `react` or `plan-execute`.
    #[serde(default = "default_strategy")]
    pub strategy: String,
    /// Tools whose calls wait for a human decision.
    #[serde(default)]
    pub approve_tools: Vec<String>,
    /// Tools flagged `needs_approval` whose calls this session runs without
    /// a decision (`--waive-approval`); recorded under the key the engine
    /// reads ([`agent_core::WAIVE_APPROVAL`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waive_approval: Vec<String>,
    /// Built-in tool names.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Programs `run_command` may start.
    #[serde(default)]
    pub allow_cmd: Vec<String>,
    /// The completion check, if any.
    #[serde(default)]
    pub finish_when: Option<String>,
    /// Environment variables passed to started programs besides `PATH`,
    /// `HOME`, `LANG` and `TMPDIR` (`--pass-env`).
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// MCP server command lines.
    #[serde(default)]
    pub mcp: Vec<String>,
    /// Seconds an MCP server may take to start or answer a call.
    #[serde(default = "default_mcp_timeout")]
    pub mcp_timeout_secs: f64,
    /// Absolute workspace root.
    pub workspace: PathBuf,
    /// Step budget.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// Token budget of the session.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Model-call budget of the session.
    #[serde(default)]
    pub max_model_calls: Option<u64>,
    /// Tool-call budget of the session.
    #[serde(default)]
    pub max_tool_calls: Option<u64>,
    /// Per-request output token cap.
    #[serde(default = "default_max_output_tokens")]
    pub max_output_tokens: u32,
    /// Wall-time budget in seconds.
    #[serde(default)]
    pub timeout_secs: Option<f64>,
    /// Time allowed for one provider request, in seconds.
    #[serde(default = "default_request_timeout")]
    pub request_timeout_secs: f64,
    /// Time allowed for one tool call, in seconds (every tool).
    #[serde(default = "default_tool_timeout")]
    pub tool_timeout_secs: f64,
    /// Retries of a failed call of an idempotent or MCP tool.
    #[serde(default = "default_tool_retries")]
    pub tool_retries: u32,
    /// Whether a call identical to an earlier successful call of an idempotent
    /// tool runs again (`--allow-repeated-calls`); by default it is answered
    /// with the earlier result and a request to finish or change course.
    #[serde(default)]
    pub allow_repeated_calls: bool,
    /// What history each model request holds (`--context`): `keep-all`,
    /// `last:N`, `window:TOKENS` or `summarise:TOKENS[:KEEP]`.
    #[serde(default = "default_context")]
    pub context: String,
    /// Invalid model outputs in a row that end the run, after one last request
    /// for a plain-text answer (`--max-invalid`; 0: no such limit).
    #[serde(default = "default_max_invalid")]
    pub max_invalid: u32,
    /// What a run that a limit ends does first (`--on-limit`): `stop` or
    /// `summarise` (one last request for an answer from what was gathered).
    #[serde(default = "default_on_limit")]
    pub on_limit: String,
    /// Steps between reflections (`--reflect-every`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reflect_every: Option<u32>,
    /// What a message sent while the session runs does (`--on-message`):
    /// `enqueue`, `interrupt` or `reject`.
    #[serde(default = "default_on_message")]
    pub on_message: String,
    /// The JSON Schema a finish's answer must satisfy (`--output-schema`; the
    /// schema itself is recorded, not its file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    /// Whether the budgets count over the whole session instead of per
    /// conversation turn (`--session-budget`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub session_budget: bool,
    /// Trace file (absolute), if any.
    #[serde(default)]
    pub trace: Option<PathBuf>,
    /// `summary` or `full`.
    #[serde(default = "default_trace_content")]
    pub trace_content: String,
    /// How the programs the session starts were confined where it started:
    /// `landlock`, or `none: <why>` (recorded, never read back as a setting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<String>,
}

fn default_max_steps() -> u32 {
    DEFAULT_MAX_STEPS
}

fn default_max_output_tokens() -> u32 {
    DEFAULT_MAX_OUTPUT_TOKENS
}

/// What a caller asks of a run: every field set overrides the recorded value (or
/// the default, for a new session). The names are the `agent run` flags in
/// snake_case; unknown fields are refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunOptions {
    /// `--model`.
    pub model: Option<String>,
    /// `--fallback-model` (replaces the recorded list when given).
    pub fallback_models: Option<Vec<String>>,
    /// `--strategy`: `react` or `plan-execute`.
    pub strategy: Option<String>,
    /// `--approve-tools`.
    pub approve_tools: Option<Vec<String>>,
    /// `--waive-approval`.
    pub waive_approval: Option<Vec<String>>,
    /// `--tools`.
    pub tools: Option<Vec<String>>,
    /// `--workspace`.
    pub workspace: Option<PathBuf>,
    /// `--allow-cmd`.
    pub allow_cmd: Option<Vec<String>>,
    /// `--finish-when`.
    pub finish_when: Option<String>,
    /// `--pass-env`.
    pub pass_env: Option<Vec<String>>,
    /// `--mcp` (replaces the recorded list when not empty).
    pub mcp: Option<Vec<String>>,
    /// `--mcp-timeout`.
    pub mcp_timeout_secs: Option<f64>,
    /// `--max-steps`.
    pub max_steps: Option<u32>,
    /// `--max-tokens`.
    pub max_tokens: Option<u64>,
    /// `--max-model-calls`.
    pub max_model_calls: Option<u64>,
    /// `--max-tool-calls`.
    pub max_tool_calls: Option<u64>,
    /// `--max-output-tokens`.
    pub max_output_tokens: Option<u32>,
    /// `--timeout`.
    pub timeout_secs: Option<f64>,
    /// `--request-timeout`.
    pub request_timeout_secs: Option<f64>,
    /// `--tool-timeout`.
    pub tool_timeout_secs: Option<f64>,
    /// `--tool-retries`.
    pub tool_retries: Option<u32>,
    /// `--allow-repeated-calls`.
    pub allow_repeated_calls: Option<bool>,
    /// `--context`.
    pub context: Option<String>,
    /// `--max-invalid`.
    pub max_invalid: Option<u32>,
    /// `--on-limit`: `stop` or `summarise`.
    pub on_limit: Option<String>,
    /// `--reflect-every` (0 turns recorded reflection off).
    pub reflect_every: Option<u32>,
    /// `--output-schema`: the JSON Schema itself (the CLI reads it from its file).
    pub output_schema: Option<serde_json::Value>,
    /// `--threads`: CPU threads of a local model (folded into its spec).
    pub threads: Option<u32>,
    /// `--temperature`: sampling temperature of a local model (folded into its spec).
    pub temperature: Option<f32>,
    /// `--session-budget`: budgets count over the whole session, not per turn.
    pub session_budget: Option<bool>,
    /// `--on-message`: `enqueue`, `interrupt` or `reject`.
    pub on_message: Option<String>,
    /// `--trace`.
    pub trace: Option<PathBuf>,
    /// `--trace-content`: `summary` or `full`.
    pub trace_content: Option<String>,
}

impl SessionConfig {
    /// The configuration `options` describe on top of `recorded` (what a session
    /// recorded at start; `None` for a new session), relative paths taken from
    /// `cwd`, checked: the model spec parses, every tool exists, the workspace is
    /// a directory, every number is in range.
    pub fn resolve(
        options: &RunOptions,
        recorded: Option<&SessionConfig>,
        cwd: &Path,
    ) -> Result<Self, ConfigError> {
        let model = match (&options.model, recorded) {
            (Some(spec), _) => crate::model::normalise(spec, cwd)?,
            (None, Some(recorded)) => recorded.model.clone(),
            (None, None) => {
                return Err(ConfigError::new(
                    "--model is required, for example --model scripted:script.json",
                ));
            }
        };
        let model = crate::model::with_local_options(&model, options.threads, options.temperature)?;
        let base = recorded.cloned().unwrap_or_else(|| Self::defaults(cwd));
        let fallback_models = match &options.fallback_models {
            Some(specs) => specs
                .iter()
                .map(|spec| {
                    crate::model::normalise(spec, cwd)
                        .map_err(|err| ConfigError::new(format!("--fallback-model: {err}")))
                })
                .collect::<Result<Vec<_>, _>>()?,
            None => base.fallback_models.clone(),
        };
        let workspace = match &options.workspace {
            Some(dir) => absolute_dir(&cwd.join(dir))?,
            None => absolute_dir(&base.workspace)?,
        };
        let trace = match &options.trace {
            Some(path) => Some(cwd.join(path)),
            None => base.trace.clone(),
        };
        let or = |given: &Option<Vec<String>>, kept: &Vec<String>| {
            given.as_ref().map_or_else(
                || kept.clone(),
                |given| {
                    given
                        .iter()
                        .map(|name| name.trim().to_owned())
                        .filter(|name| !name.is_empty())
                        .collect()
                },
            )
        };
        let config = Self {
            version: CONFIG_VERSION,
            model,
            fallback_models,
            strategy: options.strategy.clone().unwrap_or(base.strategy.clone()),
            approve_tools: or(&options.approve_tools, &base.approve_tools),
            waive_approval: or(&options.waive_approval, &base.waive_approval),
            tools: or(&options.tools, &base.tools),
            allow_cmd: or(&options.allow_cmd, &base.allow_cmd),
            finish_when: options.finish_when.clone().or(base.finish_when.clone()),
            pass_env: or(&options.pass_env, &base.pass_env),
            mcp: match &options.mcp {
                Some(servers) if !servers.is_empty() => servers.clone(),
                _ => base.mcp.clone(),
            },
            mcp_timeout_secs: options.mcp_timeout_secs.unwrap_or(base.mcp_timeout_secs),
            workspace,
            max_steps: options.max_steps.unwrap_or(base.max_steps),
            max_tokens: options.max_tokens.or(base.max_tokens),
            max_model_calls: options.max_model_calls.or(base.max_model_calls),
            max_tool_calls: options.max_tool_calls.or(base.max_tool_calls),
            max_output_tokens: options.max_output_tokens.unwrap_or(base.max_output_tokens),
            timeout_secs: options.timeout_secs.or(base.timeout_secs),
            request_timeout_secs: options
                .request_timeout_secs
                .unwrap_or(base.request_timeout_secs),
            tool_timeout_secs: options.tool_timeout_secs.unwrap_or(base.tool_timeout_secs),
            tool_retries: options.tool_retries.unwrap_or(base.tool_retries),
            allow_repeated_calls: options
                .allow_repeated_calls
                .unwrap_or(base.allow_repeated_calls),
            context: match &options.context {
                Some(spec) => agent_strategies::ContextSpec::parse(spec)
                    .map_err(|err| ConfigError::new(err.to_string()))?
                    .to_string(),
                None => base.context.clone(),
            },
            max_invalid: options.max_invalid.unwrap_or(base.max_invalid),
            on_limit: options.on_limit.clone().unwrap_or(base.on_limit.clone()),
            reflect_every: match options.reflect_every {
                Some(0) => None,
                Some(every) => Some(every),
                None => base.reflect_every,
            },
            output_schema: options.output_schema.clone().or(base.output_schema.clone()),
            session_budget: options.session_budget.unwrap_or(base.session_budget),
            on_message: options
                .on_message
                .clone()
                .unwrap_or(base.on_message.clone()),
            trace,
            trace_content: options
                .trace_content
                .clone()
                .unwrap_or(base.trace_content.clone()),
            confinement: base.confinement.clone(),
        };
        config.check()?;
        Ok(config)
    }

    fn defaults(cwd: &Path) -> Self {
        Self {
            version: CONFIG_VERSION,
            model: String::new(),
            fallback_models: Vec::new(),
            strategy: default_strategy(),
            approve_tools: Vec::new(),
            waive_approval: Vec::new(),
            tools: Vec::new(),
            allow_cmd: Vec::new(),
            finish_when: None,
            pass_env: Vec::new(),
            mcp: Vec::new(),
            mcp_timeout_secs: default_mcp_timeout(),
            workspace: cwd.to_owned(),
            max_steps: DEFAULT_MAX_STEPS,
            max_tokens: None,
            max_model_calls: None,
            max_tool_calls: None,
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
            timeout_secs: None,
            request_timeout_secs: default_request_timeout(),
            tool_timeout_secs: default_tool_timeout(),
            tool_retries: DEFAULT_TOOL_RETRIES,
            allow_repeated_calls: false,
            context: default_context(),
            max_invalid: DEFAULT_MAX_INVALID,
            on_limit: default_on_limit(),
            reflect_every: None,
            output_schema: None,
            session_budget: false,
            on_message: default_on_message(),
            trace: None,
            trace_content: default_trace_content(),
            confinement: None,
        }
    }

    /// Whether the settings can be used together.
    /// Whether sessions of this configuration may start programs:
    /// `run_command`, a `--finish-when` check or MCP servers.
    pub fn starts_programs(&self) -> bool {
        self.tools.iter().any(|tool| tool == "run_command")
            || self.finish_when.is_some()
            || !self.mcp.is_empty()
    }

    fn check(&self) -> Result<(), ConfigError> {
        if self.version > CONFIG_VERSION {
            return Err(ConfigError::new(format!(
                "the session was recorded by a newer version of agent (configuration {}; this build reads up to {CONFIG_VERSION}); upgrade agent",
                self.version
            )));
        }
        if !matches!(self.strategy.as_str(), "react" | "plan-execute") {
            return Err(ConfigError::new(format!(
                "--strategy `{}` is not known; use react or plan-execute",
                self.strategy
            )));
        }
        for (flag, value, low, high) in [
            ("--max-steps", Some(self.max_steps), 1, MAX_STEPS_LIMIT),
            (
                "--max-output-tokens",
                Some(self.max_output_tokens),
                1,
                MAX_OUTPUT_TOKENS_LIMIT,
            ),
            (
                "--tool-retries",
                Some(self.tool_retries),
                0,
                TOOL_RETRIES_LIMIT,
            ),
            ("--max-invalid", Some(self.max_invalid), 0, MAX_STEPS_LIMIT),
            ("--reflect-every", self.reflect_every, 0, MAX_STEPS_LIMIT),
        ] {
            if let Some(value) = value
                && !(low..=high).contains(&value)
            {
                return Err(ConfigError::new(format!(
                    "{flag} must be from {low} to {high} (got {value})"
                )));
            }
        }
        for (flag, seconds) in [
            ("--mcp-timeout", Some(self.mcp_timeout_secs)),
            ("--timeout", self.timeout_secs),
            ("--request-timeout", Some(self.request_timeout_secs)),
            ("--tool-timeout", Some(self.tool_timeout_secs)),
        ] {
            if let Some(seconds) = seconds {
                seconds_of(flag, seconds)?;
            }
        }
        if !matches!(self.trace_content.as_str(), "summary" | "full") {
            return Err(ConfigError::new(format!(
                "--trace-content `{}` is not known; use summary or full",
                self.trace_content
            )));
        }
        for tool in &self.approve_tools {
            if !self.tools.contains(tool) && self.mcp.is_empty() {
                return Err(ConfigError::new(format!(
                    "--approve-tools names `{tool}`, which is not among --tools"
                )));
            }
        }
        self.context_spec()?;
        self.on_limit()?;
        self.on_message()?;
        self.output()?;
        crate::tools::builtin_registry(self)?;
        Ok(())
    }

    /// The configuration a session recorded in its first event.
    pub fn recorded(config: &serde_json::Value) -> Result<Self, ConfigError> {
        let config: Self = serde_json::from_value(config.clone()).map_err(|err| {
            ConfigError::new(format!(
                "the session's recorded configuration cannot be used by this build: {err}"
            ))
        })?;
        if config.version > CONFIG_VERSION {
            return Err(ConfigError::new(format!(
                "the session was recorded by a newer version of agent (configuration {}; this build reads up to {CONFIG_VERSION}); upgrade agent",
                config.version
            )));
        }
        Ok(config)
    }

    /// The configuration as JSON, for `SessionStarted.config`.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The session's context policy, as `--context` names it.
    pub fn context_spec(&self) -> Result<agent_strategies::ContextSpec, ConfigError> {
        agent_strategies::ContextSpec::parse(&self.context)
            .map_err(|err| ConfigError::new(err.to_string()))
    }

    /// What a message sent while the session runs does, as `--on-message`
    /// names it.
    pub fn on_message(&self) -> Result<OnMessage, ConfigError> {
        match self.on_message.as_str() {
            "enqueue" => Ok(OnMessage::Enqueue),
            "interrupt" => Ok(OnMessage::Interrupt),
            "reject" => Ok(OnMessage::Reject),
            other => Err(ConfigError::new(format!(
                "unknown --on-message `{other}`: expected enqueue, interrupt or reject"
            ))),
        }
    }

    /// What the session does when a limit ends it, as `--on-limit` names it.
    pub fn on_limit(&self) -> Result<OnLimit, ConfigError> {
        self.on_limit
            .parse()
            .map_err(|err: agent_core::UnknownOnLimit| ConfigError::new(err.to_string()))
    }

    /// The session's compiled output schema, if it has one.
    pub fn output(&self) -> Result<Option<OutputSchema>, ConfigError> {
        self.output_schema
            .clone()
            .map(|schema| {
                OutputSchema::new(schema).map_err(|err| {
                    ConfigError::new(format!(
                        "--output-schema is not a usable JSON Schema: {err}; fix the schema file"
                    ))
                })
            })
            .transpose()
    }

    /// The session's budgets.
    pub fn budgets(&self) -> Budgets {
        Budgets {
            max_steps: self.max_steps,
            max_tokens: self.max_tokens,
            max_model_calls: self.max_model_calls,
            max_tool_calls: self.max_tool_calls,
            max_calls_per_tool: Default::default(),
            timeout: self
                .timeout_secs
                .and_then(|secs| Duration::try_from_secs_f64(secs).ok()),
            max_invalid: self.max_invalid,
            session_wide: self.session_budget,
        }
    }
}

/// A positive number of seconds, at most a year, as a duration.
pub(crate) fn seconds_of(flag: &str, seconds: f64) -> Result<Duration, ConfigError> {
    if seconds.is_finite() && seconds > 0.0 && seconds <= 31_536_000.0 {
        Duration::try_from_secs_f64(seconds)
            .map_err(|err| ConfigError::new(format!("{flag}: {err}")))
    } else {
        Err(ConfigError::new(format!(
            "{flag} must be a positive number of seconds, at most a year (got {seconds})"
        )))
    }
}

fn absolute_dir(dir: &Path) -> Result<PathBuf, ConfigError> {
    let canonical = dir.canonicalize().map_err(|err| {
        ConfigError::new(format!(
            "--workspace `{}` is not usable: {err}",
            dir.display()
        ))
    })?;
    if canonical.is_dir() {
        Ok(canonical)
    } else {
        Err(ConfigError::new(format!(
            "--workspace `{}` is not a directory",
            dir.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_recorded_before_versions_reads_with_defaults() {
        let old = serde_json::json!({
            "model": "scripted:/x.json", "tools": ["calculator"], "workspace": "/",
            "max_steps": 10, "max_tokens": null, "max_model_calls": null,
            "max_tool_calls": null, "max_output_tokens": 1024, "timeout_secs": null,
            "trace": null, "trace_content": "summary"
        });
        let config = SessionConfig::recorded(&old).unwrap();
        assert_eq!(config.version, CONFIG_VERSION);
        assert_eq!(config.tool_retries, DEFAULT_TOOL_RETRIES);
        assert_eq!(config.strategy, "react");
    }

    #[test]
    fn a_newer_configuration_is_refused_with_a_reason() {
        let newer = serde_json::json!({"version": 99, "model": "scripted:/x", "workspace": "/"});
        let err = SessionConfig::recorded(&newer).unwrap_err();
        assert!(err.to_string().contains("upgrade agent"), "{err}");
    }

    #[test]
    fn options_override_what_was_recorded_and_unset_ones_keep_it() {
        let cwd = std::env::temp_dir();
        let first = SessionConfig::resolve(
            &RunOptions {
                model: Some("scripted:script.json".into()),
                tools: Some(vec!["calculator".into(), " sleep ".into()]),
                max_steps: Some(4),
                ..RunOptions::default()
            },
            None,
            &cwd,
        )
        .unwrap();
        assert_eq!(first.tools, ["calculator", "sleep"]);
        assert!(first.model.starts_with("scripted:/"), "{}", first.model);
        let again = SessionConfig::resolve(
            &RunOptions {
                max_steps: Some(9),
                ..RunOptions::default()
            },
            Some(&first),
            &cwd,
        )
        .unwrap();
        assert_eq!(again.max_steps, 9);
        assert_eq!(again.tools, first.tools);
        let err = SessionConfig::resolve(
            &RunOptions {
                tools: Some(vec!["nope".into()]),
                ..RunOptions::default()
            },
            Some(&first),
            &cwd,
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown tool `nope`"), "{err}");
    }

    #[test]
    fn a_waived_tool_is_recorded_where_the_engine_reads_it() {
        let config = SessionConfig::resolve(
            &RunOptions {
                model: Some("scripted:script.json".into()),
                waive_approval: Some(vec!["deploy".into()]),
                ..RunOptions::default()
            },
            None,
            &std::env::temp_dir(),
        )
        .unwrap();
        assert!(agent_core::approval_waived(&config.to_value(), "deploy"));
        assert!(!agent_core::approval_waived(&config.to_value(), "other"));
    }

    #[test]
    fn absurd_values_are_refused_naming_the_flag_and_the_range() {
        for (options, flag) in [
            (
                RunOptions {
                    tool_retries: Some(1_000_000_000),
                    ..RunOptions::default()
                },
                "--tool-retries",
            ),
            (
                RunOptions {
                    max_steps: Some(0),
                    ..RunOptions::default()
                },
                "--max-steps",
            ),
            (
                RunOptions {
                    max_output_tokens: Some(u32::MAX),
                    ..RunOptions::default()
                },
                "--max-output-tokens",
            ),
        ] {
            let options = RunOptions {
                model: Some("scripted:script.json".into()),
                ..options
            };
            let err = SessionConfig::resolve(&options, None, &std::env::temp_dir()).unwrap_err();
            assert!(err.to_string().contains(flag), "{err}");
            assert!(err.to_string().contains(" to "), "{err}");
        }
    }

    #[test]
    fn unknown_fields_of_options_are_refused() {
        let err =
            serde_json::from_value::<RunOptions>(serde_json::json!({"modle": "x"})).unwrap_err();
        assert!(err.to_string().contains("modle"), "{err}");
    }
}
