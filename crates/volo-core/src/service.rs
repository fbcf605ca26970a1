//! `Service` and `Layer`: the shape of every step of a call, on the client and on the
//! server, in the form Volo (motore) users know.
//!
//! A [`Service`] takes a request with a mutable context and answers asynchronously. A
//! [`Layer`] wraps a service in another (a timeout, a retry, a log line...), and a
//! [`ServiceBuilder`] stacks layers around a service, outermost first.
//!
//! ```
//! use volo_core::service::{Layer, Service, ServiceBuilder, layer_fn, service_fn};
//!
//! // A layer that counts calls into the context.
//! struct Count<S>(S);
//!
//! impl<S: Service<u32, String> + Sync> Service<u32, String> for Count<S> {
//!     type Response = S::Response;
//!     type Error = S::Error;
//!
//!     async fn call(&self, cx: &mut u32, req: String) -> Result<S::Response, S::Error> {
//!         *cx += 1;
//!         self.0.call(cx, req).await
//!     }
//! }
//!
//! let svc = ServiceBuilder::new()
//!     .layer(layer_fn(Count))
//!     .service(service_fn(|_cx: &mut u32, req: String| async move {
//!         Ok::<_, std::convert::Infallible>(req.len())
//!     }));
//!
//! # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! # rt.block_on(async {
//! let mut calls = 0;
//! assert_eq!(svc.call(&mut calls, "hello".to_string()).await, Ok(5));
//! assert_eq!(calls, 1);
//! # });
//! ```

use std::fmt;
use std::future::Future;
use std::sync::Arc;

/// An asynchronous function from a request to a response, with a context it may read
/// and change (the call's metadata: method, deadline, metainfo...).
///
/// Implement it with an `async fn`; the future must be `Send` so that servers can run
/// it on any worker of a multi-thread runtime.
pub trait Service<Cx, Request> {
    /// What a successful call returns.
    type Response;
    /// What a failed call returns.
    type Error;

    /// Handles one request.
    fn call(
        &self,
        cx: &mut Cx,
        req: Request,
    ) -> impl Future<Output = Result<Self::Response, Self::Error>> + Send;
}

/// A shared or borrowed service is a service.
macro_rules! forward_service {
    ($($ptr:ty),*) => {$(
        impl<Cx, Request, S> Service<Cx, Request> for $ptr
        where
            S: Service<Cx, Request> + ?Sized,
        {
            type Response = S::Response;
            type Error = S::Error;

            fn call(
                &self,
                cx: &mut Cx,
                req: Request,
            ) -> impl Future<Output = Result<Self::Response, Self::Error>> + Send {
                (**self).call(cx, req)
            }
        }
    )*};
}

forward_service!(Arc<S>, &S, Box<S>);

/// Wraps a service in another.
pub trait Layer<S> {
    /// The wrapping service.
    type Service;

    /// Wraps `inner`.
    fn layer(self, inner: S) -> Self::Service;
}

/// The layer that changes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Identity;

impl<S> Layer<S> for Identity {
    type Service = S;

    fn layer(self, inner: S) -> S {
        inner
    }
}

/// Two layers, `outer` around `inner`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stack<Inner, Outer> {
    inner: Inner,
    outer: Outer,
}

impl<Inner, Outer> Stack<Inner, Outer> {
    /// `outer` wraps what `inner` made.
    pub fn new(inner: Inner, outer: Outer) -> Self {
        Stack { inner, outer }
    }
}

impl<S, Inner, Outer> Layer<S> for Stack<Inner, Outer>
where
    Inner: Layer<S>,
    Outer: Layer<Inner::Service>,
{
    type Service = Outer::Service;

    fn layer(self, service: S) -> Self::Service {
        self.outer.layer(self.inner.layer(service))
    }
}

/// Stacks layers around a service: the first layer added is the outermost, so a request
/// meets the layers in the order they were added.
#[derive(Debug, Clone, Default)]
pub struct ServiceBuilder<L> {
    layer: L,
}

