//! Model adapters for the agent runtime.
//!
//! - [`ModelSpec`]: the `--model` forms.
//! - [`wire`]: the strict JSON action format shared by text-based models.
//! - [`grammar`]: a GBNF grammar admitting only that format for given tools.
//! - [`JsonText`]: that format in plain text, for models without tool calling.
//! - `openai` (feature `openai`): [`OpenAi`], Chat Completions and compatible servers.
//! - `anthropic` (feature `anthropic`): [`Anthropic`], the Messages API.
//! - [`HttpChatModel`] (with either): the HTTP plumbing both share, generic over
//!   a [`WireFormat`]; when a call's text is watched it is streamed (SSE) and
//!   folded back into the whole response. Retries, timeouts and breakers are layers
//!   (`agent-layers`), the same ones tools use.
//! - `scripted` (feature `scripted`): [`ScriptedModel`], answers written in advance.
//! - `local` (feature `local`): [`LocalModel`], a GGUF model run in this process by
//!   llama.cpp, its output constrained by the action grammar; a watched call
//!   shows a finish's answer as it is generated.
//! - `replay` (feature `replay`): [`ReplayModel`], the responses of a recorded session.

mod gguf;
pub mod grammar;
mod json_text;
mod spec;
pub mod wire;

#[cfg(feature = "local")]
mod answer_stream;
#[cfg(feature = "anthropic")]
mod anthropic;
#[cfg(feature = "anthropic")]
mod anthropic_stream;
#[cfg(feature = "http")]
mod chat;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "local")]
mod local;
#[cfg(feature = "openai")]
mod openai;
#[cfg(feature = "openai")]
mod openai_stream;
#[cfg(feature = "replay")]
mod replay;
#[cfg(feature = "scripted")]
mod scripted;

#[cfg(feature = "anthropic")]
pub use anthropic::{
    ANTHROPIC_DEFAULT_BASE_URL, ANTHROPIC_VERSION, Anthropic, Messages, OUTPUT_TOOL,
    messages_request, parse_messages_response,
};
#[cfg(feature = "anthropic")]
pub use anthropic_stream::MessagesFold;
#[cfg(feature = "http")]
pub use chat::{HttpChatModel, WireFormat};
pub use gguf::check_model_file;
#[cfg(feature = "http")]
pub use http::{DEFAULT_REQUEST_TIMEOUT, HttpClient, ProviderConfig, StreamFold, is_local};
pub use json_text::{JsonText, text_request};
#[cfg(feature = "local")]
pub use local::LocalModel;
#[cfg(feature = "openai")]
pub use openai::{
    ChatCompletions, OPENAI_DEFAULT_BASE_URL, OpenAi, Tiktoken, chat_request, parse_chat_response,
};
#[cfg(feature = "openai")]
pub use openai_stream::ChatCompletionsFold;
#[cfg(feature = "replay")]
pub use replay::ReplayModel;
#[cfg(feature = "scripted")]
pub use scripted::{ScriptError, ScriptedModel};
pub use spec::{BadModelSpec, DEFAULT_LOCAL_MODEL_FILE, LocalOptions, ModelSpec};

/// The user message a history summary is sent as, so the model knows it stands
/// for earlier turns.
pub fn summary_message(summary: &str) -> String {
    format!("[Earlier turns, summarised]\n{summary}")
}
