//! Test support for the agent runtime.
//!
//! - [`FakeProvider`]: a local HTTP server that answers with scripted provider
//!   replies, so provider faults are tested with no internet and no key.
//! - [`cli`]: black-box tests of a built binary — scratch directories, running
//!   the binary in them, reading its JSON output and traces.
//! - [`conformance`]: one suite every event store passes.
//! - [`postgres`]: the throw-away PostgreSQL server of the tests, when there is one.
//! - [`SmallDisk`]: a small tmpfs, to fill a store's disk.

pub mod cli;
pub mod conformance;
mod disk;
pub mod postgres;
mod provider;

pub use disk::SmallDisk;
pub use provider::{FakeProvider, Received, Reply};
