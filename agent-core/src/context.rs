//! Context management: what of a session's history a model is sent each step.
//!
//! A [`ContextPolicy`] picks the history of one request, in whole turns — a
//! model turn's tool calls always travel with their results — and may ask the
//! engine to summarise the oldest turns first ([`Compaction`]). The engine makes
//! that summary with a model call and records it as a `context_compacted` event
//! before the next model call, so a resume, a fork or a replay sees the history
//! the model saw. Policies count tokens with a [`TokenCounter`]: the model's own
//! tokenizer where it is known, [`EstimatedTokens`] otherwise.

use std::fmt::Write as _;
use std::ops::Range;
use std::sync::Arc;

use crate::history::HistoryItem;
use crate::types::ToolSpec;

/// Tokens added per message for its role and framing, as chat formats do.
pub const TOKENS_PER_MESSAGE: u64 = 4;

/// Counts the tokens of a text as one model's tokenizer does.
pub trait TokenCounter: Send + Sync {
    /// The tokenizer's name, for people (`o200k_base`, `gguf`, `estimate`).
    fn name(&self) -> &str;

    /// Tokens in `text`.
    fn count(&self, text: &str) -> u64;
}

/// An honest estimate where the tokenizer is unknown: one token per three bytes,
/// rounded up. Real tokenizers average three to four bytes per token on prose
/// and fewer on JSON, so the estimate errs on the side of sending less.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EstimatedTokens;

impl TokenCounter for EstimatedTokens {
    fn name(&self) -> &str {
        "estimate"
    }

    fn count(&self, text: &str) -> u64 {
        u64::try_from(text.len().div_ceil(3)).unwrap_or(u64::MAX)
    }
}

/// What one model request holds besides the history policies choose from.
#[derive(Debug, Clone, Copy)]
pub struct ContextInput<'a> {
    /// The strategy's system instructions.
    pub instructions: &'a str,
    /// The task.
    pub task: &'a str,
    /// The tools offered.
    pub tools: &'a [ToolSpec],
    /// The history the strategy would send.
    pub history: &'a Arc<Vec<HistoryItem>>,
}

impl<'a> ContextInput<'a> {
    /// The same request with another history.
    pub fn with_history(self, history: &'a Arc<Vec<HistoryItem>>) -> Self {
        Self { history, ..self }
    }

    /// Tokens of the request's fixed part — instructions, task and tool specs —
    /// which every request carries whatever history it holds.
    pub fn fixed_tokens(&self, counter: &dyn TokenCounter) -> u64 {
        let tools: u64 = self
            .tools
            .iter()
            .map(|spec| {
                counter.count(&spec.name)
                    + counter.count(&spec.description)
                    + counter.count(&spec.input_schema.to_string())
            })
            .sum();
        2 * TOKENS_PER_MESSAGE + counter.count(self.instructions) + counter.count(self.task) + tools
    }

    /// Tokens of the whole request: the fixed part and every history item.
    pub fn tokens(&self, counter: &dyn TokenCounter) -> u64 {
        self.fixed_tokens(counter) + items_tokens(counter, self.history)
    }
}

/// Tokens of one history item as it is sent.
pub fn item_tokens(counter: &dyn TokenCounter, item: &HistoryItem) -> u64 {
    TOKENS_PER_MESSAGE
        + match item {
            HistoryItem::ToolCalls { calls, text } => {
                let calls: u64 = calls
                    .iter()
                    .map(|call| {
                        TOKENS_PER_MESSAGE
                            + counter.count(&call.id)
                            + counter.count(&call.tool_name)
                            + counter.count(&call.arguments.to_string())
                    })
                    .sum();
                calls + text.as_deref().map_or(0, |text| counter.count(text))
            }
            HistoryItem::Observation { observation } => {
                counter.count(&observation.call_id) + counter.count(&observation.content)
            }
            HistoryItem::AssistantText { text } | HistoryItem::Summary { text } => {
                counter.count(text)
            }
            HistoryItem::Feedback { message } => counter.count(message),
            HistoryItem::UserMessage { text } => counter.count(text),
        }
}

/// Tokens of a run of history items.
pub fn items_tokens(counter: &dyn TokenCounter, items: &[HistoryItem]) -> u64 {
    items.iter().map(|item| item_tokens(counter, item)).sum()
}

/// The history cut into turns, oldest first: a `ToolCalls` item with the
/// observations that follow it is one turn; every other item is a turn of its
/// own. Cutting between turns never separates a call from its result.
pub fn turns(history: &[HistoryItem]) -> Vec<Range<usize>> {
    let mut turns: Vec<Range<usize>> = Vec::new();
    for (index, item) in history.iter().enumerate() {
        match (item, turns.last_mut()) {
            (HistoryItem::Observation { .. }, Some(last)) if last.end == index => {
                last.end = index + 1;
            }
            _ => turns.push(index..index + 1),
        }
    }
    turns
}

/// A summary of the oldest turns the engine is asked to make before the next
/// model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compaction {
    /// How many leading history items the summary replaces (whole turns).
    pub items: usize,
    /// The instructions of the summary request.
    pub instructions: String,
    /// Output cap of the summary request, in tokens.
    pub max_output_tokens: u32,
}

/// Decides what history a model sees each step; composed with any strategy.
pub trait ContextPolicy: Send + Sync {
    /// The policy as `--context` spells it (`last:20`), for people and logs.
    fn spec(&self) -> String;

    /// The counter this policy measures with.
    fn counter(&self) -> &dyn TokenCounter;

