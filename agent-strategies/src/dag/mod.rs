//! DAG workflows on petgraph, composed in code: nodes call a model, call a tool,
//! run a nested agent, run a closure or decide a branch; edges may carry
//! conditions; fan-out groups and joins. Runs are ordinary durable sessions.

mod build;
mod graph;
mod node;
mod template;

pub use build::{DEFAULT_DAG_CONCURRENCY, DagBuilder, DagError};
pub use graph::Dag;
pub use node::{Condition, Node, NodeFn, NodeFuture, NodeKind};
pub use template::{Outputs, references, render, render_value, text_of};
