//! The limiter as a layer of the server's stack: the outermost of its built-ins, so a
//! refused call runs nothing else (no span, no metrics, no slot).

use std::sync::Arc;

use super::{LimitConfig, Limiter, Overloaded, refusal};
use crate::clock::SystemClock;
use crate::context::ServerContext;
use crate::metrics::ServerConns;
use crate::server::{DispatchError, ServerRequest};
use crate::service::{Layer, Service};

/// Refuses the calls over a [`Limiter`]'s limits with the overload exception
/// ([`refusal`]), and lets the others through, each holding its concurrency slot until
/// the service beneath has answered it (or the call is dropped). The QPS limit counts
/// from the time the call's frame was taken ([`ServerContext::arrived`]).
///
/// Still before the arguments are decoded (the dispatcher beneath decodes them), as
/// Kitex limits in `OnRead`.
#[derive(Debug, Clone)]
pub struct Limit<S> {
    inner: S,
    limiter: Arc<Limiter>,
    /// The refusals are counted here, when metrics are on.
    counters: Option<ServerConns>,
}

/// Makes [`Limit`]s sharing one [`Limiter`].
#[derive(Debug, Clone)]
pub struct LimitLayer {
    limiter: Arc<Limiter>,
    counters: Option<ServerConns>,
}

impl LimitLayer {
    /// A layer enforcing `config`.
    pub fn new(config: LimitConfig) -> Self {
        LimitLayer {
            limiter: Arc::new(Limiter::new(config, SystemClock)),
            counters: None,
        }
    }

    /// The same layer, counting its refusals in `counters` (a server's metrics).
    pub(crate) fn counted(mut self, counters: Option<ServerConns>) -> Self {
        self.counters = counters;
        self
    }
}

impl<S> Layer<S> for LimitLayer {
    type Service = Limit<S>;

    fn layer(self, inner: S) -> Limit<S> {
        Limit {
            inner,
            limiter: self.limiter,
            counters: self.counters,
        }
    }
}

impl<S> Service<ServerContext, ServerRequest> for Limit<S>
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
        let arrived = cx.arrived;
        let admitted = self
            .limiter
            .try_acquire_at(|| arrived.unwrap_or_else(std::time::Instant::now));
        let _permit = match admitted {
            Ok(permit) => permit,
            Err(over) => {
                if let Some(c) = &self.counters {
                    match over {
                        Overloaded::Concurrency { .. } => c.rejected_concurrency.inc(),
                        Overloaded::Qps { .. } => c.rejected_qps.inc(),
                    };
                }
                return Err(DispatchError::Application(refusal(&over)));
            }
        };
        self.inner.call(cx, req).await
    }
}
