//! Model specs as `--model` takes them: `scripted:FILE`, `replay:SESSION_ID`,
//! `openai:MODEL[@BASE_URL]`, `anthropic:MODEL[@BASE_URL]`, `json:<inner spec>`,
//! `local[:PATH.gguf][?OPTIONS]`.

use std::fmt;

/// A parsed model spec. It never holds a key: keys come from the environment.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSpec {
    /// Responses written in a JSON file.
    Scripted {
        /// The script file.
        path: String,
    },
    /// The responses recorded in a session.
    Replay {
        /// The recorded session.
        session_id: String,
    },
    /// The OpenAI Chat Completions API or any compatible server.
    OpenAi {
        /// Model name.
        model: String,
        /// Base URL (ending before `/chat/completions`), if given.
        base_url: Option<String>,
    },
    /// The Anthropic Messages API.
    Anthropic {
        /// Model name.
        model: String,
        /// Base URL (ending before `/v1/messages`), if given.
        base_url: Option<String>,
    },
    /// JSON-text actions from a model without native tool calling.
    JsonText(Box<ModelSpec>),
    /// A GGUF model run in this process by llama.cpp.
    Local {
        /// The model file; `None` is the default model under `.agent/models/`.
        path: Option<String>,
        /// How it is run.
        options: LocalOptions,
    },
}

/// The file name of the default local model (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M),
/// which `agent model pull` writes under `.agent/models/`.
pub const DEFAULT_LOCAL_MODEL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

/// How a local model runs: `?ctx=4096&threads=2&temperature=0&seed=42&grammar=on`
/// after the path. Defaults are left out when the spec is printed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LocalOptions {
    /// Context size in tokens (prompt and answer together).
    pub context: u32,
    /// CPU threads for prompt processing and generation.
    pub threads: u32,
    /// Sampling temperature; 0 is greedy (deterministic).
    pub temperature: f32,
    /// Seed of the sampler when the temperature is above 0.
    pub seed: u32,
    /// Whether output is constrained by the action grammar.
    pub grammar: bool,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            context: 4096,
            threads: 2,
            temperature: 0.0,
            seed: 42,
            grammar: true,
        }
    }
}

impl LocalOptions {
    /// Parses `key=value&…`; says which option is wrong and what it takes.
    pub fn parse(query: &str) -> Result<Self, String> {
        let mut options = Self::default();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("`{pair}` is not KEY=VALUE"))?;
            let number = |what: &str| -> Result<u32, String> {
                value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("`{key}` takes {what}, not `{value}`"))
            };
            match key {
                "ctx" => options.context = number("a positive number of tokens")?,
                "threads" => options.threads = number("a positive number of threads")?,
                "seed" => {
                    options.seed = value
                        .parse()
                        .map_err(|_| format!("`seed` takes a whole number, not `{value}`"))?
                }
                "temperature" => {
                    options.temperature = value
                        .parse::<f32>()
                        .ok()
                        .filter(|t| t.is_finite() && (0.0..=2.0).contains(t))
                        .ok_or_else(|| {
                            format!("`temperature` takes a number from 0 to 2, not `{value}`")
                        })?
                }
                "grammar" => {
                    options.grammar = match value {
                        "on" => true,
                        "off" => false,
                        _ => return Err(format!("`grammar` takes on or off, not `{value}`")),
                    }
                }
                _ => {
                    return Err(format!(
                        "unknown option `{key}` (known: ctx, threads, temperature, seed, grammar)"
                    ));
                }
            }
        }
        Ok(options)
    }
}

impl fmt::Display for LocalOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let defaults = Self::default();
        let mut pairs = Vec::new();
        if self.context != defaults.context {
            pairs.push(format!("ctx={}", self.context));
        }
        if self.threads != defaults.threads {
            pairs.push(format!("threads={}", self.threads));
        }
        if self.temperature != defaults.temperature {
            pairs.push(format!("temperature={}", self.temperature));
        }
        if self.seed != defaults.seed {
            pairs.push(format!("seed={}", self.seed));
        }
        if self.grammar != defaults.grammar {
            pairs.push("grammar=off".into());
        }
        if !pairs.is_empty() {
            write!(f, "?{}", pairs.join("&"))?;
        }
        Ok(())
    }
}

/// A spec that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--model `{0}` is not a model spec; use scripted:FILE, replay:SESSION_ID, openai:MODEL[@BASE_URL], anthropic:MODEL[@BASE_URL], local[:FILE.gguf][?ctx=N&threads=N&temperature=T&seed=N&grammar=off] or json:<spec>"
)]
pub struct BadModelSpec(pub String);

