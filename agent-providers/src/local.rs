//! [`LocalModel`]: a GGUF model run inside this process by llama.cpp (through
//! `llama-cpp-2`), on the CPU. The request goes in as text (tools described in
//! the system prompt, the chat template read from the GGUF), and the answer is
//! sampled under the [action grammar](crate::grammar), so it always parses as
//! one wire-format action; with `grammar=off` the strict parser and the
//! engine's feedback loop do that work instead.
//!
//! Weights are loaded once per process and file, on the first call, and shared
//! by every session that names the file; generations on one file run one at a
//! time (on a small CPU two at once are each half as fast). A raised
//! cancellation (`--timeout`, `agent cancel`, Ctrl-C) stops a generation
//! between two tokens.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use agent_core::context::{EstimatedTokens, TokenCounter};
use agent_core::delta::ModelDelta;
use agent_core::history::{HistoryItem, is_repeated_call_answer};
use agent_core::model::{
    Model, ModelContext, ModelError, ModelIdentity, ModelRequest, ModelResponse,
};
use agent_core::types::{Observation, Usage};

use crate::answer_stream::AnswerText;
use async_trait::async_trait;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;

use crate::gguf::check_model_file;
use crate::grammar::{GrammarOptions, ROOT_RULE, action_grammar};
use crate::json_text::{parse_text_actions, text_request};
use crate::spec::LocalOptions;

/// Prompt tokens decoded per batch.
const BATCH_TOKENS: usize = 512;

/// Loaded weights, shared by every [`LocalModel`] on one file.
struct Weights {
    model: LlamaModel,
    template: LlamaChatTemplate,
    /// `general.name` from the GGUF, else the file name.
    name: String,
    /// Held while one generation runs.
    busy: Mutex<()>,
}

/// What one generation produced.
struct Generated {
    text: String,
    prompt_tokens: u64,
    output_tokens: u64,
}

/// The process's llama.cpp backend, initialised once.
fn backend() -> Result<&'static LlamaBackend, ModelError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|err| err.to_string())
        })
        .as_ref()
        .map_err(|err| fatal(format!("llama.cpp cannot start: {err}")))
}

/// The weights of `path`, loading them on first use.
fn weights(path: &Path) -> Result<Arc<Weights>, ModelError> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, Arc<Weights>>>> = OnceLock::new();
    let backend = backend()?;
    let mut loaded = LOADED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(weights) = loaded.get(path) {
        return Ok(weights.clone());
    }
    check_model_file(path).map_err(fatal)?;
    let started = Instant::now();
    let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
        .map_err(|err| fatal(format!("llama.cpp cannot load {}: {err}", path.display())))?;
    let template = model.chat_template(None).map_err(|err| {
        fatal(format!(
            "{} has no usable chat template ({err}); use an instruction-tuned GGUF model",
            path.display()
        ))
    })?;
    let name = model
        .meta_val_str("general.name")
        .ok()
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| file_stem(path));
    tracing::info!(
        model = %name,
        path = %path.display(),
        load_ms = started.elapsed().as_millis() as u64,
        parameters = model.n_params(),
        "local model loaded"
    );
    let weights = Arc::new(Weights {
        model,
        template,
        name,
        busy: Mutex::new(()),
    });
    loaded.insert(path.to_owned(), weights.clone());
    Ok(weights)
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_else(|| "local".into())
}

fn fatal(message: String) -> ModelError {
    ModelError::Fatal { message }
}

/// A GGUF model run in this process.
#[derive(Debug, Clone)]
pub struct LocalModel {
    path: PathBuf,
    options: LocalOptions,
}

impl LocalModel {
    /// The model in `path`, run with `options`. The file is checked now and
    /// loaded on the first call.
    pub fn new(path: impl Into<PathBuf>, options: LocalOptions) -> Result<Self, String> {
        let path = path.into();
        check_model_file(&path)?;
        Ok(Self { path, options })
    }

    /// Loads the weights now, so the first call does not pay for it; returns
    /// the model's name.
    pub fn preload(&self) -> Result<String, ModelError> {
        Ok(weights(&self.path)?.name.clone())
    }

