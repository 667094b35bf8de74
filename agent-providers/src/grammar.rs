//! A GBNF grammar (llama.cpp's grammar format) that admits exactly the action
//! wire format for a set of tools: `tool_name` is one of the registered tools,
//! `arguments` follows that tool's input schema, and `finish` (and, for
//! planning strategies, `plan`) is always possible. A model sampled under it
//! cannot write output that fails to parse.
//!
//! The schema subset that is enforced: `type` (one or a list), `properties`
//! with `required` (object keys in the order the schema lists them),
//! `enum`, `const`, `items`, `anyOf` / `oneOf`, a one-element `allOf`, and
//! local `$ref`s into `$defs` / `definitions`. Anything else (`pattern`,
//! `minimum`, string formats, …) is admitted as any JSON value of the right
//! shape; the runtime's schema validation and feedback still check it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use agent_core::types::ToolSpec;
use serde_json::Value;

/// The name of the grammar's start rule.
pub const ROOT_RULE: &str = "root";

/// What the grammar admits besides tool calls and `finish`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GrammarOptions {
    /// The request asks for a plan: admit only `{"type":"plan","steps":[…]}`,
    /// with each step's `tool` one of the tools.
    pub expect_plan: bool,
    /// Also admit `{"type":"tool_calls","calls":[…]}` (several calls at once).
    pub allow_parallel_calls: bool,
}

/// The grammar for `tools`.
pub fn action_grammar(tools: &[ToolSpec], options: GrammarOptions) -> String {
    let mut rules = Rules::default();
    if options.expect_plan {
        plan_rules(&mut rules, tools);
        rules.add(ROOT_RULE, "plan".into());
        return rules.render();
    }
    let calls: Vec<String> = tools
        .iter()
        .enumerate()
        .map(|(index, tool)| {
            rules.begin_scope(format!("tool{index}"));
            let args = rules.schema(
                &format!("tool{index}-args"),
                &tool.input_schema,
                &tool.input_schema,
            );
            let name = format!("tool{index}-call");
            rules.add(
                &name,
                format!(
                    "{} ws \":\" ws {} ws \",\" ws {} ws \":\" ws {args}",
                    literal("\"tool_name\""),
                    literal(&json_string(&tool.name)),
                    literal("\"arguments\""),
                ),
            );
            name
        })
        .collect();
    let mut actions = vec!["finish"];
    rules.add(
        "finish",
        format!(
            "\"{{\" ws {} ws \":\" ws {} ws \",\" ws {} ws \":\" ws string ws \"}}\"",
            literal("\"type\""),
            literal("\"finish\""),
            literal("\"answer\""),
        ),
    );
    if !calls.is_empty() {
        rules.add("call", calls.join(" | "));
        rules.add(
            "tool-call",
            format!(
                "\"{{\" ws {} ws \":\" ws {} ws \",\" ws call ws \"}}\"",
                literal("\"type\""),
                literal("\"tool_call\""),
            ),
        );
        actions.insert(0, "tool-call");
        if options.allow_parallel_calls {
            rules.add(
                "tool-calls",
                format!(
                    "\"{{\" ws {} ws \":\" ws {} ws \",\" ws {} ws \":\" ws \"[\" ws call-object (ws \",\" ws call-object)* ws \"]\" ws \"}}\"",
                    literal("\"type\""),
                    literal("\"tool_calls\""),
                    literal("\"calls\""),
                ),
            );
            rules.add("call-object", "\"{\" ws call ws \"}\"".into());
            actions.insert(1, "tool-calls");
        }
    }
    rules.add(ROOT_RULE, actions.join(" | "));
    rules.render()
}

/// The `plan` rule: steps with a goal and, optionally, one of `tools`.
fn plan_rules(rules: &mut Rules, tools: &[ToolSpec]) {
    let tool_names: Vec<String> = tools
        .iter()
        .map(|tool| literal(&json_string(&tool.name)))
        .collect();
    let step_tool = if tool_names.is_empty() {
        String::new()
    } else {
        rules.add("plan-tool", tool_names.join(" | "));
        format!(
            " (ws \",\" ws {} ws \":\" ws plan-tool)?",
            literal("\"tool\"")
        )
    };
    rules.add(
        "plan-step",
        format!(
            "\"{{\" ws {} ws \":\" ws string{step_tool} ws \"}}\"",
            literal("\"goal\"")
        ),
    );
    rules.add(
        "plan",
        format!(
            "\"{{\" ws {} ws \":\" ws {} ws \",\" ws {} ws \":\" ws \"[\" ws plan-step (ws \",\" ws plan-step)* ws \"]\" ws \"}}\"",
            literal("\"type\""),
            literal("\"plan\""),
            literal("\"steps\""),
        ),
    );
}

