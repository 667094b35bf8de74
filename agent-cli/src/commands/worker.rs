//! `agent worker`: claim and do queued sessions and tool calls until SIGINT or
//! SIGTERM, then drain and exit 0. Its log goes to stderr, one timestamped line
//! per thing it does.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agent::cancel::Cancellation;
use agent_runtime::{Worker, WorkerLog};
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::WorkerArgs;
use crate::error::CliError;
use crate::store;

/// Runs a worker on the store until a stop signal.
pub async fn worker(args: WorkerArgs) -> Result<u8, CliError> {
    let store = store::open(&args.store.store).await?;
    crate::confinement::note_for_worker();
    let shutdown = shutdown_on_signals()?;
    let log = stderr_log();
    // A hangup (a closed terminal, a reload by an init system) must not kill
    // a worker mid-call: it has nothing to reload, and SIGTERM drains it.
    let mut hangups = signal(SignalKind::hangup())
        .map_err(|err| CliError::Internal(format!("cannot listen for SIGHUP: {err}")))?;
    let said = Arc::clone(&log);
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            said("SIGHUP ignored: a worker has nothing to reload; SIGTERM stops it");
        }
    });
    let mut builder = Worker::builder(store)
        .concurrency(usize::from(args.concurrency))
        .claim_ttl(Duration::from_secs_f64(args.lease_secs))
        .drain(Duration::from_secs_f64(args.drain))
        .shutdown(shutdown)
        .log(log);
    if let Some(name) = args.name {
        builder = builder.name(name);
    }
    if let Some(tools) = args.tools {
        builder = builder.only_tools(tools);
    }
    builder.build().run().await;
    Ok(0)
}

/// A shutdown signal raised by the first SIGINT or SIGTERM.
pub fn shutdown_on_signals() -> Result<Cancellation, CliError> {
    let shutdown = Cancellation::new();
    let mut terminate = signal(SignalKind::terminate())
        .map_err(|err| CliError::Internal(format!("cannot listen for SIGTERM: {err}")))?;
    let mut interrupt = signal(SignalKind::interrupt())
        .map_err(|err| CliError::Internal(format!("cannot listen for SIGINT: {err}")))?;
    let stop = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        stop.cancel();
    });
    Ok(shutdown)
}

/// Log lines on stderr, each with its time.
pub fn stderr_log() -> WorkerLog {
    Arc::new(|line: &str| {
        eprintln!(
            "{} {line}",
            humantime::format_rfc3339_millis(SystemTime::now())
        );
    })
}
