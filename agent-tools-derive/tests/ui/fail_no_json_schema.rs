use agent::prelude::*;

/// Forgot JsonSchema.
#[derive(serde::Deserialize, Tool)]
struct Lookup {
    key: String,
}

impl Lookup {
    async fn run(self, _ctx: &ToolContext) -> Result<String, ToolError> {
        Ok(self.key)
    }
}

fn main() {}
