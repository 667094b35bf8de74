//! `JsonlTrace`: an `EventSink` that appends each committed event's trace lines to
//! a file, one complete JSON object per line, written and flushed per event.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use agent_core::event::Event;
use agent_core::sink::{EventSink, SinkError};

use crate::lines::trace_lines;
use crate::summary::ContentMode;

/// A trace file opened for appending.
#[derive(Debug)]
pub struct JsonlTrace {
    path: PathBuf,
    mode: ContentMode,
    file: Mutex<File>,
}

impl JsonlTrace {
    /// Opens (creating if needed) `path` for appending trace lines.
    pub fn open(path: impl AsRef<Path>, mode: ContentMode) -> std::io::Result<Self> {
        let path = path.as_ref().to_owned();
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(Self {
            path,
            mode,
            file: Mutex::new(file),
        })
    }
}

impl EventSink for JsonlTrace {
    fn publish(&self, event: &Event, step: u32) -> Result<(), SinkError> {
        let mut text = String::new();
        for line in trace_lines(event, step, self.mode) {
            text.push_str(&serde_json::Value::Object(line).to_string());
            text.push('\n');
        }
        if text.is_empty() {
            return Ok(());
        }
        let mut file = self.file.lock().map_err(|_| {
            SinkError(format!(
                "trace file `{}`: lock poisoned",
                self.path.display()
            ))
        })?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.flush())
            .map_err(|err| {
                SinkError(format!(
                    "cannot write trace file `{}`: {err}",
                    self.path.display()
                ))
            })
    }
}
