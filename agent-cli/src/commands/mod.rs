//! One module per `agent` command.

pub mod agents;
pub mod approve;
pub mod cancel;
pub mod fork;
pub mod model;
pub mod pause;
pub mod queue;
pub mod resume;
pub mod run;
pub mod send;
pub mod serve;
pub mod sessions;
pub mod show;
pub mod submit;
pub mod trace;
pub mod wait;
pub mod worker;
