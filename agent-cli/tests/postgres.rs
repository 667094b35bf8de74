//! The `agent` command on PostgreSQL as a user meets it: `kill -9` in the middle
//! of a run and `agent resume` from another process, a second driver refused
//! with the holder named, `agent sessions`, and a password in the store URL that
//! shows up nowhere.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use agent::store::open_url;
use agent_testkit::postgres::{fresh_database, test_url};
use common::*;
use serde_json::json;

/// Polls the store at `url` until its first session's log satisfies `done`.
async fn wait_for(
    url: &str,
    done: impl Fn(&[agent::event::Event]) -> bool,
) -> (String, Vec<agent::event::Event>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(store) = open_url(url, false).await
            && let Ok(sessions) = store.sessions().await
            && let Some(first) = sessions.first()
            && let Ok(events) = store.load(&first.session_id).await
            && done(&events)
        {
            return (first.session_id.clone(), events);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for the log"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn sleep_then_append(scratch: &Scratch, seconds: f64) -> String {
    let script = scratch.script(
        "s.json",
        json!([
            {"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": seconds}},
            {"type": "tool_call", "tool_name": "append_line", "arguments": {"path": "out.txt", "line": "hello"}},
            {"type": "finish", "answer": "done"}
        ]),
    );
    format!("scripted:{}", script.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_run_then_resume_elsewhere_appends_once_and_lists_the_session() {
    let Some(url) = test_url() else { return };
    let db = fresh_database(&url).await;
    let scratch = scratch("pg-kill");
    let model = sleep_then_append(&scratch, 2.0);
    let mut child = scratch
        .command()
        .args([
            "run",
            "durable task",
            "--model",
            &model,
            "--tools",
            "sleep,append_line",
        ])
        .args(["--store", &db, "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (id, _) = wait_for(&db, |events| last_is_dispatch_of(events, "sleep")).await;
    kill_hard(&mut child);
    let output = scratch.run(&["resume", &id, "--store", &db, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(json_stdout(&output)["exit_reason"], "finished");
    assert_eq!(
        std::fs::read_to_string(scratch.path("out.txt")).unwrap(),
        "hello\n",
        "the line is written exactly once"
    );
    let listed = scratch.run(&["sessions", "--store", &db, "--json"]);
    let listed = json_stdout(&listed);
    assert_eq!(listed[0]["session_id"], id);
    assert_eq!(listed[0]["status"], "finished");
    let shown = json_stdout(&scratch.run(&["show", &id, "--store", &db, "--json"]));
    assert!(
        shown["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"]["type"] == "resumed")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_driver_is_refused_naming_the_host_and_pid_of_the_first() {
    let Some(url) = test_url() else { return };
    let db = fresh_database(&url).await;
    let scratch = scratch("pg-lease");
    let model = sleep_then_append(&scratch, 3.0);
    let child = scratch
        .command()
        .args([
            "run",
            "t",
            "--model",
            &model,
            "--tools",
            "sleep,append_line",
        ])
        .args(["--store", &db, "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (id, _) = wait_for(&db, |events| last_is_dispatch_of(events, "sleep")).await;
    let second = scratch.run(&["resume", &id, "--store", &db, "--json"]);
    assert_eq!(second.status.code(), Some(8), "{}", stderr(&second));
    let host = agent::store::ProcessIdentity::current().host;
    let message = stderr(&second);
    assert!(
        message.contains(&format!("pid {pid} on host {host}")),
        "{message}"
    );
    let first = child.wait_with_output().unwrap();
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_the_store_url_is_never_printed_traced_or_recorded() {
    let Some(url) = test_url() else { return };
    let db = fresh_database(&url).await;
    let (_, rest) = db.split_once('@').unwrap();
    let secret = "agent-pw-secret";
    let with_password = format!("postgres://agent_pw:{secret}@{rest}");
    let scratch = scratch("pg-secret");
    let output = run_calculator(
        &scratch,
        &[
            "--store",
            &with_password,
            "--trace",
            "trace.jsonl",
            "--trace-content",
            "full",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let id = json_stdout(&output)["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let human = scratch.run(&["show", &id, "--store", &with_password]);
    let wrong = format!("postgres://agent_pw:{secret}-wrong@{rest}");
    let refused = scratch.run(&["sessions", "--store", &wrong]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("password authentication failed"),
        "{}",
        stderr(&refused)
    );
    for text in [
        stdout(&output),
        stderr(&output),
        stdout(&human),
        stderr(&human),
        stderr(&refused),
        std::fs::read_to_string(scratch.path("trace.jsonl")).unwrap(),
        agent_testkit::postgres::dump(&db).await,
    ] {
        assert!(!text.contains(secret), "the password leaked: {text}");
    }
    let dump = agent_testkit::postgres::dump(&db).await;
    assert!(dump.contains(&id), "the dump holds the session");
    assert!(!dump.contains(secret), "the password is in the database");
}

/// A password kept off the command line: from `PGPASSWORD`, or from a password
/// file (`PGPASSFILE`) that only its owner may read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_can_come_from_pgpassword_or_a_password_file() {
    let Some(url) = test_url() else { return };
    let db = fresh_database(&url).await;
    let (_, rest) = db.split_once('@').unwrap();
    let no_password = format!("postgres://agent_pw@{rest}");
    let scratch = scratch("pg-passfile");
    let sessions = |env: &[(&str, &str)]| {
        let mut command = scratch.command();
        command
            .args(["sessions", "--store", &no_password])
            .env_remove("PGPASSWORD")
            .env_remove("PGPASSFILE")
            .env("HOME", &scratch.dir);
        for (name, value) in env {
            command.env(name, value);
        }
        command.output().unwrap()
    };
    let refused = sessions(&[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let from_env = sessions(&[("PGPASSWORD", "agent-pw-secret")]);
    assert_eq!(from_env.status.code(), Some(0), "{}", stderr(&from_env));
    let (host_port, database) = rest.split_once('/').unwrap();
    let (host, port) = host_port.split_once(':').unwrap();
    let file = scratch.path("pgpass");
    std::fs::write(
        &file,
        format!("{host}:{port}:{database}:agent_pw:agent-pw-secret\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let shared_file = sessions(&[("PGPASSFILE", file.to_str().unwrap())]);
    assert_eq!(
        shared_file.status.code(),
        Some(2),
        "a password file others may read is ignored"
    );
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let from_file = sessions(&[("PGPASSFILE", file.to_str().unwrap())]);
    assert_eq!(from_file.status.code(), Some(0), "{}", stderr(&from_file));
}
