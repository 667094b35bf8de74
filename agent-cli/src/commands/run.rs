//! `agent run`: start a session for a task and drive it to its end.

use std::io::{self, Write};
use std::sync::Arc;

use agent::{EventSink, RunResult};

use crate::cli::RunArgs;
use crate::config::RunConfig;
use crate::console::{Console, print_outcome};
use crate::error::CliError;

/// Runs the task; returns the exit code of its RunResult.
pub async fn run(args: RunArgs) -> Result<u8, CliError> {
    let config = RunConfig::from_flags(&args.flags)?;
    let console = (!args.flags.json).then(|| Arc::new(Console) as Arc<dyn EventSink>);
    let engine = config.engine(console)?;
    let recorded = serde_json::to_value(&config)
        .map_err(|err| CliError::Internal(format!("cannot record the configuration: {err}")))?;
    let result = engine
        .run(args.task, recorded)
        .await
        .map_err(|err| CliError::Internal(err.to_string()))?;
    report(&result, args.flags.json)?;
    Ok(u8::try_from(result.exit_code()).unwrap_or(1))
}

/// Prints a RunResult: one JSON value with `--json`, a readable summary without.
pub fn report(result: &RunResult, json: bool) -> Result<(), CliError> {
    let written = if json {
        let text = serde_json::to_string(result)
            .map_err(|err| CliError::Internal(format!("cannot serialise the result: {err}")))?;
        let mut out = io::stdout().lock();
        writeln!(out, "{text}").and_then(|()| out.flush())
    } else {
        print_outcome(result)
    };
    match written {
        Err(err) if err.kind() != io::ErrorKind::BrokenPipe => {
            Err(CliError::Internal(format!("cannot write to stdout: {err}")))
        }
        _ => Ok(()),
    }
}
