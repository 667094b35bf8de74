//! The live status line of `agent run`, `resume` and `wait` on a terminal: the
//! step, what the run is doing (thinking, or the tool it waits for, with its
//! elapsed time), tokens so far and the run's elapsed time — on stderr, only when
//! stderr is a terminal and neither `--json` nor `--quiet` is given.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agent::event::{Event, EventKind};
use agent::sink::{EventSink, SinkError};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// How often the line is redrawn.
const TICK: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
struct Status {
    step: u32,
    /// What the run waits for and since when.
    doing: Option<(String, Instant)>,
    input_tokens: u64,
    output_tokens: u64,
}

impl Status {
    fn line(&self) -> String {
        let doing = match &self.doing {
            Some((what, since)) => format!("{what} ({:.1}s)", since.elapsed().as_secs_f64()),
            None => "starting".into(),
        };
        format!(
            "step {} · {doing} · {} in / {} out tokens",
            self.step, self.input_tokens, self.output_tokens
        )
    }
}

/// The status line, while a run is followed.
pub struct Progress {
    bar: ProgressBar,
    status: Arc<Mutex<Status>>,
    /// Whether the line is held off the screen while text streams.
    held: AtomicBool,
}

impl Progress {
    /// The status line, when output is for a person on a terminal.
    pub fn start(json: bool, quiet: bool) -> Option<Arc<Self>> {
        if json || quiet || !std::io::stderr().is_terminal() {
            return None;
        }
        let status = Arc::new(Mutex::new(Status::default()));
        let shown = Arc::clone(&status);
        let style = ProgressStyle::with_template("{spinner} {elapsed} {status}")
            .ok()?
            .with_key(
                "status",
                move |_: &ProgressState, out: &mut dyn std::fmt::Write| {
                    let line = shown.lock().unwrap_or_else(PoisonError::into_inner).line();
                    let _ = out.write_str(&line);
                },
            );
        let bar =
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(style);
        bar.enable_steady_tick(TICK);
        Some(Arc::new(Self {
            bar,
            status,
            held: AtomicBool::new(false),
        }))
    }

    /// Runs `print` with the line cleared, then draws it again.
    pub fn suspend<R>(&self, print: impl FnOnce() -> R) -> R {
        self.bar.suspend(print)
    }

    /// Takes the line off the screen until [`release`](Self::release), so text
    /// streamed on the same terminal is not overdrawn by it.
    pub fn hold(&self) {
        if self.held.swap(true, Ordering::SeqCst) {
            return;
        }
        self.bar.disable_steady_tick();
        self.bar.set_draw_target(ProgressDrawTarget::hidden());
        // The hidden target does not erase what the terminal target drew.
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(b"\r\x1b[2K").and_then(|()| err.flush());
    }

    /// Draws the line again after [`hold`](Self::hold).
    pub fn release(&self) {
        if !self.held.swap(false, Ordering::SeqCst) {
            return;
        }
        self.bar.set_draw_target(ProgressDrawTarget::stderr());
        self.bar.enable_steady_tick(TICK);
    }

    /// Removes the line.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    fn update(&self, event: &Event, step: u32) {
        let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        status.step = step;
        let now = Instant::now();
        match &event.kind {
            EventKind::ModelRequested { step, .. } => {
                status.step = *step;
                status.doing = Some(("thinking".into(), now));
            }
            EventKind::ModelResponded { usage, .. }
            | EventKind::ModelOutputRejected { usage, .. }
            | EventKind::ContextCompacted { usage, .. } => {
                status.input_tokens += usage.input_tokens;
                status.output_tokens += usage.output_tokens;
            }
            EventKind::ActionDispatched { call } => {
                status.doing = Some((format!("running {}", call.tool_name), now));
            }
            EventKind::ActionsQueued { .. } => {
                status.doing = Some(("waiting for a worker".into(), now));
            }
            EventKind::ApprovalRequested { .. } => {
                status.doing = Some(("waiting for approval".into(), now));
            }
            EventKind::Finished { .. } | EventKind::Failed { .. } | EventKind::Cancelled { .. } => {
                status.doing = Some(("ended".into(), now));
            }
            _ => {}
        }
    }
}

impl EventSink for Progress {
    fn publish(&self, event: &Event, step: u32) -> Result<(), SinkError> {
        self.update(event, step);
        Ok(())
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
