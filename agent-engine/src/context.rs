//! Context policies: what of the history each model request holds, composed
//! with any strategy through [`EngineBuilder::context`](crate::EngineBuilder::context).
//!
//! - [`KeepAll`]: the whole history (the engine's behaviour without a policy).
//! - [`LastTurns`]: the last N turns.
//! - [`TokenWindow`]: the newest turns that fit in T tokens.
//! - [`Summarise`]: past T tokens, the oldest turns are summarised by the model
//!   and the summary replaces them (recorded as `context_compacted`).
//!
//! Every policy cuts between turns, so a tool call always travels with its
//! result; the system prompt and the task are sent with every request. Where
//! turns were left out the model is told how many.

use std::ops::Range;
use std::sync::Arc;

use agent_core::context::{
    Compaction, ContextInput, ContextPolicy, EstimatedTokens, TokenCounter, item_tokens,
    items_tokens, turns,
};
use agent_core::history::HistoryItem;

/// Turns a [`Summarise`] policy keeps verbatim when none is asked for.
pub const DEFAULT_KEEP_LAST: usize = 4;

/// The whole history, every time.
#[derive(Clone)]
pub struct KeepAll {
    counter: Arc<dyn TokenCounter>,
}

impl KeepAll {
    /// Keeps everything, counting with `counter` (for the recorded token counts).
    pub fn new(counter: Arc<dyn TokenCounter>) -> Self {
        Self { counter }
    }
}

impl Default for KeepAll {
    fn default() -> Self {
        Self::new(Arc::new(EstimatedTokens))
    }
}

impl ContextPolicy for KeepAll {
    fn spec(&self) -> String {
        "keep-all".into()
    }

    fn counter(&self) -> &dyn TokenCounter {
        self.counter.as_ref()
    }

    fn view(&self, input: &ContextInput<'_>) -> Arc<Vec<HistoryItem>> {
        Arc::clone(input.history)
    }
}

/// The last `turns` turns of the history.
#[derive(Clone)]
pub struct LastTurns {
    turns: usize,
    counter: Arc<dyn TokenCounter>,
}

impl LastTurns {
    /// Keeps the last `turns` turns (at least one).
    pub fn new(turns: usize, counter: Arc<dyn TokenCounter>) -> Self {
        Self {
            turns: turns.max(1),
            counter,
        }
    }
}

impl ContextPolicy for LastTurns {
    fn spec(&self) -> String {
        format!("last:{}", self.turns)
    }

    fn counter(&self) -> &dyn TokenCounter {
        self.counter.as_ref()
    }

    fn view(&self, input: &ContextInput<'_>) -> Arc<Vec<HistoryItem>> {
        let turns = turns(input.history);
        match turns.len().checked_sub(self.turns) {
            Some(dropped) if dropped > 0 => {
                let start = turns.get(dropped).map_or(0, |turn| turn.start);
                with_note(dropped, part(input.history, start..input.history.len()))
            }
            _ => Arc::clone(input.history),
        }
    }
}

/// The newest turns whose request fits in `tokens` tokens.
#[derive(Clone)]
pub struct TokenWindow {
    tokens: u64,
    counter: Arc<dyn TokenCounter>,
}

impl TokenWindow {
    /// Requests of at most `tokens` tokens, counted with `counter`.
    pub fn new(tokens: u64, counter: Arc<dyn TokenCounter>) -> Self {
        Self { tokens, counter }
    }
}

impl ContextPolicy for TokenWindow {
    fn spec(&self) -> String {
        format!("window:{}", self.tokens)
    }

    fn counter(&self) -> &dyn TokenCounter {
        self.counter.as_ref()
    }

    fn view(&self, input: &ContextInput<'_>) -> Arc<Vec<HistoryItem>> {
        window(input, self.tokens, self.counter.as_ref())
    }
}

/// Past `tokens` tokens, the oldest turns are summarised by the model; the
/// newest turns (at most `keep_last`, within half the window) stay verbatim.
/// Each request is also held to the window, as [`TokenWindow`] does, for the
/// case where the kept turns alone are larger.
#[derive(Clone)]
pub struct Summarise {
    tokens: u64,
    keep_last: usize,
    counter: Arc<dyn TokenCounter>,
}

