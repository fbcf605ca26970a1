//! The server's stack of one call, composed in one place ([`compose`], when the server
//! is bound).
//!
//! Outermost first; each is a [`Layer`]'s service, and each call goes through all:
//!
//! | layer | what it does |
//! |---|---|
//! | [`Limit`] | refuses calls over [`Server::limit`](super::Server::limit)'s limits (nothing below runs) |
//! | [`Trace`] | the call's `rpc.server` span, a child of the caller's trace |
//! | [`Inflight`] | waits for one of [`ServerCapacity::max_inflight`](super::ServerCapacity::max_inflight)'s slots |
//! | [`CatchPanic`] | a panic below becomes an `INTERNAL_ERROR` answer |
//! | [`MeteredServer`] | counts the call ([`Observability::metrics`](crate::config::Observability::metrics)) |
//! | your layers | [`Server::layer`](super::Server::layer), the first added outermost (as on the client) |
//! | [`Deadline`](super::deadline::Deadline) | gives the call up at the caller's deadline |
//! | the dispatcher | decodes the arguments and runs the handler |
//!
//! The steps before the stack are the connection's, not a call's: the frame's header
//! read (metainfo, the caller's deadline, [`ServerContext::arrived`]), the message
//! header, routing to one of several services, and the closing refusal of a server
//! that is shutting down (`call.rs`). The access log line is written with the reply,
//! when its size is known.

use std::sync::Arc;

use tokio::sync::Semaphore;

use super::limit::{Limit, LimitLayer};
use super::metered::MeteredServer;
use super::panic::{CatchPanic, CatchPanicLayer};
use super::trace::{Trace, TraceLayer};
use super::{DispatchError, LimitConfig, ServerConfig, ServerRequest};
use crate::context::ServerContext;
use crate::metrics::ServerConns;
use crate::service::{Layer, Service};

/// The built-ins around a server's stack `D` (its layers and the dispatcher).
pub(crate) type Builtins<D> = Limit<Trace<Inflight<CatchPanic<MeteredServer<D>>>>>;

/// Wraps `stack` in the server's built-in layers, as `config` sets them, in the order
/// of the [module docs](self).
pub(crate) fn compose<D>(
    stack: D,
    config: &ServerConfig,
    limit: LimitConfig,
    counters: Option<ServerConns>,
) -> Builtins<D> {
    let metered = MeteredServer::new(stack, config.observability.metrics.clone());
    let caught = CatchPanicLayer.layer(metered);
    let slotted = InflightLayer::new(config.capacity.max_inflight).layer(caught);
    let traced = TraceLayer.layer(slotted);
    LimitLayer::new(limit).counted(counters).layer(traced)
}

/// Runs at most so many calls at once across the server's connections; a call waits
/// for a slot, in its span, before the layers beneath see it.
#[derive(Debug, Clone)]
pub(crate) struct Inflight<S> {
    inner: S,
    slots: Arc<Semaphore>,
}

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

impl<S> Service<ServerContext, ServerRequest> for Inflight<S>
where
    S: Service<ServerContext, ServerRequest, Error = DispatchError> + Send + Sync,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<S::Response, DispatchError> {
        // The semaphore is never closed.
        let _slot = self.slots.acquire().await;
        self.inner.call(cx, req).await
    }
}
