//! `ToolRegistry`: collects tools under unique names and wraps each in argument
//! validation, so no handler ever sees arguments that break its schema.

use std::sync::Arc;

use agent_core::layer::Layer;
use agent_core::tool::{DuplicateTool, Tool, ToolContext, ToolError, ToolOutput, Toolbox};
use agent_core::types::ToolSpec;
use agent_layers::Timeout;
use async_trait::async_trait;
use serde_json::Value;

use crate::typed::{Typed, TypedTool};
use agent_core::schema::{ArgumentValidator, InvalidSchema};

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The name is taken.
    #[error(transparent)]
    Duplicate(#[from] DuplicateTool),
    /// The tool's input schema does not compile.
    #[error("tool `{tool}` has an {source}")]
    InvalidSchema {
        /// The tool's name.
        tool: String,
        /// The compile error.
        source: InvalidSchema,
    },
}

/// A tool whose arguments are validated against its schema before its handler runs.
pub struct Validated {
    inner: Arc<dyn Tool>,
    validator: ArgumentValidator,
}

impl Validated {
    /// Wraps `inner`, compiling its input schema once.
    pub fn new(inner: Arc<dyn Tool>) -> Result<Self, RegistryError> {
        let validator = ArgumentValidator::new(&inner.spec().input_schema).map_err(|source| {
            RegistryError::InvalidSchema {
                tool: inner.spec().name.clone(),
                source,
            }
        })?;
        Ok(Self { inner, validator })
    }
}

#[async_trait]
impl Tool for Validated {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    async fn call(&self, arguments: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.validator
            .validate(&arguments)
            .map_err(ToolError::InvalidArguments)?;
        self.inner.call(arguments, ctx).await
    }
}

/// The tools of a session, each validated; turns into the engine's [`Toolbox`].
#[derive(Debug, Default, Clone)]
pub struct ToolRegistry {
    toolbox: Toolbox,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `tool` behind argument validation.
    pub fn register(&mut self, tool: impl Tool + 'static) -> Result<&mut Self, RegistryError> {
        self.register_shared(Arc::new(tool))
    }

    /// Registers a shared tool behind argument validation.
    pub fn register_shared(&mut self, tool: Arc<dyn Tool>) -> Result<&mut Self, RegistryError> {
        self.toolbox.insert(Arc::new(Validated::new(tool)?))?;
        Ok(self)
    }

    /// Registers the typed tool `T` (for example one with `#[derive(Tool)]`),
    /// behind its declared timeout, if any, and argument validation.
    pub fn register_typed<T: TypedTool>(&mut self) -> Result<&mut Self, RegistryError>
    where
        T::State: Default,
    {
        self.register_typed_with::<T>(T::State::default())
    }

    /// Registers the typed tool `T` with the state its calls share.
    pub fn register_typed_with<T: TypedTool>(
        &mut self,
        state: T::State,
    ) -> Result<&mut Self, RegistryError> {
        let tool: Arc<dyn Tool> = Arc::new(Typed::<T>::with_state(state));
        match T::timeout() {
            Some(limit) => self.register_shared(Timeout::new(limit).layer(tool)),
            None => self.register_shared(tool),
        }
    }

    /// The validated tools, for [`agent_engine::EngineBuilder::tools`].
    pub fn into_toolbox(self) -> Toolbox {
        self.toolbox
    }
}

impl From<ToolRegistry> for Toolbox {
    fn from(registry: ToolRegistry) -> Self {
        registry.into_toolbox()
    }
}