impl Summarise {
    /// Summarise past `tokens` tokens, keeping up to `keep_last` turns (at least one).
    pub fn new(tokens: u64, keep_last: usize, counter: Arc<dyn TokenCounter>) -> Self {
        Self {
            tokens,
            keep_last: keep_last.max(1),
            counter,
        }
    }

    /// Output cap of a summary request: a quarter of the window, within 64–1024.
    fn summary_tokens(&self) -> u32 {
        u32::try_from((self.tokens / 4).clamp(64, 1024)).unwrap_or(1024)
    }
}

impl ContextPolicy for Summarise {
    fn spec(&self) -> String {
        if self.keep_last == DEFAULT_KEEP_LAST {
            format!("summarise:{}", self.tokens)
        } else {
            format!("summarise:{}:{}", self.tokens, self.keep_last)
        }
    }

    fn counter(&self) -> &dyn TokenCounter {
        self.counter.as_ref()
    }

    fn view(&self, input: &ContextInput<'_>) -> Arc<Vec<HistoryItem>> {
        window(input, self.tokens, self.counter.as_ref())
    }

    fn compaction(&self, input: &ContextInput<'_>) -> Option<Compaction> {
        let counter = self.counter.as_ref();
        if input.tokens(counter) <= self.tokens {
            return None;
        }
        let turns = turns(input.history);
        let mut kept = 0;
        let mut kept_tokens = 0;
        for turn in turns.iter().rev().take(self.keep_last) {
            let tokens = items_tokens(counter, part(input.history, turn.clone()));
            if kept > 0 && kept_tokens + tokens > self.tokens / 2 {
                break;
            }
            kept += 1;
            kept_tokens += tokens;
        }
        let first_kept = turns.len().checked_sub(kept)?;
        let items = turns
            .get(first_kept)
            .map_or(input.history.len(), |t| t.start);
        let only_a_summary = matches!(part(input.history, 0..items), [HistoryItem::Summary { .. }]);
        if items == 0 || only_a_summary {
            return None;
        }
        let limit = self.summary_tokens();
        Some(Compaction {
            items,
            instructions: format!(
                "Summarise the conversation below for yourself, to continue the user's task \
                 from it: keep every fact, result, number, file name and decision that may still \
                 matter, and what is left to do; drop the rest. Use at most {limit} tokens. \
                 Finish with the summary as your answer."
            ),
            max_output_tokens: limit,
        })
    }
}

/// The newest turns of `input` whose request fits in `limit` tokens, with a note
/// saying how many older turns are left out; the newest turn's results are cut
/// to fit when it alone is too large.
fn window(
    input: &ContextInput<'_>,
    limit: u64,
    counter: &dyn TokenCounter,
) -> Arc<Vec<HistoryItem>> {
    let fixed = input.fixed_tokens(counter);
    if fixed + items_tokens(counter, input.history) <= limit {
        return Arc::clone(input.history);
    }
    let turns = turns(input.history);
    let note_tokens = item_tokens(counter, &note(turns.len()));
    let room = limit.saturating_sub(fixed + note_tokens);
    let mut used = 0;
    let mut first = turns.len();
    for (index, turn) in turns.iter().enumerate().rev() {
        let tokens = items_tokens(counter, part(input.history, turn.clone()));
        if used + tokens > room {
            break;
        }
        used += tokens;
        first = index;
    }
    if first < turns.len() {
        let start = turns.get(first).map_or(0, |turn| turn.start);
        return with_note(first, part(input.history, start..input.history.len()));
    }
    let Some(newest) = turns.last() else {
        return Arc::clone(input.history);
    };
    let dropped = turns.len() - 1;
    let room = limit.saturating_sub(fixed + if dropped > 0 { note_tokens } else { 0 });
    let cut = cut_to_fit(part(input.history, newest.clone()), room, counter).unwrap_or_default();
    let mut view = Vec::with_capacity(cut.len() + 1);
    if dropped > 0 {
        view.push(note(dropped));
    }
    view.extend(cut);
    Arc::new(view)
}

