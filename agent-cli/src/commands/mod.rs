//! One module per `agent` command.

pub mod approve;
pub mod cancel;
pub mod fork;
pub mod resume;
pub mod run;
pub mod sessions;
pub mod show;
pub mod trace;
