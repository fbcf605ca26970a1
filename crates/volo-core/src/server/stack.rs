//! The server's stack of one call or stream, composed in one place ([`compose`],
//! when the server is bound).
//!
//! Outermost first; each is a [`Layer`]'s service, and each call goes through all, as
//! does each stream's opening (a [`StreamOpening`](super::StreamOpening), whose
//! outcome comes back up when the stream ends):
//!
//! | layer | a call | a stream |
//! |---|---|---|
//! | [`Limit`] | refused over [`Server::limit`](super::Server::limit)'s limits (nothing below runs) | refused over [`StreamConfig::max_in_flight`](crate::stream::StreamConfig::max_in_flight), its own limit; holds its slot until the stream ends |
//! | [`Trace`] | the call's `rpc.server` span, a child of the caller's trace | the same, for the stream's life |
//! | [`Inflight`] | waits for one of [`ServerCapacity::max_inflight`](super::ServerCapacity::max_inflight)'s slots | passes by: a stream does not queue, and holds no call slot |
//! | [`CatchPanic`] | a panic below becomes an `INTERNAL_ERROR` answer | the same, in the trailer |
//! | [`MeteredServer`] | counts the call ([`Observability::metrics`](crate::config::Observability::metrics)) | passes by: the session counts streams |
//! | your layers | [`Server::layer`](super::Server::layer), the first added outermost (as on the client) | the same, when written over [`ServerCall`] |
//! | [`Deadline`](super::deadline::Deadline) | gives the call up at the caller's deadline | passes by: a stream has no deadline on the wire |
//! | the bottom | the dispatcher: decodes the arguments and runs the handler | the [`StreamHandler`](super::StreamHandler) |
//!
//! Why streams have limits of their own rather than the calls': a stream lives as
//! long as its client keeps it, so a slot shared with calls would let a few thousand
//! quiet streams starve every call, and a call waiting for a slot behind streams
//! could wait for minutes. So a stream is refused at once over its own limit (as
//! [`StreamConfig::max_in_flight`](crate::stream::StreamConfig::max_in_flight) always
//! refused it), and holds that slot for its life.
//!
//! The steps before the stack are the connection's, not a call's: the frame's header
//! read (metainfo, the caller's deadline, [`ServerContext::arrived`]), the message
//! header, routing to one of several services (for a stream, whether the handler
//! serves its service and method), and the closing refusal of a server that is
//! shutting down (`call.rs`, `stream.rs`). The access log line is written with the
//! reply, when its size is known.

use super::inflight::{Inflight, InflightLayer};
use super::limit::{Limit, LimitLayer};
use super::metered::MeteredServer;
use super::panic::{CatchPanic, CatchPanicLayer};
use super::trace::{Trace, TraceLayer};
use super::{LimitConfig, ServerConfig};
use crate::governance::ServerGovernance;
use crate::metrics::ServerConns;
use crate::service::Layer;

/// The built-ins around a server's stack `D` (its layers and the dispatcher).
pub(crate) type Builtins<D> = Limit<Trace<Inflight<CatchPanic<MeteredServer<D>>>>>;

/// Wraps `stack` in the server's built-in layers, as `config` sets them, in the order
/// of the [module docs](self).
pub(crate) fn compose<D>(
    stack: D,
    config: &ServerConfig,
    (limit, governance): (LimitConfig, Option<ServerGovernance>),
    counters: Option<ServerConns>,
) -> Builtins<D> {
    let metered = MeteredServer::new(stack, config.observability.metrics.clone());
    let caught = CatchPanicLayer.layer(metered);
    let slotted = InflightLayer::new(config.capacity.max_inflight).layer(caught);
    let traced = TraceLayer.layer(slotted);
    LimitLayer::new(limit)
        .governed(governance)
        .stream_limit(config.streams.max_in_flight)
        .counted(counters)
        .layer(traced)
}
