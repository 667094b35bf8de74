use agent::prelude::*;

/// Has no handler.
#[derive(serde::Deserialize, schemars::JsonSchema, Tool)]
struct Idle {
    x: i32,
}

fn main() {}
