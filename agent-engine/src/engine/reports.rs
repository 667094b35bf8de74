//! What layers report while the engine waits for a model: retries and
//! fallbacks, kept as
//! events and recorded when the call returns (a tool call's are kept by its
//! [`CallObserver`](crate::CallObserver)).

use std::sync::{Arc, Mutex};

use crate::call::Timed;
use agent_core::event::EventKind;
use agent_core::layer::{CircuitState, LayerObserver, RetryNotice};

/// The events layers reported during one wait.
#[derive(Debug, Default)]
pub(super) struct Reports(Mutex<Vec<Timed>>);

impl Reports {
    fn push(&self, event: EventKind) {
        if let Ok(mut reports) = self.0.lock() {
            reports.push(Timed::now(event));
        }
    }

    /// Everything reported so far, oldest first, each with its moment.
    pub(super) fn take(&self) -> Vec<Timed> {
        self.0
            .lock()
            .map(|mut reports| std::mem::take(&mut *reports))
            .unwrap_or_default()
    }
}

fn millis(notice: &RetryNotice) -> u64 {
    u64::try_from(notice.delay.as_millis()).unwrap_or(u64::MAX)
}

/// The observer of one model call.
pub(super) struct ModelReports(pub(super) Arc<Reports>);

impl LayerObserver for ModelReports {
    fn retrying(&self, notice: RetryNotice) {
        self.0.push(EventKind::ModelRetried {
            attempt: notice.attempt,
            delay_ms: millis(&notice),
            error: notice.error,
        });
    }

    fn circuit_changed(&self, _target: &str, _state: CircuitState) {}

    fn fell_back(&self, from: &str, to: &str, reason: &str) {
        self.0.push(EventKind::ModelFallback {
            from: from.to_owned(),
            to: to.to_owned(),
            reason: reason.to_owned(),
        });
    }
}
