//! Named agents: an agents file (TOML) declares agents by name, each an
//! [`AgentSpec`] — instructions, model, tools, strategy, budgets, policies —
//! with a description and the settings an API client may override:
//!
//! ```toml
//! [agents.support]
//! description = "Answers questions about orders."
//! instructions = "You answer questions about ACME's orders. Be brief."
//! model = "openai:gpt-4o-mini"
//! tools = ["read_file", "search"]
//! max_steps = 12
//! overridable = ["max_steps"]
//! ```
//!
//! A session started from a definition records the agent's name and the
//! [digest](AgentDefinition::digest) of the definition, so one can tell which
//! definition ran it and whether it has changed since. Relative paths in a
//! definition (`workspace`, `trace`, a `scripted:` model file) are taken from
//! the file's directory; a definition without a `workspace` works where the
//! session is started.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::ConfigError;
use crate::spec::AgentSpec;

/// The file read when none is named: `agents.toml` in the working directory.
pub const DEFAULT_AGENTS_FILE: &str = "agents.toml";

/// The variable that names the agents file.
pub const AGENTS_FILE_VARIABLE: &str = "AGENT_AGENTS_FILE";

/// Keys of an agent's table that are not settings.
const DESCRIPTION: &str = "description";
const OVERRIDABLE: &str = "overridable";

/// One declared agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentDefinition {
    /// Its name, the key of its table.
    pub name: String,
    /// What it is for, for people (and, later, for agents that call it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its settings.
    pub spec: AgentSpec,
    /// Settings (by field name) an API client may set for a session of this
    /// agent besides lowering its budgets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overridable: Vec<String>,
    /// The directory its relative paths are taken from.
    #[serde(skip)]
    pub dir: PathBuf,
}

/// Settings an API client may always set for a declared agent's session, as
/// long as they lower the agent's own: its budgets.
const BUDGETS: &[&str] = &[
    "max_steps",
    "max_tokens",
    "max_model_calls",
    "max_tool_calls",
    "max_output_tokens",
    "timeout_secs",
];

/// A declared agent as it is shown (`agent agents show --json`, `GET
/// /v1/agents/{name}`).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AgentView {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// Its settings, as declared.
    pub definition: AgentSpec,
    /// The settings a client may set for its sessions besides lowering its budgets.
    pub overridable: Vec<String>,
    /// The digest sessions of it record.
    pub digest: String,
}

impl AgentDefinition {
    /// The definition as it is shown.
    pub fn view(&self) -> AgentView {
        AgentView {
            name: self.name.clone(),
            description: self.description.clone(),
            definition: self.spec.clone(),
            overridable: self.overridable.clone(),
            digest: self.digest(),
        }
    }

    /// The settings of `asked` a client without free-form rights may not set
    /// for a session of this agent: all but those the definition marks
    /// overridable and budgets that stay at or below the agent's own.
    pub fn refused_settings(&self, asked: &AgentSpec) -> Vec<String> {
        let (Ok(serde_json::Value::Object(asked)), Ok(serde_json::Value::Object(own))) = (
            serde_json::to_value(asked),
            serde_json::to_value(crate::config::with_defaults(&self.spec)),
        ) else {
            return vec!["(settings that cannot be read)".into()];
        };
        asked
            .iter()
            .filter(|(field, value)| {
                let lowered = BUDGETS.contains(&field.as_str())
                    && match (
                        value.as_f64(),
                        own.get(*field).and_then(serde_json::Value::as_f64),
                    ) {
                        (Some(asked), Some(limit)) => asked <= limit,
                        (Some(_), None) => true,
                        _ => false,
                    };
                !lowered && !self.overridable.contains(field)
            })
            .map(|(field, _)| field.clone())
            .collect()
    }

    /// The digest of the definition as declared (`sha256:` and 64 hex
    /// digits): a session records it, so a changed definition shows.
    pub fn digest(&self) -> String {
        let canonical = serde_json::to_string(self).unwrap_or_default();
        let hash = Sha256::digest(canonical.as_bytes());
        let hex: String = hash.iter().map(|byte| format!("{byte:02x}")).collect();
        format!("sha256:{hex}")
    }
}

