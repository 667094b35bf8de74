//! The session configuration: everything a run is given, recorded in the
//! session's first event (`SessionStarted.config`) so that a resume, a worker on
//! another machine or the HTTP server rebuilds the same engine. It is a
//! persistence format, versioned; settings added later have defaults, so an
//! old session's configuration still reads.
//!
//! What a caller asks for (the `agent run` flags, the HTTP API's fields) is an
//! [`AgentSpec`]: each setting it has overrides the recorded value, each it
//! lacks keeps it.

pub(crate) mod tools;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_engine::{Budgets, DEFAULT_MAX_INVALID, DEFAULT_MAX_STEPS, OnLimit, OutputSchema};
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::spec::AgentSpec;

/// Version of the recorded configuration this build writes (2 added the
/// agent's instructions).
pub const CONFIG_VERSION: u32 = 2;

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

/// Every setting of a session, as recorded in `SessionStarted.config`: an
/// [`AgentSpec`] resolved — every setting with a default present, paths
/// absolute, the model spec checked — with the layout's version and how the
/// programs it starts were confined. The settings are flat in the record, as
/// they always were, so a configuration recorded by an earlier version reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionConfig {
    /// Layout version ([`CONFIG_VERSION`]).
    #[serde(default = "version")]
    pub version: u32,
    /// The declared agent the session runs, if it was started from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The [digest](crate::AgentDefinition::digest) of that agent's
    /// definition when the session started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_digest: Option<String>,
    /// The settings.
    #[serde(flatten)]
    pub spec: AgentSpec,
    /// How the programs the session starts were confined where it started:
    /// `landlock`, or `none: <why>` (recorded, never read back as a setting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<String>,
}

/// The settings a session has when nothing sets them (and a configuration
/// recorded before a setting existed reads as having).
fn defaults(cwd: &Path) -> AgentSpec {
    AgentSpec {
        strategy: Some(default_strategy()),
        mcp_timeout_secs: Some(agent_tools::DEFAULT_MCP_TIMEOUT.as_secs_f64()),
        workspace: Some(cwd.to_owned()),
        max_steps: Some(DEFAULT_MAX_STEPS),
        max_output_tokens: Some(DEFAULT_MAX_OUTPUT_TOKENS),
        request_timeout_secs: Some(agent_providers::DEFAULT_REQUEST_TIMEOUT.as_secs_f64()),
        tool_timeout_secs: Some(DEFAULT_TOOL_TIMEOUT.as_secs_f64()),
        tool_retries: Some(DEFAULT_TOOL_RETRIES),
        allow_repeated_calls: Some(false),
        context: Some("keep-all".into()),
        max_invalid: Some(DEFAULT_MAX_INVALID),
        on_limit: Some(OnLimit::default().as_str().into()),
        on_message: Some("enqueue".into()),
        trace_content: Some("summary".into()),
        ..AgentSpec::default()
    }
}

fn default_strategy() -> String {
    "react".into()
}

/// `spec` with the defaults under it: what a session of it has, paths aside.
pub(crate) fn with_defaults(spec: &AgentSpec) -> AgentSpec {
    overlay(&defaults(Path::new("/")), spec).unwrap_or_else(|_| spec.clone())
}

/// `over`'s settings on top of `base`'s: each setting `over` has replaces
/// `base`'s, each it lacks keeps it.
fn overlay(base: &AgentSpec, over: &AgentSpec) -> Result<AgentSpec, ConfigError> {
    let (mut merged, over) = (to_object(base)?, to_object(over)?);
    merged.extend(over);
    serde_json::from_value(serde_json::Value::Object(merged))
        .map_err(|err| ConfigError::new(format!("the settings do not combine: {err}")))
}

fn to_object(spec: &AgentSpec) -> Result<serde_json::Map<String, serde_json::Value>, ConfigError> {
    match serde_json::to_value(spec) {
        Ok(serde_json::Value::Object(fields)) => Ok(fields),
        Ok(_) | Err(_) => Err(ConfigError::new("the settings cannot be written as JSON")),
    }
}

/// Names trimmed, blank ones dropped.
fn trimmed(names: &Option<Vec<String>>) -> Option<Vec<String>> {
    names.as_ref().map(|names| {
        names
            .iter()
            .map(|name| name.trim().to_owned())
            .filter(|name| !name.is_empty())
            .collect()
    })
}

