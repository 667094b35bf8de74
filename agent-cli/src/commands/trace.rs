//! `agent trace show FILE`: print a trace for people; reads, never writes.

use std::fs::File;
use std::io::{self, BufReader};
use std::path::Path;

use crate::error::CliError;

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