    /// The grammar a request is sampled under. After the repeated-call guard
    /// answered the latest calls from the history, only `finish` is admitted:
    /// a small model that repeats itself once would otherwise repeat itself
    /// until its step budget runs out.
    fn grammar_for(request: &ModelRequest) -> String {
        if only_repeats_answered(&request.history) {
            return action_grammar(&[], GrammarOptions::default());
        }
        action_grammar(
            &request.tools,
            GrammarOptions {
                expect_plan: request.instructions.contains(r#""type":"plan""#),
                allow_parallel_calls: true,
            },
        )
    }
}

#[async_trait]
impl Model for LocalModel {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        let text = text_request(request);
        let messages = chat_messages(&text);
        let grammar = self.options.grammar.then(|| Self::grammar_for(request));
        let max_output = request.max_output_tokens.unwrap_or(1024);
        let path = self.path.clone();
        let options = self.options;
        let cancel = ctx.cancel.clone();
        // A watched call shows the answer of a finish as it is generated.
        let watch = ctx
            .deltas
            .clone()
            .map(|sink| (sink, ctx.session_id.clone(), ctx.step));
        let generated = tokio::task::spawn_blocking(move || {
            let weights = weights(&path)?;
            let _turn = weights
                .busy
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let mut answer = AnswerText::default();
            let mut show = |piece: &str| {
                if let Some((sink, session_id, step)) = &watch {
                    let text = answer.feed(piece);
                    if !text.is_empty() {
                        sink.delta(session_id, *step, ModelDelta::Text(text));
                    }
                }
            };
            if let Some((sink, session_id, step)) = &watch {
                sink.delta(session_id, *step, ModelDelta::Started);
            }
            generate(
                &weights,
                &messages,
                grammar.as_deref(),
                options,
                max_output,
                &|| cancel.is_cancelled(),
                &mut show,
            )
        })
        .await
        .map_err(|err| ModelError::Internal {
            message: format!("the local generation stopped unexpectedly: {err}"),
        })??;
        let usage = Usage {
            input_tokens: generated.prompt_tokens,
            output_tokens: generated.output_tokens,
        };
        let actions = parse_text_actions(&generated.text, ctx.step).map_err(|message| {
            ModelError::InvalidOutput {
                raw: generated.text.clone(),
                message,
                usage,
            }
        })?;
        Ok(ModelResponse {
            actions,
            usage,
            text: None,
            model: Some(file_stem(&self.path)),
        })
    }

    fn identity(&self) -> ModelIdentity {
        ModelIdentity::new("llama.cpp", file_stem(&self.path))
    }

    fn token_counter(&self) -> Option<Arc<dyn TokenCounter>> {
        Some(Arc::new(GgufTokens {
            path: self.path.clone(),
        }))
    }
}

/// Counts tokens with the GGUF file's own vocabulary (loading the weights on
/// first use, as the first generation would); where they cannot be loaded it
/// estimates, and the generation reports the load failure.
struct GgufTokens {
    path: PathBuf,
}

impl TokenCounter for GgufTokens {
    fn name(&self) -> &str {
        "gguf"
    }

    fn count(&self, text: &str) -> u64 {
        match weights(&self.path) {
            Ok(weights) => {
                let tokens = weights
                    .model
                    .vocab()
                    .tokenize(text.as_bytes(), false, false);
                u64::try_from(tokens.len()).unwrap_or(u64::MAX)
            }
            Err(_) => EstimatedTokens.count(text),
        }
    }
}

/// Whether the latest observations (those after the last model turn) are all
/// the repeated-call guard's answers.
fn only_repeats_answered(history: &[HistoryItem]) -> bool {
    let latest: Vec<&Observation> = history
        .iter()
        .rev()
        .map_while(|item| match item {
            HistoryItem::Observation { observation } => Some(observation),
            _ => None,
        })
        .collect();
    !latest.is_empty() && latest.into_iter().all(is_repeated_call_answer)
}

