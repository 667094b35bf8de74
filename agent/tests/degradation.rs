//! Graceful degradation on the library: limits that still answer (`partial`),
//! repeated invalid output that degrades to plain text (`degraded`),
//! reflection every N steps, typed output checked against a schema, and usage
//! counted per model behind a fallback — each on the real engine with the
//! scripted model, recorded in the log and read back from it.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::{Arc, Mutex};

use agent::engine::{EngineBuilder, OnLimit};
use agent::event::{EventKind, LastAnswerKind};
use agent::history::HistoryItem;
use agent::layers::FallbackModel;
use agent::model::{ModelContext, ModelError, ModelRequest, ModelResponse};
use agent::prelude::*;
use agent::providers::ReplayModel;
use agent::result::BudgetKind;
use agent::tools::Typed;
use async_trait::async_trait;
use serde_json::{Value, json};

/// Delegates to a model and remembers every request.
struct Recording {
    inner: Arc<dyn Model>,
    requests: Mutex<Vec<ModelRequest>>,
}

#[async_trait]
impl Model for Recording {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.complete(request, ctx).await
    }
}

/// A provider that is down for good.
struct Down;

#[async_trait]
impl Model for Down {
    async fn complete(
        &self,
        _request: &ModelRequest,
        _ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        Err(ModelError::Fatal {
            message: "401 unauthorized".into(),
        })
    }
}

fn calc(left: i64, right: i64) -> Value {
    json!({"type": "tool_call", "tool_name": "calculator",
           "arguments": {"left": left, "operation": "multiply", "right": right}})
}

fn finish(answer: &str) -> Value {
    json!({"type": "finish", "answer": answer})
}

fn scripted(script: Vec<Value>) -> Arc<dyn Model> {
    Arc::new(ScriptedModel::from_values(script).unwrap())
}

struct Run {
    model: Arc<Recording>,
    store: Arc<MemoryStore>,
}

impl Run {
    fn new(model: Arc<dyn Model>) -> Self {
        Self {
            model: Arc::new(Recording {
                inner: model,
                requests: Mutex::new(Vec::new()),
            }),
            store: Arc::new(MemoryStore::new()),
        }
    }

    fn builder(&self, budgets: Budgets) -> EngineBuilder {
        let mut registry = ToolRegistry::new();
        registry.register(Typed::<Calculator>::new()).unwrap();
        Engine::builder(self.model.clone(), Arc::new(ReAct::new()))
            .tools(registry.into_toolbox())
            .store(self.store.clone())
            .budgets(budgets)
    }

    async fn events(&self, session_id: &str) -> Vec<EventKind> {
        self.store
            .load(session_id)
            .await
            .unwrap()
            .into_iter()
            .map(|event| event.kind)
            .collect()
    }

    fn requests(&self) -> Vec<ModelRequest> {
        self.model.requests.lock().unwrap().clone()
    }
}

fn steps(max_steps: u32) -> Budgets {
    Budgets {
        max_steps,
        ..Budgets::default()
    }
}

#[tokio::test]
async fn a_step_limit_asks_once_more_and_keeps_its_exit_code() {
    let run = Run::new(scripted(vec![
        calc(12, 7),
        calc(84, 1),
        finish("12 times 7 is 84; I did not get to check it."),
    ]));
    let engine = run.builder(steps(2)).build();
    let result = engine.run("What is 12 times 7?", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::MaxStepsExceeded);
    assert_eq!(result.exit_code(), 3);
    assert!(result.partial && !result.degraded);
    assert_eq!(
        result.answer.as_deref(),
        Some("12 times 7 is 84; I did not get to check it.")
    );
    assert_eq!(result.steps_used, 2, "the last answer is not a step");
    assert_eq!(result.usage.model_calls, 3, "but it is a model call");
    let requests = run.requests();
    let last = requests.last().unwrap();
    assert!(last.tools.is_empty(), "the last request offers no tools");
    assert!(
        last.instructions.contains("no more tools"),
        "{}",
        last.instructions
    );
    let results = last
        .history
        .iter()
        .filter(|item| matches!(item, HistoryItem::Observation { .. }))
        .count();
    assert_eq!(results, 2, "it sees what was gathered");
    let events = run.events(&result.session_id).await;
    let names: Vec<&str> = events.iter().rev().take(2).map(EventKind::name).collect();
    assert_eq!(names, ["failed", "last_answer"]);

    let replayed = Run::new(Arc::new(ReplayModel::from_events(
        &result.session_id,
        &run.store.load(&result.session_id).await.unwrap(),
    )));
    let again = replayed
        .builder(steps(2))
        .build()
        .run("What is 12 times 7?", json!({}))
        .await
        .unwrap();
    assert_eq!(again.answer, result.answer, "a replay answers the same");
    assert!(again.partial);
}

