//! `FallbackModel`: models tried in order for the same request. When one fails
//! for good — a fatal or transient error after its own retries, an open
//! circuit — the call goes to the next, and the switch is reported
//! ([`LayerObserver::fell_back`], a `model_fallback` event). Invalid output is
//! the model's mistake, not its provider's: it goes back to the engine as
//! feedback, with no fallback. Put a [`CircuitBreaker`](crate::CircuitBreaker)
//! around each model so a dead provider is skipped at once instead of costing a
//! timeout per step.

use std::sync::Arc;

use agent_core::context::TokenCounter;
use agent_core::model::{
    Model, ModelContext, ModelError, ModelIdentity, ModelRequest, ModelResponse,
};
use async_trait::async_trait;

/// Models tried in order; the first is the primary.
#[derive(Clone)]
pub struct FallbackModel {
    models: Vec<(String, Arc<dyn Model>)>,
}

impl FallbackModel {
    /// `primary`, named `name` in reports (a model spec, say).
    pub fn new(name: impl Into<String>, primary: Arc<dyn Model>) -> Self {
        Self {
            models: vec![(name.into(), primary)],
        }
    }

    /// Adds `model`, tried when every model before it failed for good.
    pub fn or(mut self, name: impl Into<String>, model: Arc<dyn Model>) -> Self {
        self.models.push((name.into(), model));
        self
    }
}

impl std::fmt::Debug for FallbackModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.models.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("FallbackModel")
            .field("models", &names)
            .finish()
    }
}

#[async_trait]
impl Model for FallbackModel {
    async fn complete(
        &self,
        request: &ModelRequest,
        ctx: &ModelContext,
    ) -> Result<ModelResponse, ModelError> {
        let mut models = self.models.iter().peekable();
        loop {
            let Some((name, model)) = models.next() else {
                return Err(ModelError::Internal {
                    message: "a fallback model holds no model".into(),
                });
            };
            let outcome = model.complete(request, ctx).await;
            match (&outcome, models.peek()) {
                (
                    Err(err @ (ModelError::Fatal { .. } | ModelError::Transient { .. })),
                    Some((next, _)),
                ) => {
                    ctx.observer.fell_back(name, next, &err.to_string());
                }
                _ => return outcome,
            }
        }
    }

    fn identity(&self) -> ModelIdentity {
        self.models
            .first()
            .map(|(_, model)| model.identity())
            .unwrap_or_default()
    }

    fn token_counter(&self) -> Option<Arc<dyn TokenCounter>> {
        self.models
            .first()
            .and_then(|(_, model)| model.token_counter())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use agent_core::layer::{CircuitState, Layer, LayerObserver, RetryNotice};
    use agent_core::types::{Action, Finish, Usage};

    use super::*;
    use crate::{BreakerPolicy, CircuitBreaker};

    /// Fails every call with `error`, counting calls.
    struct Dead {
        calls: AtomicU32,
        error: ModelError,
    }

    #[async_trait]
    impl Model for Dead {
        async fn complete(
            &self,
            _request: &ModelRequest,
            _ctx: &ModelContext,
        ) -> Result<ModelResponse, ModelError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Err(self.error.clone())
        }
    }

    struct Live;

    #[async_trait]
    impl Model for Live {
        async fn complete(
            &self,
            _request: &ModelRequest,
            _ctx: &ModelContext,
        ) -> Result<ModelResponse, ModelError> {
            Ok(ModelResponse {
                actions: vec![Action::Finish(Finish {
                    answer: "84".into(),
                })],
                usage: Usage::default(),
                text: None,
                model: None,
            })
        }
    }

    #[derive(Default)]
    struct Notes(Mutex<Vec<String>>);

    impl LayerObserver for Notes {
        fn retrying(&self, _notice: RetryNotice) {}
        fn circuit_changed(&self, _target: &str, _state: CircuitState) {}
        fn fell_back(&self, from: &str, to: &str, reason: &str) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{from} -> {to}: {reason}"));
        }
    }

    fn dead(error: ModelError) -> Arc<Dead> {
        Arc::new(Dead {
            calls: AtomicU32::new(0),
            error,
        })
    }

    fn request() -> ModelRequest {
        ModelRequest {
            instructions: String::new(),
            task: "t".into(),
            history: Arc::default(),
            tools: Arc::default(),
            max_output_tokens: None,
            output_schema: None,
        }
    }

    async fn ask(model: &FallbackModel, notes: &Arc<Notes>) -> Result<ModelResponse, ModelError> {
        let mut ctx = ModelContext::new("s", 1);
        ctx.observer = notes.clone();
        model.complete(&request(), &ctx).await
    }

    #[tokio::test]
    async fn a_dead_primary_falls_back_to_the_next_model_and_says_why() {
        let primary = dead(ModelError::Fatal {
            message: "HTTP 401".into(),
        });
        let model =
            FallbackModel::new("openai:a", primary.clone()).or("scripted:b", Arc::new(Live));
        let notes = Arc::new(Notes::default());
        let response = ask(&model, &notes).await.unwrap();
        assert!(matches!(&response.actions[..], [Action::Finish(_)]));
        assert_eq!(
            *notes.0.lock().unwrap(),
            ["openai:a -> scripted:b: provider error: HTTP 401"]
        );
    }

    #[tokio::test]
    async fn invalid_output_is_feedback_not_a_reason_to_fall_back() {
        let primary = dead(ModelError::InvalidOutput {
            raw: "x".into(),
            message: "not JSON".into(),
            usage: Usage::default(),
        });
        let model = FallbackModel::new("a", primary).or("b", Arc::new(Live));
        let notes = Arc::new(Notes::default());
        assert!(matches!(
            ask(&model, &notes).await,
            Err(ModelError::InvalidOutput { .. })
        ));
        assert!(notes.0.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn an_open_breaker_skips_a_dead_model_without_calling_it() {
        let primary = dead(ModelError::Transient {
            message: "connection refused".into(),
            retry_after: None,
        });
        let policy = BreakerPolicy {
            failure_threshold: 2,
            cool_down: Duration::from_secs(30),
        };
        let inner: Arc<dyn Model> = primary.clone();
        let guarded = CircuitBreaker::new(policy).named("a").layer(inner);
        let model = FallbackModel::new("a", guarded).or("b", Arc::new(Live));
        let notes = Arc::new(Notes::default());
        for _ in 0..5 {
            assert!(ask(&model, &notes).await.is_ok());
        }
        assert_eq!(
            primary.calls.load(Ordering::SeqCst),
            2,
            "the open circuit spares the dead model"
        );
        let notes = notes.0.lock().unwrap();
        assert_eq!(notes.len(), 5);
        assert!(notes[4].contains("circuit"), "{}", notes[4]);
    }

    #[tokio::test]
    async fn the_last_models_failure_is_the_answer() {
        let model = FallbackModel::new(
            "a",
            dead(ModelError::Fatal {
                message: "down".into(),
            }),
        )
        .or(
            "b",
            dead(ModelError::Fatal {
                message: "also down".into(),
            }),
        );
        let notes = Arc::new(Notes::default());
        let Err(ModelError::Fatal { message }) = ask(&model, &notes).await else {
            panic!("expected the last failure");
        };
        assert_eq!(message, "also down");
        assert_eq!(notes.0.lock().unwrap().len(), 1);
    }
}