/// `items` (one turn) with its results shortened until the turn fits in `room`
/// tokens; `None` when it does not fit even with empty results.
fn cut_to_fit(
    items: &[HistoryItem],
    room: u64,
    counter: &dyn TokenCounter,
) -> Option<Vec<HistoryItem>> {
    let longest = items
        .iter()
        .map(|item| match item {
            HistoryItem::Observation { observation } => observation.content.chars().count(),
            _ => 0,
        })
        .max()
        .unwrap_or(0);
    let mut keep = longest;
    loop {
        let cut: Vec<HistoryItem> = items.iter().map(|item| shortened(item, keep)).collect();
        if items_tokens(counter, &cut) <= room {
            return Some(cut);
        }
        if keep == 0 {
            return None;
        }
        keep /= 2;
    }
}

/// An observation whose content keeps its first `keep` characters, marked as
/// cut; any other item unchanged.
fn shortened(item: &HistoryItem, keep: usize) -> HistoryItem {
    match item {
        HistoryItem::Observation { observation } => {
            match observation.content.char_indices().nth(keep) {
                Some((end, _)) => {
                    let mut observation = observation.clone();
                    observation.content = format!(
                        "{}… [cut to fit the context window]",
                        &observation.content[..end]
                    );
                    HistoryItem::Observation { observation }
                }
                None => item.clone(),
            }
        }
        other => other.clone(),
    }
}

/// The items of `history` in `range` (none where it is out of bounds).
fn part(history: &[HistoryItem], range: Range<usize>) -> &[HistoryItem] {
    history.get(range).unwrap_or_default()
}

/// The note in place of `dropped` older turns.
fn note(dropped: usize) -> HistoryItem {
    let turns = if dropped == 1 { "turn is" } else { "turns are" };
    HistoryItem::Summary {
        text: format!("{dropped} earlier {turns} not shown here to fit the context window."),
    }
}

/// The note for `dropped` turns, then `kept`.
fn with_note(dropped: usize, kept: &[HistoryItem]) -> Arc<Vec<HistoryItem>> {
    let mut view = Vec::with_capacity(kept.len() + 1);
    view.push(note(dropped));
    view.extend_from_slice(kept);
    Arc::new(view)
}

/// Why a `--context` value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--context `{given}` is not usable: {reason}; use keep-all, last:N, window:TOKENS or summarise:TOKENS[:KEEP]"
)]
pub struct ContextSpecError {
    /// The value given.
    pub given: String,
    /// What is wrong with it.
    pub reason: String,
}

/// A context policy as `--context` names it: `keep-all`, `last:N`,
/// `window:TOKENS` or `summarise:TOKENS[:KEEP]` (also `summarize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextSpec {
    /// [`KeepAll`].
    KeepAll,
    /// [`LastTurns`].
    LastTurns(usize),
    /// [`TokenWindow`].
    TokenWindow(u64),
    /// [`Summarise`] with the window and the turns kept.
    Summarise {
        /// The window, in tokens.
        tokens: u64,
        /// Turns kept verbatim.
        keep_last: usize,
    },
}

/// Smallest window a token policy accepts: below it the fixed part of a request
/// (instructions, task, tool specs) leaves no room for history.
pub const MIN_WINDOW_TOKENS: u64 = 256;

