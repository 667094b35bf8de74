use agent::prelude::*;

/// Has a typo in its attribute.
#[derive(serde::Deserialize, schemars::JsonSchema, Tool)]
#[tool(idempotnet)]
struct Fetch {
    url: String,
}

fn main() {}
