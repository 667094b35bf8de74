//! Context policies on the real engine over a 300-step scripted session: what
//! each model request holds never exceeds the policy's window, a call never
//! travels without its result, summaries are recorded and counted, and the
//! history folded from the log is the history the model was sent.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::{Arc, Mutex};

use agent::context::ContextSpec;
use agent::context::{ContextInput, EstimatedTokens, TokenCounter};
use agent::event::{Event, EventKind};
use agent::history::HistoryItem;
use agent::model::{CallPurpose, ModelContext, ModelError, ModelRequest, ModelResponse};
use agent::prelude::*;
use agent::providers::ScriptedModel;
use agent::state::SessionState;
use agent::store::MemoryStore;
use agent::tools::{Calculator, ToolRegistry, Typed};
use async_trait::async_trait;
use serde_json::{Value, json};

const STEPS: usize = 300;

/// Delegates to a scripted model and remembers every request with its purpose.
struct Recording {
    inner: ScriptedModel,
    requests: Mutex<Vec<(ModelRequest, CallPurpose)>>,
}

#[async_trait]
impl Model for Recording {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        self.requests
            .lock()
            .unwrap()
            .push((request.clone(), ctx.purpose));
        self.inner.complete(request, ctx).await
    }
}

fn script() -> Vec<Value> {
    let mut script: Vec<Value> = (0..STEPS)
        .map(|n| {
            json!({"type": "tool_call", "tool_name": "calculator",
                   "arguments": {"left": n, "operation": "multiply", "right": 7}})
        })
        .collect();
    script.push(json!({"type": "finish", "answer": "all products computed"}));
    script
}

struct Outcome {
    result: RunResult,
    requests: Vec<(ModelRequest, CallPurpose)>,
    events: Vec<Event>,
}

async fn run(spec: &str) -> Outcome {
    let model = Arc::new(Recording {
        inner: ScriptedModel::from_values(script()).unwrap(),
        requests: Mutex::new(Vec::new()),
    });
    let store = Arc::new(MemoryStore::new());
    let mut registry = ToolRegistry::new();
    registry
        .register_shared(Arc::new(Typed::<Calculator>::new()))
        .unwrap();
    let mut builder = Engine::builder(model.clone(), Arc::new(ReAct::new()))
        .tools(registry.into_toolbox())
        .store(store.clone())
        .budgets(Budgets {
            max_steps: 400,
            ..Budgets::default()
        });
    if let Some(policy) = ContextSpec::parse(spec)
        .unwrap()
        .policy(Arc::new(EstimatedTokens))
    {
        builder = builder.context(policy);
    }
    let engine = builder.build();
    let result = engine
        .run("Multiply every number by 7.", json!({}))
        .await
        .unwrap();
    let events = store.load(&result.session_id).await.unwrap();
    let requests = model.requests.lock().unwrap().clone();
    Outcome {
        result,
        requests,
        events,
    }
}

fn tokens(request: &ModelRequest) -> u64 {
    ContextInput {
        instructions: &request.instructions,
        task: &request.task,
        tools: &request.tools,
        history: &request.history,
    }
    .tokens(&EstimatedTokens)
}

/// Every call in `history` is followed by its results, and no result comes first.
fn assert_pairs_whole(history: &[HistoryItem]) {
    let mut index = 0;
    while index < history.len() {
        match &history[index] {
            HistoryItem::ToolCalls { calls, .. } => {
                for (offset, call) in calls.iter().enumerate() {
                    match history.get(index + 1 + offset) {
                        Some(HistoryItem::Observation { observation }) => {
                            assert_eq!(observation.call_id, call.id);
                        }
                        other => panic!("call {} is sent without its result: {other:?}", call.id),
                    }
                }
                index += 1 + calls.len();
            }
            HistoryItem::Observation { observation } => {
                panic!("result of {} is sent without its call", observation.call_id)
            }
            _ => index += 1,
        }
    }
}

fn steps(outcome: &Outcome) -> Vec<&ModelRequest> {
    outcome
        .requests
        .iter()
        .filter(|(_, purpose)| *purpose == CallPurpose::Step)
        .map(|(request, _)| request)
        .collect()
}

#[tokio::test]
async fn every_policy_finishes_300_steps_with_whole_pairs_within_its_window() {
    for (spec, window) in [
        ("keep-all", None),
        ("last:8", None),
        ("window:1500", Some(1500)),
        ("summarise:2000", Some(2000)),
    ] {
        let outcome = run(spec).await;
        assert_eq!(outcome.result.exit_reason, ExitReason::Finished, "{spec}");
        assert_eq!(outcome.result.usage.tool_calls, STEPS as u64, "{spec}");
        let steps = steps(&outcome);
        assert_eq!(steps.len(), STEPS + 1, "{spec}");
        for (number, request) in steps.iter().enumerate() {
            assert_pairs_whole(&request.history);
            if let Some(window) = window {
                let sent = tokens(request);
                assert!(
                    sent <= window,
                    "{spec}: step {} sent {sent} tokens",
                    number + 1
                );
            }
        }
        if spec == "last:8" {
            assert!(
                steps.iter().all(|request| request.history.len() <= 17),
                "{spec}"
            );
        }
        if spec == "keep-all" {
            assert_eq!(steps[STEPS].history.len(), 2 * STEPS, "{spec}");
        }
    }
}

#[tokio::test]
async fn summaries_are_recorded_counted_and_are_the_history_the_log_folds_to() {
    let outcome = run("summarise:2000").await;
    let compactions: Vec<&EventKind> = outcome
        .events
        .iter()
        .map(|event| &event.kind)
        .filter(|kind| matches!(kind, EventKind::ContextCompacted { .. }))
        .collect();
    let summaries = outcome
        .requests
        .iter()
        .filter(|(_, purpose)| matches!(purpose, CallPurpose::Summary { .. }))
        .count();
    assert!(compactions.len() >= 5, "{} compactions", compactions.len());
    assert_eq!(compactions.len(), summaries);
    assert_eq!(
        outcome.result.usage.model_calls,
        (STEPS + 1 + summaries) as u64,
        "summaries count as model calls, not as steps"
    );
    assert_eq!(outcome.result.steps_used, (STEPS + 1) as u32);
    for kind in compactions {
        let EventKind::ContextCompacted {
            from_seq,
            to_seq,
            tokens_before,
            tokens_after,
            ..
        } = kind
        else {
            panic!("not a compaction: {kind:?}")
        };
        assert!(from_seq <= to_seq);
        assert!(
            tokens_after < tokens_before,
            "{tokens_before} -> {tokens_after}"
        );
        assert!(*tokens_before > 2000);
    }
    let state = SessionState::from_events(&outcome.result.session_id, &outcome.events).unwrap();
    let last = steps(&outcome)[STEPS];
    assert_eq!(
        state.history(),
        &last.history[..],
        "the log folds to what the model saw last"
    );
    assert!(matches!(state.history()[0], HistoryItem::Summary { .. }));
    for (request, purpose) in &outcome.requests {
        if let CallPurpose::Summary { .. } = purpose {
            assert!(
                request.tools.is_empty(),
                "a summary request offers no tools"
            );
            assert_pairs_whole(&request.history);
        }
    }
}

#[test]
fn the_estimate_counts_what_the_policies_count() {
    assert_eq!(EstimatedTokens.count("twelve bytes"), 4);
}
