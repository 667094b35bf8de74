//! What the commands that start or drive sessions (`run`, `submit`,
//! `resume`, `send`) share: the directory relative flags are taken from, a new
//! session's configuration (a declared agent's with the flags on top, or the
//! flags'), and the session options of a run printed for a person — its
//! sinks, its streamed text, its status line, how long it waits for a store.

use std::sync::Arc;

use agent::delta::{DeltaSink, IgnoreDeltas};
use agent::sink::EventSink;
use agent_runtime::{Agents, SessionConfig, SessionOptions};
use std::path::Path;

use crate::cli::RunFlags;
use crate::console::console;
use crate::error::CliError;
use crate::progress::Progress;
use crate::screen::{Screen, streams_by_default};

/// How long a run in a terminal waits for a store that cannot take a commit
/// (a restarting server, a full disk) before it stops and says so; workers
/// wait longer.
const TERMINAL_STORE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

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
