//! What programs the agent starts may see and touch: `run_command` and the
//! `--finish-when` check get a scrubbed environment (no API key, no store URL)
//! plus what `--pass-env` names, and under Landlock may write only in the
//! workspace and their private temp directory. On a kernel without Landlock the
//! run says so and the session records it.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use common::{json_stdout, load_log, scratch, stderr};
use serde_json::{Value, json};

const CANARY_KEY: &str = "sk-canary-0d7e41";

/// Runs `program args` through `run_command` (and `--finish-when` when
/// given) with a canary key and store password in the environment; returns the
/// call's observation and the recorded configuration.
async fn run_program(
    scratch: &common::Scratch,
    program: &str,
    args: &[&str],
    extra: &[&str],
) -> (Value, Value) {
    let script = scratch.script(
        "s.json",
        json!([
            {"type": "tool_call", "tool_name": "run_command",
             "arguments": {"program": program, "args": args}},
            {"type": "finish", "answer": "done"}
        ]),
    );
    let mut command = scratch.command();
    command
        .args([
            "run",
            "t",
            "--model",
            &format!("scripted:{}", script.display()),
        ])
        .args(["--tools", "run_command", "--allow-cmd", program, "--json"])
        .args(extra)
        .env("OPENAI_API_KEY", CANARY_KEY)
        .env("AGENT_STORE_PASSWORD_HINT", "postgres://u:pw-canary@h/db")
        .env("KEEP_ME", "kept-value");
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let session = json_stdout(&output)["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let events = load_log(&scratch.dir, &session).await;
    let observation = events
        .iter()
        .find_map(|event| match &event.kind {
            agent::event::EventKind::ActionCompleted { observation } => Some(observation.clone()),
            _ => None,
        })
        .unwrap();
    let content: Value =
        serde_json::from_str(&observation.content).unwrap_or(json!({"error": observation.content}));
    let config = match &events[0].kind {
        agent::event::EventKind::SessionStarted { config, .. } => config.clone(),
        other => panic!("first event {other:?}"),
    };
    (content, config)
}

/// Regression: `--allow-cmd printenv` printed `OPENAI_API_KEY` into an
/// observation, which is stored and sent to the provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_program_gets_a_scrubbed_environment_and_what_pass_env_names() {
    let scratch = scratch("scrubbed-env");
    let (output, _) = run_program(&scratch, "printenv", &[], &[]).await;
    let printed = output["stdout"].as_str().unwrap();
    assert!(!printed.contains(CANARY_KEY), "{printed}");
    assert!(!printed.contains("pw-canary"), "{printed}");
    assert!(!printed.contains("kept-value"), "{printed}");
    let names: Vec<&str> = printed
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .collect();
    assert!(
        names.contains(&"PATH") && names.contains(&"TMPDIR"),
        "{names:?}"
    );
    for name in &names {
        assert!(
            ["PATH", "HOME", "LANG", "TMPDIR"].contains(name),
            "{name} leaked"
        );
    }

    let (output, _) = run_program(&scratch, "printenv", &[], &["--pass-env", "KEEP_ME"]).await;
    assert!(
        output["stdout"]
            .as_str()
            .unwrap()
            .contains("KEEP_ME=kept-value")
    );
}

/// Regression: `--allow-cmd sh` could write anywhere the user could.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_program_writes_only_in_the_workspace_and_its_temp_dir() {
    let scratch = scratch("landlock");
    let outside = std::env::temp_dir().join(format!("agent-escape-{}", std::process::id()));
    let _ = std::fs::remove_file(&outside);
    let line = format!(
        "echo in > inside.txt; echo tmp > \"$TMPDIR/t\" && echo tmp-ok; echo out > {}",
        outside.display()
    );
    let (output, config) = run_program(&scratch, "sh", &["-c", &line], &[]).await;
    let confinement = config["confinement"].as_str().unwrap().to_owned();
    assert!(scratch.path("inside.txt").exists(), "{output}");
    assert!(
        output["stdout"].as_str().unwrap().contains("tmp-ok"),
        "{output}"
    );
    if confinement == "landlock" {
        assert!(!outside.exists(), "the program wrote outside: {output}");
        assert!(
            output["stderr"]
                .as_str()
                .unwrap()
                .contains("Permission denied"),
            "{output}"
        );
    } else {
        let _ = std::fs::remove_file(&outside);
        assert!(
            confinement.starts_with("none: "),
            "recorded why it is not confined: {confinement}"
        );
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must run on a kernel that enforces Landlock, or this test checks nothing: {confinement}"
        );
        eprintln!("skipped the write check: this kernel does not enforce Landlock: {confinement}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_completion_check_gets_the_scrubbed_environment_too() {
    let scratch = scratch("gate-env");
    let script = scratch.script(
        "s.json",
        json!([{"type": "finish", "answer": "a"}, {"type": "finish", "answer": "b"}]),
    );
    let output = scratch
        .command()
        .args([
            "run",
            "t",
            "--model",
            &format!("scripted:{}", script.display()),
        ])
        .args([
            "--finish-when",
            "sh -c 'test -z \"$OPENAI_API_KEY\"'",
            "--json",
        ])
        .env("OPENAI_API_KEY", CANARY_KEY)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        json_stdout(&output)["steps_used"],
        1,
        "the first finish passed the check"
    );
}

/// A program named by a path, or not on the list, is refused before it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_off_the_list_or_given_by_path_are_refused() {
    let scratch = scratch("not-allowed");
    for program in ["/bin/sh", "./sh", "../sh", "sh "] {
        let script = scratch.script(
            "s.json",
            json!([
                {"type": "tool_call", "tool_name": "run_command",
                 "arguments": {"program": program, "args": ["-c", "touch pwned"]}},
                {"type": "finish", "answer": "done"}
            ]),
        );
        let output = scratch.run(&[
            "run",
            "t",
            "--model",
            &format!("scripted:{}", script.display()),
            "--tools",
            "run_command",
            "--allow-cmd",
            "sh",
            "--json",
        ]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert!(!scratch.path("pwned").exists(), "{program} ran");
    }
}
