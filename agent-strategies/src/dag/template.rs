//! Prompt and argument templates over node outputs: `{{node}}` is the output of
//! `node`, `{{group.*}}` the outputs of a fan-out group joined by blank lines, and
//! `{{task}}` the session's task.

use std::collections::BTreeMap;

use serde_json::Value;

/// Completed nodes' outputs by name.
pub type Outputs = BTreeMap<String, Value>;

/// Names a template refers to (without `task`), in order of appearance.
pub fn references(template: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            break;
        };
        let name = after[..end].trim();
        if name != "task" && !name.is_empty() {
            names.push(name.to_owned());
        }
        rest = &after[end + 2..];
    }
    names
}

/// The text of an output: strings as they are, other JSON as JSON.
pub fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// `template` with every reference replaced.
pub fn render(template: &str, task: &str, outputs: &Outputs) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = after[..end].trim();
        if name == "task" {
            out.push_str(task);
        } else if let Some(group) = name.strip_suffix(".*") {
            let prefix = format!("{group}.");
            let mut members: Vec<(usize, &Value)> = outputs
                .iter()
                .filter_map(|(key, value)| Some((key.strip_prefix(&prefix)?.parse().ok()?, value)))
                .collect();
            members.sort_by_key(|(index, _)| *index);
            let joined: Vec<String> = members
                .into_iter()
                .map(|(_, value)| text_of(value))
                .collect();
            out.push_str(&joined.join("\n\n"));
        } else if let Some(value) = outputs.get(name) {
            out.push_str(&text_of(value));
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// `template` (a JSON value) with every string rendered; a string that is exactly
/// one reference takes the referenced output's JSON value.
pub fn render_value(template: &Value, task: &str, outputs: &Outputs) -> Value {
    match template {
        Value::String(text) => {
            let trimmed = text.trim();
            if let Some(name) = trimmed
                .strip_prefix("{{")
                .and_then(|t| t.strip_suffix("}}"))
                && !name.contains("{{")
                && let Some(value) = outputs.get(name.trim())
            {
                return value.clone();
            }
            Value::String(render(text, task, outputs))
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| render_value(item, task, outputs))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| (key.clone(), render_value(value, task, outputs)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn references_and_rendering() {
        let template = "Task: {{task}}. Facts: {{a}} and {{ b }}; all: {{q.*}}";
        assert_eq!(references(template), ["a", "b", "q.*"]);
        let outputs: Outputs = [
            ("a".to_owned(), json!("one")),
            ("b".to_owned(), json!(2)),
            ("q.1".to_owned(), json!("second")),
            ("q.0".to_owned(), json!("first")),
        ]
        .into();
        assert_eq!(
            render(template, "T", &outputs),
            "Task: T. Facts: one and 2; all: first\n\nsecond"
        );
        assert_eq!(
            render_value(
                &json!({"left": "{{b}}", "note": "b is {{b}}"}),
                "T",
                &outputs
            ),
            json!({"left": 2, "note": "b is 2"})
        );
    }
}