impl ContextSpec {
    /// Parses `--context`.
    pub fn parse(spec: &str) -> Result<Self, ContextSpecError> {
        let error = |reason: &str| ContextSpecError {
            given: spec.to_owned(),
            reason: reason.to_owned(),
        };
        let number = |text: &str, what: &str| -> Result<u64, ContextSpecError> {
            text.trim()
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    error(&format!(
                        "{what} must be a positive whole number, not `{text}`"
                    ))
                })
        };
        let window = |text: &str| -> Result<u64, ContextSpecError> {
            let tokens = number(text, "TOKENS")?;
            if tokens < MIN_WINDOW_TOKENS {
                return Err(error(&format!(
                    "a window of {tokens} tokens is below the smallest, {MIN_WINDOW_TOKENS}"
                )));
            }
            Ok(tokens)
        };
        let count = |text: &str, what: &str| -> Result<usize, ContextSpecError> {
            usize::try_from(number(text, what)?).map_err(|_| error(&format!("{what} is too large")))
        };
        let spec_trimmed = spec.trim();
        let (name, rest) = spec_trimmed.split_once(':').unwrap_or((spec_trimmed, ""));
        match (name, rest) {
            ("keep-all", "") => Ok(Self::KeepAll),
            ("last", n) if !n.is_empty() => Ok(Self::LastTurns(count(n, "N")?)),
            ("window", tokens) if !tokens.is_empty() => Ok(Self::TokenWindow(window(tokens)?)),
            ("summarise" | "summarize", args) if !args.is_empty() => {
                let (tokens, keep) = args.split_once(':').unwrap_or((args, ""));
                let keep_last = if keep.is_empty() {
                    DEFAULT_KEEP_LAST
                } else {
                    count(keep, "KEEP")?
                };
                Ok(Self::Summarise {
                    tokens: window(tokens)?,
                    keep_last,
                })
            }
            ("keep-all" | "last" | "window" | "summarise" | "summarize", _) => {
                Err(error("its number is missing or extra"))
            }
            _ => Err(error("the policy is not known")),
        }
    }

    /// The policy, counting with `counter`; `None` for keep-all, which needs no
    /// policy (and so no counting).
    pub fn policy(self, counter: Arc<dyn TokenCounter>) -> Option<Arc<dyn ContextPolicy>> {
        match self {
            Self::KeepAll => None,
            Self::LastTurns(turns) => Some(Arc::new(LastTurns::new(turns, counter))),
            Self::TokenWindow(tokens) => Some(Arc::new(TokenWindow::new(tokens, counter))),
            Self::Summarise { tokens, keep_last } => {
                Some(Arc::new(Summarise::new(tokens, keep_last, counter)))
            }
        }
    }
}

