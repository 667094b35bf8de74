//! One module per `agent` command.

pub mod run;
pub mod trace;
