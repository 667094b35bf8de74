//! `agent trace show FILE` prints a trace for people; `agent trace stats` its
//! figures. Both read, never write.

use std::fs::File;
use std::io::{self, BufReader};
use std::path::Path;

use serde_json::Value;

use crate::cli::TraceStatsArgs;
use crate::error::CliError;
use crate::output::{print, print_json};
use crate::store;

/// Shows the trace at `path`. Malformed lines go to stderr with their numbers; a
/// file without a single trace line is a usage error (exit 2).
pub fn show(path: &Path) -> Result<u8, CliError> {
    let file = File::open(path).map_err(|err| {
        CliError::Usage(format!(
            "cannot read trace file `{}`: {err}",
            path.display()
        ))
    })?;
    let stdout = io::stdout();
    let stderr = io::stderr();
    let report = agent::trace::show(BufReader::new(file), &mut stdout.lock(), &mut stderr.lock())
        .map_err(|err| {
        CliError::Usage(format!(
            "cannot read trace file `{}`: {err}",
            path.display()
        ))
    })?;
    if report.shown == 0 {
        return Err(CliError::Usage(format!(
            "`{}` holds no trace line ({} malformed); write one with `agent run --trace FILE`",
            path.display(),
            report.malformed
        )));
    }
    Ok(0)
}

/// Prints the figures of a trace file or a stored session.
pub async fn stats(args: TraceStatsArgs) -> Result<u8, CliError> {
    let lines = match (&args.file, &args.session) {
        (Some(path), _) => read_lines(path)?,
        (None, Some(session)) => {
            let store = store::open_for(&args.store.store, session).await?;
            let events = store.load(session).await?;
            agent::trace::lines_of_events(session, &events)
        }
        (None, None) => {
            return Err(CliError::Usage("give a trace file or --session ID".into()));
        }
    };
    let runs = agent::trace::stats(&lines);
    if args.json {
        print_json(
            &runs
                .iter()
                .map(agent::trace::RunStats::to_json)
                .collect::<Vec<_>>(),
        )?;
    } else if runs.is_empty() {
        print("no runs in the trace")?;
    } else {
        for run in &runs {
            print(run.render().trim_end())?;
        }
    }
    Ok(0)
}

/// The parseable lines of a trace file; malformed ones are counted on stderr.
fn read_lines(path: &Path) -> Result<Vec<Value>, CliError> {
    let text = std::fs::read_to_string(path).map_err(|err| {
        CliError::Usage(format!(
            "cannot read trace file `{}`: {err}",
            path.display()
        ))
    })?;
    let mut malformed = 0;
    let lines: Vec<Value> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .filter_map(|line| {
            let parsed = serde_json::from_str::<Value>(line)
                .ok()
                .filter(Value::is_object);
            malformed += usize::from(parsed.is_none());
            parsed
        })
        .collect();
    if malformed > 0 {
        eprintln!(
            "agent: {malformed} malformed line(s) in `{}` skipped",
            path.display()
        );
    }
    Ok(lines)
}
