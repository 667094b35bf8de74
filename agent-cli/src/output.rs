//! Writing to stdout: a closed pipe (`agent … | head`) ends output quietly.

use std::io::{self, Write};

use serde::Serialize;

use crate::error::CliError;

/// Writes `text` and a newline to stdout; a closed pipe is not an error.
pub fn print_line(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Prints `text`, turning a write failure into an internal error.
pub fn print(text: &str) -> Result<(), CliError> {
    print_line(text).map_err(|err| CliError::Internal(format!("cannot write to stdout: {err}")))
}

/// Prints `value` as one line of JSON.
pub fn print_json(value: &impl Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string(value)
        .map_err(|err| CliError::Internal(format!("cannot serialise the output: {err}")))?;
    print(&text)
}

/// Milliseconds since the Unix epoch as RFC 3339 text.
pub fn timestamp(millis: u64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(millis);
    humantime::format_rfc3339_millis(time).to_string()
}
