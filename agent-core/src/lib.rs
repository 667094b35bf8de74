//! The contract of the agent runtime: what every other crate builds on.
//!
//! A model proposes actions; the runtime owns every fact. Each state change is an
//! [`Event`](event::Event) appended to a per-session log through an
//! [`EventStore`](store::EventStore); a session's
//! [`SessionState`](state::SessionState) is a fold of that log, and
//! [`SessionState::apply`](state::SessionState::apply) enforces the status
//! machine. An [`ExecutionStrategy`](strategy::ExecutionStrategy) names the next
//! [`Decision`](strategy::Decision), a [`Guard`](guard::Guard) may stop it, a
//! [`Model`](model::Model) or [`Tool`](tool::Tool)s perform it, and
//! [`EventSink`](sink::EventSink)s see what was committed; cross-cutting
//! behaviour around tools and models is a [`Layer`](layer::Layer). The engine
//! that drives sessions through these traits is the `agent-engine` crate; this
//! one holds no engine code.
//!
//! Each module holds one concept, and its path says which: there are no
//! re-exports at the crate's root.

pub mod cancel;
pub mod context;
pub mod delta;
pub mod event;
pub mod gate;
pub mod guard;
pub mod history;
pub mod id;
pub mod layer;
pub mod model;
pub mod result;
pub mod schema;
pub mod sink;
pub mod state;
pub mod store;
pub mod strategy;
pub mod strict_json;
pub mod telemetry;
pub mod tool;
pub mod types;
