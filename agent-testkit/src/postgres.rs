//! The PostgreSQL server of the tests: `scripts/pg-cluster.sh` (run by
//! `scripts/test.sh` and `.ci/run`) starts a throw-away cluster and exports its
//! URL as `AGENT_TEST_POSTGRES_URL`. Without it a test skips on a developer's
//! machine, and fails in CI (`CI` set), where a missing service is an error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicU32, Ordering};

/// The variable that names the test server.
pub const URL_VARIABLE: &str = "AGENT_TEST_POSTGRES_URL";

/// The test server's URL; `None` (after saying so) when there is none and this
/// is not CI.
pub fn test_url() -> Option<String> {
    match std::env::var(URL_VARIABLE) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => panic!(
            "CI is set but {URL_VARIABLE} is not: .ci/run must start the throw-away PostgreSQL (scripts/pg-cluster.sh)"
        ),
        _ => {
            eprintln!("skipped: {URL_VARIABLE} is not set (scripts/pg-cluster.sh starts a server)");
            None
        }
    }
}

/// A new, empty database on the test server, and its URL.
pub async fn fresh_database(url: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "agent_test_{}_{}_{}",
        std::process::id(),
        agent_core::event::now_millis(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    drop(client);
    let _ = driver.await;
    let (base, _) = url.rsplit_once('/').unwrap();
    format!("{base}/{name}")
}

/// Every row of every table of the store's schema in the database at `url`, as
/// text: for checking what a store wrote (and did not).
pub async fn dump(url: &str) -> String {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    let mut text = String::new();
    for table in [
        "sessions",
        "events",
        "leases",
        "snapshots",
        "queue_sessions",
        "queue_actions",
        "meta",
    ] {
        let rows = client
            .simple_query(&format!("SELECT t::text FROM agent.{table} t"))
            .await
            .unwrap();
        for message in rows {
            if let tokio_postgres::SimpleQueryMessage::Row(row) = message {
                text.push_str(row.get(0).unwrap_or_default());
                text.push('\n');
            }
        }
    }
    drop(client);
    let _ = driver.await;
    text
}
