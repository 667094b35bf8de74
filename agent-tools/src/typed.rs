//! Typed tools: an argument struct that is `Deserialize + JsonSchema` plus one
//! async method is a tool. `#[derive(Tool)]` implements [`TypedTool`] for it;
//! [`Typed`] turns it into a [`Tool`] that deserialises each call's arguments.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use agent_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use agent_core::types::ToolSpec;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What an argument type needs to be a tool: serde reads it from the call's
/// arguments, schemars describes it to the model.
pub trait ToolArguments: DeserializeOwned + JsonSchema + Send + 'static {}

impl<T: DeserializeOwned + JsonSchema + Send + 'static> ToolArguments for T {}

/// The future a typed tool's handler returns.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'a>>;

/// A tool described by its argument type. Implemented by `#[derive(Tool)]`.
pub trait TypedTool: ToolArguments {
    /// What every call of the tool shares (`()` for most tools).
    type State: Send + Sync + 'static;

    /// The spec the model sees.
    fn spec() -> ToolSpec;

    /// A timeout for every call, if the tool declares one.
    fn timeout() -> Option<Duration> {
        None
    }

    /// Runs one call with these arguments.
    fn invoke<'a>(self, ctx: &'a ToolContext, state: &'a Self::State) -> ToolFuture<'a>;
}

pub use agent_core::schema::input_schema_for;

/// The [`Tool`] of a [`TypedTool`]: its spec, computed once, and its state.
pub struct Typed<T: TypedTool> {
    spec: ToolSpec,
    state: T::State,
    arguments: PhantomData<fn() -> T>,
}

impl<T: TypedTool> Typed<T>
where
    T::State: Default,
{
    /// The tool for `T`, with the default state.
    pub fn new() -> Self {
        Self::with_state(T::State::default())
    }
}

impl<T: TypedTool> Typed<T> {
    /// The tool for `T`, sharing `state` between its calls.
    pub fn with_state(state: T::State) -> Self {
        Self {
            spec: T::spec(),
            state,
            arguments: PhantomData,
        }
    }
}

impl<T: TypedTool> Default for Typed<T>
where
    T::State: Default,
{
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl<T: TypedTool> Tool for Typed<T> {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments: T = serde_json::from_value(arguments)
            .map_err(|err| ToolError::InvalidArguments(err.to_string()))?;
        arguments.invoke(ctx, &self.state).await
    }
}
