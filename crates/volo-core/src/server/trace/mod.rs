//! The server's span for each call, and its access log (see [`crate::trace`] for the
//! span's fields and the trace context).
//!
//! The [`Trace`] layer opens the `rpc.server` span, inside the limiter and outside the
//! other layers: the wait for a call slot, the metrics, the user's layers, the deadline
//! and the handler all run inside it. A call refused before that (by the limiter, or
//! routed to no service) has no span.
//!
//! # Access log
//!
//! With [`Observability::access_log`](crate::config::Observability::access_log) set, one call in
//! [`every`](AccessLog::every) is logged when its reply is written, as one `tracing`
//! event at `INFO` on the target `volo_core::access`: `side` = `server`, `method`,
//! `service`, `peer`, `status` (`ok`, or why it failed: `UnknownMethod`,
//! `ProtocolError`, the application exception's kind, `Panic`, `BizStatus`, or a
//! refusal a layer returned: `Overloaded`, `Closing`, `DeadlinePassed`), `duration_us` (from
//! the frame read to the reply written), `request_bytes` (the frame) and
//! `reply_bytes` (the reply frame; 0 for a oneway call). Off by default. The calls are picked by a counter, not at
//! random: with `every: 100`, the 1st, the 101st... of the server's calls.

mod layer;

use std::time::Instant;

use tracing::field::Empty;

use tracing::Instrument;

use super::{DispatchError, ServerCall};
use crate::context::{RpcInfo, ServerContext};
use crate::refusal::Refusal;
use crate::service::Service;
pub(crate) use crate::trace::AccessCount;
pub use crate::trace::AccessLog;
use crate::trace::{AccessLine, RPC_SYSTEM, continue_trace, record_outcome};
pub use layer::TraceLayer;

/// The `rpc.server` span of the call in `cx`; when it is recorded, a child of the
/// caller's `traceparent`, which it replaces in `cx` so that calls forwarded from
/// this one are its children.
pub(crate) fn span(cx: &mut ServerContext) -> tracing::Span {
    let span = tracing::info_span!(
        "rpc.server",
        otel.name = %format_args!("{}/{}", cx.rpc.callee.service, cx.rpc.method),
        otel.kind = "server",
        rpc.system = RPC_SYSTEM,
        rpc.service = %cx.rpc.callee.service,
        rpc.method = %cx.rpc.method,
        client.address = cx.rpc.caller.address.as_ref().map(tracing::field::display),
        trace_id = Empty,
        span_id = Empty,
        parent_span_id = Empty,
        otel.status_code = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        continue_trace(&span, &mut cx.metainfo);
    }
    span
}

/// Why a call failed, as its span's `error.type` and the access log's `status` say
/// it; `None` when it succeeded (an IDL exception is a reply like any other).
/// A refusal says which it is ([`DispatchError::refusal`]), not the exception kind it
/// is answered with.
pub(crate) fn failure<R>(outcome: &Result<R, DispatchError>) -> Option<&'static str> {
    let e = outcome.as_ref().err()?;
    if let Some(refusal) = e.refusal() {
        return Some(match refusal {
            Refusal::Overloaded => "Overloaded",
            Refusal::Closing => "Closing",
            Refusal::DeadlinePassed => "DeadlinePassed",
        });
    }
    Some(match e {
        DispatchError::UnknownMethod => "UnknownMethod",
        DispatchError::Decode(_) => "ProtocolError",
        DispatchError::Application(ex) => ex.kind.name(),
        DispatchError::Panic(_) => "Panic",
        DispatchError::Biz(_) => "BizStatus",
        // The refusals, above.
        DispatchError::Overloaded(_)
        | DispatchError::Closing
        | DispatchError::DeadlinePassed(_) => {
            thrift_wire::ApplicationExceptionKind::InternalError.name()
        }
    })
}

/// Records the call's outcome on its span.
pub(crate) fn finish(span: &tracing::Span, failure: Option<&'static str>) {
    if !span.is_disabled() {
        record_outcome(span, failure.map(tracing::field::display));
    }
}

/// What the access log needs of a call, taken when it started (only for the calls
/// the log shows).
#[derive(Debug)]
pub(crate) struct Logged {
    pub(crate) started: Instant,
    pub(crate) request_bytes: usize,
    pub(crate) status: Option<&'static str>,
}

/// Logs one call.
pub(crate) fn log_access(rpc: &RpcInfo, logged: &Logged, reply_bytes: usize) {
    AccessLine {
        side: "server",
        method: &rpc.method,
        service: &rpc.callee.service,
        peer: rpc.caller.address.as_ref(),
        status: logged.status.unwrap_or("ok"),
        started: logged.started,
        attempts: None,
        request_bytes: logged.request_bytes,
        reply_bytes,
    }
    .log();
}

/// Runs each call of the service beneath in its `rpc.server` span (see the [module docs](self)), a child
/// of the caller's trace, and records how it ended.
///
/// A stream's handler runs in such a span too, for the stream's whole life, and the
/// span records how the stream ended; the connection's `rpc.stream` span beside it
/// carries the events of its messages (see [`stream`](crate::stream#governance)).
#[derive(Debug, Clone)]
pub struct Trace<S> {
    pub(super) inner: S,
}

impl<S, R> Service<ServerContext, R> for Trace<S>
where
    S: Service<ServerContext, R, Error = DispatchError> + Send + Sync,
    R: ServerCall,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(&self, cx: &mut ServerContext, req: R) -> Result<S::Response, DispatchError> {
        let span = span(cx);
        // No subscriber takes the span: the call runs without the wrapper that would
        // enter and leave it at every poll (4% of a saturated server's samples).
        if span.is_disabled() {
            return self.inner.call(cx, req).await;
        }
        let outcome = self.inner.call(cx, req).instrument(span.clone()).await;
        finish(&span, failure(&outcome));
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::limit::Overloaded;

    /// The refusals are values: a typed one names itself in the access log and the
    /// span, an application exception is the handler's answer whatever its message.
    #[test]
    fn a_refusal_is_named_by_its_value_not_by_its_message() {
        let typed: [(DispatchError, Refusal, &str); 2] = [
            (
                DispatchError::Overloaded(Overloaded::Concurrency { limit: 1 }),
                Refusal::Overloaded,
                "Overloaded",
            ),
            (DispatchError::Closing, Refusal::Closing, "Closing"),
        ];
        for (e, refusal, status) in typed {
            assert_eq!(e.refusal(), Some(refusal));
            assert_eq!(failure::<()>(&Err(e)), Some(status));
        }
        let lookalike = DispatchError::Application(crate::refusal::overloaded("busy"));
        assert_eq!(lookalike.refusal(), None);
        assert_eq!(failure::<()>(&Err(lookalike)), Some("InternalError"));
        assert_eq!(failure::<()>(&Ok(())), None);
    }
}
