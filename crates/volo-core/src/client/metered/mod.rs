//! The client's per-call metrics: [`MeteredClient`], in the default client stack
//! right inside the call's [`Trace`](crate::client::trace::Trace) span, counting
//! when [`Observability::metrics`](crate::config::Observability::metrics) is set.

mod layer;

pub use layer::MeteredClientLayer;

use crate::client::{ClientCall, ClientContext, Error, ErrorKind};
use crate::metrics::Metrics;
use crate::metrics::labels::{InFlight, MethodEntry, Outcome, Which};
use crate::service::Service;

/// Counts each call of the service beneath it in `rpc_client_requests_total`,
/// `rpc_client_duration_seconds`, `rpc_client_inflight_requests`, and the retries
/// and backup requests the layers beneath made for it (`rpc_client_retries_total`,
/// `rpc_client_backup_requests_total`), by `cx.rpc.callee.service` and
/// `cx.rpc.method` (see the [metrics docs](crate::metrics)). Without a [`Metrics`] it only
/// passes calls on.
///
/// A call whose future is dropped unfinished counts as `cancelled`.
#[derive(Debug, Clone)]
pub struct MeteredClient<S> {
    inner: S,
    metrics: Option<Metrics>,
}

impl<S> MeteredClient<S> {
    /// Counts the calls of `inner` into `metrics` (none: counts nothing).
    pub fn new(inner: S, metrics: Option<Metrics>) -> Self {
        MeteredClient { inner, metrics }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, R> Service<ClientContext, R> for MeteredClient<S>
where
    R: ClientCall,
    S::Response: Send,
    S: Service<ClientContext, R, Error = Error> + Sync,
{
    type Response = S::Response;
    type Error = Error;

    async fn call(&self, cx: &mut ClientContext, req: R) -> Result<S::Response, Error> {
        let Some(metrics) = &self.metrics else {
            return self.inner.call(cx, req).await;
        };
        let inner = &metrics.inner;
        let table = &inner.client_methods;
        let service = table.service(&inner.client_calls, &cx.rpc.callee.service);
        let method = table.method(&inner.client_calls, service, Some(cx.rpc.method.as_str()));
        let before = cx.extra();
        let mut call = InCall {
            metrics,
            flight: InFlight::start(service),
            method,
        };
        let result = self.inner.call(cx, req).await;
        let method = call.method;
        let made = cx.extra().since(before);
        if made.retries > 0 {
            method.add(
                Which::Retries,
                &inner.client_retries,
                u64::from(made.retries),
            );
        }
        if made.backups > 0 {
            method.add(
                Which::Backups,
                &inner.client_backups,
                u64::from(made.backups),
            );
        }
        call.end(match &result {
            Ok(_) => Outcome::Ok,
            Err(e) => outcome(e.kind()),
        });
        result
    }
}

/// The `outcome` label of a failed call.
fn outcome(kind: ErrorKind) -> Outcome {
    match kind {
        ErrorKind::Connect => Outcome::Connect,
        ErrorKind::Io => Outcome::Io,
        ErrorKind::Timeout => Outcome::Timeout,
        ErrorKind::CircuitOpen => Outcome::CircuitOpen,
        ErrorKind::NoInstance => Outcome::NoInstance,
        ErrorKind::Protocol => Outcome::Protocol,
        ErrorKind::Encode => Outcome::Encode,
        ErrorKind::Application => Outcome::Application,
        ErrorKind::Overloaded => Outcome::Overloaded,
        ErrorKind::Rejected => Outcome::Rejected,
        ErrorKind::Closing => Outcome::Closing,
    }
}

/// A call in progress, recorded when it ends or is dropped.
struct InCall<'a> {
    metrics: &'a Metrics,
    flight: InFlight<'a>,
    method: &'a MethodEntry,
}

impl InCall<'_> {
    fn end(&mut self, outcome: Outcome) {
        let families = &self.metrics.inner.client_calls;
        self.flight.end(families, self.method, outcome);
    }
}

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        if !self.flight.is_ended() {
            self.end(Outcome::Cancelled);
        }
    }
}
