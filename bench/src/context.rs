//! `agent-bench context`: the input tokens a long session sends under each
//! context policy. One scripted session of `--steps` calculator steps per
//! policy runs on the real engine; every request the model receives (steps
//! and summaries) is counted with a real tokenizer. Prints one JSON line per
//! policy: total, largest and last request, and how the second half of the
//! session compares with the first (about 3 for quadratic growth, 1 for linear).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use agent::context::ContextSpec;
use agent::context::{ContextInput, EstimatedTokens, TokenCounter};
use agent::model::{CallPurpose, ModelContext, ModelError, ModelRequest, ModelResponse};
use agent::prelude::*;
use agent::providers::{ScriptedModel, Tiktoken};
use agent::tools::{Calculator, ToolRegistry, Typed};
use anyhow::Context;
use async_trait::async_trait;
use serde_json::{Value, json};

/// Arguments of `agent-bench context`.
#[derive(Debug, clap::Args)]
pub struct ContextArgs {
    /// Calculator steps before the finish.
    #[arg(long, default_value_t = 200)]
    steps: usize,
    /// Policies to compare, as `--context` spells them.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "keep-all,last:8,window:2000,summarise:2000"
    )]
    policies: Vec<String>,
    /// How tokens are counted: `o200k` (the tokenizer of gpt-4o) or `estimate`.
    #[arg(long, default_value = "o200k")]
    tokenizer: String,
}

/// Counts the tokens of every request before the scripted model answers it.
struct Counting {
    inner: ScriptedModel,
    counter: Arc<dyn TokenCounter>,
    requests: Mutex<Vec<(u64, bool)>>,
}

#[async_trait]
impl Model for Counting {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        let tokens = ContextInput {
            instructions: &request.instructions,
            task: &request.task,
            tools: &request.tools,
            history: &request.history,
        }
        .tokens(self.counter.as_ref());
        let summary = matches!(ctx.purpose, CallPurpose::Summary { .. });
        if let Ok(mut requests) = self.requests.lock() {
            requests.push((tokens, summary));
        }
        self.inner.complete(request, ctx).await
    }

    fn token_counter(&self) -> Option<Arc<dyn TokenCounter>> {
        Some(Arc::clone(&self.counter))
    }
}

fn script(steps: usize) -> Vec<Value> {
    let mut script: Vec<Value> = (0..steps)
        .map(|n| {
            json!({"type": "tool_call", "tool_name": "calculator",
                   "arguments": {"left": n, "operation": "multiply", "right": 7}})
        })
        .collect();
    script.push(json!({"type": "finish", "answer": "every product computed"}));
    script
}

/// Runs the comparison and prints its lines.
pub async fn context(args: ContextArgs) -> anyhow::Result<()> {
    let counter: Arc<dyn TokenCounter> = match args.tokenizer.as_str() {
        "o200k" => Arc::new(Tiktoken::for_model("gpt-4o").context("the o200k tokenizer")?),
        "estimate" => Arc::new(EstimatedTokens),
        other => anyhow::bail!("--tokenizer `{other}` is not known; use o200k or estimate"),
    };
    for spec in &args.policies {
        let parsed = ContextSpec::parse(spec)?;
        let model = Arc::new(Counting {
            inner: ScriptedModel::from_values(script(args.steps)).map_err(anyhow::Error::msg)?,
            counter: Arc::clone(&counter),
            requests: Mutex::new(Vec::new()),
        });
        let mut registry = ToolRegistry::new();
        registry.register_shared(Arc::new(Typed::<Calculator>::new()))?;
        let mut builder = Engine::builder(model.clone(), Arc::new(ReAct::new()))
            .tools(registry.into_toolbox())
            .budgets(Budgets {
                max_steps: u32::try_from(args.steps + 1)?,
                ..Budgets::default()
            });
        if let Some(policy) = parsed.policy(Arc::clone(&counter)) {
            builder = builder.context(policy);
        }
        let engine = builder.build();
        let started = Instant::now();
        let result = engine.run("Multiply each number by 7.", json!({})).await?;
        let elapsed = started.elapsed();
        anyhow::ensure!(
            result.exit_reason == ExitReason::Finished,
            "policy {spec}: the session ended with {}",
            result.exit_reason
        );
        let requests = model
            .requests
            .lock()
            .map_err(|_| anyhow::anyhow!("the request log was poisoned"))?
            .clone();
        let steps: Vec<u64> = requests
            .iter()
            .filter(|(_, summary)| !summary)
            .map(|(tokens, _)| *tokens)
            .collect();
        let half = steps.len() / 2;
        let (first_half, second_half) = steps.split_at(half);
        let first: u64 = first_half.iter().sum();
        let second: u64 = second_half.iter().sum();
        let total: u64 = requests.iter().map(|(tokens, _)| tokens).sum();
        println!(
            "{}",
            json!({
                "bench": "context",
                "policy": parsed.to_string(),
                "tokenizer": counter.name(),
                "steps": result.steps_used,
                "model_calls": result.usage.model_calls,
                "summaries": requests.iter().filter(|(_, summary)| *summary).count(),
                "input_tokens_total": total,
                "input_tokens_max": requests.iter().map(|(tokens, _)| *tokens).max().unwrap_or(0),
                "input_tokens_last": steps.last().copied().unwrap_or(0),
                "second_half_over_first": if first == 0 { 0.0 } else { second as f64 / first as f64 },
                "us_per_step": elapsed.as_micros() as f64 / f64::from(result.steps_used.max(1)),
            })
        );
    }
    Ok(())
}
