//! The client's spans: [`Trace`] around each call, [`TraceAttempt`] around each
//! attempt (see [`crate::trace`] for the spans' fields and how the trace context
//! travels).
//!
//! The builder puts [`Trace`] around its stack (inside the layers added with
//! `layer`, outside the timeout, retries and backup requests) and [`TraceAttempt`]
//! right under the balancer, where the instance is known, around the layers added
//! with `layer_inner` (which so log inside the attempt's span). With no subscriber (or one that does not want the spans) both pass the
//! call through untouched but for one check of the span's interest.

mod layer;

pub use layer::{TraceAttemptLayer, TraceLayer};

use tracing::Instrument;
use tracing::field::Empty;

use super::{ClientContext, ClientRequest, ClientResponse, Error};
use crate::service::Service;
use crate::trace::{RPC_SYSTEM, TRACEPARENT, continue_trace, record_ids, record_outcome};

/// Opens an `rpc.client` span around each call (see [`crate::trace`]).
#[derive(Debug, Clone)]
pub struct Trace<S> {
    inner: S,
}

impl<S> Trace<S> {
    /// Traces `inner`'s calls.
    pub fn new(inner: S) -> Self {
        Trace { inner }
    }
}

impl<S> Service<ClientContext, ClientRequest> for Trace<S>
where
    S: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error> + Sync,
{
    type Response = ClientResponse;
    type Error = Error;

    async fn call(
        &self,
        cx: &mut ClientContext,
        req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        let span = tracing::info_span!(
            "rpc.client",
            otel.name = %format_args!("{}/{}", cx.rpc.callee.service, req.method()),
            otel.kind = "client",
            rpc.system = RPC_SYSTEM,
            rpc.service = %cx.rpc.callee.service,
            rpc.method = req.method(),
            trace_id = Empty,
            span_id = Empty,
            parent_span_id = Empty,
            otel.status_code = Empty,
            error.type = Empty,
        );
        if span.is_disabled() {
            return self.inner.call(cx, req).await;
        }
        // The attempts send their own spans; a stack without them sends this one.
        cx.trace = Some(continue_trace(&span, &mut cx.metainfo));
        let out = self.inner.call(cx, req).instrument(span.clone()).await;
        record_outcome(&span, out.as_ref().err().map(Error::kind));
        out
    }
}

/// Opens an `rpc.attempt` span around each attempt, a child of the call's, and
/// sends it as the next hop's parent (see [`crate::trace`]).
#[derive(Debug, Clone)]
pub struct TraceAttempt<S> {
    inner: S,
}

impl<S> TraceAttempt<S> {
    /// Traces `inner`'s attempts.
    pub fn new(inner: S) -> Self {
        TraceAttempt { inner }
    }
}

impl<S> Service<ClientContext, ClientRequest> for TraceAttempt<S>
where
    S: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error> + Sync,
{
    type Response = ClientResponse;
    type Error = Error;

    async fn call(
        &self,
        cx: &mut ClientContext,
        req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        let Some(call) = cx.trace else {
            return self.inner.call(cx, req).await;
        };
        let span = tracing::info_span!(
            "rpc.attempt",
            otel.kind = "client",
            rpc.attempt = cx.attempt,
            server.address = cx.rpc.callee.address.as_ref().map(tracing::field::display),
            trace_id = Empty,
            span_id = Empty,
            parent_span_id = Empty,
            otel.status_code = Empty,
            error.type = Empty,
        );
        if span.is_disabled() {
            return self.inner.call(cx, req).await;
        }
        let ids = call.child();
        record_ids(&span, &ids, Some(&call));
        cx.metainfo.set_persistent(TRACEPARENT, ids.to_string());
        let out = self.inner.call(cx, req).instrument(span.clone()).await;
        record_outcome(&span, out.as_ref().err().map(Error::kind));
        out
    }
}