/// The chat as (role, content) pairs: system, the task, then the text history,
/// with consecutive messages of one role joined.
fn chat_messages(request: &ModelRequest) -> Vec<(String, String)> {
    let mut messages: Vec<(String, String)> = vec![
        ("system".into(), request.instructions.clone()),
        ("user".into(), request.task.clone()),
    ];
    for item in request.history.iter() {
        let (role, content) = match item {
            HistoryItem::AssistantText { text } => ("assistant", text.clone()),
            HistoryItem::Feedback { message: text } | HistoryItem::UserMessage { text } => {
                ("user", text.clone())
            }
            HistoryItem::Summary { text } => ("user", crate::summary_message(text)),
            HistoryItem::ToolCalls { calls, .. } => (
                "assistant",
                serde_json::to_string(calls).unwrap_or_default(),
            ),
            HistoryItem::Observation { observation } => ("user", observation.content.clone()),
        };
        match messages.last_mut() {
            Some((last_role, last)) if last_role == role => {
                last.push_str("\n\n");
                last.push_str(&content);
            }
            _ => messages.push((role.into(), content)),
        }
    }
    messages
}

/// Hands the whole characters at the start of `bytes` to `show` (a token may
/// end inside a character, which waits for the next token); returns how many
/// bytes are done with, counting bytes that can never be text.
fn show_complete(bytes: &[u8], show: &mut dyn FnMut(&str)) -> usize {
    let (valid, skipped) = match std::str::from_utf8(bytes) {
        Ok(text) => (text, 0),
        Err(err) => (
            std::str::from_utf8(bytes.get(..err.valid_up_to()).unwrap_or_default())
                .unwrap_or_default(),
            err.error_len().unwrap_or(0),
        ),
    };
    if !valid.is_empty() {
        show(valid);
    }
    valid.len() + skipped
}

/// Runs one generation: the prompt through the chat template, then tokens
/// until the end of the turn (or the grammar's end), `max_output` or a cancel;
/// `show` gets the generated text as it grows, in whole characters.
fn generate(
    weights: &Weights,
    messages: &[(String, String)],
    grammar: Option<&str>,
    options: LocalOptions,
    max_output: u32,
    cancelled: &dyn Fn() -> bool,
    show: &mut dyn FnMut(&str),
) -> Result<Generated, ModelError> {
    let backend = backend()?;
    let chat = messages
        .iter()
        .map(|(role, content)| LlamaChatMessage::new(role.clone(), content.replace('\0', "")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| fatal(format!("the prompt cannot be built: {err}")))?;
    let prompt = weights
        .model
        .apply_chat_template(&weights.template, &chat, true)
        .map_err(|err| fatal(format!("the model's chat template failed: {err}")))?;
    let vocab = weights.model.vocab();
    let tokens = vocab.tokenize(prompt.as_bytes(), true, true);
    if tokens.is_empty() {
        return Err(fatal("the prompt is empty".into()));
    }
    let needed = tokens.len() + max_output as usize;
    if needed > options.context as usize {
        return Err(fatal(format!(
            "the prompt is {} tokens and the answer may take {max_output}, more than the context of {}; raise it with ?ctx=N in the model spec or shorten the task",
            tokens.len(),
            options.context
        )));
    }
    let threads = i32::try_from(options.threads).unwrap_or(i32::MAX);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(options.context))
        .with_n_batch(BATCH_TOKENS as u32)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut context = weights
        .model
        .new_context(backend, params)
        .map_err(|err| fatal(format!("llama.cpp cannot make a context: {err}")))?;
    let started = Instant::now();
    let mut batch = LlamaBatch::new(BATCH_TOKENS, 1);
    let last = tokens.len() - 1;
    for (chunk_index, chunk) in tokens.chunks(BATCH_TOKENS).enumerate() {
        if cancelled() {
            return Err(cancelled_error());
        }
        batch.clear();
        for (offset, token) in chunk.iter().enumerate() {
            let position = chunk_index * BATCH_TOKENS + offset;
            batch
                .add(*token, position as i32, &[0], position == last)
                .map_err(|err| fatal(format!("the prompt batch is full: {err}")))?;
        }
        context
            .decode(&mut batch)
            .map_err(|err| fatal(format!("llama.cpp cannot read the prompt: {err}")))?;
    }
    let prompt_read = started.elapsed();
    let mut sampler = sampler(weights, grammar, options)?;
    let mut text = Vec::new();
    let mut position = tokens.len() as i32;
    let mut output_tokens = 0u64;
    let mut shown = 0;
    loop {
        if cancelled() {
            return Err(cancelled_error());
        }
        // `sample` also advances the samplers (the grammar) past the token.
        let token: LlamaToken = sampler.sample(&context, batch.n_tokens() - 1);
        if vocab.is_eog(token) {
            break;
        }
        output_tokens += 1;
        text.extend(vocab.token_to_piece(token, false, None));
        shown += show_complete(text.get(shown..).unwrap_or_default(), show);
        if output_tokens >= u64::from(max_output) {
            let text = String::from_utf8_lossy(&text).into_owned();
            return Err(ModelError::InvalidOutput {
                message: format!(
                    "the answer was cut off at {max_output} tokens; answer with one short JSON action"
                ),
                raw: text,
                usage: Usage {
                    input_tokens: tokens.len() as u64,
                    output_tokens,
                },
            });
        }
        batch.clear();
        batch
            .add(token, position, &[0], true)
            .map_err(|err| fatal(format!("the generation batch is full: {err}")))?;
        position += 1;
        context
            .decode(&mut batch)
            .map_err(|err| fatal(format!("llama.cpp stopped generating: {err}")))?;
    }
    tracing::info!(
        prompt_tokens = tokens.len(),
        prompt_ms = prompt_read.as_millis() as u64,
        output_tokens,
        generation_ms = (started.elapsed() - prompt_read).as_millis() as u64,
        grammar = grammar.is_some(),
        "local generation"
    );
    Ok(Generated {
        text: String::from_utf8_lossy(&text).into_owned(),
        prompt_tokens: tokens.len() as u64,
        output_tokens,
    })
}