/// The agents of one file, by name.
#[derive(Debug, Clone, Default)]
pub struct Agents {
    /// Where they were read from (`None` when there is no file).
    pub path: Option<PathBuf>,
    agents: BTreeMap<String, AgentDefinition>,
}

impl Agents {
    /// The agents file `named` (`--agents`), else `AGENT_AGENTS_FILE`, else
    /// `agents.toml` in `cwd` when it exists; no agents when there is none.
    pub fn find(named: Option<&Path>, cwd: &Path) -> Result<Self, ConfigError> {
        let from_env = std::env::var_os(AGENTS_FILE_VARIABLE).map(PathBuf::from);
        match named.map(Path::to_path_buf).or(from_env) {
            Some(path) => Self::read(&cwd.join(path)),
            None => {
                let default = cwd.join(DEFAULT_AGENTS_FILE);
                if default.exists() {
                    Self::read(&default)
                } else {
                    Ok(Self::default())
                }
            }
        }
    }

    /// The agents declared in the file at `path`.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|err| {
            ConfigError::new(format!(
                "the agents file `{}` cannot be read: {err}",
                path.display()
            ))
        })?;
        let dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let agents = parse(&text, &dir).map_err(|why| {
            ConfigError::new(format!("the agents file `{}`: {why}", path.display()))
        })?;
        Ok(Self {
            path: Some(path.to_path_buf()),
            agents,
        })
    }

    /// The agent called `name`; an unknown name lists the known ones.
    pub fn get(&self, name: &str) -> Result<&AgentDefinition, ConfigError> {
        self.agents.get(name).ok_or_else(|| {
            let known: Vec<&str> = self.agents.keys().map(String::as_str).collect();
            ConfigError::new(match (&self.path, known.is_empty()) {
                (None, _) => format!(
                    "no agent `{name}`: there is no agents file (give one with --agents FILE or {AGENTS_FILE_VARIABLE}, or put {DEFAULT_AGENTS_FILE} here)"
                ),
                (Some(path), true) => {
                    format!("no agent `{name}`: `{}` declares none", path.display())
                }
                (Some(path), false) => format!(
                    "no agent `{name}` in `{}`; it declares {}",
                    path.display(),
                    known.join(", ")
                ),
            })
        })
    }

    /// Every agent, by name.
    pub fn iter(&self) -> impl Iterator<Item = &AgentDefinition> {
        self.agents.values()
    }
}

/// The agents of a file's text; an error names the line and the field.
fn parse(text: &str, dir: &Path) -> Result<BTreeMap<String, AgentDefinition>, String> {
    let document: toml::Table = toml::from_str(text).map_err(|err| err.to_string())?;
    if let Some(other) = document.keys().find(|key| *key != "agents") {
        return Err(format!(
            "line {}: unknown table `{other}`; declare agents as [agents.NAME]",
            line_of(text, other)
        ));
    }
    let tables = match document.get("agents") {
        None => return Ok(BTreeMap::new()),
        Some(toml::Value::Table(tables)) => tables,
        Some(_) => return Err("`agents` must be a table of [agents.NAME] tables".into()),
    };
    let mut agents = BTreeMap::new();
    for (name, value) in tables {
        let line = line_of(text, &format!("agents.{name}"));
        let at = |why: String| format!("line {line}: agent `{name}`: {why}");
        let toml::Value::Table(table) = value else {
            return Err(at("must be a table ([agents.NAME])".into()));
        };
        let mut table = table.clone();
        let description = match table.remove(DESCRIPTION) {
            None => None,
            Some(toml::Value::String(text)) => Some(text),
            Some(_) => return Err(at("field `description` must be text".into())),
        };
        let overridable: Vec<String> = match table.remove(OVERRIDABLE) {
            None => Vec::new(),
            Some(value) => value
                .try_into()
                .map_err(|err| at(format!("field `overridable`: {err}")))?,
        };
        let fields = AgentSpec::field_names();
        if let Some(unknown) = overridable.iter().find(|field| !fields.contains(field)) {
            return Err(at(format!(
                "`overridable` names `{unknown}`, which is no setting; settings are {}",
                fields.join(", ")
            )));
        }
        let spec: AgentSpec = toml::Value::Table(table)
            .try_into()
            .map_err(|err| at(err.to_string().trim().to_owned()))?;
        agents.insert(
            name.clone(),
            AgentDefinition {
                name: name.clone(),
                description,
                spec,
                overridable,
                dir: dir.to_path_buf(),
            },
        );
    }
    Ok(agents)
}

