//! The scripted model: answers from a JSON file holding an array of responses, by
//! position, so a resumed session continues where its log stopped.

use std::path::{Path, PathBuf};

use agent_core::context::{digest, reflection_digest};
use agent_core::model::{
    CallPurpose, Model, ModelContext, ModelError, ModelIdentity, ModelRequest, ModelResponse,
};
use agent_core::types::{Action, Finish, Usage};
use async_trait::async_trait;
use serde_json::Value;

use crate::wire::parse_actions;

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file cannot be read.
    #[error("cannot read script file `{path}`: {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Script text is not a JSON array of strings and objects.
    #[error("the script is not usable: {0}")]
    InvalidText(String),
    /// The file is not a JSON array of strings and objects.
    #[error("script file `{path}` is not usable: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// A model whose responses are written in advance; response `n` answers step `n`.
/// A summary request (a context policy's) takes no response from the script: it
/// is answered with a digest of the turns it summarises
/// ([`digest`](agent_core::context::digest)); a reflection is answered with the
/// runtime's own look back ([`reflection_digest`](agent_core::context::reflection_digest)).
/// The last answer after a limit takes the script's next response, like a step.
///
/// A string element is raw model text (it may be invalid on purpose); an object
/// element is serialised as it is. Both are parsed with the wire format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedModel {
    responses: Vec<String>,
}

impl ScriptedModel {
    /// Loads a script file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ScriptError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Unreadable {
            path: path.to_owned(),
            source,
        })?;
        let invalid = |message: String| ScriptError::Invalid {
            path: path.to_owned(),
            message,
        };
        let value: Value =
            serde_json::from_str(&text).map_err(|err| invalid(format!("not valid JSON: {err}")))?;
        let Value::Array(elements) = value else {
            return Err(invalid(
                "expected a JSON array with one element per model response".into(),
            ));
        };
        Self::from_values(elements).map_err(invalid)
    }

    /// A script from JSON text holding an array of responses.
    pub fn from_json_str(text: &str) -> Result<Self, ScriptError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|err| ScriptError::InvalidText(format!("not valid JSON: {err}")))?;
        let Value::Array(elements) = value else {
            return Err(ScriptError::InvalidText(
                "expected a JSON array with one element per model response".into(),
            ));
        };
        Self::from_values(elements).map_err(ScriptError::InvalidText)
    }

    /// A script from response values: strings are raw text, objects are serialised.
    pub fn from_values(elements: Vec<Value>) -> Result<Self, String> {
        let responses = elements
            .into_iter()
            .enumerate()
            .map(|(index, element)| match element {
                Value::String(text) => Ok(text),
                Value::Object(_) => Ok(element.to_string()),
                other => Err(format!(
                    "element {} is {other}; each element must be a string (raw model text) or an object (an action)",
                    index + 1
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { responses })
    }

    /// Number of scripted responses.
    pub fn len(&self) -> usize {
        self.responses.len()
    }

    /// Whether the script has no responses.
    pub fn is_empty(&self) -> bool {
        self.responses.is_empty()
    }
}

#[async_trait]
impl Model for ScriptedModel {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        let aside = match ctx.purpose {
            CallPurpose::Summary { .. } => Some(digest(&request.history)),
            CallPurpose::Reflection { .. } => Some(reflection_digest(&request.history)),
            CallPurpose::Step | CallPurpose::LastAnswer => None,
        };
        if let Some(answer) = aside {
            return Ok(ModelResponse {
                actions: vec![Action::Finish(Finish { answer })],
                usage: Usage::default(),
                text: None,
                model: Some("script".into()),
            });
        }
        let index = usize::try_from(ctx.step.saturating_sub(1)).unwrap_or(usize::MAX);
        let Some(raw) = self.responses.get(index) else {
            return Err(ModelError::Internal {
                message: format!(
                    "the scripted model ran out of responses: step {} needs response {} but the script holds {}; add responses to the script",
                    ctx.step,
                    ctx.step,
                    self.responses.len()
                ),
            });
        };
        match parse_actions(raw, ctx.step) {
            Ok(actions) => Ok(ModelResponse {
                actions,
                usage: Usage::default(),
                text: None,
                model: Some("script".into()),
            }),
            Err(message) => Err(ModelError::InvalidOutput {
                raw: raw.clone(),
                message,
                usage: Usage::default(),
            }),
        }
    }

    fn identity(&self) -> ModelIdentity {
        ModelIdentity::new("scripted", "script")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn request() -> ModelRequest {
        ModelRequest {
            instructions: String::new(),
            task: "t".into(),
            history: Arc::default(),
            tools: Arc::new(Vec::new()),
            max_output_tokens: None,
            output_schema: None,
        }
    }

    async fn ask(model: &ScriptedModel, step: u32) -> Result<ModelResponse, ModelError> {
        model
            .complete(&request(), &ModelContext::new("s", step))
            .await
    }

    #[tokio::test]
    async fn answers_by_step_and_reports_running_out() {
        let model = ScriptedModel::from_values(vec![
            json!("not json"),
            json!({"type": "finish", "answer": "done"}),
        ])
        .unwrap();
        assert!(matches!(
            ask(&model, 1).await,
            Err(ModelError::InvalidOutput { .. })
        ));
        let response = ask(&model, 2).await.unwrap();
        assert!(matches!(&response.actions[..], [Action::Finish(_)]));
        let Err(ModelError::Internal { message }) = ask(&model, 3).await else {
            panic!("expected an internal error");
        };
        assert!(message.contains("ran out of responses"), "{message}");
    }

    #[test]
    fn elements_must_be_strings_or_objects() {
        let err = ScriptedModel::from_values(vec![json!(3)]).unwrap_err();
        assert!(err.contains("element 1 is 3"), "{err}");
    }

    #[test]
    fn unreadable_and_malformed_files_are_reported_with_their_path() {
        let err = ScriptedModel::from_file("/definitely/missing.json").unwrap_err();
        assert!(err.to_string().contains("/definitely/missing.json"));
        let dir = std::env::temp_dir().join(format!("scripted-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("object.json");
        std::fs::write(&file, r#"{"type":"finish"}"#).unwrap();
        let err = ScriptedModel::from_file(&file).unwrap_err();
        assert!(err.to_string().contains("expected a JSON array"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
