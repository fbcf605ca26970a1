//! Adapters to and from [`tower_service::Service`], so that tower's middleware
//! (concurrency limits, load shedding, buffers...) can wrap services of this crate.
//!
//! Tower services take their request by value and return `'static` futures, so the
//! context travels with the request: the tower side sees `(Cx, Req)` and answers
//! `(Cx, Resp)`.
//!
//! - [`IntoTower`] makes a [`Service`] usable as a tower service.
//! - [`FromTower`] makes a tower service over `(Cx, Req)` a [`Service`] again. The
//!   context is moved into the request (`std::mem::take`, so `Cx: Default`) and put back
//!   from the response; when the tower service fails, the context it was given is lost
//!   and the caller's is left at its default.
//!
//! ```
//! use tower::ServiceBuilder;
//! use volo_core::service::{Service, service_fn};
//! use volo_core::tower::{FromTower, IntoTower};
//!
//! let ours = service_fn(|cx: &mut u32, req: u64| {
//!     *cx += 1;
//!     async move { Ok::<_, std::convert::Infallible>(req * 2) }
//! });
//! // tower's concurrency limit around our service, then back into our shape.
//! let limited = FromTower::new(
//!     ServiceBuilder::new()
//!         .concurrency_limit(8)
//!         .service(IntoTower::new(ours)),
//! );
//! # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! # rt.block_on(async {
//! let mut calls = 0;
//! assert_eq!(limited.call(&mut calls, 21).await, Ok(42));
//! assert_eq!(calls, 1);
//! # });
//! ```

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::service::Service;

/// A [`Service`] as a tower service over `(Cx, Req)`.
#[derive(Debug)]
pub struct IntoTower<S> {
    inner: Arc<S>,
}

impl<S> IntoTower<S> {
    /// Wraps `service`.
    pub fn new(service: S) -> Self {
        IntoTower {
            inner: Arc::new(service),
        }
    }
}

impl<S> Clone for IntoTower<S> {
    fn clone(&self) -> Self {
        IntoTower {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// The future an [`IntoTower`] returns.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, Cx, Req> tower_service::Service<(Cx, Req)> for IntoTower<S>
where
    S: Service<Cx, Req> + Send + Sync + 'static,
    Cx: Send + 'static,
    Req: Send + 'static,
{
    type Response = (Cx, S::Response);
    type Error = S::Error;
    type Future = BoxFuture<Result<(Cx, S::Response), S::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, (mut cx, req): (Cx, Req)) -> Self::Future {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            let resp = inner.call(&mut cx, req).await?;
            Ok((cx, resp))
        })
    }
}

/// A tower service over `(Cx, Req)` as a [`Service`].
#[derive(Debug, Clone)]
pub struct FromTower<T> {
    inner: T,
}

impl<T> FromTower<T> {
    /// Wraps `service`; each call works on a clone of it, as tower expects.
    pub fn new(service: T) -> Self {
        FromTower { inner: service }
    }
}

impl<T, Cx, Req, Resp> Service<Cx, Req> for FromTower<T>
where
    T: tower_service::Service<(Cx, Req), Response = (Cx, Resp)> + Clone + Send + Sync,
    T::Future: Send,
    T::Error: Send,
    Cx: Default + Send,
    Req: Send,
    Resp: Send,
{
    type Response = Resp;
    type Error = T::Error;

    async fn call(&self, cx: &mut Cx, req: Req) -> Result<Resp, T::Error> {
        let mut svc = self.inner.clone();
        poll_fn(|c| svc.poll_ready(c)).await?;
        let (back, resp) = svc.call((std::mem::take(cx), req)).await?;
        *cx = back;
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::service_fn;

    #[test]
    fn a_tower_timeout_wraps_our_service_and_the_context_comes_back() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let slow = service_fn(|cx: &mut Vec<u64>, req: u64| {
            cx.push(req);
            async move {
                if req == 0 {
                    std::future::pending::<()>().await;
                }
                Ok::<_, tower::BoxError>(req + 1)
            }
        });
        let timed = FromTower::new(
            tower::ServiceBuilder::new()
                .timeout(std::time::Duration::from_millis(20))
                .service(IntoTower::new(slow)),
        );
        rt.block_on(async {
            let mut cx = vec![7];
            assert_eq!(timed.call(&mut cx, 1).await.unwrap(), 2);
            assert_eq!(cx, [7, 1], "the context went through tower and came back");
            let err = timed.call(&mut cx, 0).await.unwrap_err();
            assert!(err.is::<tower::timeout::error::Elapsed>(), "{err}");
            assert!(cx.is_empty(), "a failed call leaves the default context");
        });
    }
}