/// The 1-based line of the first line that declares `table` (`[table]`) or,
/// failing that, mentions it.
fn line_of(text: &str, table: &str) -> usize {
    let header = format!("[{table}]");
    let found = text
        .lines()
        .position(|line| line.trim() == header)
        .or_else(|| text.lines().position(|line| line.contains(table)));
    found.map_or(1, |index| index + 1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const FILE: &str = r#"
[agents.support]
description = "Answers questions about orders."
instructions = "You answer questions about ACME's orders. Be brief."
model = "openai:gpt-4o-mini"
fallback_models = ["anthropic:claude-3-5-haiku-latest"]
tools = ["read_file", "search"]
max_steps = 12
overridable = ["max_steps"]

[agents.triage]
model = "scripted:triage.json"
"#;

    #[test]
    fn a_file_declares_agents_by_name() {
        let agents = parse(FILE, Path::new("/etc/agents")).unwrap();
        let support = &agents["support"];
        assert_eq!(support.spec.max_steps, Some(12));
        assert_eq!(support.overridable, ["max_steps"]);
        assert_eq!(
            support.description.as_deref(),
            Some("Answers questions about orders.")
        );
        assert!(support.digest().starts_with("sha256:"));
        assert_ne!(support.digest(), agents["triage"].digest());
    }

    #[test]
    fn mistakes_name_the_line_and_the_field() {
        let typo = FILE.replace("max_steps = 12", "max_stepz = 12");
        let err = parse(&typo, Path::new(".")).unwrap_err();
        assert!(
            err.contains("line 2") && err.contains("support") && err.contains("max_stepz"),
            "{err}"
        );
        let wrong_type = FILE.replace("max_steps = 12", "max_steps = \"twelve\"");
        let err = parse(&wrong_type, Path::new(".")).unwrap_err();
        assert!(err.contains("line 2"), "{err}");
        let broken = "[agents.x\nmodel = 1";
        assert!(parse(broken, Path::new(".")).unwrap_err().contains("line"));
        let not_a_setting = FILE.replace(
            "overridable = [\"max_steps\"]",
            "overridable = [\"workspace\", \"shell\"]",
        );
        let err = parse(&not_a_setting, Path::new(".")).unwrap_err();
        assert!(err.contains("`shell`"), "{err}");
    }

    #[test]
    fn a_client_may_lower_budgets_and_set_what_is_overridable_only() {
        let agents = parse(FILE, Path::new(".")).unwrap();
        let support = &agents["support"];
        let asked =
            |json: serde_json::Value| -> AgentSpec { serde_json::from_value(json).unwrap() };
        assert!(
            support
                .refused_settings(&asked(serde_json::json!({
                    "max_steps": 50, "max_tokens": 1000, "max_output_tokens": 512
                })))
                .is_empty(),
            "max_steps is overridable; no token budget is a budget a client may lower; 512 < 1024"
        );
        let triage = &agents["triage"];
        assert_eq!(
            triage.refused_settings(&asked(serde_json::json!({"max_steps": 11}))),
            ["max_steps"],
            "above the default of 10"
        );
        assert!(
            triage
                .refused_settings(&asked(serde_json::json!({"max_steps": 3})))
                .is_empty()
        );
        let mut refused = triage.refused_settings(&asked(serde_json::json!({
            "mcp": ["sh"], "allow_cmd": ["sh"], "workspace": "/", "model": "openai:m"
        })));
        refused.sort();
        assert_eq!(refused, ["allow_cmd", "mcp", "model", "workspace"]);
    }

    #[test]
    fn an_unknown_agent_lists_the_known_ones() {
        let agents = Agents {
            path: Some("agents.toml".into()),
            agents: parse(FILE, Path::new(".")).unwrap(),
        };
        let err = agents.get("sales").unwrap_err().to_string();
        assert!(err.contains("support, triage"), "{err}");
        assert!(
            Agents::default()
                .get("x")
                .unwrap_err()
                .to_string()
                .contains("no agents file")
        );
    }
}
