//! `Dag`: a checked workflow graph and the strategy that runs it. Every ready node
//! runs at once (up to a limit); each node's result is a strategy event
//! (`node_completed` / `node_failed`), so a resume never re-runs a completed node.
//! The graph's structural hash is recorded at start; a resume with another graph
//! is refused before anything is written.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use agent_core::model::{ModelContext, ModelRequest};
use agent_core::result::ExitReason;
use agent_core::state::SessionState;
use agent_core::strategy::{
    Decision, ExecutionStrategy, StrategyError, StrategyWork, Work, WorkContext, WorkRecord,
};
use agent_core::tool::ToolContext;
use agent_core::types::{Action, ToolCall};
use async_trait::async_trait;
use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use serde_json::{Value, json};

use super::node::{Condition, Node, NodeKind};
use super::template::{Outputs, render, render_value, text_of};

const DAG_STARTED: &str = "dag_started";
const NODE_COMPLETED: &str = "node_completed";
const NODE_FAILED: &str = "node_failed";

/// Instructions of a model node's call.
const NODE_INSTRUCTIONS: &str =
    "You are one step of a workflow. Answer the request directly and concisely, as text.";

/// When an edge lets its target run.
#[derive(Clone)]
pub(crate) enum EdgeKind {
    /// When the source completed.
    Always,
    /// When the source completed and the condition holds.
    When { label: String, condition: Condition },
    /// When the source failed.
    OnError,
}

/// An edge of the graph.
#[derive(Clone)]
pub(crate) struct Edge {
    pub(crate) kind: EdgeKind,
}

impl Edge {
    fn describe(&self) -> String {
        match &self.kind {
            EdgeKind::Always => "always".into(),
            EdgeKind::When { label, .. } => format!("when:{label}"),
            EdgeKind::OnError => "on_error".into(),
        }
    }
}

/// How a node stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resolution {
    Completed,
    Failed,
    Skipped,
}

/// A checked workflow graph; also the strategy that runs it.
pub struct Dag {
    strategy_name: String,
    graph: DiGraph<String, Edge>,
    nodes: HashMap<String, Node>,
    order: Vec<NodeIndex>,
    model_steps: HashMap<String, u32>,
    output: String,
    concurrency: usize,
    hash: String,
}

impl Dag {
    pub(crate) fn new(
        name: String,
        graph: DiGraph<String, Edge>,
        nodes: Vec<(String, Node)>,
        output: String,
        concurrency: usize,
    ) -> Self {
        let order = topological(&graph);
        let mut model_steps = HashMap::new();
        for at in &order {
            let name = &graph[*at];
            if nodes
                .iter()
                .any(|(n, node)| n == name && matches!(node.kind, NodeKind::Model { .. }))
            {
                let step = u32::try_from(model_steps.len() + 1).unwrap_or(u32::MAX);
                model_steps.insert(name.clone(), step);
            }
        }
        let mut lines: Vec<String> = nodes
            .iter()
            .map(|(name, node)| format!("node {name} {}", node.describe()))
            .collect();
        lines.extend(graph.edge_references().map(|edge| {
            format!(
                "edge {} {} {}",
                graph[edge.source()],
                graph[edge.target()],
                edge.weight().describe()
            )
        }));
        lines.push(format!("output {output}"));
        lines.sort();
        Self {
            strategy_name: format!("dag:{name}"),
            graph,
            nodes: nodes.into_iter().collect(),
            order,
            model_steps,
            output,
            concurrency,
            hash: fnv1a(&lines.join("\n")),
        }
    }

    /// The structural hash recorded at start and checked on resume.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// Node names in the order they are considered (topological, ties by insertion).
    pub fn node_names(&self) -> Vec<&str> {
        self.order
            .iter()
            .map(|at| self.graph[*at].as_str())
            .collect()
    }
}

impl std::fmt::Debug for Dag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dag")
            .field("name", &self.strategy_name)
            .field("nodes", &self.node_names())
            .field("output", &self.output)
            .field("hash", &self.hash)
            .finish()
    }
}

/// Kahn's algorithm, taking the earliest-added ready node first, so the order is
/// the same every time.
fn topological(graph: &DiGraph<String, Edge>) -> Vec<NodeIndex> {
    let mut waiting: HashMap<NodeIndex, usize> = graph
        .node_indices()
        .map(|n| (n, graph.neighbors_directed(n, Direction::Incoming).count()))
        .collect();
    let mut ready: BinaryHeap<Reverse<NodeIndex>> = roots(graph).into_iter().map(Reverse).collect();
    let mut order = Vec::new();
    while let Some(Reverse(node)) = ready.pop() {
        order.push(node);
        for next in graph.neighbors_directed(node, Direction::Outgoing) {
            if let Some(count) = waiting.get_mut(&next) {
                *count -= 1;
                if *count == 0 {
                    ready.push(Reverse(next));
                }
            }
        }
    }
    order
}