    /// The history to send for `input`, in whole turns.
    fn view(&self, input: &ContextInput<'_>) -> Arc<Vec<HistoryItem>>;

    /// A summary to make before this request, if the policy wants one. Only
    /// asked when the strategy sends the session's whole history.
    fn compaction(&self, input: &ContextInput<'_>) -> Option<Compaction> {
        let _ = input;
        None
    }
}

/// A short digest of history items that names every call and quotes the latest
/// results: what the scripted model answers to a summary request, and what the
/// engine records when a model's summary is unusable.
pub fn digest(items: &[HistoryItem]) -> String {
    const QUOTE: usize = 160;
    let mut calls: Vec<(String, u32)> = Vec::new();
    let mut earlier: Option<&str> = None;
    let mut last_result: Option<&str> = None;
    for item in items {
        match item {
            HistoryItem::ToolCalls { calls: made, .. } => {
                for call in made {
                    match calls.iter_mut().find(|(name, _)| *name == call.tool_name) {
                        Some((_, count)) => *count += 1,
                        None => calls.push((call.tool_name.clone(), 1)),
                    }
                }
            }
            HistoryItem::Observation { observation } => last_result = Some(&observation.content),
            HistoryItem::Summary { text } => earlier = Some(text),
            HistoryItem::AssistantText { .. }
            | HistoryItem::Feedback { .. }
            | HistoryItem::UserMessage { .. } => {}
        }
    }
    let mut digest = String::from("Summary of earlier steps:");
    if let Some(earlier) = earlier {
        let _ = write!(digest, " before them, {}.", clip(earlier, QUOTE));
    }
    if calls.is_empty() {
        digest.push_str(" no tool was called.");
    } else {
        let named: Vec<String> = calls
            .iter()
            .map(|(name, count)| format!("{name} ×{count}"))
            .collect();
        let _ = write!(digest, " tools called: {}.", named.join(", "));
    }
    if let Some(result) = last_result {
        let _ = write!(digest, " Latest result: {}", clip(result, QUOTE));
    }
    digest
}

/// The runtime's own look back over `items`: whether the latest calls repeat
/// earlier ones (same tool, same arguments) — going in circles — or are new.
/// What the scripted model answers to a reflection request, and what the
/// engine records when a model's reflection is unusable.
pub fn reflection_digest(items: &[HistoryItem]) -> String {
    let calls: Vec<&crate::types::ToolCall> = items
        .iter()
        .filter_map(|item| match item {
            HistoryItem::ToolCalls { calls, .. } => Some(calls),
            _ => None,
        })
        .flatten()
        .collect();
    let Some((latest, earlier)) = calls.split_last() else {
        return "No tool has been called yet: call one that moves the task forward, or finish."
            .into();
    };
    let repeats = |call: &crate::types::ToolCall, before: &[&crate::types::ToolCall]| {
        before
            .iter()
            .any(|other| other.tool_name == call.tool_name && other.arguments == call.arguments)
    };
    if repeats(latest, earlier) {
        let looping = (0..calls.len())
            .rev()
            .take_while(|&index| {
                let (before, from) = calls.split_at(index);
                from.first().is_some_and(|call| repeats(call, before))
            })
            .count();
        format!(
            "Going in circles: the last {looping} call(s) repeat earlier ones (`{}` with the same arguments), and their results will not change. Use the results already in hand and finish, or try a different tool or different arguments.",
            latest.tool_name
        )
    } else {
        format!(
            "Making progress: {} tool call(s) so far, and the latest (`{}`) was new. Finish as soon as the results answer the task.",
            calls.len(),
            latest.tool_name
        )
    }
}

/// At most `max` characters of `text`, marked when cut.
fn clip(text: &str, max: usize) -> String {
    let text = text.trim().trim_end_matches('.');
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::types::{Observation, ToolCall};

    fn call(id: &str) -> HistoryItem {
        HistoryItem::ToolCalls {
            calls: vec![ToolCall {
                id: id.into(),
                tool_name: "calculator".into(),
                arguments: json!({"expression": "1+1"}),
            }],
            text: None,
        }
    }

    fn result(id: &str, content: &str) -> HistoryItem {
        HistoryItem::Observation {
            observation: Observation {
                call_id: id.into(),
                tool_name: "calculator".into(),
                content: content.into(),
                is_error: false,
            },
        }
    }

    #[test]
    fn turns_keep_calls_with_their_results() {
        let history = vec![
            call("a"),
            result("a", "2"),
            HistoryItem::Feedback {
                message: "no".into(),
            },
            HistoryItem::ToolCalls {
                calls: vec![],
                text: None,
            },
            result("b", "x"),
            result("c", "y"),
        ];
        assert_eq!(turns(&history), vec![0..2, 2..3, 3..6]);
    }

    #[test]
    fn the_estimate_rounds_up_and_counts_every_part() {
        assert_eq!(EstimatedTokens.count(""), 0);
        assert_eq!(EstimatedTokens.count("abcd"), 2);
        let history = Arc::new(vec![call("a"), result("a", "2")]);
        let input = ContextInput {
            instructions: "be brief",
            task: "add",
            tools: &[],
            history: &history,
        };
        let fixed = input.fixed_tokens(&EstimatedTokens);
        assert_eq!(fixed, 8 + 3 + 1);
        assert!(input.tokens(&EstimatedTokens) > fixed + 2 * TOKENS_PER_MESSAGE);
    }

    #[test]
    fn a_digest_names_the_calls_and_quotes_the_latest_result() {
        let items = vec![
            HistoryItem::Summary {
                text: "the user wants sums".into(),
            },
            call("a"),
            result("a", "2"),
            call("b"),
            result("b", &"9".repeat(400)),
        ];
        let digest = digest(&items);
        assert!(digest.contains("the user wants sums"), "{digest}");
        assert!(digest.contains("calculator ×2"), "{digest}");
        assert!(digest.ends_with('…'), "{digest}");
        assert!(digest.len() < 400, "{digest}");
    }
}
