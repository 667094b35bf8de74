//! JSONL traces for the agent runtime.
//!
//! A trace is a projection of the event stream ([`trace_lines`]), written by the
//! [`JsonlTrace`] sink one complete JSON object per line. By default text is
//! written only as a [`summarize`]d `chars=N;sha256=HEX` and argument values never
//! are ([`ContentMode::Summary`]). [`show`] renders a trace for people, and
//! [`describe`] an event.

mod describe;
mod jsonl;
mod lines;
mod show;
mod stats;
mod summary;
pub mod telemetry;

pub use describe::{describe, is_problem};
pub use jsonl::JsonlTrace;
pub use lines::trace_lines;
pub use show::{ShowReport, render, show};
pub use stats::{RunStats, ToolStats, lines_of_events, stats};
pub use summary::{ContentMode, UnknownContentMode, summarize};