impl ModelSpec {
    /// Parses a spec.
    pub fn parse(spec: &str) -> Result<Self, BadModelSpec> {
        let bad = || BadModelSpec(spec.to_owned());
        if let Some(rest) = spec.strip_prefix("local") {
            return Self::parse_local(rest).ok_or_else(bad);
        }
        let (kind, rest) = spec.split_once(':').ok_or_else(bad)?;
        let model_and_url = |rest: &str| -> Result<(String, Option<String>), BadModelSpec> {
            let (model, url) = match rest.split_once('@') {
                Some((model, url)) => (model, Some(url)),
                None => (rest, None),
            };
            if model.is_empty()
                || url
                    .is_some_and(|url| !(url.starts_with("http://") || url.starts_with("https://")))
            {
                return Err(bad());
            }
            Ok((
                model.to_owned(),
                url.map(|url| url.trim_end_matches('/').to_owned()),
            ))
        };
        match kind {
            "scripted" if !rest.is_empty() => Ok(Self::Scripted { path: rest.into() }),
            "replay" if !rest.is_empty() => Ok(Self::Replay {
                session_id: rest.into(),
            }),
            "openai" => {
                let (model, base_url) = model_and_url(rest)?;
                Ok(Self::OpenAi { model, base_url })
            }
            "anthropic" => {
                let (model, base_url) = model_and_url(rest)?;
                Ok(Self::Anthropic { model, base_url })
            }
            "json" => match Self::parse(rest).map_err(|_| bad())? {
                Self::JsonText(_) => Err(bad()),
                inner => Ok(Self::JsonText(Box::new(inner))),
            },
            _ => Err(bad()),
        }
    }

    /// `local` followed by `rest`: nothing, `:PATH`, and/or `?OPTIONS`.
    fn parse_local(rest: &str) -> Option<Self> {
        let (path, query) = match rest.split_once('?') {
            Some((path, query)) => (path, query),
            None => (rest, ""),
        };
        let path = match path {
            "" => None,
            path => Some(path.strip_prefix(':').filter(|p| !p.is_empty())?.to_owned()),
        };
        let options = LocalOptions::parse(query).ok()?;
        Some(Self::Local { path, options })
    }

    /// What is wrong with a `local` spec's options, if that is why it does not parse.
    pub fn local_options_error(spec: &str) -> Option<String> {
        let (_, query) = spec.strip_prefix("local")?.split_once('?')?;
        LocalOptions::parse(query).err()
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let with_url =
            |f: &mut fmt::Formatter<'_>, kind: &str, model: &str, url: &Option<String>| match url {
                Some(url) => write!(f, "{kind}:{model}@{url}"),
                None => write!(f, "{kind}:{model}"),
            };
        match self {
            Self::Scripted { path } => write!(f, "scripted:{path}"),
            Self::Replay { session_id } => write!(f, "replay:{session_id}"),
            Self::OpenAi { model, base_url } => with_url(f, "openai", model, base_url),
            Self::Anthropic { model, base_url } => with_url(f, "anthropic", model, base_url),
            Self::JsonText(inner) => write!(f, "json:{inner}"),
            Self::Local { path, options } => match path {
                Some(path) => write!(f, "local:{path}{options}"),
                None => write!(f, "local{options}"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_prints_back() {
        for spec in [
            "scripted:a/b.json",
            "replay:0193-abc",
            "openai:gpt-4o-mini",
            "openai:m@http://127.0.0.1:8080/v1",
            "anthropic:claude-sonnet-4-5",
            "anthropic:claude@https://proxy.example/anthropic",
            "json:openai:m@http://localhost:1234/v1",
            "local",
            "local:/models/m.gguf",
            "local?ctx=8192&threads=4",
            "local:m.gguf?temperature=0.7&seed=7&grammar=off",
        ] {
            assert_eq!(ModelSpec::parse(spec).unwrap().to_string(), spec);
        }
        assert_eq!(
            ModelSpec::parse("openai:m@http://h/v1/").unwrap(),
            ModelSpec::OpenAi {
                model: "m".into(),
                base_url: Some("http://h/v1".into())
            }
        );
    }

    #[test]
    fn malformed_specs_are_refused() {
        for spec in [
            "",
            "gpt",
            "scripted:",
            "openai:",
            "openai:m@ftp://x",
            "json:json:openai:m",
            "mystery:x",
            "local:",
            "localhost",
            "local?ctx=0",
            "local?threads=two",
            "local?temperature=9",
            "local?grammar=maybe",
            "local?color=red",
        ] {
            assert!(ModelSpec::parse(spec).is_err(), "{spec}");
        }
    }
}
