//! Serving a streaming connection: [`Serving`] runs the streams of one connection
//! through the server's stack (in that connection's task, beside its reader), and
//! [`ServesStreams`] is how a server with a stream handler makes one.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::watch;

use super::DispatchError;
use super::opening::{NoStreams, Streams};
use super::opening::{OpenStream, StreamOpening};
use super::stack::Builtins;
use super::stream::{ServeBoxed, ServerStream};
use crate::codec::{Framing, Protocol};
use crate::context::{Address, ServerContext};
use crate::metrics::Metrics;
use crate::service::Service;
use crate::stream::session::Session;
use crate::stream::shared::{Opened, StreamShared};
use crate::stream::tasks::closed_here;
use crate::stream::{Metadata, StreamConfig, StreamError};
use crate::transport::{Conn, FrameIo};

/// Whether a server's stack `S` (its layers around its [`StreamSupport::Bottom`](super::StreamSupport::Bottom))
/// serves what it must: always, for a server without streams; for one with streams,
/// only if every layer is a `Service<ServerContext, StreamOpening>` too, as a layer
/// written over [`ServerCall`](super::ServerCall) is.
///
/// A layer written over [`ServerRequest`](super::ServerRequest) alone, on a server of streams, is a
/// compile error at `bind`:
///
/// ```compile_fail
/// use volo_core::context::ServerContext;
/// use volo_core::server::{Dispatch, DispatchError, Server, ServerRequest, ServiceInfo, StreamHandler};
/// use volo_core::service::{Service, layer_fn};
///
/// struct CallsOnly<S>(S);
///
/// impl<S> Service<ServerContext, ServerRequest> for CallsOnly<S>
/// where
///     S: Service<ServerContext, ServerRequest, Error = DispatchError> + Sync,
/// {
///     type Response = S::Response;
///     type Error = DispatchError;
///
///     async fn call(&self, cx: &mut ServerContext, req: ServerRequest) -> Result<S::Response, DispatchError> {
///         self.0.call(cx, req).await
///     }
/// }
///
/// async fn serve<D: Dispatch + ServiceInfo>(d: D, h: impl StreamHandler) {
///     let _ = Server::new(d)
///         .streams(h)
///         .layer(layer_fn(CallsOnly))
///         .bind(&"127.0.0.1:0".parse().unwrap())
///         .await;
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "a layer of this server does not serve streams",
    label = "this server serves streams",
    note = "a layer added with `Server::layer` to a server with `Server::streams` must be a \
            `Service<ServerContext, R>` for every `R: ServerCall`, not only for `ServerRequest`"
)]
pub trait ServesStreams<S> {
    /// The server's serving of streams through `stack`, the composed stack.
    #[doc(hidden)]
    fn serving(&self, stack: Arc<Builtins<S>>, config: StreamConfig) -> Option<Serving>;
}

impl<S> ServesStreams<S> for NoStreams {
    fn serving(&self, _stack: Arc<Builtins<S>>, _config: StreamConfig) -> Option<Serving> {
        None
    }
}

impl<S> ServesStreams<S> for Streams
where
    S: Service<ServerContext, StreamOpening, Response = (), Error = DispatchError>
        + Send
        + Sync
        + 'static,
{
    fn serving(&self, stack: Arc<Builtins<S>>, config: StreamConfig) -> Option<Serving> {
        let stack: Arc<dyn OpenStream> = stack;
        Some(Serving::new(Arc::clone(&self.handler), stack, config))
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