impl SessionConfig {
    /// The configuration `options` describe on top of `recorded` (what a session
    /// recorded at start; `None` for a new session), relative paths taken from
    /// `cwd`, checked: the model spec parses, every tool exists, the workspace is
    /// a directory, every number is in range.
    pub fn resolve(
        options: &AgentSpec,
        recorded: Option<&SessionConfig>,
        cwd: &Path,
    ) -> Result<Self, ConfigError> {
        let base = match recorded {
            Some(recorded) => overlay(&defaults(cwd), &recorded.spec)?,
            None => defaults(cwd),
        };
        let model = match (&options.model, &base.model) {
            (Some(spec), _) => crate::model_spec::normalise(spec, cwd)?,
            (None, Some(recorded)) => recorded.clone(),
            (None, None) => {
                return Err(ConfigError::new(
                    "--model is required, for example --model scripted:script.json",
                ));
            }
        };
        let given = AgentSpec {
            model: Some(crate::model_spec::with_local_options(
                &model,
                options.threads,
                options.temperature,
            )?),
            fallback_models: options
                .fallback_models
                .as_ref()
                .map(|specs| {
                    specs
                        .iter()
                        .map(|spec| {
                            crate::model_spec::normalise(spec, cwd)
                                .map_err(|err| ConfigError::new(format!("--fallback-model: {err}")))
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?,
            approve_tools: trimmed(&options.approve_tools),
            waive_approval: trimmed(&options.waive_approval),
            tools: trimmed(&options.tools),
            allow_cmd: trimmed(&options.allow_cmd),
            pass_env: trimmed(&options.pass_env),
            mcp: options.mcp.clone().filter(|servers| !servers.is_empty()),
            workspace: Some(absolute_dir(&match &options.workspace {
                Some(dir) => cwd.join(dir),
                None => base.workspace.clone().unwrap_or_else(|| cwd.to_owned()),
            })?),
            trace: options.trace.as_ref().map(|path| cwd.join(path)),
            context: options
                .context
                .as_ref()
                .map(|spec| {
                    agent_engine::context::ContextSpec::parse(spec)
                        .map(|spec| spec.to_string())
                        .map_err(|err| ConfigError::new(err.to_string()))
                })
                .transpose()?,
            // Folded into the local model's spec above.
            threads: None,
            temperature: None,
            ..options.clone()
        };
        let mut spec = overlay(&base, &given)?;
        if spec.reflect_every == Some(0) {
            spec.reflect_every = None;
        }
        let config = Self {
            version: CONFIG_VERSION,
            agent: recorded.and_then(|recorded| recorded.agent.clone()),
            definition_digest: recorded.and_then(|recorded| recorded.definition_digest.clone()),
            spec,
            confinement: recorded.and_then(|recorded| recorded.confinement.clone()),
        };
        config.check()?;
        Ok(config)
    }

    /// The configuration of a new session of the declared agent `definition`,
    /// with `options` on top (the flags or fields a caller gave besides the
    /// agent's name): its relative paths are taken from the definition's
    /// directory, the caller's from `cwd`, and without a `workspace` of its
    /// own the session works in `cwd`; the agent's name and digest are
    /// recorded.
    pub fn for_agent(
        definition: &crate::AgentDefinition,
        options: &AgentSpec,
        cwd: &Path,
    ) -> Result<Self, ConfigError> {
        let mut declared = definition.spec.clone();
        if declared.workspace.is_none() {
            // Where the caller works, not where the file lives.
            declared.workspace = Some(cwd.to_owned());
        }
        if declared.model.is_none() {
            // The caller's model, taken from the caller's directory below.
            declared.model = options
                .model
                .as_ref()
                .map(|spec| crate::model_spec::normalise(spec, cwd))
                .transpose()?;
        }
        let base = Self::resolve(&declared, None, &definition.dir)
            .map_err(|err| ConfigError::new(format!("agent `{}`: {err}", definition.name)))?;
        let mut config = Self::resolve(options, Some(&base), cwd)?;
        config.agent = Some(definition.name.clone());
        config.definition_digest = Some(definition.digest());
        Ok(config)
    }

    /// The model spec (never with a key; file paths absolute).
    pub fn model(&self) -> &str {
        self.spec.model.as_deref().unwrap_or_default()
    }

    /// The models asked, in order, when the one before failed for good.
    pub fn fallback_models(&self) -> &[String] {
        self.spec.fallback_models.as_deref().unwrap_or_default()
    }

    /// `react` or `plan-execute`.
    pub fn strategy(&self) -> &str {
        self.spec.strategy.as_deref().unwrap_or("react")
    }

    /// The agent's instructions, if it has any.
    pub fn instructions(&self) -> Option<&str> {
        self.spec.instructions.as_deref()
    }

    /// Tools whose calls wait for a human decision.
    pub fn approve_tools(&self) -> &[String] {
        self.spec.approve_tools.as_deref().unwrap_or_default()
    }

    /// Built-in tool names.
    pub fn tools(&self) -> &[String] {
        self.spec.tools.as_deref().unwrap_or_default()
    }

    /// Programs `run_command` may start.
    pub fn allow_cmd(&self) -> &[String] {
        self.spec.allow_cmd.as_deref().unwrap_or_default()
    }

    /// Environment variables started programs get besides the defaults.
    pub fn pass_env(&self) -> &[String] {
        self.spec.pass_env.as_deref().unwrap_or_default()
    }

    /// MCP server command lines.
    pub fn mcp(&self) -> &[String] {
        self.spec.mcp.as_deref().unwrap_or_default()
    }

    /// The completion check, if any.
    pub fn finish_when(&self) -> Option<&str> {
        self.spec.finish_when.as_deref()
    }

    /// The absolute workspace root.
    pub fn workspace(&self) -> &Path {
        self.spec.workspace.as_deref().unwrap_or(Path::new("/"))
    }

    /// Seconds an MCP server may take to start or answer a call.
    pub fn mcp_timeout_secs(&self) -> f64 {
        self.spec
            .mcp_timeout_secs
            .unwrap_or(agent_tools::DEFAULT_MCP_TIMEOUT.as_secs_f64())
    }

    /// Output tokens per request.
    pub fn max_output_tokens(&self) -> u32 {
        self.spec
            .max_output_tokens
            .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)
    }

    /// Seconds allowed for one provider request.
    pub fn request_timeout_secs(&self) -> f64 {
        self.spec
            .request_timeout_secs
            .unwrap_or(agent_providers::DEFAULT_REQUEST_TIMEOUT.as_secs_f64())
    }

    /// Seconds allowed for one tool call.
    pub fn tool_timeout_secs(&self) -> f64 {
        self.spec
            .tool_timeout_secs
            .unwrap_or(DEFAULT_TOOL_TIMEOUT.as_secs_f64())
    }

    /// Retries of a failed call of an idempotent or MCP tool.
    pub fn tool_retries(&self) -> u32 {
        self.spec.tool_retries.unwrap_or(DEFAULT_TOOL_RETRIES)
    }

    /// Whether a call identical to an earlier successful one runs again.
    pub fn allow_repeated_calls(&self) -> bool {
        self.spec.allow_repeated_calls.unwrap_or(false)
    }

    /// Steps between reflections, if any.
    pub fn reflect_every(&self) -> Option<u32> {
        self.spec.reflect_every.filter(|every| *every > 0)
    }

    /// The trace file (absolute), if any.
    pub fn trace(&self) -> Option<&Path> {
        self.spec.trace.as_deref()
    }

    /// Whether the trace and telemetry hold texts whole (`--trace-content full`).
    pub fn full_content(&self) -> bool {
        self.spec.trace_content.as_deref() == Some("full")
    }

    /// Whether sessions of this configuration may start programs:
    /// `run_command`, a `--finish-when` check or MCP servers.
    pub fn starts_programs(&self) -> bool {
        self.tools().iter().any(|tool| tool == "run_command")
            || self.finish_when().is_some()
            || !self.mcp().is_empty()
    }

    fn check(&self) -> Result<(), ConfigError> {
        if self.version > CONFIG_VERSION {
            return Err(ConfigError::new(format!(
                "the session was recorded by a newer version of agent (configuration {}; this build reads up to {CONFIG_VERSION}); upgrade agent",
                self.version
            )));
        }
        if !matches!(self.strategy(), "react" | "plan-execute") {
            return Err(ConfigError::new(format!(
                "--strategy `{}` is not known; use react or plan-execute",
                self.strategy()
            )));
        }
        let spec = &self.spec;
        for (flag, value, low, high) in [
            ("--max-steps", spec.max_steps, 1, MAX_STEPS_LIMIT),
            (
                "--max-output-tokens",
                spec.max_output_tokens,
                1,
                MAX_OUTPUT_TOKENS_LIMIT,
            ),
            ("--tool-retries", spec.tool_retries, 0, TOOL_RETRIES_LIMIT),
            ("--max-invalid", spec.max_invalid, 0, MAX_STEPS_LIMIT),
            ("--reflect-every", spec.reflect_every, 0, MAX_STEPS_LIMIT),
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
            ("--mcp-timeout", spec.mcp_timeout_secs),
            ("--timeout", spec.timeout_secs),
            ("--request-timeout", spec.request_timeout_secs),
            ("--tool-timeout", spec.tool_timeout_secs),
        ] {
            if let Some(seconds) = seconds {
                seconds_of(flag, seconds)?;
            }
        }
        if let Some(mode) = &spec.trace_content
            && !matches!(mode.as_str(), "summary" | "full")
        {
            return Err(ConfigError::new(format!(
                "--trace-content `{mode}` is not known; use summary or full"
            )));
        }
        for tool in self.approve_tools() {
            if !self.tools().contains(tool) && self.mcp().is_empty() {
                return Err(ConfigError::new(format!(
                    "--approve-tools names `{tool}`, which is not among --tools"
                )));
            }
        }
        self.context_spec()?;
        self.on_limit()?;
        self.on_message()?;
        self.output()?;
        tools::builtin_registry(self)?;
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
    pub fn context_spec(&self) -> Result<agent_engine::context::ContextSpec, ConfigError> {
        agent_engine::context::ContextSpec::parse(
            self.spec.context.as_deref().unwrap_or("keep-all"),
        )
        .map_err(|err| ConfigError::new(err.to_string()))
    }

    /// What a message sent while the session runs does, as `--on-message`
    /// names it.
    pub fn on_message(&self) -> Result<OnMessage, ConfigError> {
        match self.spec.on_message.as_deref().unwrap_or("enqueue") {
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
        match &self.spec.on_limit {
            Some(mode) => mode
                .parse()
                .map_err(|err: agent_engine::UnknownOnLimit| ConfigError::new(err.to_string())),
            None => Ok(OnLimit::default()),
        }
    }

    /// The session's compiled output schema, if it has one.
    pub fn output(&self) -> Result<Option<OutputSchema>, ConfigError> {
        self.spec
            .output_schema
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
        let spec = &self.spec;
        Budgets {
            max_steps: spec.max_steps.unwrap_or(DEFAULT_MAX_STEPS),
            max_tokens: spec.max_tokens,
            max_model_calls: spec.max_model_calls,
            max_tool_calls: spec.max_tool_calls,
            max_calls_per_tool: Default::default(),
            timeout: spec
                .timeout_secs
                .and_then(|secs| Duration::try_from_secs_f64(secs).ok()),
            max_invalid: spec.max_invalid.unwrap_or(DEFAULT_MAX_INVALID),
            session_wide: spec.session_budget.unwrap_or(false),
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
        assert_eq!(config.tool_retries(), DEFAULT_TOOL_RETRIES);
        assert_eq!(config.strategy(), "react");
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
            &AgentSpec {
                model: Some("scripted:script.json".into()),
                tools: Some(vec!["calculator".into(), " sleep ".into()]),
                max_steps: Some(4),
                ..AgentSpec::default()
            },
            None,
            &cwd,
        )
        .unwrap();
        assert_eq!(first.tools(), ["calculator", "sleep"]);
        assert!(first.model().starts_with("scripted:/"), "{}", first.model());
        let again = SessionConfig::resolve(
            &AgentSpec {
                max_steps: Some(9),
                ..AgentSpec::default()
            },
            Some(&first),
            &cwd,
        )
        .unwrap();
        assert_eq!(again.spec.max_steps, Some(9));
        assert_eq!(again.tools(), first.tools());
        let err = SessionConfig::resolve(
            &AgentSpec {
                tools: Some(vec!["nope".into()]),
                ..AgentSpec::default()
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
            &AgentSpec {
                model: Some("scripted:script.json".into()),
                waive_approval: Some(vec!["deploy".into()]),
                ..AgentSpec::default()
            },
            None,
            &std::env::temp_dir(),
        )
        .unwrap();
        assert!(agent_engine::approval_waived(&config.to_value(), "deploy"));
        assert!(!agent_engine::approval_waived(&config.to_value(), "other"));
    }

    #[test]
    fn absurd_values_are_refused_naming_the_flag_and_the_range() {
        for (options, flag) in [
            (
                AgentSpec {
                    tool_retries: Some(1_000_000_000),
                    ..AgentSpec::default()
                },
                "--tool-retries",
            ),
            (
                AgentSpec {
                    max_steps: Some(0),
                    ..AgentSpec::default()
                },
                "--max-steps",
            ),
            (
                AgentSpec {
                    max_output_tokens: Some(u32::MAX),
                    ..AgentSpec::default()
                },
                "--max-output-tokens",
            ),
        ] {
            let options = AgentSpec {
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
            serde_json::from_value::<AgentSpec>(serde_json::json!({"modle": "x"})).unwrap_err();
        assert!(err.to_string().contains("modle"), "{err}");
    }
}
