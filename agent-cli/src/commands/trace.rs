//! `agent trace show FILE`: print a trace for people; reads, never writes.

use std::fs::File;
use std::io::{self, BufReader};
use std::path::Path;

use crate::error::CliError;

/// Shows the trace at `path`. Malformed lines go to stderr with their numbers.
pub fn show(path: &Path) -> Result<u8, CliError> {
    let file = File::open(path).map_err(|err| {
        CliError::Usage(format!(
            "cannot read trace file `{}`: {err}",
            path.display()
        ))
    })?;
    let stdout = io::stdout();
    let stderr = io::stderr();
    agent::trace::show(BufReader::new(file), &mut stdout.lock(), &mut stderr.lock()).map_err(
        |err| {
            CliError::Usage(format!(
                "cannot read trace file `{}`: {err}",
                path.display()
            ))
        },
    )?;
    Ok(0)
}
