//! Durable sessions as a user meets them: `kill -9` at many points then `agent
//! resume`, leases that refuse a second driver, cancel from another process, and the
//! `sessions` / `show` output.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use agent::engine::INTERRUPTED;
use agent::event::EventKind;
use common::*;
use serde_json::{Value, json};

fn spawn_run(scratch: &Scratch, script: &Path, tools: &str) -> Child {
    scratch
        .command()
        .args([
            "run",
            "durable task",
            "--model",
            &format!("scripted:{}", script.display()),
            "--tools",
            tools,
            "--trace",
            "trace.jsonl",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn sleep_then_append(seconds: f64) -> Value {
    json!([
        {"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": seconds}},
        {"type": "tool_call", "tool_name": "append_line", "arguments": {"path": "out.txt", "line": "hello"}},
        {"type": "finish", "answer": "done"}
    ])
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn kill_during_sleep_then_resume_reruns_the_sleep_and_appends_once() {
    let scratch = scratch("kill-sleep");
    let script = scratch.script("s.json", sleep_then_append(30.0));
    let mut child = spawn_run(&scratch, &script, "sleep,append_line");
    let (id, _) = wait_for_log(&scratch.dir, "the sleep to be dispatched", |events| {
        last_is_dispatch_of(events, "sleep")
    })
    .await;
    kill_hard(&mut child);

    let script = scratch.script("s.json", sleep_then_append(0.1));
    let output = scratch.run(&[
        "resume",
        &id,
        "--model",
        &format!("scripted:{}", script.display()),
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(json_stdout(&output)["exit_reason"], "finished");
    assert_eq!(lines_of(&scratch.path("out.txt")), ["hello"]);

    let log = load_log(&scratch.dir, &id).await;
    let resumed = log
        .iter()
        .position(|e| matches!(e.kind, EventKind::Resumed { .. }))
        .unwrap();
    let sleep_done: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(&e.kind, EventKind::ActionCompleted { observation } if observation.tool_name == "sleep"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(sleep_done.len(), 1);
    assert!(
        sleep_done[0] > resumed,
        "the in-flight idempotent sleep is re-run after the resume"
    );
    let types = event_types(&trace_lines(&scratch.path("trace.jsonl")));
    assert!(types.contains(&"run_resumed".to_owned()), "{types:?}");
    assert_eq!(types.last().unwrap(), "run_finished");
}

#[tokio::test]
async fn an_in_flight_non_idempotent_call_is_reported_interrupted_not_rerun() {
    let scratch = scratch("kill-append");
    let fifo = scratch.path("blocked.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let script = scratch.script(
        "s.json",
        json!([
            {"type": "tool_call", "tool_name": "append_line", "arguments": {"path": "blocked.fifo", "line": "x"}},
            {"type": "finish", "answer": "gave up"}
        ]),
    );
    let mut child = spawn_run(&scratch, &script, "append_line");
    let (id, _) = wait_for_log(&scratch.dir, "append_line to be dispatched", |events| {
        last_is_dispatch_of(events, "append_line")
    })
    .await;
    kill_hard(&mut child);
    let output = scratch.run(&["resume", &id, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let log = load_log(&scratch.dir, &id).await;
    let observations: Vec<_> = log
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ActionCompleted { observation } => Some(observation.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(observations.len(), 1);
    assert!(observations[0].is_error);
    assert_eq!(observations[0].content, INTERRUPTED);
}

/// Kills a run of three appends and two sleeps once its log reaches `kill_at`
/// events (or its next sleep starts), resumes it, and checks nothing ran twice.
async fn kill_at_and_resume(kill_at: usize, during_sleep: bool) {
    let scratch = scratch(&format!("kill-{kill_at}-{during_sleep}"));
    let script = scratch.script(
        "s.json",
        json!([
            {"type": "tool_call", "tool_name": "append_line", "arguments": {"path": "out.txt", "line": "1"}},
            {"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": 0.3}},
            {"type": "tool_calls", "calls": [
                {"tool_name": "append_line", "arguments": {"path": "out.txt", "line": "2"}},
                {"tool_name": "sleep", "arguments": {"seconds": 0.3}}]},
            {"type": "tool_call", "tool_name": "append_line", "arguments": {"path": "out.txt", "line": "3"}},
            {"type": "finish", "answer": "done"}
        ]),
    );
    let mut child = spawn_run(&scratch, &script, "sleep,append_line");
    let (id, _) = wait_for_log(&scratch.dir, "the kill point", |events| {
        if during_sleep {
            events.len() >= kill_at && last_is_dispatch_of(events, "sleep")
        } else {
            events.len() >= kill_at
        }
    })
    .await;
    kill_hard(&mut child);
    let output = scratch.run(&["resume", &id, "--json"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "kill at {kill_at}: {}",
        stderr(&output)
    );
    assert_eq!(json_stdout(&output)["exit_reason"], "finished");

    let log = load_log(&scratch.dir, &id).await;
    let lines = lines_of(&scratch.path("out.txt"));
    for line in ["1", "2", "3"] {
        let written = lines.iter().filter(|l| *l == line).count();
        let completed = log.iter().any(|e| {
            matches!(&e.kind,
            EventKind::ActionCompleted { observation }
                if observation.tool_name == "append_line" && !observation.is_error
                && log.iter().any(|d| matches!(&d.kind,
                    EventKind::ActionDispatched { call }
                        if call.id == observation.call_id && call.arguments["line"] == line)))
        });
        assert!(
            written <= 1,
            "kill at {kill_at}: line {line} written {written} times"
        );
        if completed {
            assert_eq!(
                written, 1,
                "kill at {kill_at}: a completed append of {line} is in the file"
            );
        }
    }
    let state = agent::state::SessionState::from_events(&id, &log).unwrap();
    assert_eq!(state.status(), agent::state::Status::Finished);
}

#[tokio::test]
async fn kills_at_many_points_lose_nothing_and_repeat_no_effect() {
    for kill_at in [1, 3, 4, 6, 8, 10, 12, 14, 16] {
        kill_at_and_resume(kill_at, false).await;
    }
    for kill_at in [1, 8] {
        kill_at_and_resume(kill_at, true).await;
    }
}

#[tokio::test]
async fn a_second_driver_is_refused_while_the_first_finishes_undisturbed() {
    let scratch = scratch("lease");
    let script = scratch.script("s.json", sleep_then_append(2.0));
    let child = spawn_run(&scratch, &script, "sleep,append_line");
    let pid = child.id();
    let (id, _) = wait_for_log(&scratch.dir, "the sleep", |events| {
        last_is_dispatch_of(events, "sleep")
    })
    .await;
    let started = std::time::Instant::now();
    let second = scratch.run(&["resume", &id, "--json"]);
    assert_eq!(second.status.code(), Some(8), "{}", stderr(&second));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once"
    );
    assert_eq!(stdout(&second), "");
    assert!(
        stderr(&second).contains(&format!("pid {pid}")),
        "{}",
        stderr(&second)
    );
    let first = child.wait_with_output().unwrap();
    assert_eq!(first.status.code(), Some(0));
    let result: Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(result["exit_reason"], "finished");
    assert_eq!(lines_of(&scratch.path("out.txt")), ["hello"]);
}

#[tokio::test]
async fn eight_concurrent_resumes_of_a_crashed_session_have_one_driver() {
    let scratch = scratch("race-resume");
    let script = scratch.script("s.json", sleep_then_append(30.0));
    let mut child = spawn_run(&scratch, &script, "sleep,append_line");
    let (id, _) = wait_for_log(&scratch.dir, "the sleep", |events| {
        last_is_dispatch_of(events, "sleep")
    })
    .await;
    kill_hard(&mut child);
    let script = scratch.script("s.json", sleep_then_append(1.0));
    let model = format!("scripted:{}", script.display());
    let racers: Vec<Child> = (0..8)
        .map(|_| {
            scratch
                .command()
                .args(["resume", &id, "--model", &model, "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let codes: Vec<Option<i32>> = racers
        .into_iter()
        .map(|racer| racer.wait_with_output().unwrap().status.code())
        .collect();
    assert_eq!(
        codes.iter().filter(|c| **c == Some(0)).count(),
        1,
        "{codes:?}"
    );
    assert_eq!(
        codes.iter().filter(|c| **c == Some(8)).count(),
        7,
        "{codes:?}"
    );
    let log = load_log(&scratch.dir, &id).await;
    let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=log.len() as u64).collect::<Vec<_>>());
    assert_eq!(lines_of(&scratch.path("out.txt")), ["hello"]);
}

/// `agent pause` while a sleep runs: the sleep finishes, the process that
/// drove the session prints a `paused` RunResult and exits 11, the session is
/// listed as paused, and `agent resume` finishes it with each effect once.
#[tokio::test]
async fn pause_stops_after_the_step_and_resume_continues() {
    let scratch = scratch("pause");
    let script = scratch.script("s.json", sleep_then_append(1.0));
    let child = spawn_run(&scratch, &script, "sleep,append_line");
    let (id, _) = wait_for_log(&scratch.dir, "the sleep", |events| {
        last_is_dispatch_of(events, "sleep")
    })
    .await;
    let pause = scratch.run(&["pause", &id, "--json"]);
    assert_eq!(pause.status.code(), Some(0), "{}", stderr(&pause));
    assert_eq!(
        json_stdout(&pause),
        json!({"session_id": id, "status": "running", "pause_requested": true})
    );
    let driven = child.wait_with_output().unwrap();
    assert_eq!(
        driven.status.code(),
        Some(11),
        "{}",
        String::from_utf8_lossy(&driven.stderr)
    );
    let result: Value = serde_json::from_slice(&driven.stdout).unwrap();
    assert_eq!(result["exit_reason"], "paused");
    assert_eq!(
        result["steps_used"], 1,
        "the sleep's step ended, no other began"
    );
    let log = load_log(&scratch.dir, &id).await;
    assert!(
        log.iter().any(|event| matches!(&event.kind,
            agent::event::EventKind::ActionCompleted { observation } if observation.content.starts_with("slept"))),
        "the sleep ran to its end"
    );
    let types = event_types(&trace_lines(&scratch.path("trace.jsonl")));
    assert_eq!(types.last().unwrap(), "run_paused");
    let listed = json_stdout(&scratch.run(&["sessions", "--status", "paused", "--json"]));
    assert_eq!(listed[0]["session_id"], id.as_str());
    let waited = scratch.run(&["wait", &id, "--json"]);
    assert_eq!(waited.status.code(), Some(11), "wait reports the pause");

    let resumed = scratch.run(&["resume", &id, "--json"]);
    assert_eq!(resumed.status.code(), Some(0), "{}", stderr(&resumed));
    assert_eq!(json_stdout(&resumed)["answer"], "done");
    assert_eq!(lines_of(&scratch.path("out.txt")), ["hello"]);
    let again = scratch.run(&["pause", &id]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("already ended"),
        "{}",
        stderr(&again)
    );
}

#[tokio::test]
async fn cancel_stops_the_driving_process_and_a_dead_one() {
    let scratch = scratch("cancel");
    let script = scratch.script("s.json", sleep_then_append(30.0));
    let child = spawn_run(&scratch, &script, "sleep,append_line");
    let (id, _) = wait_for_log(&scratch.dir, "the sleep", |events| {
        last_is_dispatch_of(events, "sleep")
    })
    .await;
    let cancel = scratch.run(&["cancel", &id, "--json"]);
    assert_eq!(cancel.status.code(), Some(0), "{}", stderr(&cancel));
    assert_eq!(
        json_stdout(&cancel),
        json!({"session_id": id, "status": "cancelled"})
    );
    let driven = child.wait_with_output().unwrap();
    assert_eq!(driven.status.code(), Some(6));
    let result: Value = serde_json::from_slice(&driven.stdout).unwrap();
    assert_eq!(result["exit_reason"], "cancelled");
    assert!(!scratch.path("out.txt").exists());
    let types = event_types(&trace_lines(&scratch.path("trace.jsonl")));
    assert_eq!(types.last().unwrap(), "run_finished");

    let again = scratch.run(&["cancel", &id]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("already ended"),
        "{}",
        stderr(&again)
    );
    let resumed = scratch.run(&["resume", &id, "--json"]);
    assert_eq!(
        resumed.status.code(),
        Some(6),
        "an ended session prints its stored result"
    );
    assert_eq!(json_stdout(&resumed)["exit_reason"], "cancelled");

    let dead_dir = common::scratch("cancel-dead");
    let script = dead_dir.script("s.json", sleep_then_append(30.0));
    let mut child = spawn_run(&dead_dir, &script, "sleep,append_line");
    let (id, _) = wait_for_log(&dead_dir.dir, "the sleep", |events| {
        last_is_dispatch_of(events, "sleep")
    })
    .await;
    kill_hard(&mut child);
    let cancel = dead_dir.run(&["cancel", &id, "--json"]);
    assert_eq!(json_stdout(&cancel)["status"], "cancelled");
    let listed = dead_dir.run(&["sessions", "--status", "cancelled", "--json"]);
    assert_eq!(json_stdout(&listed).as_array().unwrap().len(), 1);
}

#[test]
fn sessions_and_show_print_what_the_contract_says() {
    let scratch = scratch("listing");
    let mut ids = Vec::new();
    for _ in 0..2 {
        let run = run_calculator(&scratch, &[]);
        ids.push(json_stdout(&run)["session_id"].as_str().unwrap().to_owned());
        std::thread::sleep(Duration::from_millis(3));
    }
    let model = format!("scripted:{}", scratch.path("calc.json").display());
    let failed = scratch.run(&["run", "t", "--model", &model, "--max-steps", "1", "--json"]);
    assert_eq!(failed.status.code(), Some(3));
    ids.push(
        json_stdout(&failed)["session_id"]
            .as_str()
            .unwrap()
            .to_owned(),
    );

    let listed = json_stdout(&scratch.run(&["sessions", "--json"]));
    let rows = listed.as_array().unwrap();
    let listed_ids: Vec<&str> = rows
        .iter()
        .map(|r| r["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed_ids,
        [ids[2].as_str(), ids[1].as_str(), ids[0].as_str()],
        "newest first"
    );
    let keys: Vec<&String> = rows[0].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["session_id", "status", "task", "created_at", "updated_at"]
    );
    assert_eq!(rows[0]["status"], "failed");
    assert_eq!(rows[1]["status"], "finished");
    assert_eq!(rows[1]["task"], CALCULATOR_TASK);
    let finished = json_stdout(&scratch.run(&["sessions", "--status", "finished", "--json"]));
    assert_eq!(finished.as_array().unwrap().len(), 2);
    let bad = scratch.run(&["sessions", "--status", "sleeping"]);
    assert_eq!(bad.status.code(), Some(2));

    let shown = json_stdout(&scratch.run(&["show", &ids[0], "--json"]));
    let keys: Vec<&String> = shown.as_object().unwrap().keys().collect();
    // The published keys, and the agents issue's additions (null for a
    // session of no declared agent).
    assert_eq!(
        keys,
        [
            "session_id",
            "status",
            "task",
            "agent",
            "definition_digest",
            "events"
        ]
    );
    assert!(shown["agent"].is_null() && shown["definition_digest"].is_null());
    assert_eq!(shown["status"], "finished");
    let seqs: Vec<u64> = shown["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "log order"
    );
    assert_eq!(shown["events"][0]["kind"]["type"], "session_started");

    let human = stdout(&scratch.run(&["show", &ids[0]]));
    assert!(human.contains("action_completed"), "{human}");
    assert!(human.contains("observing -> thinking"), "{human}");
    assert!(human.contains("calculator"), "{human}");

    for command in ["show", "resume", "cancel"] {
        let unknown = scratch.run(&[command, "no-such-session"]);
        assert_eq!(unknown.status.code(), Some(2), "{command}");
        assert!(
            stderr(&unknown).contains("unknown session id `no-such-session`"),
            "{command}: {}",
            stderr(&unknown)
        );
    }
}

#[test]
fn unusable_stores_are_refused_and_left_unmodified() {
    let scratch = scratch("bad-store");
    let script = scratch.script("calc.json", calculator_script());
    let model = format!("scripted:{}", script.display());
    let corrupt = scratch.path("corrupt.db");
    std::fs::write(
        &corrupt,
        b"this is not a database, it only pretends to be one....",
    )
    .unwrap();
    let before = std::fs::read(&corrupt).unwrap();
    let url = format!("sqlite://{}", corrupt.display());
    for args in [
        vec!["run", "t", "--model", &model, "--store", &url, "--json"],
        vec!["sessions", "--store", &url],
        vec!["show", "x", "--store", &url],
    ] {
        let output = scratch.run(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&output).contains("not an agent store"),
            "{}",
            stderr(&output)
        );
        assert_eq!(stdout(&output), "");
    }
    assert_eq!(std::fs::read(&corrupt).unwrap(), before);

    let run = scratch.run(&[
        "run",
        "t",
        "--model",
        &model,
        "--tools",
        "calculator",
        "--json",
    ]);
    assert_eq!(run.status.code(), Some(0));
    let db = scratch.path(".agent/agent.db");
    rusqlite::Connection::open(&db)
        .unwrap()
        .pragma_update(None, "user_version", 42)
        .unwrap();
    let newer = scratch.run(&["sessions", "--json"]);
    assert_eq!(newer.status.code(), Some(2));
    assert!(
        stderr(&newer).contains("newer version"),
        "{}",
        stderr(&newer)
    );

    let env_store = scratch.path("elsewhere.db");
    let output = scratch
        .command()
        .env("AGENT_STORE", format!("sqlite://{}", env_store.display()))
        .args([
            "run",
            "t",
            "--model",
            &model,
            "--tools",
            "calculator",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(env_store.exists(), "AGENT_STORE chooses the store");
}
