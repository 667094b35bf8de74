//! A fleet on one PostgreSQL with its default `max_connections = 100`: twenty
//! `agent worker`s and `agent serve` run forty sessions to their ends, and the
//! server keeps room for one more client (`psql`) the whole time.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

/// A throw-away PostgreSQL cluster of `scripts/pg-cluster.sh`, stopped when dropped.
struct Cluster {
    dir: PathBuf,
    url: String,
}

impl Cluster {
    /// A cluster with `max_connections`; `None` (after saying so) where
    /// PostgreSQL cannot be started and this is not CI.
    fn start(dir: &Path, max_connections: u32) -> Option<Self> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/pg-cluster.sh");
        let output = Command::new(&script)
            .arg("start")
            .arg(dir)
            .env("PG_MAX_CONNECTIONS", max_connections.to_string())
            .output()
            .unwrap();
        if !output.status.success() {
            let why = String::from_utf8_lossy(&output.stderr).into_owned();
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must be able to start PostgreSQL: {why}"
            );
            eprintln!("skipped: cannot start PostgreSQL here: {why}");
            return None;
        }
        Some(Self {
            dir: dir.to_path_buf(),
            url: String::from_utf8(output.stdout).unwrap().trim().to_owned(),
        })
    }

    /// One value from `psql`, or why it could not connect.
    fn psql(&self, query: &str) -> Result<String, String> {
        let output = Command::new("psql")
            .args([self.url.as_str(), "-Atc", query])
            .output()
            .unwrap();
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/pg-cluster.sh");
        let _ = Command::new(script).arg("stop").arg(&self.dir).status();
    }
}

/// Processes killed when dropped.
struct Fleet(Vec<Child>);

impl Drop for Fleet {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn twenty_workers_and_a_server_fit_a_default_postgresql() {
    let scratch = scratch("fleet");
    let pg_dir = std::env::temp_dir().join(format!("agent-fleet-pg-{}", std::process::id()));
    let Some(cluster) = Cluster::start(&pg_dir, 100) else {
        return;
    };
    assert_eq!(cluster.psql("SHOW max_connections").unwrap(), "100");
    let store = cluster.url.clone();
    let mut fleet = Fleet(Vec::new());
    let serve_log = scratch.path("serve.log");
    fleet.0.push(
        scratch
            .command()
            .args(["serve", "--listen", "127.0.0.1:0", "--store", &store])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&serve_log).unwrap())
            .spawn()
            .unwrap(),
    );
    let mut logs = vec![serve_log];
    for n in 0..20 {
        let log = scratch.path(&format!("worker-{n}.log"));
        fleet.0.push(
            scratch
                .command()
                .args(["worker", "--store", &store, "--name", &format!("w{n}")])
                .args(["--lease-secs", "5"])
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap(),
        );
        logs.push(log);
    }
    let script = scratch.script(
        "steps.json",
        json!([
            {"type": "tool_call", "tool_name": "calculator",
             "arguments": {"left": 6, "operation": "multiply", "right": 7}},
            {"type": "tool_call", "tool_name": "sleep", "arguments": {"seconds": 0.2}},
            {"type": "finish", "answer": "42"}
        ]),
    );
    let model = format!("scripted:{}", script.display());
    let mut ids = Vec::new();
    let mut most = 0u32;
    for n in 0..40 {
        let output = scratch.run(&[
            "submit",
            &format!("task {n}"),
            "--model",
            &model,
            "--tools",
            "calculator,sleep",
            "--store",
            &store,
            "--json",
        ]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        ids.push(
            json_stdout(&output)["session_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        most = most.max(clients(&cluster));
    }
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        most = most.max(clients(&cluster));
        let finished = cluster
            .psql("SELECT count(*) FROM agent.sessions WHERE status = 'finished'")
            .unwrap();
        if finished == "40" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{finished} of 40 sessions finished; logs:\n{}",
            logs.iter()
                .map(|log| std::fs::read_to_string(log).unwrap_or_default())
                .collect::<String>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for id in &ids {
        let output = scratch.run(&["wait", id, "--store", &store, "--json", "--timeout", "30"]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(json_stdout(&output)["answer"], "42");
    }
    for log in &logs {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        assert!(
            !text.contains("too many clients"),
            "{}: {text}",
            log.display()
        );
    }
    assert!(
        most <= 96,
        "the fleet held {most} connections: no room left for psql"
    );
    eprintln!("most client connections at once: {most} (of 100, 3 reserved)");
}

/// Client connections the server holds now (this query's own included).
fn clients(cluster: &Cluster) -> u32 {
    cluster
        .psql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
        .unwrap_or_else(|err| panic!("psql could not connect: {err}"))
        .parse()
        .unwrap()
}