/// 64-bit FNV-1a, hex: small, stable across builds and platforms.
fn fnv1a(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// What the records say about the nodes.
struct Standing {
    outputs: Outputs,
    errors: HashMap<String, String>,
}

impl Standing {
    fn of(state: &SessionState) -> Self {
        let mut standing = Self {
            outputs: Outputs::new(),
            errors: HashMap::new(),
        };
        for record in state.records() {
            let node = record.text("node").to_owned();
            match record.name.as_str() {
                NODE_COMPLETED => {
                    standing
                        .outputs
                        .insert(node, record.field("output").cloned().unwrap_or_default());
                }
                NODE_FAILED => {
                    standing
                        .errors
                        .insert(node, record.text("error").to_owned());
                }
                _ => {}
            }
        }
        standing
    }
}

impl Dag {
    fn recorded_hash<'a>(&self, state: &'a SessionState) -> Option<&'a str> {
        state
            .records()
            .iter()
            .find(|record| record.name == DAG_STARTED)
            .and_then(|record| record.field("hash"))
            .and_then(Value::as_str)
    }

    /// Resolves every node it can and returns the ready ones.
    fn resolve(&self, standing: &Standing) -> (HashMap<NodeIndex, Resolution>, Vec<NodeIndex>) {
        let mut resolved = HashMap::new();
        let mut ready = Vec::new();
        for at in &self.order {
            let name = &self.graph[*at];
            if standing.outputs.contains_key(name) {
                resolved.insert(*at, Resolution::Completed);
                continue;
            }
            if standing.errors.contains_key(name) {
                resolved.insert(*at, Resolution::Failed);
                continue;
            }
            let incoming: Vec<_> = self
                .graph
                .edges_directed(*at, Direction::Incoming)
                .collect();
            if incoming
                .iter()
                .any(|edge| !resolved.contains_key(&edge.source()))
            {
                continue;
            }
            let active = incoming.is_empty()
                || incoming.iter().any(|edge| {
                    match (&edge.weight().kind, resolved.get(&edge.source()).copied()) {
                        (EdgeKind::Always, Some(Resolution::Completed)) => true,
                        (EdgeKind::When { condition, .. }, Some(Resolution::Completed)) => {
                            condition(&standing.outputs)
                        }
                        (EdgeKind::OnError, Some(Resolution::Failed)) => true,
                        _ => false,
                    }
                });
            if active {
                ready.push(*at);
            } else {
                resolved.insert(*at, Resolution::Skipped);
            }
        }
        (resolved, ready)
    }
}

impl ExecutionStrategy for Dag {
    fn name(&self) -> &str {
        &self.strategy_name
    }

    fn next(&self, state: &SessionState) -> Result<Decision, StrategyError> {
        if self.recorded_hash(state).is_none() {
            return Ok(Decision::Record {
                name: DAG_STARTED.into(),
                data: json!({"hash": self.hash, "nodes": self.node_names()}),
            });
        }
        let standing = Standing::of(state);
        if let Some(output) = standing.outputs.get(&self.output) {
            return Ok(Decision::Finish {
                answer: text_of(output),
            });
        }
        for (name, error) in &standing.errors {
            let handled = self
                .order
                .iter()
                .find(|at| &self.graph[**at] == name)
                .is_some_and(|at| {
                    self.graph
                        .edges_directed(*at, Direction::Outgoing)
                        .any(|edge| matches!(edge.weight().kind, EdgeKind::OnError))
                });
            if !handled {
                return Ok(Decision::Fail {
                    exit_reason: ExitReason::InternalError,
                    error: format!(
                        "workflow node `{name}` failed and has no error branch: {error}"
                    ),
                });
            }
        }
        let (resolved, ready) = self.resolve(&standing);
        if ready.is_empty() {
            let why = if self.order.iter().any(|at| {
                self.graph[*at] == self.output && resolved.get(at) == Some(&Resolution::Skipped)
            }) {
                format!(
                    "no branch of the workflow reached its output node `{}`",
                    self.output
                )
            } else {
                "no node of the workflow can run".to_owned()
            };
            return Ok(Decision::Fail {
                exit_reason: ExitReason::InternalError,
                error: why,
            });
        }
        let work = ready
            .into_iter()
            .filter_map(|at| {
                let name = self.graph[at].clone();
                let node = self.nodes.get(&name)?.clone();
                Some(Work {
                    key: name.clone(),
                    job: Arc::new(NodeJob {
                        step: self.model_steps.get(&name).copied().unwrap_or(0),
                        name,
                        node,
                        outputs: standing.outputs.clone(),
                    }),
                })
            })
            .collect();
        Ok(Decision::RunWork {
            work,
            limit: self.concurrency,
        })
    }

    fn check_resume(&self, state: &SessionState) -> Result<(), String> {
        match self.recorded_hash(state) {
            Some(recorded) if recorded != self.hash => Err(format!(
                "the workflow graph changed since the session started (recorded hash {recorded}, this graph {}); resume it with the graph it started with, or start a new session",
                self.hash
            )),
            _ => Ok(()),
        }
    }
}

