//! Model specs as `--model` takes them: `scripted:FILE`, `replay:SESSION_ID`,
//! `openai:MODEL[@BASE_URL]`, `anthropic:MODEL[@BASE_URL]`, `json:<inner spec>`.

use std::fmt;

/// A parsed model spec. It never holds a key: keys come from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

/// A spec that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--model `{0}` is not a model spec; use scripted:FILE, replay:SESSION_ID, openai:MODEL[@BASE_URL], anthropic:MODEL[@BASE_URL] or json:<spec>"
)]
pub struct BadModelSpec(pub String);

impl ModelSpec {
    /// Parses a spec.
    pub fn parse(spec: &str) -> Result<Self, BadModelSpec> {
        let bad = || BadModelSpec(spec.to_owned());
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
        ] {
            assert!(ModelSpec::parse(spec).is_err(), "{spec}");
        }
    }
}
