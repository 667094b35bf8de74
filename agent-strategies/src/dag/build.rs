//! `DagBuilder`: nodes and edges in code, checked by `build()` — no cycles (the
//! error names the nodes of the cycle), no reference to a missing node, no node
//! that cannot reach the output — and hashed, so a resume can tell the graph
//! changed.

use std::collections::{BTreeSet, HashMap};

use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{Dfs, Reversed};

use super::graph::{Dag, Edge, EdgeKind};
use super::node::{Condition, Node};
use super::template::references;

/// Ready nodes that run at once when no limit is set.
pub const DEFAULT_DAG_CONCURRENCY: usize = 4;

/// Why a graph was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DagError {
    /// Two nodes share a name.
    #[error("two nodes are named `{0}`; node names must be unique")]
    DuplicateNode(String),
    /// An edge or template names a node that does not exist.
    #[error("{from} refers to `{missing}`, which is not a node of the graph")]
    MissingNode {
        /// What refers to it.
        from: String,
        /// The missing name.
        missing: String,
    },
    /// A template refers to a node that does not run before it.
    #[error(
        "node `{node}` uses the output of `{reference}`, which is not one of its predecessors; add an edge"
    )]
    NotAPredecessor {
        /// The node.
        node: String,
        /// What it refers to.
        reference: String,
    },
    /// The edges form a cycle.
    #[error("the graph has a cycle through {}", .0.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "))]
    Cycle(Vec<String>),
    /// No output node was chosen.
    #[error("the graph has no output node; call `.output(name)`")]
    NoOutput,
    /// A node whose work could never reach the output.
    #[error(
        "node `{0}` cannot reach the output node `{1}`, so its work would be lost; connect it or remove it"
    )]
    Unreachable(String, String),
}

/// Builds a workflow graph.
pub struct DagBuilder {
    name: String,
    nodes: Vec<(String, Node)>,
    edges: Vec<(String, String, EdgeKind)>,
    output: Option<String>,
    concurrency: usize,
}

