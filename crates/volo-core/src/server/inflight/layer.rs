//! The layer that wraps a service in [`Inflight`], its slots shared.

use std::sync::Arc;

use tokio::sync::Semaphore;

use super::Inflight;
use crate::service::Layer;

/// Makes [`Inflight`]s sharing one count of slots.
#[derive(Debug, Clone)]
pub(crate) struct InflightLayer {
    slots: Arc<Semaphore>,
}

impl InflightLayer {
    /// `max` slots.
    pub(crate) fn new(max: usize) -> Self {
        InflightLayer {
            slots: Arc::new(Semaphore::new(max)),
        }
    }
}

impl<S> Layer<S> for InflightLayer {
    type Service = Inflight<S>;

    fn layer(self, inner: S) -> Inflight<S> {
        Inflight {
            inner,
            slots: self.slots,
        }
    }
}
