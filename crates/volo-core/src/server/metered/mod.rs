//! The server's per-call metrics: [`MeteredServer`], the outermost service of a
//! server's stack when [`Observability::metrics`](crate::config::Observability::metrics)
//! is set.

mod layer;

pub use layer::MeteredServerLayer;
use thrift_wire::Utf8Bytes;

use crate::context::ServerContext;
use crate::metrics::Metrics;
use crate::metrics::labels::{InFlight, Outcome, ServiceEntry};
use crate::refusal::Refusal;
use crate::server::{DispatchError, ServerCall};
use crate::service::Service;

/// Counts each call of the service beneath it in `rpc_server_requests_total`,
/// `rpc_server_duration_seconds` and `rpc_server_inflight_requests` (see the
/// [metrics docs](crate::metrics)), by `cx.rpc.callee.service` and `cx.rpc.method`. Without a
/// [`Metrics`] it only passes calls on.
///
/// The method is named only if the call did not end in
/// [`DispatchError::UnknownMethod`] (then it is `_other`). A call whose future is
/// dropped unfinished counts as `panic` if a panic unwinds through it, `cancelled`
/// otherwise.
///
/// Streams ([`StreamOpening`](crate::server::StreamOpening)s) pass through uncounted:
/// the connection's session counts each stream once, in the stream families (open,
/// ended by outcome, messages, bytes: see [`metrics`](crate::metrics)), and a
/// stream's life, minutes perhaps, has no place in the call latencies.
#[derive(Debug, Clone)]
pub struct MeteredServer<S> {
    inner: S,
    metrics: Option<Metrics>,
}

impl<S> MeteredServer<S> {
    /// Counts the calls of `inner` into `metrics` (none: counts nothing).
    pub fn new(inner: S, metrics: Option<Metrics>) -> Self {
        MeteredServer { inner, metrics }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, R> Service<ServerContext, R> for MeteredServer<S>
where
    S: Service<ServerContext, R, Error = DispatchError> + Sync,
    S::Response: Send,
    R: ServerCall,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(&self, cx: &mut ServerContext, req: R) -> Result<S::Response, DispatchError> {
        // A stream is counted once, by its connection's session, in the stream
        // families; counted here too it would put its whole life in the call latencies.
        let Some(metrics) = self.metrics.as_ref().filter(|_| !req.opens_stream()) else {
            return self.inner.call(cx, req).await;
        };
        let inner = &metrics.inner;
        let service = inner
            .server_methods
            .service(&inner.server_calls, &cx.rpc.callee.service);
        let mut call = InCall::start(metrics, service, cx.rpc.method.clone());
        let result = self.inner.call(cx, req).await;
        call.end(match &result {
            Ok(_) => Outcome::Ok,
            Err(e) => match e.refusal() {
                Some(Refusal::DeadlinePassed) => Outcome::DeadlineExceeded,
                Some(Refusal::Overloaded) => Outcome::Overloaded,
                Some(Refusal::Closing) => Outcome::Closing,
                None => match e {
                    DispatchError::UnknownMethod => Outcome::UnknownMethod,
                    DispatchError::Decode(_) => Outcome::DecodeError,
                    DispatchError::Panic(_) => Outcome::Panic,
                    _ => Outcome::ApplicationError,
                },
            },
        });
        result
    }
}

/// A call in the stack, recorded when it ends or is dropped.
struct InCall<'a> {
    metrics: &'a Metrics,
    flight: InFlight<'a>,
    method: Utf8Bytes,
}

impl<'a> InCall<'a> {
    fn start(metrics: &'a Metrics, service: &'a ServiceEntry, method: Utf8Bytes) -> Self {
        InCall {
            metrics,
            flight: InFlight::start(service),
            method,
        }
    }

    fn end(&mut self, outcome: Outcome) {
        let inner = &self.metrics.inner;
        let known = outcome != Outcome::UnknownMethod;
        let method = inner.server_methods.method(
            &inner.server_calls,
            self.flight.service(),
            known.then_some(self.method.as_str()),
        );
        self.flight.end(&inner.server_calls, method, outcome);
    }
}

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        if !self.flight.is_ended() {
            self.end(if std::thread::panicking() {
                Outcome::Panic
            } else {
                Outcome::Cancelled
            });
        }
    }
}
