//! A panic in a handler, or in a layer beneath, answered as an exception.

use std::any::Any;
use std::future::poll_fn;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::task::Poll;

use crate::context::ServerContext;
use crate::server::{DispatchError, ServerCall};
use crate::service::Service;

mod layer;

pub use layer::CatchPanicLayer;

/// Catches a panic of the service beneath while it is polled, and fails the call with
/// [`DispatchError::Panic`] (the caller gets an `INTERNAL_ERROR` saying so); the
/// connection and the other calls go on. The layers outside it (the span, the
/// limiter's slot) see an ordinary error; those beneath see the unwinding (the metrics
/// count such a call as `panic`). A stream whose handler panics ends with an
/// `INTERNAL_ERROR` in its trailer, from here.
#[derive(Debug, Clone)]
pub struct CatchPanic<S> {
    pub(super) inner: S,
}

impl<S, R> Service<ServerContext, R> for CatchPanic<S>
where
    S: Service<ServerContext, R, Error = DispatchError> + Send + Sync,
    R: ServerCall,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(&self, cx: &mut ServerContext, req: R) -> Result<S::Response, DispatchError> {
        let mut fut = std::pin::pin!(self.inner.call(cx, req));
        poll_fn(
            |task| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(task))) {
                Ok(poll) => poll,
                Err(panic) => Poll::Ready(Err(DispatchError::Panic(
                    panic_message(&*panic).to_string(),
                ))),
            },
        )
        .await
    }
}

/// What a panic said, when it said it with a string.
fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}
