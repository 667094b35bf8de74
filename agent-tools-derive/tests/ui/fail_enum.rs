use agent::prelude::*;

/// Not a struct.
#[derive(serde::Deserialize, schemars::JsonSchema, Tool)]
enum Mode {
    Fast,
    Slow,
}

fn main() {}
