//! The layer that wraps a server's stack in [`MeteredServer`].

use super::MeteredServer;
use crate::metrics::Metrics;
use crate::service::Layer;

/// Wraps a service in [`MeteredServer`]. A server with
/// [`Observability::metrics`](crate::config::Observability::metrics) puts one around
/// its whole stack itself; this is for stacks of your own.
#[derive(Debug, Clone)]
pub struct MeteredServerLayer {
    metrics: Metrics,
}

impl MeteredServerLayer {
    /// Counts into `metrics`.
    pub fn new(metrics: Metrics) -> Self {
        MeteredServerLayer { metrics }
    }
}

impl<S> Layer<S> for MeteredServerLayer {
    type Service = MeteredServer<S>;

    fn layer(self, inner: S) -> MeteredServer<S> {
        MeteredServer::new(inner, Some(self.metrics))
    }
}
