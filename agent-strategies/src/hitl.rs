//! Human-in-the-Loop: wraps any strategy. A policy marks calls that need a human
//! decision — by tool name or by a predicate in code. (Tools whose spec sets
//! `needs_approval` need no policy: the engine holds their calls under every
//! strategy.) Such calls pause the session durably (`awaiting_approval`) until they
//! are approved (perhaps with edited arguments) or denied. The policy is recorded
//! in the session's log at start, and a resume obeys the recorded policy as well as
//! its own, so a resume can never drop it.

use std::collections::BTreeSet;
use std::sync::Arc;

use agent_core::state::SessionState;
use agent_core::strategy::{Decision, ExecutionStrategy, StrategyError};
use agent_core::types::{ToolCall, ToolSpec};
use serde_json::{Value, json};

/// The record name under which the policy is kept in the log.
const POLICY_RECORD: &str = "approval_policy";

/// A predicate on calls, named so that the session can record it.
#[derive(Clone)]
pub struct CallPredicate {
    name: String,
    test: Arc<dyn Fn(&ToolCall) -> bool + Send + Sync>,
}

/// Which calls need a human decision.
#[derive(Clone, Default)]
pub struct ApprovalPolicy {
    tools: BTreeSet<String>,
    predicate: Option<CallPredicate>,
}

impl std::fmt::Debug for ApprovalPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalPolicy")
            .field("tools", &self.tools)
            .field("predicate", &self.predicate.as_ref().map(|p| &p.name))
            .finish()
    }
}

impl ApprovalPolicy {
    /// No call needs approval.
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls of these tools need approval.
    pub fn tools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.tools.extend(names.into_iter().map(Into::into));
        self
    }

    /// Calls of tools whose spec sets `needs_approval` need approval.
    pub fn flagged(self, specs: &[ToolSpec]) -> Self {
        let flagged: Vec<String> = specs
            .iter()
            .filter(|spec| spec.needs_approval)
            .map(|spec| spec.name.clone())
            .collect();
        self.tools(flagged)
    }

    /// Calls for which `test` holds need approval. `name` is recorded in the session.
    pub fn predicate(
        mut self,
        name: impl Into<String>,
        test: impl Fn(&ToolCall) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.predicate = Some(CallPredicate {
            name: name.into(),
            test: Arc::new(test),
        });
        self
    }

    fn record(&self) -> Value {
        json!({"tools": self.tools, "predicate": self.predicate.as_ref().map(|p| &p.name)})
    }

    fn requires(&self, call: &ToolCall) -> bool {
        self.tools.contains(&call.tool_name)
            || self.predicate.as_ref().is_some_and(|p| (p.test)(call))
    }
}

/// A strategy whose calls pass a human first when the policy says so.
pub struct Hitl<S> {
    inner: S,
    policy: ApprovalPolicy,
    name: String,
}

impl<S: ExecutionStrategy> Hitl<S> {
    /// Wraps `inner` with `policy`.
    pub fn new(inner: S, policy: ApprovalPolicy) -> Self {
        let name = format!("hitl+{}", inner.name());
        Self {
            inner,
            policy,
            name,
        }
    }
}

/// Whether the policy recorded in the session requires approval of `call`. A
/// recorded predicate this process cannot evaluate requires approval of every call.
fn recorded_requires(state: &SessionState, call: &ToolCall, own: &ApprovalPolicy) -> bool {
    state
        .records()
        .iter()
        .filter(|record| record.name == POLICY_RECORD)
        .any(|record| {
            let listed = record
                .field("tools")
                .and_then(Value::as_array)
                .is_some_and(|tools| {
                    tools
                        .iter()
                        .any(|tool| tool.as_str() == Some(call.tool_name.as_str()))
                });
            let predicate = record
                .field("predicate")
                .and_then(Value::as_str)
                .is_some_and(|name| {
                    own.predicate
                        .as_ref()
                        .filter(|p| p.name == name)
                        .is_none_or(|p| (p.test)(call))
                });
            listed || predicate
        })
}

impl<S: ExecutionStrategy> ExecutionStrategy for Hitl<S> {
    fn name(&self) -> &str {
        &self.name
    }

    fn takes_follow_ups(&self) -> bool {
        self.inner.takes_follow_ups()
    }

    fn next(&self, state: &SessionState) -> Result<Decision, StrategyError> {
        if !state
            .records()
            .iter()
            .any(|record| record.name == POLICY_RECORD)
        {
            return Ok(Decision::Record {
                name: POLICY_RECORD.into(),
                data: self.policy.record(),
            });
        }
        match self.inner.next(state)? {
            Decision::Dispatch(calls) => {
                let waiting: Vec<ToolCall> = calls
                    .iter()
                    .filter(|call| !state.is_decided(&call.id))
                    .filter(|call| {
                        self.policy.requires(call) || recorded_requires(state, call, &self.policy)
                    })
                    .cloned()
                    .collect();
                if waiting.is_empty() {
                    Ok(Decision::Dispatch(calls))
                } else {
                    Ok(Decision::AwaitApproval(waiting))
                }
            }
            other => Ok(other),
        }
    }
}