/// One node's work, with the outputs it may read.
struct NodeJob {
    name: String,
    node: Node,
    outputs: Outputs,
    step: u32,
}

impl NodeJob {
    fn completed(&self, output: Value, usage: Option<agent_core::types::Usage>) -> WorkRecord {
        WorkRecord {
            name: NODE_COMPLETED.into(),
            data: json!({"node": self.name, "output": output}),
            usage,
        }
    }

    /// The id of the node's tool call, in approvals and tool contexts.
    fn call_id(&self) -> String {
        format!("node:{}", self.name)
    }

    fn failed(&self, error: String, usage: Option<agent_core::types::Usage>) -> WorkRecord {
        WorkRecord {
            name: NODE_FAILED.into(),
            data: json!({"node": self.name, "error": error}),
            usage,
        }
    }
}

#[async_trait]
impl StrategyWork for NodeJob {
    async fn perform(&self, ctx: &WorkContext) -> WorkRecord {
        match &self.node.kind {
            NodeKind::Model { prompt } => {
                let request = ModelRequest {
                    instructions: match &ctx.instructions {
                        Some(agent) => format!("{agent}\n\n{NODE_INSTRUCTIONS}"),
                        None => NODE_INSTRUCTIONS.into(),
                    },
                    task: render(prompt, &ctx.task, &self.outputs),
                    history: Arc::default(),
                    tools: Arc::new(Vec::new()),
                    max_output_tokens: ctx.max_output_tokens,
                    output_schema: None,
                };
                let model_ctx = ModelContext::new(ctx.session_id.clone(), self.step);
                match ctx.model.complete(&request, &model_ctx).await {
                    Ok(response) => {
                        let text = response.actions.iter().find_map(|action| match action {
                            Action::Finish(finish) => Some(finish.answer.clone()),
                            _ => None,
                        });
                        match text.or(response.text) {
                            Some(text) => self.completed(Value::String(text), Some(response.usage)),
                            None => self.failed(
                                "the model answered without text".into(),
                                Some(response.usage),
                            ),
                        }
                    }
                    Err(agent_core::model::ModelError::InvalidOutput {
                        message, usage, ..
                    }) => self.failed(message, Some(usage)),
                    Err(err) => {
                        self.failed(err.to_string(), Some(agent_core::types::Usage::default()))
                    }
                }
            }
            NodeKind::Tool { tool, arguments } => {
                let Some(handler) = ctx.tools.get(tool) else {
                    return self.failed(format!("unknown tool `{tool}`"), None);
                };
                let call_ctx =
                    ToolContext::new(&ctx.session_id, self.call_id(), Arc::clone(&ctx.workspace));
                let arguments = ctx
                    .approved_arguments
                    .clone()
                    .unwrap_or_else(|| render_value(arguments, &ctx.task, &self.outputs));
                match handler.call(arguments, &call_ctx).await {
                    Ok(output) => self.completed(Value::String(output.content), None),
                    Err(err) => self.failed(err.to_string(), None),
                }
            }
            NodeKind::Agent { engine, task } => {
                let task = render(task, &ctx.task, &self.outputs);
                match engine
                    .run(
                        task,
                        json!({"parent_session": ctx.session_id, "node": self.name}),
                    )
                    .await
                {
                    Ok(result) if result.exit_reason == ExitReason::Finished => {
                        self.completed(Value::String(result.answer.unwrap_or_default()), None)
                    }
                    Ok(result) => self.failed(
                        format!(
                            "the nested agent (session {}) ended with {}: {}",
                            result.session_id,
                            result.exit_reason,
                            result.error.unwrap_or_default()
                        ),
                        None,
                    ),
                    Err(err) => self.failed(format!("the nested agent failed: {err}"), None),
                }
            }
            NodeKind::Function { run, .. } => match run(self.outputs.clone()).await {
                Ok(output) => self.completed(output, None),
                Err(error) => self.failed(error, None),
            },
            NodeKind::Branch { test, .. } => self.completed(Value::Bool(test(&self.outputs)), None),
        }
    }

    fn tool_call(&self, ctx: &WorkContext) -> Option<ToolCall> {
        match &self.node.kind {
            NodeKind::Tool { tool, arguments } => Some(ToolCall {
                id: self.call_id(),
                tool_name: tool.clone(),
                arguments: render_value(arguments, &ctx.task, &self.outputs),
            }),
            _ => None,
        }
    }

    fn denied(&self, reason: &str) -> WorkRecord {
        self.failed(format!("its tool call was denied: {reason}"), None)
    }
}

/// Every node with no incoming edge, in insertion order.
fn roots(graph: &DiGraph<String, Edge>) -> Vec<NodeIndex> {
    graph
        .node_indices()
        .filter(|n| {
            graph
                .neighbors_directed(*n, Direction::Incoming)
                .next()
                .is_none()
        })
        .collect()
}
