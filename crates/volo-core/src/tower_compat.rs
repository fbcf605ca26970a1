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
//! - [`TowerLayer`] makes a tower layer a client layer: `ClientBuilder::layer(
//!   TowerLayer::new(tower::timeout::TimeoutLayer::new(..)))`. Errors the tower layer
//!   makes of its own (tower's `Elapsed`, `Overloaded`...) reach the caller as
//!   [`crate::client::ErrorKind::Rejected`] with the tower error
//!   as their source; the stack's own errors come through unchanged.
//!
//! ```
//! use tower::ServiceBuilder;
//! use volo_core::service::{Service, service_fn};
//! use volo_core::tower_compat::{FromTower, IntoTower};
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

use crate::client::{BoxError, ClientContext, ClientRequest, ClientResponse, Error, ErrorKind};
use crate::service::{Layer, Service};

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

/// A tower layer as a client layer (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct TowerLayer<L> {
    layer: L,
}

impl<L> TowerLayer<L> {
    /// Uses `layer` (a `tower::Layer`) in a client stack.
    pub fn new(layer: L) -> Self {
        TowerLayer { layer }
    }
}

impl<S, L> Layer<S> for TowerLayer<L>
where
    L: tower_layer::Layer<IntoTower<S>>,
{
    type Service = TowerClient<L::Service>;

    fn layer(self, inner: S) -> TowerClient<L::Service> {
        TowerClient {
            inner: FromTower::new(self.layer.layer(IntoTower::new(inner))),
        }
    }
}

/// The service a [`TowerLayer`] makes: a tower service in a client stack.
#[derive(Debug, Clone)]
pub struct TowerClient<T> {
    inner: FromTower<T>,
}

impl<T> Service<ClientContext, ClientRequest> for TowerClient<T>
where
    T: tower_service::Service<
            (ClientContext, ClientRequest),
            Response = (ClientContext, ClientResponse),
        > + Clone
        + Send
        + Sync,
    T::Future: Send,
    T::Error: Into<BoxError> + Send,
{
    type Response = ClientResponse;
    type Error = Error;

    async fn call(
        &self,
        cx: &mut ClientContext,
        req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        self.inner.call(cx, req).await.map_err(|e| {
            let e: BoxError = e.into();
            match e.downcast::<Error>() {
                Ok(ours) => *ours,
                Err(theirs) => Error::new(ErrorKind::Rejected, theirs),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::service_fn;

    /// tower's own timeout and concurrency limit on a real client against a real
    /// server: the limit of one serialises concurrent calls, and the timeout fails a
    /// call that is never answered with tower's error as the source. The timeout (1 s)
    /// leaves the answered calls, each waiting for the ones before it, time to spare
    /// on a loaded machine.
    #[test]
    fn tower_middleware_wraps_a_real_client() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::Duration;

        use crate::client::Client;
        use crate::test_support::{runtime, start, text};

        /// Counts attempts in flight below the tower layers, and the most at once.
        #[derive(Clone)]
        struct Count<S> {
            inner: S,
            now: Arc<AtomicUsize>,
            most: Arc<AtomicUsize>,
        }

        impl<S> Service<ClientContext, ClientRequest> for Count<S>
        where
            S: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error>
                + Sync,
        {
            type Response = ClientResponse;
            type Error = Error;

            async fn call(
                &self,
                cx: &mut ClientContext,
                req: ClientRequest,
            ) -> Result<ClientResponse, Error> {
                let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
                self.most.fetch_max(n, Ordering::SeqCst);
                let out = self.inner.call(cx, req).await;
                self.now.fetch_sub(1, Ordering::SeqCst);
                out
            }
        }

        runtime().block_on(async {
            let server = start(crate::server::ServerConfig::default()).await;
            let (now, most) = (Arc::default(), Arc::new(AtomicUsize::new(0)));
            let counted = {
                let (now, most) = (Arc::clone(&now), Arc::clone(&most));
                crate::service::layer_fn(move |inner| Count { inner, now, most })
            };
            let client = Client::builder("Test")
                .address(crate::context::Address::Tcp(server.addr))
                .layer(TowerLayer::new(
                    tower::ServiceBuilder::new()
                        .timeout(Duration::from_secs(1))
                        .concurrency_limit(1)
                        .into_inner(),
                ))
                .layer(counted)
                .build()
                .unwrap();
            let calls: Vec<_> = (0..4)
                .map(|i| {
                    let client = client.clone();
                    tokio::spawn(async move {
                        client
                            .call::<_, crate::test_support::Text>(
                                &mut ClientContext::new(),
                                "echo",
                                text(1, &i.to_string()),
                            )
                            .await
                    })
                })
                .collect();
            for (i, call) in calls.into_iter().enumerate() {
                let reply = call.await.unwrap().unwrap();
                assert_eq!(reply, text(0, &i.to_string()));
            }
            assert_eq!(most.load(Ordering::SeqCst), 1, "the limit of one held");
            // `hang` never answers: tower's timeout fires.
            let err = client
                .call::<_, crate::test_support::Text>(
                    &mut ClientContext::new(),
                    "hang",
                    text(1, "x"),
                )
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Rejected, "{err}");
            let source = std::error::Error::source(&err).expect("tower's error");
            assert!(source.is::<tower::timeout::error::Elapsed>(), "{source}");
        });
    }

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
