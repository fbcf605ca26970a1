//! Streaming calls' server side (see [`stream`](crate::stream)): a
//! [`StreamHandler`] serves the streams of the connections a [`Server`](super::Server)
//! finds to be streaming ones.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use thrift_wire::{Message, Utf8Bytes};

use crate::stream::handle::{Receiver, Sender};
use crate::stream::shared::StreamShared;
use crate::stream::{HandlerError, Metadata};

/// Serves streams: one call of [`serve`](Self::serve) per stream a client opens, run
/// inside its connection's task beside the other streams of that connection (as a
/// mux connection's calls run), so that their answers leave together; a
/// handler with heavy CPU work should move it off with `spawn_blocking`. The
/// generated `<Service>StreamServer` implements it for a service's streaming
/// methods.
///
/// Before it spawns a handler, the server asks [`service_name`](Self::service_name)
/// and [`serves_method`](Self::serves_method) whether the stream is one the handler
/// serves; one it does not serve is reset at once with an `UNKNOWN_METHOD` exception
/// naming its method (the client fails with
/// [`StreamError::UnknownMethod`](crate::stream::StreamError::UnknownMethod)), and the
/// handler never sees it. Both have defaults that take every stream, so a handler
/// that does not say answers for itself.
pub trait StreamHandler: Send + Sync + 'static {
    /// Serves `stream` until done. `Ok` ends the stream with an empty trailer; an
    /// error ends it with the error in the trailer (as Kitex carries a handler's
    /// error). A handler that panics ends its stream with an `INTERNAL_ERROR`. The
    /// trailer goes even when the client reset the stream meanwhile, as Kitex's
    /// server sends it (see [`stream`](crate::stream#lifecycle)); a stream reset by
    /// the server or whose connection failed gets none.
    fn serve(&self, stream: ServerStream) -> impl Future<Output = Result<(), HandlerError>> + Send;

    /// The service whose streams it serves, as clients name it in a stream's header
    /// (the `isn` key: the IDL's service name). A stream that names another service
    /// is refused; one that names none is taken. Default `None`: any service.
    fn service_name(&self) -> Option<&str> {
        None
    }

    /// Whether it serves streams of `method`; a stream of another method is refused.
    /// Default: every method (the handler answers one it does not know, for example
    /// with [`HandlerError::unknown_method`]).
    fn serves_method(&self, method: &str) -> bool {
        let _ = method;
        true
    }
}

/// A stream a client opened, as its handler gets it.
pub struct ServerStream {
    pub(super) stream: Arc<StreamShared>,
    pub(super) header: Metadata,
    pub(super) service: Option<Utf8Bytes>,
}

impl fmt::Debug for ServerStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerStream")
            .field("stream", &self.stream.id)
            .field("method", &self.stream.method)
            .field("service", &self.service)
            .field("header", &self.header)
            .finish()
    }
}

impl ServerStream {
    /// The method the client named.
    pub fn method(&self) -> &str {
        &self.stream.method
    }

    /// The service the client named (its `isn` key), if it did.
    pub fn service(&self) -> Option<&str> {
        self.service.as_deref()
    }

    /// The metadata of the client's header.
    pub fn header(&self) -> &Metadata {
        &self.header
    }

    /// The stream id (for logs).
    pub fn id(&self) -> i32 {
        self.stream.id
    }

    /// The typed halves: requests of type `Req` in, responses of type `Resp` out.
    pub fn halves<Req: Message, Resp: Message>(self) -> (Receiver<Req>, Sender<Resp>) {
        (
            Receiver::new(Arc::clone(&self.stream), None),
            Sender::new(self.stream, None),
        )
    }

    /// The stream's context and its typed halves: what a generated handler gets.
    pub fn into_parts<Req: Message, Resp: Message>(
        self,
    ) -> (StreamContext, Receiver<Req>, Sender<Resp>) {
        let cx = StreamContext {
            stream: Arc::clone(&self.stream),
            header: self.header,
            service: self.service,
        };
        (
            cx,
            Receiver::new(Arc::clone(&self.stream), None),
            Sender::new(self.stream, None),
        )
    }
}

/// What a stream's handler knows of it beside its messages: the client's header,
/// the method and service, and the metadata it sends back.
pub struct StreamContext {
    stream: Arc<StreamShared>,
    header: Metadata,
    service: Option<Utf8Bytes>,
}

impl fmt::Debug for StreamContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamContext")
            .field("stream", &self.stream.id)
            .field("method", &self.stream.method)
            .field("service", &self.service)
            .field("header", &self.header)
            .finish()
    }
}

impl StreamContext {
    /// The method the client named.
    pub fn method(&self) -> &str {
        &self.stream.method
    }

    /// The service the client named (its `isn` key), if it did.
    pub fn service(&self) -> Option<&str> {
        self.service.as_deref()
    }

    /// The metadata of the client's header (its metainfo keys included).
    pub fn header(&self) -> &Metadata {
        &self.header
    }

    /// Sets the metadata of the server's header; it goes with the first message or
    /// the trailer, whichever is first.
    pub fn set_header(&self, header: Metadata) {
        self.stream.set_header(header);
    }

    /// Sets the metadata of the server's trailer.
    pub fn set_trailer(&self, trailer: Metadata) {
        self.stream.set_trailer(trailer);
    }

    /// Waits until the stream is reset (the client cancelled it, its deadline
    /// passed, the connection failed) and says why.
    pub async fn cancelled(&self) -> crate::stream::StreamError {
        self.stream.reset_reason().await
    }
}

type BoxedServe = Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send>>;

/// [`StreamHandler`] with its future boxed, to be held without its type.
pub(crate) trait ServeBoxed: Send + Sync {
    fn serve_boxed(self: Arc<Self>, stream: ServerStream) -> BoxedServe;
    fn service_name(&self) -> Option<&str>;
    fn serves_method(&self, method: &str) -> bool;
}

impl<H: StreamHandler> ServeBoxed for H {
    fn serve_boxed(self: Arc<Self>, stream: ServerStream) -> BoxedServe {
        Box::pin(async move { self.serve(stream).await })
    }

    fn service_name(&self) -> Option<&str> {
        StreamHandler::service_name(self)
    }

    fn serves_method(&self, method: &str) -> bool {
        StreamHandler::serves_method(self, method)
    }
}
