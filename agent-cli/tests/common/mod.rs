//! Helpers for black-box tests that run the built `agent` binary: the generic
//! ones come from `agent_testkit::cli`; these read the default store.

#![allow(
    dead_code,
    unused_imports,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::Path;

pub use agent_testkit::cli::{
    CALCULATOR_TASK, Scratch, calculator_script, event_types, json_stdout, kill_hard,
    run_calculator, stderr, stdout, trace_lines,
};

/// A scratch directory for the `agent` binary of this package.
pub fn scratch(name: &str) -> Scratch {
    Scratch::new(env!("CARGO_BIN_EXE_agent"), name)
}

/// Polls the default store of `dir` until `done` holds for the first session's log.
pub async fn wait_for_log(
    dir: &Path,
    what: &str,
    done: impl Fn(&[agent::event::Event]) -> bool,
) -> (String, Vec<agent::event::Event>) {
    use agent::store::{EventLog, SessionIndex};
    let db = dir.join(".agent/agent.db");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Ok(store) = agent::store::SqliteStore::open_existing(&db)
            && let Ok(sessions) = store.sessions().await
            && let Some(first) = sessions.first()
            && let Ok(events) = store.load(&first.session_id).await
            && done(&events)
        {
            return (first.session_id.clone(), events);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The stored log of a session in the default store of `dir`.
pub async fn load_log(dir: &Path, session_id: &str) -> Vec<agent::event::Event> {
    use agent::store::{EventLog, SessionIndex};
    let store = agent::store::SqliteStore::open_existing(dir.join(".agent/agent.db")).unwrap();
    store.load(session_id).await.unwrap()
}

/// Whether the last event is the dispatch of a call to `tool`.
pub fn last_is_dispatch_of(events: &[agent::event::Event], tool: &str) -> bool {
    matches!(
        events.last().map(|e| &e.kind),
        Some(agent::event::EventKind::ActionDispatched { call }) if call.tool_name == tool
    )
}
