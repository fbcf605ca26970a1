//! The layer that wraps a client's stack in [`MeteredClient`].

use super::MeteredClient;
use crate::metrics::Metrics;
use crate::service::Layer;

/// Wraps a service in [`MeteredClient`]. A client built with
/// [`Observability::metrics`](crate::config::Observability::metrics) has one around its
/// default stack already (inside the call's span, around the timeout); this is for
/// stacks of your own.
#[derive(Debug, Clone)]
pub struct MeteredClientLayer {
    metrics: Metrics,
}

impl MeteredClientLayer {
    /// Counts into `metrics`.
    pub fn new(metrics: Metrics) -> Self {
        MeteredClientLayer { metrics }
    }
}

impl<S> Layer<S> for MeteredClientLayer {
    type Service = MeteredClient<S>;

    fn layer(self, inner: S) -> MeteredClient<S> {
        MeteredClient::new(inner, Some(self.metrics))
    }
}
