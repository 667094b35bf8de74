//! Group commit loses no acknowledged event: `kill -9` during a 50-session run,
//! then every session's log must hold every event its caller was told is committed.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use agent::store::EventLog;
use agent::store::SqliteStore;

#[tokio::test]
async fn a_killed_process_loses_no_acknowledged_event() {
    let dir = std::env::temp_dir().join(format!("group-commit-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("bench.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-bench"))
        .args([
            "run",
            "--sessions",
            "50",
            "--concurrency",
            "50",
            "--tool-steps",
            "400",
        ])
        .args([
            "--operation",
            "add",
            "--store",
            "sqlite",
            "--ack-log",
            "--db",
        ])
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked: Vec<(String, u64, String)> = Vec::new();
    while acked.len() < 3000 {
        let Some(Ok(line)) = lines.next() else {
            panic!("the run ended before the kill ({} acks)", acked.len());
        };
        let parts: Vec<&str> = line.split(' ').collect();
        if let ["ack", session, seq, kind] = parts[..] {
            acked.push((session.to_owned(), seq.parse().unwrap(), kind.to_owned()));
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    for line in lines.map_while(Result::ok) {
        let parts: Vec<&str> = line.split(' ').collect();
        if let ["ack", session, seq, kind] = parts[..] {
            acked.push((session.to_owned(), seq.parse().unwrap(), kind.to_owned()));
        }
    }

    let store = SqliteStore::open_existing(&db).unwrap();
    let mut logs = HashMap::new();
    for (session, _, _) in &acked {
        if !logs.contains_key(session) {
            logs.insert(session.clone(), store.load(session).await.unwrap());
        }
    }
    assert!(logs.len() > 1, "acknowledgements came from many sessions");
    for (session, log) in &logs {
        let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
        assert_eq!(
            seqs,
            (1..=log.len() as u64).collect::<Vec<_>>(),
            "{session} is gap-free"
        );
    }
    for (session, seq, kind) in &acked {
        let log = &logs[session];
        let event = log
            .get(usize::try_from(*seq).unwrap() - 1)
            .unwrap_or_else(|| panic!("{session}: acknowledged seq {seq} was lost"));
        assert_eq!(event.kind.name(), kind, "{session} seq {seq}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
