//! The layer that wraps a service in [`CatchPanic`].

use super::CatchPanic;
use crate::service::Layer;

/// Makes [`CatchPanic`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct CatchPanicLayer;

impl<S> Layer<S> for CatchPanicLayer {
    type Service = CatchPanic<S>;

    fn layer(self, inner: S) -> CatchPanic<S> {
        CatchPanic { inner }
    }
}
