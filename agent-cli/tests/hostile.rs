//! The `agent` binary probed as a hostile user would: damaged stores, traces that
//! are not traces, mistyped store paths, stop signals in the middle of a step and
//! many processes creating one store at once. Each case once misbehaved.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use agent_testkit::{FakeProvider, Reply};
use common::{json_stdout, last_is_dispatch_of, load_log, run_calculator, scratch, stderr};
use serde_json::json;

fn only_session(db: &std::path::Path) -> String {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row("SELECT session_id FROM sessions", [], |row| row.get(0))
        .unwrap()
}

/// Regression: a row whose body does not decode made `show`, `resume` and
/// `cancel` exit 1 ("internal error") where the README promises exit 2.
#[test]
fn a_damaged_event_row_is_a_clear_exit_2_and_changes_nothing() {
    let scratch = scratch("damaged-row");
    assert_eq!(run_calculator(&scratch, &[]).status.code(), Some(0));
    let db = scratch.path(".agent/agent.db");
    let session = only_session(&db);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("UPDATE events SET body = '{garbage' WHERE seq = 2", [])
        .unwrap();
    let before = dump(&db);
    for command in ["show", "resume", "cancel"] {
        let output = scratch.run(&[command, &session]);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{command}: {}",
            stderr(&output)
        );
        let message = stderr(&output);
        assert!(
            message.contains("event 2 of session") && message.contains("nothing was changed"),
            "{command}: {message}"
        );
    }
    assert_eq!(dump(&db), before, "the store was left as it was");

    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("UPDATE events SET schema_version = 99 WHERE seq = 2", [])
        .unwrap();
    let newer = scratch.run(&["show", &session]);
    assert_eq!(newer.status.code(), Some(2));
    assert!(
        stderr(&newer).contains("upgrade agent"),
        "{}",
        stderr(&newer)
    );
}

/// Regression: a log whose events decode but do not fold (one removed) was an
/// internal error.
#[test]
fn a_log_with_a_missing_event_is_a_clear_exit_2() {
    let scratch = scratch("gap");
    assert_eq!(run_calculator(&scratch, &[]).status.code(), Some(0));
    let db = scratch.path(".agent/agent.db");
    let session = only_session(&db);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("DELETE FROM events WHERE seq = 3", [])
        .unwrap();
    for command in ["show", "resume"] {
        let output = scratch.run(&[command, &session]);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{command}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains("inconsistent"),
            "{}",
            stderr(&output)
        );
    }
}

