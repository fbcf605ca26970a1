//! The layer that wraps a service in [`Trace`].

use super::Trace;
use crate::service::Layer;

/// Makes [`Trace`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceLayer;

impl<S> Layer<S> for TraceLayer {
    type Service = Trace<S>;

    fn layer(self, inner: S) -> Trace<S> {
        Trace { inner }
    }
}
