//! The index behind the repeated-call guard: for each distinct call (tool and
//! arguments) whose latest result succeeded, where that result is in the history.
//! It changes with the history — results added, summaries put in place of turns —
//! so finding an earlier identical call costs the same however long the session is.

use std::collections::BTreeMap;
use std::ops::Range;

use serde_json::Value;

use super::SessionState;
use crate::history::HistoryItem;
use crate::types::ToolCall;

/// History positions of successful results, by [`call_key`].
pub(super) type ResultIndex = BTreeMap<String, usize>;

/// What identifies a call for the guard: its tool and its arguments, with object
/// keys sorted so that the order the model wrote them in does not matter (as it
/// does not for JSON equality).
pub(super) fn call_key(call: &ToolCall) -> String {
    let mut key = String::with_capacity(call.tool_name.len() + 64);
    key.push_str(&call.tool_name);
    key.push('\0');
    write_canonical(&call.arguments, &mut key);
    key
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, value)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The positions left after `range` of the history was replaced by one summary:
/// results inside it are gone, those after it move up.
pub(super) fn reindex_after_summary(index: &mut ResultIndex, range: &Range<usize>) {
    let removed = range.len().saturating_sub(1);
    index.retain(|_, position| !range.contains(position));
    for position in index.values_mut() {
        if *position >= range.end {
            *position -= removed;
        }
    }
}

impl SessionState {
    /// The id and result of the latest earlier successful call identical to
    /// `call` (same tool, same arguments) that the history still holds.
    pub fn earlier_success(&self, call: &ToolCall) -> Option<(&str, &str)> {
        let position = *self.successes.get(&call_key(call))?;
        match self.history.get(position)? {
            HistoryItem::Observation { observation }
                if !observation.is_error && observation.call_id != call.id =>
            {
                Some((observation.call_id.as_str(), observation.content.as_str()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(arguments: Value) -> ToolCall {
        ToolCall {
            id: "c".into(),
            tool_name: "calculator".into(),
            arguments,
        }
    }

    #[test]
    fn the_key_ignores_the_order_of_object_keys_but_not_values() {
        let a = call_key(&call(
            json!({"left": 1, "right": {"x": [1, "a"], "y": null}}),
        ));
        let b = call_key(&call(
            json!({"right": {"y": null, "x": [1, "a"]}, "left": 1}),
        ));
        assert_eq!(a, b);
        assert_ne!(a, call_key(&call(json!({"left": 1.0, "right": 2}))));
        assert_ne!(
            call_key(&call(json!({"a": "b,c"}))),
            call_key(&call(json!({"a": "b", "c": null})))
        );
    }

    #[test]
    fn a_summary_drops_the_results_it_replaced_and_moves_the_later_ones() {
        let mut index: ResultIndex = [("a".into(), 1), ("b".into(), 3), ("c".into(), 6)].into();
        reindex_after_summary(&mut index, &(2..5));
        assert_eq!(index, [("a".into(), 1), ("c".into(), 4)].into());
    }
}
