//! SIGINT and SIGTERM for commands that drive a session in this process (`run`,
//! `resume`): the step in flight is abandoned — as a crash would, so everything
//! committed stays and nothing half-done is recorded — the MCP servers are
//! stopped, and the command says how to continue and exits 130 or 143.

use agent::store::{EventLog, StoreError};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::error::CliError;

/// Listeners for the two stop signals, installed before the run starts.
pub struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
}

/// Which stop signal arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT (Ctrl-C): exit 130.
    Interrupt,
    /// SIGTERM: exit 143.
    Terminate,
}

impl Stop {
    /// The exit code a shell gives a process this signal ended: 128 + its number.
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Interrupt => 130,
            Self::Terminate => 143,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Interrupt => "SIGINT",
            Self::Terminate => "SIGTERM",
        }
    }
}

impl StopSignals {
    /// Starts listening; from now on the signals no longer end the process.
    pub fn listen() -> Result<Self, CliError> {
        let listen = |kind: SignalKind, name: &str| {
            signal(kind)
                .map_err(|err| CliError::Internal(format!("cannot listen for {name}: {err}")))
        };
        Ok(Self {
            interrupt: listen(SignalKind::interrupt(), "SIGINT")?,
            terminate: listen(SignalKind::terminate(), "SIGTERM")?,
        })
    }

    /// Completes when the first stop signal arrives.
    pub async fn next(&mut self) -> Stop {
        tokio::select! {
            _ = self.interrupt.recv() => Stop::Interrupt,
            _ = self.terminate.recv() => Stop::Terminate,
        }
    }
}

/// Tells the user on stderr what a stop left behind and returns the exit code.
pub async fn report_stop(stop: Stop, store: &dyn EventLog, session_id: &str) -> u8 {
    let message = match store.load(session_id).await {
        Ok(events) => format!(
            "stopped by {}: session {session_id} keeps its {} committed event(s) and can be continued with: agent resume {session_id}",
            stop.name(),
            events.len()
        ),
        Err(StoreError::NotFound(_)) => format!(
            "stopped by {} before the session was recorded; nothing was stored",
            stop.name()
        ),
        Err(err) => format!(
            "stopped by {}; the session {session_id} could not be read back ({err}); try: agent resume {session_id}",
            stop.name()
        ),
    };
    eprintln!("agent: {message}");
    stop.exit_code()
}
