use agent::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema, Tool)]
struct Silent {
    x: i32,
}

fn main() {}
