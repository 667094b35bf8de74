//! A custom tool in a few lines of typed Rust: `#[derive(Tool)]` writes its spec
//! (name, description, JSON Schema) from the struct and its doc comments; the
//! registry validates every call against that schema before `run` sees it.
//!
//! `cargo run -p examples --example custom_tool`

use std::sync::Arc;

use agent::prelude::*;
use agent::tools::TypedTool;
use serde::Deserialize;
use serde_json::json;

/// Converts an amount of money between two currencies at a fixed rate.
#[derive(Deserialize, schemars::JsonSchema, Tool)]
#[tool(idempotent, timeout_secs = 5)]
struct ConvertCurrency {
    /// The amount to convert.
    amount: f64,
    /// Currency of the amount.
    from: Currency,
    /// Currency wanted.
    to: Currency,
}

#[derive(Deserialize, schemars::JsonSchema, Clone, Copy)]
#[serde(rename_all = "UPPERCASE")]
enum Currency {
    Eur,
    Usd,
}

impl ConvertCurrency {
    async fn run(self, _ctx: &ToolContext) -> Result<String, ToolError> {
        let in_eur = match self.from {
            Currency::Eur => self.amount,
            Currency::Usd => self.amount / 1.1,
        };
        let out = match self.to {
            Currency::Eur => in_eur,
            Currency::Usd => in_eur * 1.1,
        };
        Ok(format!("{out:.2}"))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut tools = ToolRegistry::new();
    tools.register_typed::<ConvertCurrency>()?;
    let spec = <ConvertCurrency as TypedTool>::spec();
    println!(
        "spec the model sees:\n{}",
        serde_json::to_string_pretty(&spec)?
    );

    let model = ScriptedModel::from_values(vec![
        json!({"type": "tool_call", "tool_name": "convert_currency",
               "arguments": {"amount": 100, "from": "EUR", "to": "GBP"}}),
        json!({"type": "tool_call", "tool_name": "convert_currency",
               "arguments": {"amount": 100, "from": "EUR", "to": "USD"}}),
        json!({"type": "finish", "answer": "100 EUR is 110.00 USD"}),
    ])
    .map_err(anyhow::Error::msg)?;
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::builder(Arc::new(model), Arc::new(ReAct::new()))
        .tools(tools.into_toolbox())
        .store(store.clone())
        .build();
    let result = engine.run("Convert 100 EUR to USD", json!({})).await?;
    for event in store.load(&result.session_id).await? {
        if let agent::event::EventKind::ActionCompleted { observation } = event.kind {
            println!(
                "observation (error: {}): {}",
                observation.is_error, observation.content
            );
        }
    }
    println!("answer: {}", result.answer.as_deref().unwrap_or(""));
    anyhow::ensure!(
        result.exit_reason == ExitReason::Finished,
        "the run did not finish"
    );
    Ok(())
}
