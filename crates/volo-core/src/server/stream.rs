//! Streaming calls' server side (see [`stream`](crate::stream)): a
//! [`StreamHandler`] serves the streams of the connections a [`Server`](super::Server)
//! finds to be streaming ones.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use futures_util::stream::{FuturesUnordered, StreamExt};
use thrift_codec::{Message, Utf8Bytes};
use tokio::sync::watch;

use super::DispatchError;
use super::opening::{OpenStream, StreamOpening};
use crate::codec::{Framing, Protocol};
use crate::context::{Address, ServerContext};
use crate::metrics::Metrics;
use crate::stream::handle::{Receiver, Sender};
use crate::stream::session::{Opened, Session, StreamShared, closed_here};
use crate::stream::{HandlerError, Metadata, StreamConfig, StreamError};
use crate::transport::{Conn, FrameIo};

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
    stream: Arc<StreamShared>,
    header: Metadata,
    service: Option<Utf8Bytes>,
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

/// A server's stream handler, its stack and stream settings: what serves the streams
/// of its streaming connections. `pub` only to appear in the server's bounds
/// ([`ServesStreams`](super::ServesStreams)): its module is private.
#[derive(Clone)]
pub struct Serving {
    /// Asked which streams it serves, before the stack sees them.
    handler: Arc<dyn ServeBoxed>,
    /// The server's stack, with the handler at its bottom.
    stack: Arc<dyn OpenStream>,
    config: StreamConfig,
}

impl fmt::Debug for Serving {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serving")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Serving {
    /// Serves with `handler` through `stack` (whose bottom is `handler` too).
    pub(crate) fn new(
        handler: Arc<dyn ServeBoxed>,
        stack: Arc<dyn OpenStream>,
        config: StreamConfig,
    ) -> Self {
        Serving {
            handler,
            stack,
            config,
        }
    }

    /// The settings.
    pub(crate) fn config(&self) -> &StreamConfig {
        &self.config
    }

    /// Serves the streams of `conn`, whose first frame was `first`, until the peer
    /// closes it; after `shutdown`, the streams in progress run to their end.
    ///
    /// The handlers run inside this task, beside the connection's reader (no task
    /// per stream, as the calls of a mux connection run in its own): each
    /// turn takes every frame that has arrived, polls the handlers those frames
    /// woke, and then flushes once, so that what the streams answer in one turn
    /// leaves in one send.
    pub(crate) async fn serve_conn(
        &self,
        conn: Conn,
        first: bytes::Bytes,
        mut shutdown: watch::Receiver<bool>,
        metrics: Option<&Metrics>,
    ) {
        let counters = metrics.map(|m| m.streams(true).clone());
        let peer = conn.peer();
        let session = Session::server(conn, self.config, counters);
        let mut reading = Box::pin(Arc::clone(&session).read(Some(first)));
        // Dropped with this future (the server gave up waiting): the handlers with it.
        let mut handlers = FuturesUnordered::<Handler>::new();
        let mut ended = None;
        let mut stopping = false;
        loop {
            let changed = shutdown.changed();
            tokio::pin!(changed);
            let flush = std::future::poll_fn(|cx| {
                session.begin_turn();
                if ended.is_none()
                    && let Poll::Ready(e) = reading.as_mut().poll(cx)
                {
                    ended = Some(e);
                }
                for opened in session.take_opened() {
                    let handler: Handler = if stopping {
                        // Shutting down: new streams are refused, those in progress end.
                        Box::pin(async move {
                            end(&opened.stream, Err(DispatchError::Closing)).await;
                        })
                    } else {
                        match self.route(&opened) {
                            Ok(()) => Box::pin(self.run(opened, peer.clone())),
                            Err(why) => {
                                tracing::debug!(stream = opened.stream.id, why = %why, "a stream not served; reset");
                                opened.stream.reset(StreamError::UnknownMethod(why));
                                continue;
                            }
                        }
                    };
                    handlers.push(handler);
                }
                while let Poll::Ready(Some(())) = handlers.poll_next_unpin(cx) {}
                if !stopping && changed.as_mut().poll(cx).is_ready() {
                    stopping = true;
                }
                // Last: what every handler polled above wrote leaves in one send.
                if session.poll_flush_wanted(cx).is_ready() {
                    return Poll::Ready(true);
                }
                if (stopping || ended.is_some()) && handlers.is_empty() {
                    return Poll::Ready(false);
                }
                Poll::Pending
            });
            if !flush.await {
                break;
            }
            if session.flush().await.is_err() {
                // The connection failed: the reader stops (if the socket does not
                // tell it first), every stream fails, and the handlers end.
                session.stop();
            }
        }
        session.end(ended.unwrap_or_else(closed_here)).await;
    }