/// Greedy (or seeded sampling at a temperature), under the grammar if there is one.
fn sampler(
    weights: &Weights,
    grammar: Option<&str>,
    options: LocalOptions,
) -> Result<LlamaSampler, ModelError> {
    let mut chain = Vec::new();
    if let Some(grammar) = grammar {
        chain.push(
            LlamaSampler::grammar(&weights.model, grammar, ROOT_RULE).map_err(|err| {
                ModelError::Internal {
                    message: format!("llama.cpp refused the action grammar: {err}"),
                }
            })?,
        );
    }
    if options.temperature > 0.0 {
        chain.push(LlamaSampler::temp(options.temperature));
        chain.push(LlamaSampler::dist(options.seed));
    } else {
        chain.push(LlamaSampler::greedy());
    }
    Ok(LlamaSampler::chain_simple(chain))
}

fn cancelled_error() -> ModelError {
    ModelError::Transient {
        message: "the local generation was cancelled".into(),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observed(content: &str, is_error: bool) -> HistoryItem {
        HistoryItem::Observation {
            observation: Observation {
                call_id: "call_1_1".into(),
                tool_name: "calculator".into(),
                content: content.into(),
                is_error,
            },
        }
    }

    const ANSWERED: &str = "Not run again: `calculator` was already called";

    #[test]
    fn the_agents_instructions_open_the_local_models_prompt() {
        let request = ModelRequest {
            instructions: agent_core::model::agent_instructions(
                Some("You work for ACME. Be brief."),
                "Finish with the answer.".into(),
            ),
            task: "What is 12 times 7?".into(),
            history: Arc::default(),
            tools: Arc::new(Vec::new()),
            max_output_tokens: None,
            output_schema: None,
        };
        let messages = chat_messages(&text_request(&request));
        let (role, content) = messages.first().cloned().unwrap_or_default();
        assert_eq!(role, "system");
        assert!(
            content.starts_with("You work for ACME. Be brief."),
            "{content}"
        );
    }

    #[test]
    fn only_a_turn_answered_entirely_from_the_history_narrows_to_finish() {
        let turn = HistoryItem::AssistantText { text: "{}".into() };
        assert!(!only_repeats_answered(&[]));
        assert!(!only_repeats_answered(&[observed("84", false)]));
        assert!(only_repeats_answered(&[observed(ANSWERED, true)]));
        assert!(!only_repeats_answered(&[
            observed(ANSWERED, true),
            observed("89", false)
        ]));
        assert!(!only_repeats_answered(&[observed(ANSWERED, true), turn]));
        assert!(!only_repeats_answered(&[observed(ANSWERED, false)]));
    }
}
