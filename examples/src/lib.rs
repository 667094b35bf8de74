//! Runnable examples of the agent runtime. Each program is a Cargo example target:
//! `cargo run -p examples --example NAME`.
//!
//! - `react_calculator`: ReAct with the scripted model and the calculator, printing
//!   the result and the JSONL trace.
//! - `custom_tool`: a tool written with `#[derive(Tool)]`, its generated spec, and
//!   schema validation of a bad call.
//! - `code_agent`: file tools and a `cargo test` completion gate fix a failing test
//!   in a fixture crate (its own `[workspace]` and target dir).
//! - `plan_execute`: a two-step plan, each step a bounded ReAct loop, and a
//!   composed answer.
//! - `approval`: a call that needs approval pauses the session; the code approves
//!   it and resumes.
//! - `dag_research`: a DAG that fans out over three sub-questions, joins and
//!   summarises; `--crash-after-two` kills it mid-run and `--resume ID` finishes
//!   only what is left.