/// The rules shared by every grammar: JSON values of each type.
const PRIMITIVES: &str = r#"ws ::= " "?
value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" char* "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] )
integer ::= "-"? ( "0" | [1-9] [0-9]{0,15} )
number ::= integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?
boolean ::= "true" | "false"
null ::= "null"
"#;

/// Rules in the order they were added, deduplicated by name.
#[derive(Default)]
struct Rules {
    order: Vec<String>,
    bodies: BTreeMap<String, String>,
    refs: BTreeMap<String, String>,
    scope: String,
}

impl Rules {
    /// Starts the rules of another tool: `$ref`s now point into its schema.
    fn begin_scope(&mut self, scope: String) {
        self.refs.clear();
        self.scope = scope;
    }

    fn add(&mut self, name: &str, body: String) {
        if self.bodies.insert(name.to_owned(), body).is_none() {
            self.order.push(name.to_owned());
        }
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for name in self.order.iter().rev() {
            if let Some(body) = self.bodies.get(name) {
                let _ = writeln!(out, "{name} ::= {body}");
            }
        }
        out.push_str(PRIMITIVES);
        out
    }

    /// The rule (or primitive) that admits `schema`, adding what it needs under
    /// names starting with `name`. `root` is the document `$ref`s point into.
    fn schema(&mut self, name: &str, schema: &Value, root: &Value) -> String {
        let Some(object) = schema.as_object() else {
            // `true` (or anything that is not a schema object) admits any value.
            return "value".into();
        };
        if let Some(target) = object.get("$ref").and_then(Value::as_str) {
            return self.reference(target, root);
        }
        if let Some(value) = object.get("const") {
            return self.literal_rule(name, std::slice::from_ref(value));
        }
        if let Some(Value::Array(values)) = object.get("enum") {
            return self.literal_rule(name, values);
        }
        for keyword in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = object.get(keyword) {
                return self.alternatives(name, options, root);
            }
        }
        if let Some(Value::Array(parts)) = object.get("allOf")
            && let [only] = parts.as_slice()
        {
            return self.schema(name, only, root);
        }
        match object.get("type") {
            Some(Value::String(kind)) => self.typed(name, kind, object, root),
            Some(Value::Array(kinds)) => {
                let options: Vec<String> = kinds
                    .iter()
                    .filter_map(Value::as_str)
                    .enumerate()
                    .map(|(index, kind)| self.typed(&format!("{name}-{index}"), kind, object, root))
                    .collect();
                if options.is_empty() {
                    return "value".into();
                }
                self.add(name, options.join(" | "));
                name.to_owned()
            }
            _ if object.contains_key("properties") => self.typed(name, "object", object, root),
            _ => "value".into(),
        }
    }

    fn typed(
        &mut self,
        name: &str,
        kind: &str,
        object: &serde_json::Map<String, Value>,
        root: &Value,
    ) -> String {
        match kind {
            "string" => "string".into(),
            "integer" => "integer".into(),
            "number" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => match object.get("items") {
                Some(items) => {
                    let item = self.schema(&format!("{name}-item"), items, root);
                    self.add(
                        name,
                        format!("\"[\" ws ( {item} ( ws \",\" ws {item} )* )? ws \"]\""),
                    );
                    name.to_owned()
                }
                None => "array".into(),
            },
            "object" => self.object(name, object, root),
            _ => "value".into(),
        }
    }

    /// An object with the schema's properties in the order listed; required
    /// ones always, the others where they may be.
    fn object(
        &mut self,
        name: &str,
        object: &serde_json::Map<String, Value>,
        root: &Value,
    ) -> String {
        let Some(Value::Object(properties)) = object.get("properties") else {
            return "object".into();
        };
        let required: Vec<&str> = object
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let members: Vec<(String, bool)> = properties
            .iter()
            .enumerate()
            .map(|(index, (key, schema))| {
                let value = self.schema(&format!("{name}-p{index}"), schema, root);
                let member = format!("{} ws \":\" ws {value}", literal(&json_string(key)));
                (member, required.contains(&key.as_str()))
            })
            .collect();
        let body = object_body(&members);
        self.add(name, format!("\"{{\" ws {body} ws \"}}\""));
        name.to_owned()
    }

    fn alternatives(&mut self, name: &str, options: &[Value], root: &Value) -> String {
        let rules: Vec<String> = options
            .iter()
            .enumerate()
            .map(|(index, option)| self.schema(&format!("{name}-{index}"), option, root))
            .collect();
        if rules.is_empty() {
            return "value".into();
        }
        self.add(name, rules.join(" | "));
        name.to_owned()
    }

    fn literal_rule(&mut self, name: &str, values: &[Value]) -> String {
        if values.is_empty() {
            return "value".into();
        }
        let body: Vec<String> = values
            .iter()
            .map(|value| literal(&value.to_string()))
            .collect();
        self.add(name, body.join(" | "));
        name.to_owned()
    }

    fn reference(&mut self, target: &str, root: &Value) -> String {
        if let Some(rule) = self.refs.get(target) {
            return rule.clone();
        }
        let Some(pointer) = target.strip_prefix('#') else {
            return "value".into();
        };
        let Some(schema) = root.pointer(pointer) else {
            return "value".into();
        };
        let rule = format!("{}-ref{}", self.scope, self.refs.len());
        self.refs.insert(target.to_owned(), rule.clone());
        let schema = schema.clone();
        let inner = self.schema(&format!("{rule}-def"), &schema, root);
        self.add(&rule, inner);
        rule
    }
}

