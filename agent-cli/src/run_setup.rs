//! What the commands that start or drive sessions (`run`, `submit`,
//! `resume`, `send`) share: the directory relative flags are taken from, a new
//! session's configuration (a declared agent's with the flags on top, or the
//! flags'), and the session options of a run printed for a person — its
//! sinks, its streamed text, its status line, how long it waits for a store —
//! and driving a session in the foreground until it stops or a signal comes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agent::delta::{DeltaSink, IgnoreDeltas};
use agent::engine::EngineError;
use agent::result::RunResult;
use agent::sink::EventSink;
use agent::store::Store;
use agent_runtime::{Agents, Session, SessionConfig, SessionOptions};
use serde_json::Value;
use std::path::Path;

use crate::cli::RunFlags;
use crate::console::{console, report};
use crate::error::CliError;
use crate::interrupt::{StopSignals, report_stop};
use crate::progress::Progress;
use crate::screen::{Screen, streams_by_default};

/// How long a run in a terminal waits for a store that cannot take a commit
/// (a restarting server, a full disk) before it stops and says so; workers
/// wait longer.
const TERMINAL_STORE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// What a foreground command asks of the engine.
pub enum Drive<'a> {
    /// A new session `session_id` for `task`, recording `config`.
    Run {
        /// The new session's id.
        session_id: &'a str,
        /// Its task.
        task: String,
        /// The configuration it records.
        config: Value,
    },
    /// Continue stored session `session_id`.
    Resume {
        /// The session.
        session_id: &'a str,
    },
    /// The next turn of session `session_id`: `message`, with `config` when
    /// the flags changed it.
    Send {
        /// The session.
        session_id: &'a str,
        /// The user's message.
        message: &'a str,
        /// The configuration the turn records, if changed.
        config: Option<Value>,
    },
}

/// The engine driving a session, until it stops.
type Driving<'e> = Pin<Box<dyn Future<Output = Result<RunResult, EngineError>> + 'e>>;

/// Opens the session `config` describes on `store` with the sinks of `flags`,
/// drives it as `drive` says until it stops or a stop signal comes (Ctrl-C,
/// SIGTERM), and reports: the RunResult's exit code, or what the stop left of
/// the session.
pub async fn drive_session(
    config: &SessionConfig,
    store: &Arc<dyn Store>,
    flags: &RunFlags,
    drive: Drive<'_>,
) -> Result<u8, CliError> {
    let mut stops = StopSignals::listen()?;
    let (options, progress) = sinks(flags);
    let session = Session::open(config, store.clone(), options).await?;
    let engine = &session.engine;
    let (session_id, driving): (&str, Driving<'_>) = match drive {
        Drive::Run {
            session_id,
            task,
            config,
        } => (
            session_id,
            Box::pin(engine.run_as(session_id, task, config)),
        ),
        Drive::Resume { session_id } => (session_id, Box::pin(engine.resume(session_id))),
        Drive::Send {
            session_id,
            message,
            config,
        } => (
            session_id,
            Box::pin(engine.send(session_id, message, config)),
        ),
    };
    let outcome = tokio::select! {
        outcome = driving => Ok(outcome),
        stop = stops.next() => Err(stop),
    };
    session.shutdown().await;
    if let Some(progress) = progress {
        progress.finish();
    }
    match outcome {
        Ok(outcome) => report(&outcome?, flags.json),
        Err(stop) => Ok(report_stop(stop, store.as_ref(), session_id).await),
    }
}

/// The current directory, which relative flags are relative to.
pub fn current_dir() -> Result<std::path::PathBuf, CliError> {
    std::env::current_dir()
        .map_err(|err| CliError::Usage(format!("cannot read the current directory: {err}")))
}

/// The session options of a run printed for a person (or not, with `--json`),
/// and its status line (on a terminal, unless `--quiet`). The run streams —
/// its text printed as it is written — with `--stream`, or by default when
/// stdout is a terminal, unless `--no-stream`; with `--json` a streaming run
/// still prints only its RunResult.
pub fn sinks(flags: &RunFlags) -> (SessionOptions, Option<Arc<Progress>>) {
    let progress = Progress::start(flags.json, flags.quiet);
    let streams = !flags.no_stream && (flags.stream || streams_by_default(flags.json));
    let mut sinks: Vec<Arc<dyn EventSink>> = Vec::new();
    let deltas = if flags.json {
        streams.then(|| Arc::new(IgnoreDeltas) as Arc<dyn DeltaSink>)
    } else {
        let screen = Arc::new(Screen::new(progress.clone()));
        sinks.push(console(Arc::clone(&screen)));
        streams.then_some(screen as Arc<dyn DeltaSink>)
    };
    if let Some(progress) = &progress {
        sinks.push(Arc::clone(progress) as Arc<dyn EventSink>);
    }
    let options = SessionOptions {
        sinks,
        deltas,
        store_patience: Some(TERMINAL_STORE_PATIENCE),
        ..SessionOptions::default()
    };
    (options, progress)
}

/// The configuration of a new session: the declared agent `--agent` names
/// with the flags on top, or the flags alone.
pub fn new_session_config(flags: &RunFlags, cwd: &Path) -> Result<SessionConfig, CliError> {
    match &flags.agent {
        Some(name) => {
            let agents = Agents::find(flags.agents.file.as_deref(), cwd)?;
            Ok(SessionConfig::for_agent(
                agents.get(name)?,
                &flags.spec,
                cwd,
            )?)
        }
        None => Ok(SessionConfig::resolve(&flags.spec, None, cwd)?),
    }
}