    /// Whether the handler serves the service and method of `opened`; if not, why,
    /// naming the method. Asked before the stack, as a call is routed before it.
    fn route(&self, opened: &Opened) -> Result<(), String> {
        let method = &opened.stream.method;
        if let (Some(named), Some(served)) = (&opened.service, self.handler.service_name())
            && named.as_str() != served
        {
            return Err(format!(
                "unknown service {named} (TTHeader isn) for streaming method {method}"
            ));
        }
        if !self.handler.serves_method(method) {
            return Err(format!("unknown streaming method {method}"));
        }
        Ok(())
    }

    /// The future that serves one stream from `peer`: down the server's stack to the
    /// handler, then the trailer with the outcome.
    pub(crate) fn run(
        &self,
        opened: Opened,
        peer: Option<Address>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let cx = self.context(&opened, peer.clone());
        let stack = Arc::clone(&self.stack);
        let stream = Arc::clone(&opened.stream);
        let opening = StreamOpening::new(
            ServerStream {
                stream: opened.stream,
                header: opened.header,
                service: opened.service,
            },
            peer,
        );
        async move {
            let outcome = stack.open(cx, opening).await;
            match &outcome {
                Ok(()) => {}
                Err(DispatchError::Panic(message)) => {
                    tracing::error!(stream = stream.id, method = %stream.method, %message, "a stream handler panicked");
                }
                Err(e) => {
                    tracing::debug!(stream = stream.id, method = %stream.method, error = ?e, "a stream ended in failure");
                }
            }
            end(&stream, outcome).await;
        }
    }

    /// A stream's context, as a call's is filled: its method, the service, the peer,
    /// and the metainfo of its header.
    fn context(&self, opened: &Opened, peer: Option<Address>) -> ServerContext {
        let mut cx = ServerContext::new(Framing::TTHeader, Protocol::Binary);
        cx.rpc.caller.address = peer;
        cx.rpc.method = opened.stream.method.clone();
        cx.rpc.seq_id = opened.stream.id;
        let service = match (self.handler.service_name(), &opened.service) {
            (Some(served), _) => served.to_owned(),
            (None, Some(named)) => named.to_string(),
            (None, None) => String::new(),
        };
        cx.rpc.callee.service = service.into();
        cx.metainfo.read_request(opened.header.pairs());
        cx
    }
}

/// A stream's handler, through the stack (or its refusal), run inside its
/// connection's task.
type Handler = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Ends a stream with `outcome` in its trailer: empty for `Ok`, the error otherwise.
/// A refusal (the stack's limiter, a closing server) is also named under
/// [`HEADER_KEY`](crate::refusal::HEADER_KEY), as a refused call's reply header names
/// it: a client of this crate goes by that value (a closing server's connection takes
/// no more streams), any other by the exception. The trailer goes even when the
/// client reset the stream meanwhile, as from Kitex's server; one reset here or whose
/// connection failed, none.
async fn end(stream: &StreamShared, outcome: Result<(), DispatchError>) {
    let error = outcome.err().map(|e| {
        // A typed refusal ran no handler: no trailer metadata of the handler's is lost.
        if !matches!(e, DispatchError::Application(_))
            && let Some(refusal) = e.refusal()
        {
            let mut trailer = Metadata::new();
            trailer.insert(crate::refusal::HEADER_KEY, refusal.as_str());
            stream.set_trailer(trailer);
        }
        e.into_handler_error(&stream.method)
    });
    let _ = stream.handler_returned(error.as_ref()).await;
    stream.finish();
}