/// The members of an object in order: every required one, and each optional
/// one present or not, with commas only between members that are there.
fn object_body(members: &[(String, bool)]) -> String {
    if members.iter().any(|(_, required)| *required) {
        let mut parts = Vec::new();
        let mut seen_required = false;
        for (member, required) in members {
            let part = match (seen_required, *required) {
                // Before the first required member: optional, followed by a comma.
                (false, false) => format!("( {member} ws \",\" ws )?"),
                (false, true) => member.clone(),
                (true, true) => format!("ws \",\" ws {member}"),
                (true, false) => format!("( ws \",\" ws {member} )?"),
            };
            seen_required |= *required;
            parts.push(part);
        }
        return parts.join(" ");
    }
    if members.is_empty() {
        return String::new();
    }
    // All optional: some member comes first, then any of the later ones.
    let starts: Vec<String> = members
        .iter()
        .enumerate()
        .map(|(first, (member, _))| {
            let mut parts = vec![member.clone()];
            parts.extend(
                members
                    .iter()
                    .skip(first + 1)
                    .map(|(later, _)| format!("( ws \",\" ws {later} )?")),
            );
            parts.join(" ")
        })
        .collect();
    format!("( {} )?", starts.join(" | "))
}

/// `text` as a JSON string (with its quotes).
fn json_string(text: &str) -> String {
    Value::from(text).to_string()
}

