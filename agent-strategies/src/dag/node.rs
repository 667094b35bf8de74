//! What a workflow node does: call a model with a prompt template, call a tool,
//! run a nested agent, run a Rust closure, or decide a branch.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agent_engine::Engine;
use serde_json::Value;

use super::template::Outputs;

/// The future a closure node returns.
pub type NodeFuture = Pin<Box<dyn Future<Output = Result<Value, String>> + Send>>;

/// An async Rust function over the outputs of earlier nodes.
pub type NodeFn = Arc<dyn Fn(Outputs) -> NodeFuture + Send + Sync>;

/// A condition over outputs, for branches and conditional edges.
pub type Condition = Arc<dyn Fn(&Outputs) -> bool + Send + Sync>;

/// The work of one node.
#[derive(Clone)]
pub enum NodeKind {
    /// One model call; the text answer is the output.
    Model {
        /// The prompt; `{{node}}` refers to earlier outputs.
        prompt: String,
    },
    /// One tool call; the tool's output is the node's.
    Tool {
        /// The tool.
        tool: String,
        /// Its arguments; strings may refer to earlier outputs.
        arguments: Value,
    },
    /// A nested agent session (any strategy); its answer is the output.
    Agent {
        /// The engine that runs it.
        engine: Arc<Engine>,
        /// Its task; `{{node}}` refers to earlier outputs.
        task: String,
    },
    /// A Rust closure.
    Function {
        /// A label for the graph's hash.
        label: String,
        /// The function.
        run: NodeFn,
    },
    /// A condition whose boolean output conditional edges can test.
    Branch {
        /// A label for the graph's hash.
        label: String,
        /// The condition.
        test: Condition,
    },
}

/// A node before it is placed in a graph.
#[derive(Clone)]
pub struct Node {
    pub(crate) kind: NodeKind,
}

impl Node {
    /// A model call with `prompt` (a template over earlier outputs).
    pub fn model(prompt: impl Into<String>) -> Self {
        Self {
            kind: NodeKind::Model {
                prompt: prompt.into(),
            },
        }
    }

    /// A call of `tool` with `arguments` (strings are templates).
    pub fn tool(tool: impl Into<String>, arguments: Value) -> Self {
        Self {
            kind: NodeKind::Tool {
                tool: tool.into(),
                arguments,
            },
        }
    }

    /// A nested agent run by `engine` on `task` (a template).
    pub fn agent(engine: Arc<Engine>, task: impl Into<String>) -> Self {
        Self {
            kind: NodeKind::Agent {
                engine,
                task: task.into(),
            },
        }
    }

    /// An async closure over the outputs so far; `label` names it in the graph's hash.
    pub fn function<F, Fut>(label: impl Into<String>, run: F) -> Self
    where
        F: Fn(Outputs) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, String>> + Send + 'static,
    {
        let run: NodeFn = Arc::new(move |outputs| Box::pin(run(outputs)));
        Self {
            kind: NodeKind::Function {
                label: label.into(),
                run,
            },
        }
    }

    /// A branch: its output is `test(outputs)`, which `edge_when` conditions can read.
    pub fn branch(
        label: impl Into<String>,
        test: impl Fn(&Outputs) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self {
            kind: NodeKind::Branch {
                label: label.into(),
                test: Arc::new(test),
            },
        }
    }

    /// The templates this node renders.
    pub(crate) fn templates(&self) -> Vec<String> {
        match &self.kind {
            NodeKind::Model { prompt } => vec![prompt.clone()],
            NodeKind::Agent { task, .. } => vec![task.clone()],
            NodeKind::Tool { arguments, .. } => {
                let mut strings = Vec::new();
                collect_strings(arguments, &mut strings);
                strings
            }
            NodeKind::Function { .. } | NodeKind::Branch { .. } => Vec::new(),
        }
    }

    /// A stable description for the graph's hash.
    pub(crate) fn describe(&self) -> String {
        match &self.kind {
            NodeKind::Model { prompt } => format!("model:{prompt}"),
            NodeKind::Tool { tool, arguments } => format!("tool:{tool}:{arguments}"),
            NodeKind::Agent { engine, task } => format!("agent:{}:{task}", engine.strategy_name()),
            NodeKind::Function { label, .. } => format!("function:{label}"),
            NodeKind::Branch { label, .. } => format!("branch:{label}"),
        }
    }
}

fn collect_strings(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::String(text) => into.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| collect_strings(item, into)),
        Value::Object(map) => map.values().for_each(|item| collect_strings(item, into)),
        _ => {}
    }
}