fn dump(db: &std::path::Path) -> Vec<(String, i64, String)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut select = conn
        .prepare("SELECT session_id, seq, body FROM events ORDER BY session_id, seq")
        .unwrap();
    select
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Regression: `trace show` exited 0 on a file without a single trace line, and
/// held an endless line in memory without bound.
#[test]
fn trace_show_refuses_a_file_without_trace_lines_and_caps_line_length() {
    let scratch = scratch("not-a-trace");
    let empty = scratch.path("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let prose = scratch.path("prose.txt");
    std::fs::write(&prose, "hello\nworld\n").unwrap();
    for file in [&empty, &prose] {
        let output = scratch.run(&["trace", "show", file.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        assert!(
            stderr(&output).contains("holds no trace line"),
            "{}",
            stderr(&output)
        );
    }

    let long = scratch.path("long.jsonl");
    let mut file = std::fs::File::create(&long).unwrap();
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..40 {
        file.write_all(&chunk).unwrap();
    }
    file.write_all(b"\n{\"step\":1,\"event_type\":\"run_finished\"}\n")
        .unwrap();
    drop(file);
    let output = scratch.run(&["trace", "show", long.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("line 1: malformed trace line: longer than"),
        "{}",
        stderr(&output)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("run_finished"));
}

/// Regression: a store path whose parent directories are missing created them all.
#[test]
fn a_store_path_in_a_missing_directory_is_refused_without_creating_it() {
    let scratch = scratch("missing-parent");
    let store = format!(
        "sqlite://{}",
        scratch.path("no/such/dir/agent.db").display()
    );
    let output = run_calculator(&scratch, &["--store", &store]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("does not exist"),
        "{}",
        stderr(&output)
    );
    assert!(!scratch.path("no").exists(), "nothing was created");

    let one_level = format!("sqlite://{}", scratch.path("fresh/agent.db").display());
    let output = run_calculator(&scratch, &["--store", &one_level]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

/// Regression: SIGINT or SIGTERM ended `agent run` without a word. Now the step
/// in flight is abandoned, the session stays resumable, and the exit code says
/// which signal stopped it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_signal_leaves_a_resumable_session_and_says_how_to_resume() {
    for (signal, code) in [
        (rustix::process::Signal::INT, 130),
        (rustix::process::Signal::TERM, 143),
    ] {
        let scratch = scratch("stop-signal");
        let script = scratch.script(
            "s.json",
            json!([
                {"type": "tool_call", "tool_name": "append_line",
                 "arguments": {"path": "out.txt", "line": "one"}},
                {"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": 2}},
                {"type": "finish", "answer": "done"}
            ]),
        );
        let model = format!("scripted:{}", script.display());
        let child = scratch
            .command()
            .args([
                "run",
                "t",
                "--model",
                &model,
                "--tools",
                "append_line,sleep",
                "--json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (session, _) = common::wait_for_log(&scratch.dir, "the sleep", |events| {
            last_is_dispatch_of(events, "sleep")
        })
        .await;
        let pid = rustix::process::Pid::from_child(&child);
        rustix::process::kill_process(pid, signal).unwrap();
        let output = tokio::time::timeout(
            Duration::from_secs(20),
            tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()),
        )
        .await
        .expect("the run stopped soon after the signal")
        .unwrap();
        assert_eq!(output.status.code(), Some(code), "{}", stderr(&output));
        assert!(
            output.stdout.is_empty(),
            "no RunResult: the run did not end"
        );
        let message = stderr(&output);
        assert!(
            message.contains(&format!("agent resume {session}")),
            "{message}"
        );
        let events = load_log(&scratch.dir, &session).await;
        assert!(
            last_is_dispatch_of(&events, "sleep"),
            "the step in flight was not recorded as done"
        );

        let resumed = scratch.run(&["resume", &session, "--json"]);
        assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
        assert_eq!(json_stdout(&resumed)["answer"], "done");
        assert_eq!(
            std::fs::read_to_string(scratch.path("out.txt")).unwrap(),
            "one\n",
            "the finished side effect did not run again"
        );
    }
}

/// Regression: of 8 `agent run` processes started at once on a new store file,
/// some saw another's half-created schema and exited 2 ("an SQLite database of
/// something else"). Sixteen racing first opens, twenty rounds.
#[test]
fn sixteen_processes_creating_one_store_at_once_all_run() {
    let scratch = scratch("create-race");
    let script = scratch.script("calc.json", common::calculator_script());
    let model = format!("scripted:{}", script.display());
    for round in 0..20 {
        let store = format!(
            "sqlite://{}",
            scratch.path(&format!("race-{round}.db")).display()
        );
        let runs: Vec<_> = (0..16)
            .map(|_| {
                scratch
                    .command()
                    .args([
                        "run",
                        common::CALCULATOR_TASK,
                        "--model",
                        &model,
                        "--tools",
                        "calculator",
                        "--json",
                        "--store",
                        &store,
                    ])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for run in runs {
            let output = run.wait_with_output().unwrap();
            assert_eq!(
                output.status.code(),
                Some(0),
                "round {round}: {}",
                stderr(&output)
            );
        }
    }
}

const CANARY_KEY: &str = "sk-canary-hostile-93ab";

fn text_reply(text: &str) -> Reply {
    Reply::json(&json!({
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1}
    }))
}

fn bad_arguments_reply() -> Reply {
    Reply::json(&json!({
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function",
                            "function": {"name": "calculator", "arguments": "{\"left\": 1,"}}]}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1}
    }))
}

