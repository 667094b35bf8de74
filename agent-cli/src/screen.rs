//! What `agent run`, `resume` and `send` print for a person, in one place: the
//! console's lines and, when the run streams, each step's text as the model
//! writes it (`step N  ~> …`). A retried or fallen-back call starts its text
//! over; what was already shown is not printed again — only what goes beyond
//! it, or, where the new attempt says something else, the new text on a line
//! of its own marked `(again)`.

use std::io::{self, IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};

use agent::delta::{DeltaSink, ModelDelta};

use crate::output::print_line;
use crate::progress::Progress;

/// The text streamed for the step on screen.
#[derive(Debug, Default)]
struct Streamed {
    /// The step whose text is on screen.
    step: Option<u32>,
    /// The text shown for it.
    shown: String,
    /// How much of the current attempt has arrived (bytes); that much
    /// equals the start of `shown`.
    attempt_len: usize,
    /// Whether streamed text ends the screen without its newline.
    open: bool,
}

/// Stdout for a person, shared by the console and the streamed text.
pub struct Screen {
    progress: Option<Arc<Progress>>,
    streamed: Mutex<Streamed>,
}

impl Screen {
    /// A screen printing around `progress`'s status line, if any.
    pub fn new(progress: Option<Arc<Progress>>) -> Self {
        Self {
            progress,
            streamed: Mutex::new(Streamed::default()),
        }
    }

    /// Prints `text` as whole lines, after ending any streamed text.
    pub fn line(&self, text: &str) -> io::Result<()> {
        let mut streamed = self.lock();
        self.end_text(&mut streamed)?;
        match &self.progress {
            Some(progress) => progress.suspend(|| print_line(text)),
            None => print_line(text),
        }
    }

    /// Whether the text streamed for `step` is `answer` (so the console need
    /// not print it again).
    pub fn showed(&self, step: u32, answer: &str) -> bool {
        let streamed = self.lock();
        streamed.step == Some(step) && streamed.shown.trim() == answer.trim()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Streamed> {
        self.streamed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends streamed text with a newline and lets the status line back.
    fn end_text(&self, streamed: &mut Streamed) -> io::Result<()> {
        if !streamed.open {
            return Ok(());
        }
        streamed.open = false;
        let written = if streamed.shown.ends_with('\n') {
            Ok(())
        } else {
            write_out("\n")
        };
        if let Some(progress) = &self.progress {
            progress.release();
        }
        written
    }

    fn show(&self, step: u32, delta: ModelDelta) -> io::Result<()> {
        let mut streamed = self.lock();
        if streamed.step != Some(step) {
            self.end_text(&mut streamed)?;
            *streamed = Streamed {
                step: Some(step),
                ..Streamed::default()
            };
        }
        let piece = match delta {
            ModelDelta::Started => {
                streamed.attempt_len = 0;
                return Ok(());
            }
            ModelDelta::Text(piece) => piece,
        };
        let start = streamed.attempt_len;
        streamed.attempt_len += piece.len();
        let shown = streamed.shown.len();
        if start >= shown {
            return self.append(&mut streamed, step, &piece, false);
        }
        // Part of this piece repeats what an earlier attempt showed.
        let overlap = (shown - start).min(piece.len());
        let repeats = streamed.shown.as_bytes().get(start..start + overlap)
            == piece.as_bytes().get(..overlap);
        if repeats {
            return match piece.get(overlap..).filter(|rest| !rest.is_empty()) {
                Some(rest) => self.append(&mut streamed, step, rest, false),
                None => Ok(()),
            };
        }
        // This attempt says something else: show it whole, once.
        let text = format!("{}{piece}", streamed.shown.get(..start).unwrap_or_default());
        self.end_text(&mut streamed)?;
        streamed.shown.clear();
        self.append(&mut streamed, step, &text, true)
    }

    /// Prints `piece` after the text on screen, with the step's label first
    /// (marked `(again)` when it starts a different attempt's text over).
    fn append(
        &self,
        streamed: &mut Streamed,
        step: u32,
        piece: &str,
        again: bool,
    ) -> io::Result<()> {
        if !streamed.open {
            if let Some(progress) = &self.progress {
                progress.hold();
            }
            let again = if again { "(again) " } else { "" };
            write_out(&format!("step {step:<3} ~> {again}"))?;
            streamed.open = true;
        }
        streamed.shown.push_str(piece);
        write_out(piece)
    }
}

impl DeltaSink for Screen {
    fn delta(&self, _session_id: &str, step: u32, delta: ModelDelta) {
        // A closed stdout ends what is shown, not the run; the result is
        // printed (or not) the same way at the end.
        let _ = self.show(step, delta);
    }
}

/// Writes `text` to stdout at once; a closed pipe is not an error.
fn write_out(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Whether a run streams by default: when its text is read on a terminal.
pub fn streams_by_default(json: bool) -> bool {
    !json && io::stdout().is_terminal()
}
