//! The minimal agent loop end to end on the library: ReAct, the scripted model, the
//! calculator and the in-memory store.

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent::engine::INTERRUPTED;
use agent::event::{Event, EventKind};
use agent::history::HistoryItem;
use agent::model::{ModelContext, ModelError, ModelRequest, ModelResponse};
use agent::prelude::*;
use agent::result::BudgetKind;
use agent::sink::{EventSink, SinkError};
use agent::tools::Typed;
use agent::types::ToolSpec;
use agent::types::{Action, Observation, ToolCall};
use async_trait::async_trait;
use serde_json::{Value, json};

/// Delegates to a scripted model and remembers every request.
struct Recording {
    inner: ScriptedModel,
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

/// Collects committed events with their steps.
#[derive(Default)]
struct Collect(Mutex<Vec<(Event, u32)>>);

impl EventSink for Collect {
    fn publish(&self, event: &Event, step: u32) -> Result<(), SinkError> {
        self.0.lock().unwrap().push((event.clone(), step));
        Ok(())
    }
}

struct Harness {
    model: Arc<Recording>,
    store: Arc<MemoryStore>,
    sink: Arc<Collect>,
    engine: Engine,
}

fn harness(script: Vec<Value>, tools: Vec<Arc<dyn Tool>>, budgets: Budgets) -> Harness {
    let model = Arc::new(Recording {
        inner: ScriptedModel::from_values(script).unwrap(),
        requests: Mutex::new(Vec::new()),
    });
    let store = Arc::new(MemoryStore::new());
    let sink = Arc::new(Collect::default());
    let mut registry = ToolRegistry::new();
    for tool in tools {
        registry.register_shared(tool).unwrap();
    }
    let engine = Engine::builder(model.clone(), Arc::new(ReAct::new()))
        .tools(registry.into_toolbox())
        .store(store.clone())
        .sink(sink.clone())
        .budgets(budgets)
        .build();
    Harness {
        model,
        store,
        sink,
        engine,
    }
}

fn calculator() -> Vec<Arc<dyn Tool>> {
    vec![Arc::new(Typed::<Calculator>::new())]
}

fn calc(left: Value, operation: &str, right: Value) -> Value {
    json!({"type": "tool_call", "tool_name": "calculator",
           "arguments": {"left": left, "operation": operation, "right": right}})
}

fn finish(answer: &str) -> Value {
    json!({"type": "finish", "answer": answer})
}

fn observations(h: &Harness) -> Vec<Observation> {
    h.sink
        .0
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(event, _)| match &event.kind {
            EventKind::ActionCompleted { observation } => Some(observation.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_model_sees_an_empty_history_then_the_call_and_its_observation() {
    let h = harness(
        vec![
            calc(json!(12), "multiply", json!(7)),
            finish("84, which is above 80"),
        ],
        calculator(),
        Budgets::default(),
    );
    let result = h
        .engine
        .run("What is 12 times 7, and is it above 80?", json!({}))
        .await
        .unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    assert_eq!(result.answer.as_deref(), Some("84, which is above 80"));
    assert_eq!(result.steps_used, 2);
    assert_eq!(result.usage.tool_calls, 1);
    assert_eq!(result.usage.model_calls, 2);

    let requests = h.model.requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].history.is_empty());
    assert_eq!(requests[0].task, "What is 12 times 7, and is it above 80?");
    assert_eq!(requests[0].tools.len(), 1);
    assert_eq!(requests[0].tools[0].name, "calculator");
    let call = ToolCall {
        id: "call_1_1".into(),
        tool_name: "calculator".into(),
        arguments: json!({"left": 12, "operation": "multiply", "right": 7}),
    };
    assert_eq!(
        *requests[1].history,
        [
            HistoryItem::ToolCalls {
                calls: vec![call.clone()],
                text: None
            },
            HistoryItem::Observation {
                observation: Observation::success(&call, "84")
            },
        ]
    );
}

#[tokio::test]
async fn invalid_output_becomes_feedback_and_the_model_is_asked_again() {
    let h = harness(
        vec![json!("the answer is 84"), finish("84")],
        calculator(),
        Budgets::default(),
    );
    let result = h.engine.run("task", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    assert_eq!(result.steps_used, 2);
    let requests = h.model.requests.lock().unwrap();
    let [HistoryItem::Feedback { message }] = requests[1].history.as_slice() else {
        panic!("expected one feedback item, got {:?}", requests[1].history);
    };
    assert!(message.contains("not valid JSON"), "{message}");
}

#[tokio::test]
async fn output_that_stays_invalid_ends_with_invalid_model_output() {
    let budgets = Budgets {
        max_steps: 3,
        ..Budgets::default()
    };
    let h = harness(
        vec![
            json!("nope"),
            json!({"type": "finish"}),
            json!({"type": "dance"}),
        ],
        calculator(),
        budgets,
    );
    let result = h.engine.run("task", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::InvalidModelOutput);
    assert_eq!(result.exit_code(), 4);
    assert_eq!(result.steps_used, 3);
}

#[tokio::test]
async fn an_unknown_tool_is_an_error_observation_and_the_run_goes_on() {
    let h = harness(
        vec![
            json!({"type": "tool_call", "tool_name": "weather", "arguments": {"city": "Oslo"}}),
            finish("no weather tool"),
        ],
        calculator(),
        Budgets::default(),
    );
    let result = h.engine.run("task", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    let [observation] = observations(&h).try_into().unwrap();
    assert!(observation.is_error);
    assert_eq!(
        observation.content,
        "unknown tool `weather`: available tools are calculator"
    );
}

#[tokio::test]
async fn division_by_zero_is_an_error_observation() {
    let h = harness(
        vec![calc(json!(1), "divide", json!(0)), finish("cannot")],
        calculator(),
        Budgets::default(),
    );
    let result = h.engine.run("task", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    let [observation] = observations(&h).try_into().unwrap();
    assert!(observation.is_error);
    assert_eq!(observation.content, "division by zero");
}

#[tokio::test]
async fn extra_and_misspelled_arguments_are_error_observations_naming_the_field() {
    let h = harness(
        vec![
            json!({"type": "tool_call", "tool_name": "calculator",
                   "arguments": {"left": 1, "operation": "add", "right": 2, "precision": 3}}),
            json!({"type": "tool_call", "tool_name": "calculator",
                   "arguments": {"left": 1, "oprtation": "add", "right": 2}}),
            calc(json!("12"), "add", json!(1)),
            finish("done"),
        ],
        calculator(),
        Budgets::default(),
    );
    let result = h.engine.run("task", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    let observations = observations(&h);
    assert!(observations.iter().all(|o| o.is_error));
    assert!(
        observations[0]
            .content
            .contains("unexpected field `precision`"),
        "{}",
        observations[0].content
    );
    assert!(
        observations[1]
            .content
            .contains("unexpected field `oprtation`"),
        "{}",
        observations[1].content
    );
    assert!(
        observations[1]
            .content
            .contains("missing required field `operation`"),
        "{}",
        observations[1].content
    );
    assert!(
        observations[2].content.contains("field `left`"),
        "{}",
        observations[2].content
    );
}

#[tokio::test]
async fn no_finish_within_the_step_budget_is_max_steps_exceeded() {
    let budgets = Budgets {
        max_steps: 2,
        ..Budgets::default()
    };
    let script = vec![calc(json!(1), "add", json!(1)); 5];
    let h = harness(script, calculator(), budgets);
    let result = h.engine.run("task", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::MaxStepsExceeded);
    assert_eq!(result.exit_code(), 3);
    assert_eq!(result.steps_used, 2);
    let requests = h.model.requests.lock().unwrap();
    assert_eq!(requests.len(), 3, "two steps and the last answer");
    assert!(
        requests[2].tools.is_empty(),
        "the last answer offers no tools"
    );
    assert_eq!(
        result.answer, None,
        "the script's next response is a tool call"
    );
    assert!(!result.partial);
}

/// A tool that panics on every call.
struct Panicking(ToolSpec);

#[async_trait]
impl Tool for Panicking {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        panic!("the tool has a bug")
    }
}

fn spec(name: &str, idempotent: bool) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("test tool {name}"),
        input_schema: json!({"type": "object"}),
        output_description: None,
        error_description: None,
        idempotent,
        needs_approval: false,
    }
}

#[tokio::test]
async fn a_panicking_tool_is_recorded_as_internal_error_before_the_run_fails() {
    let h = harness(
        vec![
            json!({"type": "tool_call", "tool_name": "buggy", "arguments": {}}),
            finish("x"),
        ],
        vec![Arc::new(Panicking(spec("buggy", true)))],
        Budgets::default(),
    );
    let result = h.engine.run("task", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::InternalError);
    assert_eq!(result.exit_code(), 1);
    let error = result.error.unwrap();
    assert!(
        error.contains("tool `buggy` panicked") && error.contains("the tool has a bug"),
        "{error}"
    );
    let log = h.store.load(&result.session_id).await.unwrap();
    let Some(EventKind::Failed { exit_reason, .. }) = log.last().map(|e| &e.kind) else {
        panic!("the log must end with the failure");
    };
    assert_eq!(*exit_reason, ExitReason::InternalError);
}

/// Waits at a shared barrier, so two calls complete only if they run concurrently;
/// `delay` makes the first-proposed call finish last.
struct Rendezvous {
    spec: ToolSpec,
    barrier: Arc<tokio::sync::Barrier>,
    delay: Duration,
}

#[async_trait]
impl Tool for Rendezvous {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.barrier.wait().await;
        tokio::time::sleep(self.delay).await;
        Ok(self.spec.name.as_str().into())
    }
}

#[tokio::test]
async fn calls_of_one_turn_run_concurrently_and_observations_keep_proposal_order() {
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(Rendezvous {
            spec: spec("slow", true),
            barrier: barrier.clone(),
            delay: Duration::from_millis(50),
        }),
        Arc::new(Rendezvous {
            spec: spec("fast", true),
            barrier,
            delay: Duration::ZERO,
        }),
    ];
    let h = harness(
        vec![
            json!({"type": "tool_calls", "calls": [
                {"tool_name": "slow", "arguments": {}},
                {"tool_name": "fast", "arguments": {}}]}),
            finish("both"),
        ],
        tools,
        Budgets::default(),
    );
    let result = tokio::time::timeout(Duration::from_secs(10), h.engine.run("task", json!({})))
        .await
        .expect("the calls must run concurrently: each waits for the other")
        .unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    let completed: Vec<String> = observations(&h).into_iter().map(|o| o.content).collect();
    assert_eq!(
        completed,
        ["fast", "slow"],
        "results are committed as they arrive"
    );
    let requests = h.model.requests.lock().unwrap();
    let seen: Vec<&str> = requests[1]
        .history
        .iter()
        .filter_map(|item| match item {
            HistoryItem::Observation { observation } => Some(observation.content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(seen, ["slow", "fast"], "the model sees proposal order");
}

/// A tool that never returns.
struct Hanging(ToolSpec);

#[async_trait]
impl Tool for Hanging {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, _: Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn the_wall_time_budget_cancels_a_call_in_flight() {
    let budgets = Budgets {
        timeout: Some(Duration::from_millis(100)),
        ..Budgets::default()
    };
    let h = harness(
        vec![json!({"type": "tool_call", "tool_name": "hang", "arguments": {}})],
        vec![Arc::new(Hanging(spec("hang", true)))],
        budgets,
    );
    let result = h.engine.run("task", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::BudgetExceeded);
    assert_eq!(result.budget, Some(BudgetKind::WallTime));
}

#[tokio::test]
async fn tool_call_budgets_in_total_and_per_tool() {
    let two_calls = vec![
        calc(json!(1), "add", json!(1)),
        calc(json!(2), "add", json!(2)),
        finish("done"),
    ];
    let total = Budgets {
        max_tool_calls: Some(1),
        ..Budgets::default()
    };
    let h = harness(two_calls.clone(), calculator(), total);
    let result = h.engine.run("task", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::BudgetExceeded);
    assert_eq!(result.budget, Some(BudgetKind::ToolCalls));
    assert_eq!(result.usage.tool_calls, 1);

    let per_tool = Budgets {
        max_calls_per_tool: [("calculator".to_owned(), 1)].into(),
        ..Budgets::default()
    };
    let h = harness(two_calls, calculator(), per_tool);
    let result = h.engine.run("task", json!({})).await.unwrap();
    assert_eq!(
        result.budget,
        Some(BudgetKind::ToolCallsOf("calculator".into()))
    );
    assert_eq!(
        serde_json::to_value(&result).unwrap()["budget"],
        "tool_calls:calculator"
    );
}

#[tokio::test]
async fn a_script_that_runs_out_is_an_internal_error() {
    let h = harness(
        vec![calc(json!(1), "add", json!(1))],
        calculator(),
        Budgets::default(),
    );
    let result = h.engine.run("task", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::InternalError);
    assert!(result.error.unwrap().contains("ran out of responses"));
}

#[tokio::test]
async fn resume_reruns_idempotent_calls_and_reports_others_as_interrupted() {
    let h = harness(
        vec![
            json!({"type": "tool_calls", "calls": [
                {"tool_name": "calculator", "arguments": {"left": 2, "operation": "add", "right": 2}},
                {"tool_name": "effect", "arguments": {}}]}),
            finish("recovered"),
        ],
        vec![
            Arc::new(Typed::<Calculator>::new()),
            Arc::new(Hanging(spec("effect", false))),
        ],
        Budgets::default(),
    );
    let session = "resume-test";
    let calls = [
        ToolCall {
            id: "call_1_1".into(),
            tool_name: "calculator".into(),
            arguments: json!({"left": 2, "operation": "add", "right": 2}),
        },
        ToolCall {
            id: "call_1_2".into(),
            tool_name: "effect".into(),
            arguments: json!({}),
        },
    ];
    let kinds = vec![
        EventKind::SessionStarted {
            task: "task".into(),
            strategy: "react".into(),
            config: json!({}),
        },
        EventKind::ModelRequested {
            step: 1,
            context_tokens: None,
        },
        EventKind::ModelResponded {
            actions: calls.iter().cloned().map(Action::ToolCall).collect(),
            usage: agent::types::Usage::default(),
            text: None,
        },
        EventKind::ActionDispatched {
            call: calls[0].clone(),
        },
        EventKind::ActionDispatched {
            call: calls[1].clone(),
        },
    ];
    let events: Vec<Event> = kinds
        .into_iter()
        .zip(1..)
        .map(|(kind, seq)| Event::new(session, seq, kind))
        .collect();
    h.store
        .append(agent::store::Append::creating(&events, agent::store::Durability::Full).unwrap())
        .await
        .unwrap();

    let result = h.engine.resume(session).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    assert_eq!(result.steps_used, 2);
    let mut contents: Vec<(String, String)> = observations(&h)
        .into_iter()
        .map(|o| (o.tool_name, o.content))
        .collect();
    contents.sort();
    assert_eq!(
        contents,
        [
            ("calculator".to_owned(), "4".to_owned()),
            ("effect".to_owned(), INTERRUPTED.to_owned())
        ]
    );
    let again = h.engine.resume(session).await.unwrap();
    assert_eq!(
        again, result,
        "resuming an ended session returns its stored result"
    );
}

/// Looks at the store the moment it is called: what the engine had written by
/// the time an idempotent tool started.
struct Witness {
    spec: ToolSpec,
    store: Arc<MemoryStore>,
    seen: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Tool for Witness {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let log = self.store.load(&ctx.session_id).await.unwrap();
        *self.seen.lock().unwrap() = log.iter().map(|e| e.kind.name().to_owned()).collect();
        Ok("seen".into())
    }
}

/// Regression: a response was held in memory while its idempotent calls ran,
/// so a process killed during them lost it and a resume paid for the step again.
#[tokio::test]
async fn a_model_response_is_written_before_its_idempotent_calls_start() {
    let store = Arc::new(MemoryStore::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let witness = Witness {
        spec: spec("witness", true),
        store: store.clone(),
        seen: seen.clone(),
    };
    let engine = Engine::builder(
        Arc::new(
            ScriptedModel::from_values(vec![
                json!({"type": "tool_call", "tool_name": "witness", "arguments": {}}),
                finish("done"),
            ])
            .unwrap(),
        ),
        Arc::new(ReAct::new()),
    )
    .tools({
        let mut registry = ToolRegistry::new();
        registry.register_shared(Arc::new(witness)).unwrap();
        registry.into_toolbox()
    })
    .store(store.clone())
    .build();
    let result = engine.run("task", json!({})).await.unwrap();
    assert_eq!(result.exit_reason, ExitReason::Finished);
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.ends_with(&["model_responded".to_owned(), "action_dispatched".to_owned()]),
        "written when the tool started: {seen:?}"
    );
}