/// Every fault a provider can throw ends the run with a defined exit reason and
/// one RunResult, and the key is nowhere: stdout, stderr, trace, store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_faults_end_every_run_with_a_defined_exit_reason_and_no_key() {
    let busy = || Reply::status(429, r#"{"error":{"message":"busy"}}"#).header("Retry-After", "0");
    let storms: Vec<(&str, Vec<Reply>, i32)> = vec![
        ("429 storm", (0..6).map(|_| busy()).collect(), 7),
        (
            "5xx then an answer",
            vec![
                Reply::status(500, "{}"),
                Reply::status(503, "oops"),
                text_reply("ok"),
            ],
            0,
        ),
        (
            "connection resets",
            vec![
                Reply::status(200, "").reset(),
                Reply::status(200, "").reset(),
                text_reply("ok"),
            ],
            0,
        ),
        (
            "resets only",
            (0..6).map(|_| Reply::status(200, "").reset()).collect(),
            7,
        ),
        (
            "slow bodies",
            vec![
                text_reply("late").delayed(Duration::from_secs(3)),
                text_reply("ok"),
            ],
            0,
        ),
        (
            "truncated JSON",
            vec![text_reply("cut").cut(12), text_reply("ok")],
            0,
        ),
        (
            "not JSON at all",
            (0..6).map(|_| Reply::status(200, "<html>")).collect(),
            7,
        ),
        (
            "tool call with invalid JSON arguments",
            vec![bad_arguments_reply(), text_reply("ok")],
            0,
        ),
        (
            "invalid arguments until the steps run out",
            (0..3).map(|_| bad_arguments_reply()).collect(),
            4,
        ),
    ];
    for (name, replies, code) in storms {
        let server = FakeProvider::start(replies).await.unwrap();
        let scratch = scratch("faults");
        let output = scratch
            .command()
            .args([
                "run",
                "t",
                "--model",
                &format!("openai:m@{}/v1", server.url()),
            ])
            .args([
                "--tools",
                "calculator",
                "--max-steps",
                "3",
                "--request-timeout",
                "1",
            ])
            .args(["--trace", "trace.jsonl", "--json"])
            .env("OPENAI_API_KEY", CANARY_KEY)
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(code),
            "{name}: {}",
            stderr(&output)
        );
        let result = json_stdout(&output);
        assert!(result["exit_reason"].is_string(), "{name}: {result}");
        let mut everything = String::from_utf8_lossy(&output.stdout).into_owned();
        everything.push_str(&stderr(&output));
        everything
            .push_str(&std::fs::read_to_string(scratch.path("trace.jsonl")).unwrap_or_default());
        for file in ["agent.db", "agent.db-wal"] {
            let bytes = std::fs::read(scratch.path(&format!(".agent/{file}"))).unwrap_or_default();
            everything.push_str(&String::from_utf8_lossy(&bytes));
        }
        assert!(!everything.contains(CANARY_KEY), "{name}: the key leaked");
    }
}

/// A store file cut in the middle of a page is refused with a clear error.
#[test]
fn a_truncated_store_file_is_refused_clearly() {
    let scratch = scratch("truncated");
    for _ in 0..3 {
        assert_eq!(run_calculator(&scratch, &[]).status.code(), Some(0));
    }
    let db = scratch.path(".agent/agent.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let _ = std::fs::remove_file(scratch.path(".agent/agent.db-wal"));
    let _ = std::fs::remove_file(scratch.path(".agent/agent.db-shm"));
    let length = std::fs::metadata(&db).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&db).unwrap();
    file.set_len(length / 2 + 100).unwrap();
    drop(file);
    let before = std::fs::read(&db).unwrap();
    for args in [
        vec!["sessions"],
        vec!["run", "x", "--model", "scripted:none.json"],
    ] {
        let output = scratch.run(&args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        let message = stderr(&output);
        assert!(
            message.contains("damaged")
                || message.contains("corrupt")
                || message.contains("malformed"),
            "{args:?}: {message}"
        );
    }
    assert_eq!(std::fs::read(&db).unwrap(), before, "nothing was written");
}

/// A store on a full disk fails with a clear error and keeps every committed
/// session; made read-only, it is refused clearly and left as it was.
#[test]
fn a_full_or_read_only_disk_is_a_clear_error_and_corrupts_nothing() {
    let scratch = scratch("full-disk");
    let mount = scratch.path("small");
    let Some(_disk) = agent_testkit::SmallDisk::for_test(&mount, "600k") else {
        return;
    };
    let store = format!("sqlite://{}/agent.db", mount.display());
    let task = "x".repeat(20_000);
    let script = scratch.script("calc.json", common::calculator_script());
    let model = format!("scripted:{}", script.display());
    let mut finished = Vec::new();
    let mut full = None;
    for _ in 0..200 {
        let output = scratch.run(&[
            "run",
            &task,
            "--model",
            &model,
            "--tools",
            "calculator",
            "--store",
            &store,
            "--json",
        ]);
        match output.status.code() {
            Some(0) => finished.push(
                json_stdout(&output)["session_id"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            ),
            _ => {
                full = Some(output);
                break;
            }
        }
    }
    let full = full.expect("the disk filled up");
    assert!(!finished.is_empty());
    assert!(
        matches!(full.status.code(), Some(1 | 2)),
        "{}",
        stderr(&full)
    );
    assert!(
        stderr(&full).to_lowercase().contains("full"),
        "says the disk is full: {}",
        stderr(&full)
    );
    for id in &finished {
        let shown = scratch.run(&["show", id, "--store", &store, "--json"]);
        assert_eq!(shown.status.code(), Some(0), "{}", stderr(&shown));
        assert_eq!(json_stdout(&shown)["status"], "finished");
    }
    let integrity: String = rusqlite::Connection::open(mount.join("agent.db"))
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");

    let remounted = std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&mount)
        .status()
        .unwrap();
    assert!(remounted.success());
    let output = scratch.run(&[
        "run",
        "t",
        "--model",
        &model,
        "--tools",
        "calculator",
        "--store",
        &store,
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("cannot be written"),
        "{}",
        stderr(&output)
    );
}