/// A GBNF literal matching exactly `text`.
fn literal(text: &str) -> String {
    let mut out = String::from("\"");
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            other => out.push(other),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            input_schema: schema,
            output_description: None,
            error_description: None,
            idempotent: true,
            needs_approval: false,
        }
    }

    /// Every rule a grammar refers to is defined, and every rule is defined once.
    fn assert_well_formed(grammar: &str) {
        let mut defined = Vec::new();
        let mut bodies = Vec::new();
        for line in grammar.lines().filter(|line| !line.trim().is_empty()) {
            let (name, body) = line.split_once(" ::= ").expect("a rule per line");
            assert!(!defined.contains(&name), "{name} defined twice");
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
                "bad rule name {name}"
            );
            defined.push(name);
            bodies.push(body);
        }
        assert!(defined.contains(&ROOT_RULE));
        for body in bodies {
            for word in words_outside_literals(body) {
                assert!(
                    defined.contains(&word.as_str()),
                    "{word} is not defined in\n{grammar}"
                );
            }
        }
    }

    /// The rule names a body refers to: words outside literals and character classes.
    fn words_outside_literals(body: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut chars = body.chars().peekable();
        let mut word = String::new();
        while let Some(ch) = chars.next() {
            match ch {
                '"' => {
                    while let Some(inner) = chars.next() {
                        match inner {
                            '\\' => {
                                chars.next();
                            }
                            '"' => break,
                            _ => {}
                        }
                    }
                }
                '[' => {
                    while let Some(inner) = chars.next() {
                        match inner {
                            '\\' => {
                                chars.next();
                            }
                            ']' => break,
                            _ => {}
                        }
                    }
                }
                '{' => {
                    for inner in chars.by_ref() {
                        if inner == '}' {
                            break;
                        }
                    }
                }
                c if c.is_ascii_alphanumeric() || c == '-' => word.push(c),
                _ => {
                    if !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                }
            }
        }
        if !word.is_empty() {
            words.push(word);
        }
        words
    }

    #[test]
    fn tool_names_and_argument_keys_are_literals() {
        let grammar = action_grammar(
            &[tool(
                "calculator",
                json!({"type": "object", "properties": {
                    "left": {"type": "number"},
                    "operation": {"type": "string", "enum": ["add", "multiply"]},
                    "right": {"type": "number"}},
                    "required": ["left", "operation", "right"]}),
            )],
            GrammarOptions::default(),
        );
        assert_well_formed(&grammar);
        assert!(grammar.contains(r#""\"calculator\"""#), "{grammar}");
        assert!(
            grammar.contains(r#""\"add\"" | "\"multiply\"""#),
            "{grammar}"
        );
        assert!(
            grammar.contains(r#""\"left\"" ws ":" ws number"#),
            "{grammar}"
        );
        assert!(
            grammar.starts_with("root ::= tool-call | finish\n"),
            "{grammar}"
        );
        assert!(!grammar.contains("tool-calls"));
        assert!(!grammar.contains("plan"));
    }

    #[test]
    fn without_tools_only_finish_is_admitted() {
        let grammar = action_grammar(&[], GrammarOptions::default());
        assert_well_formed(&grammar);
        assert!(grammar.starts_with("root ::= finish\n"));
    }

    #[test]
    fn parallel_calls_when_asked() {
        let grammar = action_grammar(
            &[tool("a", json!({"type": "object", "properties": {}}))],
            GrammarOptions {
                expect_plan: false,
                allow_parallel_calls: true,
            },
        );
        assert_well_formed(&grammar);
        assert!(grammar.starts_with("root ::= tool-call | tool-calls | finish\n"));
    }

    #[test]
    fn a_request_for_a_plan_admits_only_a_plan() {
        let grammar = action_grammar(
            &[tool("a", json!({"type": "object", "properties": {}}))],
            GrammarOptions {
                expect_plan: true,
                allow_parallel_calls: true,
            },
        );
        assert_well_formed(&grammar);
        assert!(grammar.starts_with("root ::= plan\n"), "{grammar}");
        assert!(grammar.contains("plan-tool ::= \"\\\"a\\\"\""), "{grammar}");
        assert!(!grammar.contains("tool-call"), "{grammar}");
    }

    #[test]
    fn optional_members_refs_unions_and_arrays() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": ["integer", "null"]},
                "mode": {"$ref": "#/$defs/Mode"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "extra": {"anyOf": [{"type": "boolean"}, {"const": 3}]},
                "free": {"pattern": "x"}
            },
            "required": ["mode"],
            "$defs": {"Mode": {"oneOf": [{"const": "fast"}, {"const": "safe"}]}}
        });
        let grammar = action_grammar(&[tool("t", schema)], GrammarOptions::default());
        assert_well_formed(&grammar);
        assert!(
            grammar.contains("tool0-ref0 ::= tool0-ref0-def"),
            "{grammar}"
        );
        assert!(grammar.contains("\"\\\"fast\\\"\""), "{grammar}");
        assert!(grammar.contains("integer | null"), "{grammar}");
        assert!(
            grammar.contains("( \"\\\"path\\\"\" ws \":\" ws string ws \",\" ws )?"),
            "{grammar}"
        );
    }

    #[test]
    fn all_optional_members_may_each_come_first() {
        let body = object_body(&[("A".into(), false), ("B".into(), false)]);
        assert_eq!(body, "( A ( ws \",\" ws B )? | B )?");
    }

    #[test]
    fn every_builtin_tool_schema_is_enforced_member_by_member() {
        let specs: Vec<ToolSpec> = agent_tools::BUILTIN_TOOLS
            .iter()
            .map(|name| {
                agent_tools::builtin_tool(name, &agent_tools::BuiltinOptions::default())
                    .expect("a built-in tool")
                    .spec()
                    .clone()
            })
            .collect();
        let grammar = action_grammar(
            &specs,
            GrammarOptions {
                expect_plan: false,
                allow_parallel_calls: true,
            },
        );
        assert_well_formed(&grammar);
        for (index, spec) in specs.iter().enumerate() {
            let args = grammar
                .lines()
                .find_map(|line| line.strip_prefix(&format!("tool{index}-args ::= ")))
                .unwrap_or_else(|| panic!("{} has no argument rule", spec.name));
            assert!(args.starts_with("\"{\""), "{}: {args}", spec.name);
            let properties = spec.input_schema["properties"]
                .as_object()
                .unwrap_or_else(|| panic!("{} has no properties", spec.name));
            for key in properties.keys() {
                assert!(
                    args.contains(&literal(&json_string(key))),
                    "{}: `{key}` is not in {args}",
                    spec.name
                );
            }
            assert!(grammar.contains(&literal(&json_string(&spec.name))));
        }
    }

    #[test]
    fn literals_escape_quotes_and_backslashes() {
        assert_eq!(literal(r#""a\b""#), r#""\"a\\b\"""#);
    }
}