/// Calls the calculator, then hangs on every step; the last answer comes at once.
struct HangsAfterOneStep;

#[async_trait]
impl Model for HangsAfterOneStep {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        let answer = match ctx.purpose {
            agent::model::CallPurpose::LastAnswer => finish("84, before the time ran out"),
            _ if ctx.step == 1 => calc(12, 7),
            _ => {
                tokio::time::sleep(std::time::Duration::from_secs(30)).await;
                finish("too late")
            }
        };
        ScriptedModel::from_values(vec![answer])
            .unwrap()
            .complete(request, &ModelContext::new(&ctx.session_id, 1))
            .await
    }
}

#[tokio::test]
async fn the_wall_time_limit_still_answers_after_its_deadline() {
    let run = Run::new(Arc::new(HangsAfterOneStep));
    let budgets = Budgets {
        timeout: Some(std::time::Duration::from_millis(300)),
        ..Budgets::default()
    };
    let result = run
        .builder(budgets)
        .build()
        .run("What is 12 times 7?", json!({}))
        .await
        .unwrap();
    assert_eq!(result.exit_reason, ExitReason::BudgetExceeded);
    assert_eq!(result.budget, Some(BudgetKind::WallTime));
    assert!(result.partial, "{result:?}");
    assert_eq!(
        result.answer.as_deref(),
        Some("84, before the time ran out")
    );
}

#[tokio::test]
async fn a_crash_after_the_last_answer_is_recorded_does_not_ask_again() {
    let script = vec![calc(12, 7), calc(84, 1), finish("84, partially checked")];
    let first = Run::new(scripted(script.clone()));
    let result = first
        .builder(steps(2))
        .build()
        .run("What is 12 times 7?", json!({}))
        .await
        .unwrap();
    let mut events = first.store.load(&result.session_id).await.unwrap();
    let failed = events.pop().unwrap();
    assert_eq!(failed.kind.name(), "failed");
    let crashed = Run::new(scripted(script));
    crashed
        .store
        .append(agent::store::Append::creating(&events, agent::store::Durability::Full).unwrap())
        .await
        .unwrap();
    let resumed = crashed
        .builder(steps(2))
        .build()
        .resume(&result.session_id)
        .await
        .unwrap();
    assert!(crashed.requests().is_empty(), "the answer was already in");
    assert_eq!(resumed.answer, result.answer);
    assert!(resumed.partial);
    assert_eq!(resumed.exit_reason, ExitReason::MaxStepsExceeded);
}

#[tokio::test]
async fn on_limit_stop_ends_without_asking() {
    let run = Run::new(scripted(vec![calc(12, 7), calc(84, 1), finish("never")]));
    let engine = run.builder(steps(2)).on_limit(OnLimit::Stop).build();
    let result = engine.run("What is 12 times 7?", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::MaxStepsExceeded);
    assert_eq!((result.answer, result.partial), (None, false));
    assert_eq!(run.requests().len(), 2);
}

#[tokio::test]
async fn a_call_budget_answers_too_and_still_names_the_budget() {
    let run = Run::new(scripted(vec![calc(12, 7), finish("84, from the one call")]));
    let budgets = Budgets {
        max_model_calls: Some(1),
        ..Budgets::default()
    };
    let result = run
        .builder(budgets)
        .build()
        .run("What is 12 times 7?", json!({}))
        .await
        .unwrap();
    assert_eq!(result.exit_reason, ExitReason::BudgetExceeded);
    assert_eq!(result.budget, Some(BudgetKind::ModelCalls));
    assert!(result.partial);
    assert_eq!(result.answer.as_deref(), Some("84, from the one call"));
}

#[tokio::test]
async fn three_invalid_outputs_in_a_row_degrade_to_plain_text() {
    let run = Run::new(scripted(vec![
        json!("not json"),
        json!({"type": "dance"}),
        json!("{\"type\": \"tool_call\""),
        json!("The answer is 84."),
        finish("never asked"),
    ]));
    let result = run
        .builder(Budgets::default())
        .build()
        .run("What is 12 times 7?", json!({}))
        .await
        .unwrap();
    assert_eq!(result.exit_reason, ExitReason::InvalidModelOutput);
    assert_eq!(result.exit_code(), 4);
    assert!(result.degraded && !result.partial);
    assert_eq!(result.answer.as_deref(), Some("The answer is 84."));
    assert_eq!(result.steps_used, 3, "three invalid outputs, then it stops");
    let last = run.requests().pop().unwrap();
    assert!(last.tools.is_empty());
    assert!(
        last.instructions.contains("plain text"),
        "{}",
        last.instructions
    );
    let events = run.events(&result.session_id).await;
    assert!(events.iter().any(|event| matches!(
        event,
        EventKind::LastAnswer {
            kind: LastAnswerKind::Degraded,
            ..
        }
    )));
}

