//! The client's spans: [`Trace`] around each call, [`TraceAttempt`] around each
//! attempt (see [`crate::trace`] for the spans' fields and how the trace context
//! travels), and the client's access log.
//!
//! The builder puts [`Trace`] around its stack (inside the layers added with
//! `layer`, outside the metrics, timeout, retries and backup requests) and
//! [`TraceAttempt`] right under the balancer, where the instance is known, around the
//! layers added with `layer_inner` (which so log inside the attempt's span). With no
//! subscriber (or one that does not want the spans) both pass the call through
//! untouched but for one check of the span's interest.
//!
//! # Access log
//!
//! With [`Observability::access_log`](crate::config::Observability::access_log) set, [`Trace`]
//! logs one call in [`every`](crate::trace::AccessLog::every) when it is over, as
//! one `tracing` event at `INFO` on the target `volo_core::access`: `side` =
//! `client`, `method`, `service`, `peer` (the instance that answered, or the last one
//! tried), `status` (`ok`, or the [`ErrorKind`](super::ErrorKind)), `duration_us`
//! (the whole call as its caller waited, retries included), `attempts` (1, plus the
//! retries and backup requests), and `request_bytes` and `reply_bytes` (the frames
//! of the attempt that answered, framing included; 0 when none was written or
//! read). The same call logged by the server shows the same sizes.

mod layer;

use std::sync::Arc;
use std::time::Instant;

pub use layer::{TraceAttemptLayer, TraceLayer};
use tracing::Instrument;
use tracing::field::Empty;

use super::{ClientCall, ClientContext, Error, ExtraAttempts};
use crate::service::Service;
use crate::trace::{
    AccessCount, AccessLine, AccessLog, RPC_SYSTEM, TRACEPARENT, continue_trace, record_ids,
    record_outcome,
};

/// Opens an `rpc.client` span around each call (see [`crate::trace`]), and logs the
/// calls its access log picks (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct Trace<S> {
    inner: S,
    /// The access log and its count of calls, shared by the clones.
    access: Option<Arc<(AccessLog, AccessCount)>>,
}

impl<S> Trace<S> {
    /// Traces `inner`'s calls, with no access log.
    pub fn new(inner: S) -> Self {
        Trace {
            inner,
            access: None,
        }
    }

    /// Traces `inner`'s calls and logs those `log` picks (`None`: none).
    pub fn with_access_log(inner: S, log: Option<AccessLog>) -> Self {
        Trace {
            inner,
            access: log.map(|log| Arc::new((log, AccessCount::default()))),
        }
    }
}

impl<S, R> Service<ClientContext, R> for Trace<S>
where
    R: ClientCall,
    S::Response: Send,
    S: Service<ClientContext, R, Error = Error> + Sync,
{
    type Response = S::Response;
    type Error = Error;

    async fn call(&self, cx: &mut ClientContext, req: R) -> Result<S::Response, Error> {
        let logged = match &self.access {
            Some(access) if access.1.pick(Some(&access.0)) => Some(Started::now(cx)),
            _ => None,
        };
        let name = req.method_name().clone();
        let method = name.as_str();
        let span = tracing::info_span!(
            "rpc.client",
            otel.name = %format_args!("{}/{}", cx.rpc.callee.service, method),
            otel.kind = "client",
            rpc.system = RPC_SYSTEM,
            rpc.service = %cx.rpc.callee.service,
            rpc.method = method,
            trace_id = Empty,
            span_id = Empty,
            parent_span_id = Empty,
            otel.status_code = Empty,
            error.type = Empty,
        );
        let out = if span.is_disabled() {
            self.inner.call(cx, req).await
        } else {
            // The attempts send their own spans; a stack without them sends this one.
            cx.trace = Some(continue_trace(&span, &mut cx.metainfo));
            let out = self.inner.call(cx, req).instrument(span.clone()).await;
            record_outcome(&span, out.as_ref().err().map(Error::kind));
            out
        };
        if let Some(started) = logged {
            log_access(cx, method, &out, started);
        }
        out
    }
}

/// When a logged call started, and the retries and backup requests its context had
/// made by then.
struct Started {
    at: Instant,
    before: ExtraAttempts,
}

impl Started {
    fn now(cx: &ClientContext) -> Self {
        Started {
            at: Instant::now(),
            before: cx.extra(),
        }
    }

    /// The attempts of the call: 1, and the retries and backups made for it.
    fn attempts(&self, cx: &ClientContext) -> u64 {
        let made = cx.extra().since(self.before);
        1 + u64::from(made.retries) + u64::from(made.backups)
    }
}

/// Logs one call of the client.
fn log_access<T>(cx: &ClientContext, method: &str, out: &Result<T, Error>, started: Started) {
    let peer = match out {
        Err(e) => e.instance().or(cx.rpc.callee.address.as_ref()),
        Ok(_) => cx.rpc.callee.address.as_ref(),
    };
    // Only for the calls logged, so the String is no cost to the others.
    let status = match out {
        Ok(_) => "ok".to_string(),
        Err(e) => format!("{:?}", e.kind()),
    };
    AccessLine {
        side: "client",
        method,
        service: &cx.rpc.callee.service,
        peer,
        status: &status,
        started: started.at,
        attempts: Some(started.attempts(cx)),
        request_bytes: cx.frame_sizes.sent,
        reply_bytes: cx.frame_sizes.received,
    }
    .log();
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

impl<S, R> Service<ClientContext, R> for TraceAttempt<S>
where
    R: ClientCall,
    S::Response: Send,
    S: Service<ClientContext, R, Error = Error> + Sync,
{
    type Response = S::Response;
    type Error = Error;

    async fn call(&self, cx: &mut ClientContext, req: R) -> Result<S::Response, Error> {
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
