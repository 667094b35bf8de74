//! Execution strategies for the agent runtime, each behind a feature of its name.
//!
//! - `react`: [`ReAct`], think → act → observe with concurrent tool calls.
//! - `plan-execute`: [`PlanExecute`], a validated plan, one bounded sub-loop per
//!   step, one replan on failure, a composed answer.
//! - `hitl`: [`Hitl`], wraps any strategy; calls its [`ApprovalPolicy`] marks wait
//!   for a human decision.
//! - `dag`: [`dag::Dag`], workflows on petgraph built with [`dag::DagBuilder`].
//!
//! The context policies, which decide what history each model request holds
//! whatever the strategy, are the engine's: `agent_engine::context`.

#[cfg(feature = "dag")]
pub mod dag;
#[cfg(feature = "hitl")]
mod hitl;
#[cfg(feature = "plan-execute")]
mod plan_execute;
#[cfg(feature = "react")]
mod react;

#[cfg(feature = "dag")]
pub use dag::{Dag, DagBuilder, DagError, Node};
#[cfg(feature = "hitl")]
pub use hitl::{ApprovalPolicy, CallPredicate, Hitl};
#[cfg(feature = "plan-execute")]
pub use plan_execute::{DEFAULT_STEPS_PER_PLAN_STEP, PlanExecute};
#[cfg(feature = "react")]
pub use react::{REACT_INSTRUCTIONS, ReAct};