impl DagBuilder {
    /// An empty graph called `name` (the session's strategy is `dag:NAME`).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            nodes: Vec::new(),
            edges: Vec::new(),
            output: None,
            concurrency: DEFAULT_DAG_CONCURRENCY,
        }
    }

    /// Adds a node.
    pub fn node(mut self, name: impl Into<String>, node: Node) -> Self {
        self.nodes.push((name.into(), node));
        self
    }

    /// Adds one node per item, named `group.0`, `group.1`, …, each made by `make`;
    /// `{{group.*}}` refers to all their outputs. `after` runs before each of them.
    pub fn fan_out<I, T>(
        mut self,
        group: &str,
        after: Option<&str>,
        items: I,
        make: impl Fn(T) -> Node,
    ) -> Self
    where
        I: IntoIterator<Item = T>,
    {
        for (index, item) in items.into_iter().enumerate() {
            let name = format!("{group}.{index}");
            if let Some(after) = after {
                self.edges
                    .push((after.to_owned(), name.clone(), EdgeKind::Always));
            }
            self.nodes.push((name, make(item)));
        }
        self
    }

    /// Adds a node that runs after every member of `group` (a join).
    pub fn join(mut self, name: impl Into<String>, group: &str, node: Node) -> Self {
        let name = name.into();
        let prefix = format!("{group}.");
        let members: Vec<String> = self
            .nodes
            .iter()
            .map(|(member, _)| member.clone())
            .filter(|member| member.starts_with(&prefix))
            .collect();
        for member in members {
            self.edges.push((member, name.clone(), EdgeKind::Always));
        }
        self.nodes.push((name, node));
        self
    }

    /// `to` runs after `from` completes.
    pub fn edge(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.edges.push((from.into(), to.into(), EdgeKind::Always));
        self
    }

    /// `to` runs after `from` completes if `condition` holds over the outputs;
    /// `label` names the condition in the graph's hash.
    pub fn edge_when(
        mut self,
        from: impl Into<String>,
        to: impl Into<String>,
        label: impl Into<String>,
        condition: impl Fn(&super::template::Outputs) -> bool + Send + Sync + 'static,
    ) -> Self {
        let condition: Condition = std::sync::Arc::new(condition);
        self.edges.push((
            from.into(),
            to.into(),
            EdgeKind::When {
                label: label.into(),
                condition,
            },
        ));
        self
    }

    /// `to` runs if `from` fails (its error branch); without one, a failed node fails the run.
    pub fn on_error(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.edges.push((from.into(), to.into(), EdgeKind::OnError));
        self
    }

    /// The node whose output is the run's answer.
    pub fn output(mut self, name: impl Into<String>) -> Self {
        self.output = Some(name.into());
        self
    }

    /// Ready nodes running at once, at most (default [`DEFAULT_DAG_CONCURRENCY`]).
    pub fn concurrency(mut self, limit: usize) -> Self {
        self.concurrency = limit.max(1);
        self
    }

    /// The checked graph.
    pub fn build(self) -> Result<Dag, DagError> {
        let mut graph: DiGraph<String, Edge> = DiGraph::new();
        let mut index: HashMap<String, NodeIndex> = HashMap::new();
        for (name, _) in &self.nodes {
            if index.contains_key(name) {
                return Err(DagError::DuplicateNode(name.clone()));
            }
            index.insert(name.clone(), graph.add_node(name.clone()));
        }
        for (from, to, kind) in &self.edges {
            let lookup = |name: &String| {
                index
                    .get(name)
                    .copied()
                    .ok_or_else(|| DagError::MissingNode {
                        from: format!("the edge `{from}` -> `{to}`"),
                        missing: name.clone(),
                    })
            };
            let (a, b) = (lookup(from)?, lookup(to)?);
            graph.add_edge(a, b, Edge { kind: kind.clone() });
        }
        if let Some(cycle) = tarjan_scc(&graph).into_iter().find(|component| {
            component.len() > 1 || component.iter().any(|n| graph.contains_edge(*n, *n))
        }) {
            let mut names: Vec<String> = cycle.iter().map(|n| graph[*n].clone()).collect();
            names.sort();
            return Err(DagError::Cycle(names));
        }
        let output = self.output.clone().ok_or(DagError::NoOutput)?;
        let output_index = *index.get(&output).ok_or_else(|| DagError::MissingNode {
            from: "the output".into(),
            missing: output.clone(),
        })?;
        let mut contributes = BTreeSet::new();
        let reversed = Reversed(&graph);
        let mut walk = Dfs::new(reversed, output_index);
        while let Some(node) = walk.next(reversed) {
            contributes.insert(node);
        }
        for (name, node) in &self.nodes {
            let Some(&at) = index.get(name) else {
                continue;
            };
            if !contributes.contains(&at) {
                return Err(DagError::Unreachable(name.clone(), output.clone()));
            }
            let mut ancestors = BTreeSet::new();
            let mut walk = Dfs::new(reversed, at);
            while let Some(ancestor) = walk.next(reversed) {
                if ancestor != at {
                    ancestors.insert(graph[ancestor].clone());
                }
            }
            for template in node.templates() {
                for reference in references(&template) {
                    let known = match reference.strip_suffix(".*") {
                        Some(group) => {
                            let prefix = format!("{group}.");
                            let members: Vec<&String> = index
                                .keys()
                                .filter(|key| key.starts_with(&prefix))
                                .collect();
                            if members.is_empty() {
                                return Err(DagError::MissingNode {
                                    from: format!("node `{name}`"),
                                    missing: reference.clone(),
                                });
                            }
                            members.iter().all(|member| ancestors.contains(*member))
                        }
                        None => {
                            if !index.contains_key(&reference) {
                                return Err(DagError::MissingNode {
                                    from: format!("node `{name}`"),
                                    missing: reference.clone(),
                                });
                            }
                            ancestors.contains(&reference)
                        }
                    };
                    if !known {
                        return Err(DagError::NotAPredecessor {
                            node: name.clone(),
                            reference,
                        });
                    }
                }
            }
        }
        Ok(Dag::new(
            self.name,
            graph,
            self.nodes,
            output,
            self.concurrency,
        ))
    }
}
