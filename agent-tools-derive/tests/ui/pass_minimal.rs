use agent::prelude::*;

/// Says hello.
#[derive(serde::Deserialize, schemars::JsonSchema, Tool)]
struct Greet {
    /// Who to greet.
    name: String,
}

impl Greet {
    async fn run(self, _ctx: &ToolContext) -> Result<String, ToolError> {
        Ok(format!("hello {}", self.name))
    }
}

fn main() {
    let mut tools = ToolRegistry::new();
    tools.register_typed::<Greet>().unwrap();
}
