//! A session's settings are declared once (`agent_runtime::AgentSpec`): every
//! field is a flag of `run`, `submit`, `send` and `resume` with its doc comment
//! as help, a property of `POST /v1/sessions` in the OpenAPI document with the
//! same description, a line of the README's flag table, and a key of the
//! configuration a session records.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use agent_runtime::AgentSpec;
use clap::Args;
use common::{json_stdout, scratch, stdout};

/// Each field's flag, as clap derives it from the one declaration.
fn flags() -> Vec<(String, String)> {
    AgentSpec::augment_args(clap::Command::new("spec"))
        .get_arguments()
        .map(|arg| {
            (
                arg.get_id().to_string(),
                format!("--{}", arg.get_long().unwrap()),
            )
        })
        .collect()
}

#[test]
fn every_setting_is_a_flag_of_each_command_with_its_help() {
    let fields = AgentSpec::field_names();
    assert!(fields.len() > 30, "{fields:?}");
    let flags = flags();
    assert_eq!(flags.len(), fields.len());
    let scratch = scratch("settings-help");
    for command in ["run", "submit", "send", "resume"] {
        let help = stdout(&scratch.run(&[command, "--help"]));
        for (field, flag) in &flags {
            assert!(
                help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}[")),
                "`agent {command} --help` lacks {flag} (field `{field}`)"
            );
        }
    }
}

#[test]
fn every_setting_is_a_documented_property_of_a_new_session() {
    let document = serde_json::to_value(agent_server::openapi()).unwrap();
    let spec = &document["components"]["schemas"]["AgentSpec"];
    let properties = spec["properties"].as_object().unwrap();
    let fields = AgentSpec::field_names();
    assert_eq!(properties.len(), fields.len());
    for field in &fields {
        let description = properties[field]["description"]
            .as_str()
            .unwrap_or_default();
        assert!(!description.is_empty(), "`{field}` has no description");
    }
    let create =
        serde_json::to_string(&document["components"]["schemas"]["CreateSession"]).unwrap();
    assert!(
        create.contains("#/components/schemas/AgentSpec"),
        "POST /v1/sessions takes the settings: {create}"
    );
}

#[test]
fn every_setting_has_a_line_in_the_readme() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let missing: Vec<String> = flags()
        .into_iter()
        .filter(|(_, flag)| !readme.contains(&format!("| `{flag}")))
        .map(|(field, flag)| format!("{flag} (field `{field}`)"))
        .collect();
    assert!(
        missing.is_empty(),
        "the README's flag table has no line for {missing:?}"
    );
}

#[test]
fn a_session_records_what_the_flags_set_under_the_fields_names() {
    let scratch = scratch("settings-recorded");
    let script = scratch.script("calc.json", common::calculator_script());
    let output = scratch.run(&[
        "run",
        "What is 12 times 7?",
        "--model",
        &format!("scripted:{}", script.display()),
        "--tools",
        "calculator",
        "--instructions",
        "You are terse.",
        "--max-steps",
        "4",
        "--session-budget",
        "--trace",
        "trace.jsonl",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", common::stderr(&output));
    let id = json_stdout(&output)["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = json_stdout(&scratch.run(&["show", &id, "--json"]));
    let config = &shown["events"][0]["kind"]["config"];
    assert_eq!(config["instructions"], "You are terse.");
    assert_eq!(config["max_steps"], 4);
    assert_eq!(config["session_budget"], true);
    assert_eq!(config["tools"], serde_json::json!(["calculator"]));
    let started = &common::trace_lines(&scratch.path("trace.jsonl"))[0];
    assert_eq!(started["event_type"], "run_started");
    assert!(
        started["instructions"]
            .as_str()
            .unwrap()
            .starts_with("chars=14;sha256="),
        "the trace holds a safe summary of the instructions: {started}"
    );
    for key in config.as_object().unwrap().keys() {
        assert!(
            AgentSpec::field_names().contains(key)
                || ["version", "confinement"].contains(&key.as_str()),
            "the record holds `{key}`, which is no setting"
        );
    }
}