#[tokio::test]
async fn an_invalid_output_between_valid_ones_does_not_count_towards_the_limit() {
    let run = Run::new(scripted(vec![
        json!("not json"),
        json!("not json"),
        calc(12, 7),
        json!("not json"),
        json!("not json"),
        finish("84"),
    ]));
    let result = run
        .builder(Budgets::default())
        .build()
        .run("What is 12 times 7?", json!({}))
        .await
        .unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished, "{result:?}");
    assert!(!result.degraded);
}

#[tokio::test]
async fn reflection_every_two_steps_tells_a_looping_model_so() {
    let run = Run::new(scripted(vec![
        calc(12, 7),
        calc(12, 7),
        calc(12, 7),
        calc(12, 7),
        finish("84"),
    ]));
    let engine = run.builder(steps(10)).reflect_every(Some(2)).build();
    let result = engine.run("What is 12 times 7?", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    assert_eq!(result.steps_used, 5, "reflections are not steps");
    assert_eq!(result.usage.model_calls, 7, "but they are model calls");
    let events = run.events(&result.session_id).await;
    let reflections: Vec<(u32, &str)> = events
        .iter()
        .filter_map(|event| match event {
            EventKind::Reflection { step, note, .. } => Some((*step, note.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        reflections
            .iter()
            .map(|(step, _)| *step)
            .collect::<Vec<_>>(),
        [2, 4]
    );
    assert!(
        reflections[0].1.starts_with("Going in circles"),
        "{reflections:?}"
    );
    let requests = run.requests();
    let after_first = &requests[3];
    assert!(
        after_first.history.iter().any(|item| matches!(
            item,
            HistoryItem::Feedback { message } if message.starts_with("Reflection after step 2: Going in circles")
        )),
        "the next decision sees the note: {:?}",
        after_first.history
    );
}

#[derive(Debug, PartialEq, schemars::JsonSchema, serde::Deserialize)]
struct Product {
    product: i64,
}

#[tokio::test]
async fn an_answer_that_breaks_the_output_schema_is_fed_back_then_lands_as_output() {
    let run = Run::new(scripted(vec![
        finish(r#"{"product": "eighty-four"}"#),
        finish(r#"{"product": 84}"#),
    ]));
    let engine = run
        .builder(Budgets::default())
        .output::<Product>()
        .unwrap()
        .build();
    let result = engine.run("What is 12 times 7?", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    assert_eq!(result.output, Some(json!({"product": 84})));
    assert_eq!(
        result.output_as::<Product>().unwrap().unwrap(),
        Product { product: 84 }
    );
    let requests = run.requests();
    assert!(requests[0].output_schema.is_some());
    assert!(requests[0].instructions.contains("JSON Schema"));
    let HistoryItem::Feedback { message } = requests[1].history.last().unwrap() else {
        panic!("expected feedback, got {:?}", requests[1].history);
    };
    assert!(message.contains("field `product`"), "{message}");
}

#[tokio::test]
async fn usage_is_counted_per_model_behind_a_fallback() {
    let chain = FallbackModel::new("openai:down", Arc::new(Down)).or(
        "scripted:calc.json",
        scripted(vec![calc(12, 7), finish("84")]),
    );
    let run = Run::new(Arc::new(chain));
    let result = run
        .builder(Budgets::default())
        .build()
        .run("What is 12 times 7?", json!({"model": "openai:down"}))
        .await
        .unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    let by_model = &result.usage.by_model;
    assert_eq!(by_model.len(), 1, "{by_model:?}");
    assert_eq!(by_model["scripted:calc.json"].model_calls, 2);

    let plain = Run::new(scripted(vec![finish("84")]));
    let result = plain
        .builder(Budgets::default())
        .build()
        .run("What is 12 times 7?", json!({"model": "scripted:one.json"}))
        .await
        .unwrap();
    assert_eq!(result.usage.by_model["scripted:one.json"].model_calls, 1);
}
