//! `agent submit`, `agent worker`, `agent wait` and `agent queue` as real
//! processes, on SQLite and on PostgreSQL: three workers and fifty sessions, one
//! worker killed with SIGKILL in the middle of tool calls; a worker that stops on
//! SIGTERM; a call of a tool no worker runs, waiting in plain sight; a session
//! that pauses for approval on a worker and continues on one.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime};

use agent_testkit::postgres::{fresh_database, test_url};
use common::*;
use serde_json::{Value, json};

/// The store of a test on SQLite, in its scratch directory.
fn sqlite_url(scratch: &Scratch) -> String {
    format!("sqlite://{}", scratch.path("agent.db").display())
}

/// A running `agent worker` and the file its log goes to.
struct WorkerProcess {
    name: String,
    child: Child,
    log: PathBuf,
}

impl WorkerProcess {
    fn start(scratch: &Scratch, store: &str, name: &str, extra: &[&str]) -> Self {
        let log = scratch.path(&format!("{name}.log"));
        let child = scratch
            .command()
            .args(["worker", "--store", store, "--name", name])
            .args(["--concurrency", "20", "--lease-secs", "3"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Self {
            name: name.to_owned(),
            child,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGTERM and waits for the exit code.
    fn terminate(&mut self) -> i32 {
        let pid = rustix::process::Pid::from_child(&self.child);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "{} did not stop", self.name);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A script that sleeps, appends `line` to `out.txt` and finishes.
fn sleep_then_append(scratch: &Scratch, line: &str, seconds: f64) -> String {
    let script = scratch.script(
        &format!("{line}.json"),
        json!([
            {"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": seconds}},
            {"type": "tool_call", "tool_name": "append_line",
             "arguments": {"path": "out.txt", "line": line}},
            {"type": "finish", "answer": format!("wrote {line}")}
        ]),
    );
    format!("scripted:{}", script.display())
}

/// Submits a task with `--json`; returns the new session's id.
fn submit(scratch: &Scratch, store: &str, model: &str, tools: &str, extra: &[&str]) -> String {
    let output = scratch.run(
        &[
            &["submit", "a task", "--model", model, "--tools", tools],
            extra,
            &["--store", store, "--json"],
        ]
        .concat(),
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let printed = json_stdout(&output);
    assert_eq!(printed["status"], "queued");
    printed["session_id"].as_str().unwrap().to_owned()
}

/// `agent wait ID --json`: its exit code and RunResult.
fn wait(scratch: &Scratch, store: &str, id: &str, timeout: &str) -> (Option<i32>, Value) {
    let output = scratch.run(&["wait", id, "--store", store, "--json", "--timeout", timeout]);
    let value = serde_json::from_str(stdout(&output).trim()).unwrap_or(Value::Null);
    (output.status.code(), value)
}

/// `agent queue --json`.
fn queue(scratch: &Scratch, store: &str) -> Value {
    let output = scratch.run(&["queue", "--store", store, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    json_stdout(&output)
}

/// Polls `agent queue` until `done` holds.
fn queue_until(scratch: &Scratch, store: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let view = queue(scratch, store);
        if done(&view) {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {view}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A drive of a session by a worker, from its log: when it started and ended
/// (in Unix milliseconds; a drive of a killed worker ends when it was killed).
#[derive(Debug)]
struct DriveSpan {
    worker: String,
    start: u128,
    end: u128,
}

fn millis(stamp: &str) -> u128 {
    humantime::parse_rfc3339(stamp)
        .unwrap()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// The drives in a worker's log, by session.
fn drives(
    worker: &str,
    log: &str,
    killed_at: Option<u128>,
    spans: &mut HashMap<String, Vec<DriveSpan>>,
) {
    let mut open: HashMap<String, u128> = HashMap::new();
    for line in log.lines() {
        let Some((stamp, rest)) = line.split_once(' ') else {
            continue;
        };
        let Some(what) = rest.strip_prefix(&format!("worker {worker}: ")) else {
            continue;
        };
        let (verb, session) = match what.rsplit_once(' ') {
            Some((verb, session)) if session.len() == 36 => (verb, session),
            _ => match what.split_once(": ") {
                Some((head, _)) => match head.rsplit_once(' ') {
                    Some((verb, session)) if session.len() == 36 => (verb, session),
                    _ => continue,
                },
                None => continue,
            },
        };
        match verb {
            "driving" => {
                assert!(
                    open.insert(session.to_owned(), millis(stamp)).is_none(),
                    "{worker} drives {session} twice at once"
                );
            }
            "parked" | "ended" | "left awaiting approval" | "left" | "cannot drive" => {
                let start = open
                    .remove(session)
                    .unwrap_or_else(|| panic!("{worker}: `{line}` without a drive"));
                if verb != "left" && verb != "cannot drive" {
                    spans
                        .entry(session.to_owned())
                        .or_default()
                        .push(DriveSpan {
                            worker: worker.to_owned(),
                            start,
                            end: millis(stamp),
                        });
                }
            }
            _ => {}
        }
    }
    for (session, start) in open {
        let end =
            killed_at.unwrap_or_else(|| panic!("{worker} never ended its drive of {session}"));
        spans.entry(session).or_default().push(DriveSpan {
            worker: worker.to_owned(),
            start,
            end,
        });
    }
}

fn now_millis() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Whether the session's `append_line` call was reported interrupted.
async fn append_interrupted(store: &str, id: &str) -> bool {
    let store = agent::store::open_url(store, false).await.unwrap();
    store.load(id).await.unwrap().iter().any(|event| {
        matches!(&event.kind, agent::event::EventKind::ActionCompleted { observation }
            if observation.tool_name == "append_line" && observation.content == agent::engine::INTERRUPTED)
    })
}

async fn fifty_sessions_survive_a_killed_worker(scratch: &Scratch, store: &str) {
    let mut workers: Vec<WorkerProcess> = ["w1", "w2", "w3"]
        .iter()
        .map(|name| WorkerProcess::start(scratch, store, name, &[]))
        .collect();
    let mut ids = Vec::new();
    for n in 0..50 {
        let line = format!("line-{n:02}");
        let model = sleep_then_append(scratch, &line, 2.0);
        ids.push((
            line,
            submit(scratch, store, &model, "sleep,append_line", &[]),
        ));
    }

    let view = queue_until(scratch, store, "sleep calls running on workers", |view| {
        view["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["tool_name"] == "sleep" && !a["claimed_by"].is_null())
    });
    let mut held: BTreeMap<String, usize> = BTreeMap::new();
    for action in view["actions"].as_array().unwrap() {
        if let Some(worker) = action["claimed_by"].as_str() {
            *held.entry(worker.to_owned()).or_default() += 1;
        }
    }
    let victim_name = held.iter().max_by_key(|(_, n)| **n).unwrap().0.clone();
    let victim = workers.iter().position(|w| w.name == victim_name).unwrap();
    kill_hard(&mut workers[victim].child);
    let killed_at = now_millis();

    let mut interrupted = Vec::new();
    for (line, id) in &ids {
        let (code, result) = wait(scratch, store, id, "120");
        if code != Some(0) {
            let logs: Vec<String> = workers
                .iter()
                .flat_map(|w| w.log().lines().map(str::to_owned).collect::<Vec<_>>())
                .filter(|line| line.contains(id.as_str()) || !line.contains(" of "))
                .collect();
            panic!(
                "{id} did not finish ({code:?}: {result}); victim {victim_name}; queue {}\n{}",
                queue(scratch, store),
                logs.join("\n")
            );
        }
        assert_eq!(result["exit_reason"], "finished");
        assert_eq!(result["answer"], format!("wrote {line}"));
        if append_interrupted(store, id).await {
            interrupted.push(line.clone());
        }
    }

    let written = std::fs::read_to_string(scratch.path("out.txt")).unwrap();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for line in written.lines() {
        *counts.entry(line).or_default() += 1;
    }
    for (line, _) in &ids {
        let count = counts.get(line.as_str()).copied().unwrap_or(0);
        if interrupted.contains(line) {
            assert!(count <= 1, "{line} written {count} times");
        } else {
            assert_eq!(count, 1, "{line} written {count} times:\n{written}");
        }
    }
    assert!(counts.len() <= ids.len(), "unexpected lines:\n{written}");

    let victim_log = workers[victim].log();
    assert!(victim_log.contains("ran sleep") || victim_log.contains("driving"));
    let others: String = workers
        .iter()
        .filter(|w| w.name != victim_name)
        .map(WorkerProcess::log)
        .collect();
    assert!(others.contains("ran sleep"), "{others}");

    let mut spans: HashMap<String, Vec<DriveSpan>> = HashMap::new();
    for worker in &workers {
        let killed = (worker.name == victim_name).then_some(killed_at);
        drives(&worker.name, &worker.log(), killed, &mut spans);
    }
    assert_eq!(spans.len(), ids.len(), "every session was driven");
    for (session, mut list) in spans {
        list.sort_by_key(|span| span.start);
        for pair in list.windows(2) {
            assert!(
                pair[1].start >= pair[0].end,
                "{session} driven by {} and {} at once: {pair:?}",
                pair[0].worker,
                pair[1].worker
            );
        }
    }

    let view = queue(scratch, store);
    assert_eq!(view["sessions"], json!([]), "{view}");
    assert_eq!(view["actions"], json!([]), "{view}");

    for worker in workers.iter_mut().filter(|w| w.name != victim_name) {
        assert_eq!(worker.terminate(), 0);
        assert!(worker.log().contains("stopped after"), "{}", worker.log());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sessions_survive_a_killed_worker_on_sqlite() {
    let scratch = scratch("workers-sqlite");
    let store = sqlite_url(&scratch);
    fifty_sessions_survive_a_killed_worker(&scratch, &store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sessions_survive_a_killed_worker_on_postgres() {
    let Some(url) = test_url() else { return };
    let store = fresh_database(&url).await;
    let scratch = scratch("workers-pg");
    fifty_sessions_survive_a_killed_worker(&scratch, &store).await;
}

fn sigterm_drains_and_a_missing_tool_waits_in_sight(scratch: &Scratch, store: &str) {
    let mut picky = WorkerProcess::start(
        scratch,
        store,
        "picky",
        &["--tools", "sleep,append_line", "--drain", "10"],
    );
    let reader = scratch.script(
        "read.json",
        json!([
            {"type": "tool_call", "tool_name": "read_file", "arguments": {"path": "notes.txt"}},
            {"type": "finish", "answer": "read it"}
        ]),
    );
    std::fs::write(scratch.path("notes.txt"), "hello\n").unwrap();
    let reader = format!("scripted:{}", reader.display());
    let waiting = submit(scratch, store, &reader, "read_file", &[]);
    let view = queue_until(scratch, store, "the read_file call in the queue", |view| {
        view["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["session_id"] == waiting.as_str() && a["tool_name"] == "read_file")
    });
    let call = view["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["session_id"] == waiting.as_str())
        .unwrap();
    assert_eq!(call["claimed_by"], Value::Null, "{view}");
    let (code, _) = wait(scratch, store, &waiting, "1");
    assert_eq!(
        code,
        Some(9),
        "the session waits for a worker with read_file"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !picky.log().contains("leaves read_file") {
        assert!(Instant::now() < deadline, "{}", picky.log());
        std::thread::sleep(Duration::from_millis(50));
    }

    let model = sleep_then_append(scratch, "drained", 2.0);
    let drained = submit(scratch, store, &model, "sleep,append_line", &[]);
    queue_until(scratch, store, "the sleep call running", |view| {
        view["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["session_id"] == drained.as_str() && a["claimed_by"] == "picky")
    });
    assert_eq!(picky.terminate(), 0);
    let log = picky.log();
    assert!(log.contains("stopping: draining 1 task(s)"), "{log}");
    assert!(
        log.contains(&format!("ran sleep [call_1_1] of {drained}")),
        "{log}"
    );
    let view = queue(scratch, store);
    assert!(
        view["actions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["claimed_by"].is_null()),
        "a stopped worker holds nothing: {view}"
    );

    let _any = WorkerProcess::start(scratch, store, "any", &[]);
    let (code, result) = wait(scratch, store, &waiting, "60");
    assert_eq!((code, &result["answer"]), (Some(0), &json!("read it")));
    let (code, result) = wait(scratch, store, &drained, "60");
    assert_eq!(
        (code, &result["answer"]),
        (Some(0), &json!("wrote drained"))
    );

    let approved = submit(
        scratch,
        store,
        &sleep_then_append(scratch, "approved", 0.1),
        "sleep,append_line",
        &["--approve-tools", "append_line"],
    );
    let (code, result) = wait(scratch, store, &approved, "60");
    assert_eq!(code, Some(10), "{result}");
    let output = scratch.run(&["approve", &approved, "--store", store]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).contains("queued for a worker"));
    let (code, result) = wait(scratch, store, &approved, "60");
    assert_eq!(
        (code, &result["answer"]),
        (Some(0), &json!("wrote approved"))
    );
    let written = std::fs::read_to_string(scratch.path("out.txt")).unwrap();
    assert_eq!(written, "drained\napproved\n");
}

#[test]
fn sigterm_drains_and_a_missing_tool_waits_in_sight_on_sqlite() {
    let scratch = scratch("drain-sqlite");
    let store = sqlite_url(&scratch);
    sigterm_drains_and_a_missing_tool_waits_in_sight(&scratch, &store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_and_a_missing_tool_waits_in_sight_on_postgres() {
    let Some(url) = test_url() else { return };
    let store = fresh_database(&url).await;
    let scratch = scratch("drain-pg");
    tokio::task::spawn_blocking(move || {
        sigterm_drains_and_a_missing_tool_waits_in_sight(&scratch, &store);
    })
    .await
    .unwrap();
}

#[test]
fn resume_detach_queues_a_session_and_wait_follows_it() {
    let scratch = scratch("detach");
    let store = sqlite_url(&scratch);
    let model = sleep_then_append(&scratch, "detached", 0.1);
    let id = submit(&scratch, &store, &model, "sleep,append_line", &[]);
    let output = scratch.run(&["resume", &id, "--detach", "--store", &store, "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        json_stdout(&output),
        json!({"session_id": id, "status": "queued"})
    );
    let output = scratch.run(&[
        "resume",
        &id,
        "--detach",
        "--max-steps",
        "3",
        "--store",
        &store,
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--detach"), "{}", stderr(&output));
    let output = scratch.run(&[
        "sessions", "--status", "queued", "--store", &store, "--json",
    ]);
    assert_eq!(json_stdout(&output)[0]["session_id"], id.as_str());

    let _worker = WorkerProcess::start(&scratch, &store, "solo", &[]);
    let output = scratch.run(&["wait", &id, "--store", &store]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("resumed: taken by worker solo"), "{text}");
    assert!(text.contains("answer: wrote detached"), "{text}");
    let output = scratch.run(&["resume", &id, "--detach", "--store", &store, "--json"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(json_stdout(&output)["exit_reason"], "finished");
    let output = scratch.run(&["wait", "no-such-session", "--store", &store]);
    assert_eq!(output.status.code(), Some(2));
}

/// The pids of live processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // A zombie has done all it will do.
            let zombie = state
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            !zombie && String::from_utf8_lossy(&cmdline).contains(marker)
        })
        .collect()
}

#[test]
fn a_worker_killed_during_run_command_takes_the_command_with_it() {
    let scratch = Scratch::new(env!("CARGO_BIN_EXE_agent"), "worker-orphans");
    let store = sqlite_url(&scratch);
    let marker = format!("orphan-marker-{}", std::process::id());
    let effects = scratch.path("effects.txt");
    // The command's later effect would land two seconds after it started.
    let line = format!(
        "echo START >> {0}; sleep 2; echo END >> {0} # {marker}",
        effects.display()
    );
    let script = scratch.script(
        "command.json",
        json!([
            {"type": "tool_call", "tool_name": "run_command",
             "arguments": {"program": "sh", "args": ["-c", line]}},
            {"type": "finish", "answer": "ran it"}
        ]),
    );
    let id = submit(
        &scratch,
        &store,
        &format!("scripted:{}", script.display()),
        "run_command",
        &["--allow-cmd", "sh"],
    );
    let mut doomed = WorkerProcess::start(&scratch, &store, "doomed", &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&effects)
        .unwrap_or_default()
        .contains("START")
    {
        assert!(
            Instant::now() < deadline,
            "the command never started: {}",
            doomed.log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !processes_with(&marker).is_empty(),
        "the command is not running"
    );
    kill_hard(&mut doomed.child);
    let killed = Instant::now();
    while !processes_with(&marker).is_empty() {
        assert!(
            killed.elapsed() < Duration::from_secs(1),
            "the command outlived its worker by a second: {:?}",
            processes_with(&marker)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Another worker reports the call's outcome as unknown; the command's
    // END, due a second or two after the kill, never comes.
    let _next = WorkerProcess::start(&scratch, &store, "next", &[]);
    let (code, result) = wait(&scratch, &store, &id, "60");
    assert_eq!(code, Some(0), "{result}");
    let shown = scratch.run(&["show", &id, "--store", &store, "--json"]);
    assert!(
        stdout(&shown).contains("interrupted: outcome unknown"),
        "{}",
        stdout(&shown)
    );
    while killed.elapsed() < Duration::from_secs(4) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        std::fs::read_to_string(&effects).unwrap(),
        "START\n",
        "an effect landed after its outcome was recorded as unknown"
    );
}