impl ServiceBuilder<Identity> {
    /// A builder with no layers.
    pub fn new() -> Self {
        ServiceBuilder { layer: Identity }
    }
}

impl<L> ServiceBuilder<L> {
    /// Adds `layer` inside the layers added so far.
    pub fn layer<T>(self, layer: T) -> ServiceBuilder<Stack<T, L>> {
        ServiceBuilder {
            layer: Stack::new(layer, self.layer),
        }
    }

    /// The layers as one layer.
    pub fn into_inner(self) -> L {
        self.layer
    }

    /// Wraps `service` in the layers.
    pub fn service<S>(self, service: S) -> L::Service
    where
        L: Layer<S>,
    {
        self.layer.layer(service)
    }
}

/// A service made of a function (see [`service_fn`]).
#[derive(Clone, Copy)]
pub struct ServiceFn<F> {
    f: F,
}

impl<F> fmt::Debug for ServiceFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServiceFn")
    }
}

/// A service that calls `f(cx, req)`. The future `f` returns may not borrow `cx` (copy
/// what it needs from it first); for that, implement [`Service`] with an `async fn`.
pub fn service_fn<F>(f: F) -> ServiceFn<F> {
    ServiceFn { f }
}

impl<Cx, Request, F, Fut, R, E> Service<Cx, Request> for ServiceFn<F>
where
    F: Fn(&mut Cx, Request) -> Fut,
    Fut: Future<Output = Result<R, E>> + Send,
{
    type Response = R;
    type Error = E;

    fn call(&self, cx: &mut Cx, req: Request) -> impl Future<Output = Result<R, E>> + Send {
        (self.f)(cx, req)
    }
}

/// A layer made of a function from the inner service to the outer (see [`layer_fn`]).
#[derive(Clone, Copy)]
pub struct LayerFn<F> {
    f: F,
}

impl<F> fmt::Debug for LayerFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LayerFn")
    }
}

/// A layer that calls `f(inner)`; a wrapper's constructor is such a function.
pub fn layer_fn<F>(f: F) -> LayerFn<F> {
    LayerFn { f }
}

impl<S, F, Out> Layer<S> for LayerFn<F>
where
    F: FnOnce(S) -> Out,
{
    type Service = Out;

    fn layer(self, inner: S) -> Out {
        (self.f)(inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the order in which layers see a request.
    struct Tag<S> {
        name: &'static str,
        inner: S,
    }

    impl<S> Service<Vec<&'static str>, u8> for Tag<S>
    where
        S: Service<Vec<&'static str>, u8> + Sync,
    {
        type Response = S::Response;
        type Error = S::Error;

        async fn call(&self, cx: &mut Vec<&'static str>, req: u8) -> Result<S::Response, S::Error> {
            cx.push(self.name);
            self.inner.call(cx, req).await
        }
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn layers_run_in_the_order_they_were_added() {
        let svc = ServiceBuilder::new()
            .layer(layer_fn(|inner| Tag {
                name: "first",
                inner,
            }))
            .layer(layer_fn(|inner| Tag {
                name: "second",
                inner,
            }))
            .layer(Identity)
            .service(service_fn(|cx: &mut Vec<&'static str>, req: u8| {
                cx.push("service");
                async move { Ok::<_, ()>(req + 1) }
            }));
        let mut seen = Vec::new();
        assert_eq!(block_on(svc.call(&mut seen, 41)), Ok(42));
        assert_eq!(seen, ["first", "second", "service"]);
    }

    #[test]
    fn shared_and_borrowed_services_are_services() {
        let svc = Arc::new(service_fn(|_: &mut (), req: u8| async move {
            Ok::<_, ()>(req * 2)
        }));
        assert_eq!(block_on(svc.call(&mut (), 4)), Ok(8));
        let borrowed = &*svc;
        // `Service::call` on `&&ServiceFn`: the `&S` impl.
        assert_eq!(block_on(Service::call(&borrowed, &mut (), 5)), Ok(10));
    }
}
