//! Streaming calls' server side (see [`stream`](crate::stream)): a
//! [`StreamHandler`] serves the streams of the connections a [`Server`](super::Server)
//! finds to be streaming ones.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use futures_util::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use thrift_codec::{ApplicationException, ApplicationExceptionKind, Message, Utf8Bytes};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use crate::metrics::Metrics;
use crate::refusal::{OVERLOAD_PREFIX, Refusal};
use crate::stream::handle::{Receiver, Sender};
use crate::stream::session::{Opened, Session, StreamShared, closed_here};
use crate::stream::{HandlerError, Metadata, StreamConfig, StreamError};
use crate::transport::Conn;

/// Serves streams: one call of [`serve`](Self::serve) per stream a client opens, run
/// inside its connection's task beside the other streams of that connection (as a
/// multiplexed connection's calls run), so that their answers leave together; a
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
trait ServeBoxed: Send + Sync {
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

/// A server's stream handler and stream settings.
#[derive(Clone)]
pub(crate) struct Serving {
    handler: Arc<dyn ServeBoxed>,
    config: StreamConfig,
    /// Streams in progress across the server's connections, against
    /// `config.max_in_flight`.
    in_flight: Option<Arc<Semaphore>>,
}

impl fmt::Debug for Serving {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serving")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Serving {
    pub(crate) fn new(handler: impl StreamHandler, config: StreamConfig) -> Self {
        Serving {
            handler: Arc::new(handler),
            config,
            in_flight: config.max_in_flight.map(|n| Arc::new(Semaphore::new(n))),
        }
    }

    /// The settings.
    pub(crate) fn config(&self) -> &StreamConfig {
        &self.config
    }

    /// The same handler with `config`.
    pub(crate) fn with_config(self, config: StreamConfig) -> Self {
        Serving {
            in_flight: config.max_in_flight.map(|n| Arc::new(Semaphore::new(n))),
            config,
            handler: self.handler,
        }
    }

    /// Serves the streams of `conn`, whose first frame was `first`, until the peer
    /// closes it; after `shutdown`, the streams in progress run to their end.
    ///
    /// The handlers run inside this task, beside the connection's reader (no task
    /// per stream, as the calls of a multiplexed connection run in its own): each
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
                        let refused = HandlerError::Exception(crate::refusal::closing());
                        Box::pin(async move { refuse(&opened, Refusal::Closing, refused).await })
                    } else {
                        match self.admit(&opened) {
                            Ok(permit) => Box::pin(run(Arc::clone(&self.handler), opened, permit)),
                            Err(Declined::Unknown(why)) => {
                                tracing::debug!(stream = opened.stream.id, why = %why, "a stream not served; reset");
                                opened.stream.reset(StreamError::UnknownMethod(why));
                                continue;
                            }
                            Err(Declined::Overloaded(refused)) => {
                                tracing::debug!(
                                    stream = opened.stream.id,
                                    "a stream over the limit; refused"
                                );
                                Box::pin(async move {
                                    refuse(&opened, Refusal::Overloaded, refused).await;
                                })
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
}

/// A stream's handler (or its refusal), run inside its connection's task.
type Handler = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Ends a stream the server will not run with `refused` in its trailer, which also
/// names the refusal under [`HEADER_KEY`](crate::refusal::HEADER_KEY), as a refused
/// call's reply header does: a client of this crate goes by that value (a closing
/// server's connection takes no more streams), any other by the exception.
async fn refuse(opened: &Opened, refusal: Refusal, refused: HandlerError) {
    let mut trailer = Metadata::new();
    trailer.insert(crate::refusal::HEADER_KEY, refusal.as_str());
    opened.stream.set_trailer(trailer);
    let _ = opened.stream.close_send(Some(&refused)).await;
    opened.stream.finish();
}

/// Why the server does not run a handler for a stream.
enum Declined {
    /// The handler does not serve its service or method: why, naming the method.
    Unknown(String),
    /// The streams in progress are at their limit: the trailer a client of this
    /// crate reads as overloaded.
    Overloaded(HandlerError),
}

impl Serving {
    /// Whether `opened` is a stream to run the handler for, with its place among the
    /// streams in progress.
    fn admit(&self, opened: &Opened) -> Result<Option<OwnedSemaphorePermit>, Declined> {
        let method = &opened.stream.method;
        if let (Some(named), Some(served)) = (&opened.service, self.handler.service_name())
            && named.as_str() != served
        {
            return Err(Declined::Unknown(format!(
                "unknown service {named} (TTHeader isn) for streaming method {method}"
            )));
        }
        if !self.handler.serves_method(method) {
            return Err(Declined::Unknown(format!(
                "unknown streaming method {method}"
            )));
        }
        let Some(in_flight) = &self.in_flight else {
            return Ok(None);
        };
        Arc::clone(in_flight)
            .try_acquire_owned()
            .map(Some)
            .map_err(|_| {
                Declined::Overloaded(HandlerError::internal(format!(
                    "{OVERLOAD_PREFIX}{} streams in progress",
                    self.config.max_in_flight.unwrap_or_default()
                )))
            })
    }
}

/// Runs the handler of one stream and ends the stream with its outcome; `_permit`
/// holds its place among the streams in progress until then.
async fn run(handler: Arc<dyn ServeBoxed>, opened: Opened, _permit: Option<OwnedSemaphorePermit>) {
    let stream = Arc::clone(&opened.stream);
    let served = ServerStream {
        stream: opened.stream,
        header: opened.header,
        service: opened.service,
    };
    let outcome = match AssertUnwindSafe(handler.serve_boxed(served))
        .catch_unwind()
        .await
    {
        Ok(outcome) => outcome,
        Err(_) => {
            tracing::error!(stream = stream.id, method = %stream.method, "a stream handler panicked");
            Err(HandlerError::Exception(ApplicationException::new(
                ApplicationExceptionKind::InternalError,
                "the handler panicked",
            )))
        }
    };
    if let Err(e) = &outcome {
        tracing::debug!(stream = stream.id, method = %stream.method, error = ?e, "a stream handler failed");
    }
    // A stream the client reset meanwhile gets the trailer all the same, as from
    // Kitex's server; one reset here or whose connection failed, none.
    let _ = stream.handler_returned(outcome.err().as_ref()).await;
    stream.finish();
}
