//! The server's bound on the calls in progress across its connections
//! ([`ServerCapacity::max_inflight`](super::ServerCapacity::max_inflight)).

use std::sync::Arc;

use tokio::sync::Semaphore;

use super::{DispatchError, ServerCall};
use crate::context::ServerContext;
use crate::service::Service;

mod layer;

pub(crate) use layer::InflightLayer;

/// Runs at most so many calls at once across the server's connections; a call waits
/// for a slot, in its span, before the layers beneath see it. Streams pass by without
/// a slot (see the [stack](super::stack)).
///
/// `pub` only to appear in the server's bounds: its module is private.
#[derive(Debug, Clone)]
pub struct Inflight<S> {
    pub(super) inner: S,
    pub(super) slots: Arc<Semaphore>,
}

impl<S, R> Service<ServerContext, R> for Inflight<S>
where
    S: Service<ServerContext, R, Error = DispatchError> + Send + Sync,
    R: ServerCall,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(&self, cx: &mut ServerContext, req: R) -> Result<S::Response, DispatchError> {
        if req.opens_stream() {
            // A stream would hold a slot for its whole life: the limiter's stream
            // limit bounds streams instead.
            return self.inner.call(cx, req).await;
        }
        // The semaphore is never closed.
        let _slot = self.slots.acquire().await;
        self.inner.call(cx, req).await
    }
}
