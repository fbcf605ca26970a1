//! A stream's opening on its way down the server's stack ([`StreamOpening`]), the
//! service at the bottom that serves it ([`WithStreams`]), and how a [`Server`]
//! records at the type level whether it serves streams ([`NoStreams`], [`Streams`]).
//!
//! [`Server`]: super::Server

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::stream::{ServeBoxed, ServerStream};
use super::{DispatchError, ServerCall, ServerRequest};
use crate::context::{Address, ServerContext};
use crate::service::Service;
use crate::stream::Metadata;

/// A stream a client opened, as the layers of the server's stack see it: its method,
/// service, header metadata and peer. At the bottom of the stack it becomes the
/// [`ServerStream`] the [`StreamHandler`](super::StreamHandler) serves, and what comes
/// back up is the stream's outcome, once its handler has returned.
///
/// The server fills the context of a stream as it does a call's: `cx.rpc.method`,
/// `cx.rpc.callee.service`, the peer in `cx.rpc.caller.address`, and the metainfo of
/// the stream's header in `cx.metainfo` (framing TTHeader, protocol Binary, as
/// Kitex's streams travel).
pub struct StreamOpening {
    stream: ServerStream,
    peer: Option<Address>,
}

impl fmt::Debug for StreamOpening {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamOpening")
            .field("stream", &self.stream)
            .field("peer", &self.peer)
            .finish()
    }
}

impl StreamOpening {
    pub(crate) fn new(stream: ServerStream, peer: Option<Address>) -> Self {
        StreamOpening { stream, peer }
    }

    /// The method the client named.
    pub fn method(&self) -> &str {
        self.stream.method()
    }

    /// The service the client named (its `isn` key), if it did.
    pub fn service(&self) -> Option<&str> {
        self.stream.service()
    }

    /// The metadata of the client's header.
    pub fn header(&self) -> &Metadata {
        self.stream.header()
    }

    /// The client's address, when the transport has one.
    pub fn peer(&self) -> Option<&Address> {
        self.peer.as_ref()
    }

    /// The stream id (for logs).
    pub fn id(&self) -> i32 {
        self.stream.id()
    }

    /// The stream, for the handler: what the bottom of the stack serves.
    pub fn into_stream(self) -> ServerStream {
        self.stream
    }
}

impl ServerCall for StreamOpening {
    fn opens_stream(&self) -> bool {
        true
    }
}

/// The bottom of the stack of a server that serves streams: calls go to the
/// dispatcher `D`, streams to the [`StreamHandler`](super::StreamHandler) given to
/// [`Server::streams`](super::Server::streams). A stream's outcome is its handler's:
/// `Ok(())`, or its error as a [`DispatchError`] (an exception as
/// [`Application`](DispatchError::Application), a business status as
/// [`Biz`](DispatchError::Biz)).
pub struct WithStreams<D> {
    dispatch: D,
    handler: Arc<dyn ServeBoxed>,
}

impl<D: fmt::Debug> fmt::Debug for WithStreams<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithStreams")
            .field("dispatch", &self.dispatch)
            .finish_non_exhaustive()
    }
}

impl<D> WithStreams<D> {
    /// The dispatcher of the calls.
    pub fn dispatch(&self) -> &D {
        &self.dispatch
    }
}

impl<D> Service<ServerContext, ServerRequest> for WithStreams<D>
where
    D: Service<ServerContext, ServerRequest, Error = DispatchError> + Sync,
{
    type Response = D::Response;
    type Error = DispatchError;

    fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> impl Future<Output = Result<D::Response, DispatchError>> + Send {
        self.dispatch.call(cx, req)
    }
}

impl<D: Sync> Service<ServerContext, StreamOpening> for WithStreams<D> {
    type Response = ();
    type Error = DispatchError;

    async fn call(
        &self,
        _cx: &mut ServerContext,
        opening: StreamOpening,
    ) -> Result<(), DispatchError> {
        Arc::clone(&self.handler)
            .serve_boxed(opening.into_stream())
            .await
            .map_err(DispatchError::from)
    }
}

/// A [`Server`](super::Server) that serves no streams (the default): its stack's
/// bottom is its dispatcher, and its layers need only serve calls.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoStreams;

/// A [`Server`](super::Server) that serves streams with a
/// [`StreamHandler`](super::StreamHandler) ([`Server::streams`](super::Server::streams)):
/// its stack's bottom is a [`WithStreams`], and each of its layers must serve
/// [`StreamOpening`]s as well as calls.
#[derive(Clone)]
pub struct Streams {
    pub(super) handler: Arc<dyn ServeBoxed>,
}

impl fmt::Debug for Streams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Streams").finish_non_exhaustive()
    }
}

impl Streams {
    pub(crate) fn new(handler: impl super::StreamHandler) -> Self {
        Streams {
            handler: Arc::new(handler),
        }
    }
}

/// Whether a server serves streams, and so what its stack's bottom is: implemented by
/// [`NoStreams`] (the dispatcher `D` itself) and [`Streams`] (a [`WithStreams`]); not
/// meant to be implemented elsewhere.
pub trait StreamSupport<D> {
    /// The service beneath the server's [`Deadline`](super::deadline::Deadline).
    type Bottom;

    /// Puts `dispatch` at the bottom.
    #[doc(hidden)]
    fn bottom(&self, dispatch: D) -> Self::Bottom;

    /// Whether streams are served.
    #[doc(hidden)]
    fn serves_streams(&self) -> bool;
}

impl<D> StreamSupport<D> for NoStreams {
    type Bottom = D;

    fn bottom(&self, dispatch: D) -> D {
        dispatch
    }

    fn serves_streams(&self) -> bool {
        false
    }
}

impl<D> StreamSupport<D> for Streams {
    type Bottom = WithStreams<D>;

    fn bottom(&self, dispatch: D) -> WithStreams<D> {
        WithStreams {
            dispatch,
            handler: Arc::clone(&self.handler),
        }
    }

    fn serves_streams(&self) -> bool {
        true
    }
}

/// A stack that serves streams, with its future boxed, to be held without its type.
pub(crate) trait OpenStream: Send + Sync {
    /// Runs `opening` down the stack: its outcome once the stream has ended.
    fn open(
        self: Arc<Self>,
        cx: ServerContext,
        opening: StreamOpening,
    ) -> Pin<Box<dyn Future<Output = Result<(), DispatchError>> + Send>>;
}

impl<S> OpenStream for S
where
    S: Service<ServerContext, StreamOpening, Response = (), Error = DispatchError>
        + Send
        + Sync
        + 'static,
{
    fn open(
        self: Arc<Self>,
        mut cx: ServerContext,
        opening: StreamOpening,
    ) -> Pin<Box<dyn Future<Output = Result<(), DispatchError>> + Send>> {
        Box::pin(async move { self.call(&mut cx, opening).await })
    }
}
