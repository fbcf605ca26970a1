//! The layers that make [`Trace`] and [`TraceAttempt`] services.

use super::{Trace, TraceAttempt};
use crate::service::Layer;

/// Wraps a service in a [`Trace`] (a span per call).
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceLayer;

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;

    fn layer(self, inner: S) -> Trace<S> {
        Trace::new(inner)
    }
}

/// Wraps a service in a [`TraceAttempt`] (a span per attempt).
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceAttemptLayer;

impl<S> Layer<S> for TraceAttemptLayer {
    type Service = TraceAttempt<S>;

    fn layer(self, inner: S) -> TraceAttempt<S> {
        TraceAttempt::new(inner)
    }
}