impl std::fmt::Display for ContextSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::KeepAll => f.write_str("keep-all"),
            Self::LastTurns(turns) => write!(f, "last:{turns}"),
            Self::TokenWindow(tokens) => write!(f, "window:{tokens}"),
            Self::Summarise { tokens, keep_last } if *keep_last == DEFAULT_KEEP_LAST => {
                write!(f, "summarise:{tokens}")
            }
            Self::Summarise { tokens, keep_last } => write!(f, "summarise:{tokens}:{keep_last}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use agent_core::types::{Observation, ToolCall};
    use serde_json::json;

    use super::*;

    fn calls(turns: usize, result: &str) -> Arc<Vec<HistoryItem>> {
        let mut items = Vec::new();
        for n in 0..turns {
            let call = ToolCall {
                id: format!("c{n}"),
                tool_name: "calculator".into(),
                arguments: json!({"expression": format!("{n}+1")}),
            };
            items.push(HistoryItem::ToolCalls {
                calls: vec![call.clone()],
                text: None,
            });
            items.push(HistoryItem::Observation {
                observation: Observation::success(&call, result),
            });
        }
        Arc::new(items)
    }

    fn input(history: &Arc<Vec<HistoryItem>>) -> ContextInput<'_> {
        ContextInput {
            instructions: "Be an agent.",
            task: "Add numbers.",
            tools: &[],
            history,
        }
    }

    /// Every call in `view` is followed by its results, and no result comes first.
    fn assert_pairs_whole(view: &[HistoryItem]) {
        assert!(!matches!(
            view.first(),
            Some(HistoryItem::Observation { .. })
        ));
        for (index, item) in view.iter().enumerate() {
            if let HistoryItem::ToolCalls { calls, .. } = item {
                for (offset, call) in calls.iter().enumerate() {
                    match view.get(index + 1 + offset) {
                        Some(HistoryItem::Observation { observation }) => {
                            assert_eq!(observation.call_id, call.id);
                        }
                        other => panic!("call {} has no result after it: {other:?}", call.id),
                    }
                }
            }
        }
    }

    #[test]
    fn last_turns_keeps_pairs_and_says_what_it_left_out() {
        let history = calls(10, "2");
        let view = LastTurns::new(3, Arc::new(EstimatedTokens)).view(&input(&history));
        assert_eq!(view.len(), 7);
        assert!(
            matches!(&view[0], HistoryItem::Summary { text } if text.starts_with("7 earlier turns"))
        );
        assert_pairs_whole(&view[1..]);
        let short = calls(2, "2");
        let view = LastTurns::new(3, Arc::new(EstimatedTokens)).view(&input(&short));
        assert!(Arc::ptr_eq(&view, &short));
    }

    #[test]
    fn a_token_window_never_sends_more_than_it_allows() {
        let counter: Arc<dyn TokenCounter> = Arc::new(EstimatedTokens);
        for turns in [1, 5, 50, 300] {
            let history = calls(turns, &"result text ".repeat(20));
            let policy = TokenWindow::new(600, counter.clone());
            let view = policy.view(&input(&history));
            let sent = input(&history).with_history(&view).tokens(counter.as_ref());
            assert!(sent <= 600, "{turns} turns: {sent} tokens sent");
            assert_pairs_whole(
                &view[usize::from(matches!(view[0], HistoryItem::Summary { .. }))..],
            );
        }
    }

    #[test]
    fn a_turn_too_large_for_the_window_is_cut_not_dropped() {
        let counter: Arc<dyn TokenCounter> = Arc::new(EstimatedTokens);
        let history = calls(3, &"x".repeat(20_000));
        let view = TokenWindow::new(400, counter.clone()).view(&input(&history));
        let sent = input(&history).with_history(&view).tokens(counter.as_ref());
        assert!(sent <= 400, "{sent}");
        let Some(HistoryItem::Observation { observation }) = view.last() else {
            panic!("the newest result is missing: {view:?}");
        };
        assert!(
            observation
                .content
                .ends_with("[cut to fit the context window]")
        );
    }

    #[test]
    fn summarise_asks_for_a_summary_of_all_but_the_newest_turns_past_the_window() {
        let counter: Arc<dyn TokenCounter> = Arc::new(EstimatedTokens);
        let policy = Summarise::new(500, 2, counter);
        assert!(policy.compaction(&input(&calls(2, "2"))).is_none());
        let long = calls(40, "2");
        let compaction = policy.compaction(&input(&long)).expect("a summary is due");
        assert_eq!(compaction.items, 76, "all but the last two turns");
        let summarised: Arc<Vec<HistoryItem>> = Arc::new(
            std::iter::once(HistoryItem::Summary { text: "s".into() })
                .chain(long[76..].iter().cloned())
                .collect(),
        );
        assert!(policy.compaction(&input(&summarised)).is_none());
    }

    #[test]
    fn specs_parse_print_and_explain_their_errors() {
        for (given, parsed) in [
            ("keep-all", ContextSpec::KeepAll),
            ("last:12", ContextSpec::LastTurns(12)),
            ("window:8000", ContextSpec::TokenWindow(8000)),
            (
                "summarise:2000",
                ContextSpec::Summarise {
                    tokens: 2000,
                    keep_last: DEFAULT_KEEP_LAST,
                },
            ),
            (
                "summarise:2000:6",
                ContextSpec::Summarise {
                    tokens: 2000,
                    keep_last: 6,
                },
            ),
        ] {
            assert_eq!(ContextSpec::parse(given).unwrap(), parsed);
            assert_eq!(parsed.to_string(), given);
        }
        assert_eq!(
            ContextSpec::parse("summarize:900").unwrap().to_string(),
            "summarise:900"
        );
        for (bad, says) in [
            ("last:0", "positive whole number"),
            ("window:10", "below the smallest"),
            ("window", "missing"),
            ("keep-all:3", "extra"),
            ("trim:4", "not known"),
            ("summarise:x", "not `x`"),
        ] {
            let err = ContextSpec::parse(bad).unwrap_err().to_string();
            assert!(
                err.contains(says) && err.contains("keep-all, last:N"),
                "{bad}: {err}"
            );
        }
    }
}
