//! Code-agent tools — read, search, edit, run — that cannot leave their workspace.

mod command;
mod files;
mod search;

pub use command::{
    CommandOutput, CommandPolicy, DEFAULT_COMMAND_TIMEOUT, MAX_COMMAND_TIMEOUT, OUTPUT_CAP,
    RunCommand, run_program,
};
pub use files::{
    EditFile, ListDir, MAX_ENTRIES, MAX_FILE_BYTES, MAX_READ_CHARS, ReadFile, WriteFile,
};
pub use search::{MAX_MATCHES, Search};
