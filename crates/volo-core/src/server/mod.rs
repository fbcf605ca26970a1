//! The server: the shape of the service it runs ([`Dispatch`]: a [`Service`] from a
//! [`ServerContext`] and a [`ServerRequest`] to a reply), the errors a handler returns
//! ([`ServerError`]), the layer that gives up on calls whose caller has ([`deadline`]),
//! several services behind one server ([`multiplex`]), and the server that runs them
//! ([`Server`]).
//!
//! # The stack of one call
//!
//! Generated code, for each IDL service, writes a trait with one `async fn` per method
//! (the user implements it) and a dispatcher, `<Service>Server<T>`, which is a
//! `Service<ServerContext, ServerRequest>`: it decodes a call's arguments by method
//! name in the call's protocol (zero-copy: strings and binaries are slices of the
//! frame), calls the user's method, and returns the reply as one value of a
//! per-service reply type. It also implements [`ServiceInfo`], which tells the server
//! the service's name and which methods are oneway.
//!
//! [`Server::new`] takes the dispatcher; [`Server::layer`] adds the user's layers,
//! the first added outermost, as on the client. When the server is bound, one
//! function composes the whole stack: the server's built-in layers, outermost, then
//! the user's, then a [`deadline::Deadline`] around the dispatcher. Before a call
//! reaches the stack, the connection takes its frame through fixed steps (in the
//! server's `start_call`), which are not layers because they are the connection's,
//! not a call's. Outermost first:
//!
//! ```text
//!   steps, for each frame read:
//!     framing header decoded   TTHeader or THeader: metainfo, the caller's deadline,
//!                              the time the frame was taken (cx.arrived)
//!     message header read      method name, sequence id, message type
//!     routed                   on a multiplexed server: to one of its services
//!     closing refusal          while the server drains: answered at once, unrun
//!   layers, built in:
//!     Limit                    Server::limit: refused at once when over
//!     Trace                    the rpc.server span, around all that follows
//!     Inflight                 waits for one of ServerCapacity::max_inflight's slots
//!     CatchPanic               a panic below is answered as an exception
//!     MeteredServer            counts the call (with Observability::metrics)
//!   layers, yours:
//!     [user layers...]         Server::layer, the first added outermost
//!   layers, built in:
//!     Deadline                 drops the call at the caller's deadline, answers it
//!     <Service>Server          the dispatcher (or a Multiplex of them): decodes
//!                              the arguments, calls the handler
//! ```
//!
//! A server layer is any [`Layer`](crate::service::Layer) whose service is again a
//! [`Dispatch`]; it sees the method (`cx.rpc.method`), the context and the still
//! encoded request, may decode the arguments itself ([`ServerRequest::decode`]), and
//! may answer on its own: return a reply, or a [`DispatchError`] (a
//! [`DispatchError::Application`] reaches the caller as that `TApplicationException`).
//! tower middleware fits in through [`crate::tower_compat::IntoTower`] and
//! [`crate::tower_compat::FromTower`]; `DispatchError` converts from tower's boxed errors.
//!
//! ```
//! use thrift_wire::{ApplicationException, ApplicationExceptionKind};
//! use volo_core::context::ServerContext;
//! use volo_core::server::{Dispatch, DispatchError, Server, ServerRequest, ServiceInfo};
//! use volo_core::service::{Service, layer_fn};
//!
//! /// Refuses callers without a tenant before the handler runs.
//! struct Tenants<S>(S);
//!
//! impl<S> Service<ServerContext, ServerRequest> for Tenants<S>
//! where
//!     S: Service<ServerContext, ServerRequest, Error = DispatchError> + Sync,
//! {
//!     type Response = S::Response;
//!     type Error = DispatchError;
//!
//!     async fn call(
//!         &self,
//!         cx: &mut ServerContext,
//!         req: ServerRequest,
//!     ) -> Result<S::Response, DispatchError> {
//!         if cx.metainfo.persistent("tenant").is_none() {
//!             return Err(DispatchError::Application(ApplicationException::new(
//!                 ApplicationExceptionKind::Unknown,
//!                 format!("{} needs a tenant", cx.rpc.method.as_str()),
//!             )));
//!         }
//!         self.0.call(cx, req).await
//!     }
//! }
//!
//! // Any generated `<Service>Server<T>` is a `Dispatch + ServiceInfo`. The layers are
//! // put together when the server is bound.
//! async fn with_tenants<D: Dispatch + ServiceInfo>(dispatcher: D) -> std::io::Result<()> {
//!     let server = Server::new(dispatcher).layer(layer_fn(Tenants));
//!     let bound = server.bind(&"127.0.0.1:0".parse().unwrap()).await?;
//!     drop(bound);
//!     Ok(())
//! }
//! ```
//!
//! # One stack for calls and streams
//!
//! A server that serves streams too ([`Server::streams`]) takes each stream's opening
//! down the same stack as a call, in the same order: the limiter, the span, the
//! panic catching, your layers, the deadline, and at the bottom the
//! [`StreamHandler`] instead of the dispatcher (a [`WithStreams`] holds both). What
//! goes down is a [`StreamOpening`] (method, service, header metadata, peer; the
//! context is filled as a call's is), and what comes back up is the stream's outcome,
//! when its handler has returned: `Ok(())`, or its error as a [`DispatchError`]. So a
//! layer sees a stream's opening and its end, and whatever it holds across the
//! `await` (a limiter's slot, a span) it holds for the stream's life. The choice is
//! tonic's, which serves unary and streaming calls through one `Service`; the client
//! side of this crate does the same with [`ClientCall`](crate::client::ClientCall).
//!
//! The built-in layers differ for streams only where a stream is not a short call
//! (see the table in `stack.rs`, and each layer's docs): streams have their own limit,
//! [`StreamConfig::max_in_flight`](crate::stream::StreamConfig::max_in_flight), and
//! take no call slot, so that long streams cannot starve calls; the metrics layer
//! leaves them to the connection's session, which counts each stream once in the
//! stream families; a stream carries no deadline. Refusals (over a limit, a closing
//! server, a passed deadline) are values, [`DispatchError::Overloaded`],
//! [`DispatchError::Closing`] and [`DispatchError::DeadlinePassed`], made into wire
//! text in one place ([`DispatchError::into_exception`]): a call's exception reply,
//! or a stream's trailer, each naming the refusal under
//! [`HEADER_KEY`](crate::refusal::HEADER_KEY).
//!
//! To wrap both, write a layer over [`ServerCall`], which [`ServerRequest`] and
//! [`StreamOpening`] implement. A layer written over [`ServerRequest`] alone still
//! serves calls, on a server without streams; on a server with streams it does not
//! compile, since streams would pass it by unseen. (A server records whether it
//! serves streams in its type, [`NoStreams`] or [`Streams`].) The `one-layer` example
//! (`examples/src/bin/one_layer.rs`) runs such a layer on a server of both.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use volo_core::context::ServerContext;
//! use volo_core::server::{DispatchError, ServerCall};
//! use volo_core::service::Service;
//!
//! /// Counts what is in progress, calls and streams alike, and logs how each ended.
//! struct InProgress<S> {
//!     inner: S,
//!     now: Arc<AtomicUsize>,
//! }
//!
//! impl<S, R> Service<ServerContext, R> for InProgress<S>
//! where
//!     S: Service<ServerContext, R, Error = DispatchError> + Sync,
//!     R: ServerCall,
//! {
//!     type Response = S::Response;
//!     type Error = DispatchError;
//!
//!     async fn call(&self, cx: &mut ServerContext, req: R) -> Result<S::Response, DispatchError> {
//!         let stream = req.opens_stream();
//!         self.now.fetch_add(1, Ordering::Relaxed);
//!         let outcome = self.inner.call(cx, req).await;
//!         self.now.fetch_sub(1, Ordering::Relaxed);
//!         let failed = outcome.as_ref().err().map(ToString::to_string);
//!         println!("{} {stream} {failed:?}", cx.rpc.method.as_str());
//!         outcome
//!     }
//! }
//! # fn main() {}
//! ```
//!
//! # Several services on one server
//!
//! [`Server::multiplexed`] serves the services of a [`Multiplex`]: each call goes to
//! one of them by its method name's `Service:` prefix (Apache's
//! `TMultiplexedProtocol`), by TTHeader's `isn` key (the IDL service name Kitex's and
//! Volo's clients send), or to the default service; the handler and the layers see the
//! bare method in `cx.rpc.method` and the service in `cx.rpc.callee.service`, and the
//! reply carries the bare name, as Apache's `TMultiplexedProcessor` writes it. See
//! [`multiplex`] for the rules.
//!
//! ```
//! use volo_core::server::{Dispatch, Multiplex, Server, ServiceInfo};
//!
//! fn thrift_test<A, B>(thrift_test: A, second: B)
//! where
//!     A: Dispatch + ServiceInfo,
//!     B: Dispatch + ServiceInfo,
//! {
//!     // `ThriftTest:testString` goes to `thrift_test`, `SecondService:secondtestString`
//!     // to `second`, and an unprefixed `testString` to `thrift_test` too.
//!     let _server = Server::multiplexed(
//!         Multiplex::new().default_service(thrift_test).service(second),
//!     );
//! }
//! ```
//!
//! # Replies, oneway calls and deadlines
//!
//! A call is answered unless its method is oneway in the IDL or its message was sent
//! as ONEWAY: then nothing is sent, whether it succeeded, failed, had arguments that
//! did not decode, or panicked. A CALL to a method the service does not have is
//! answered `UNKNOWN_METHOD`; a ONEWAY message to one is not answered. On a
//! multiplexed server, "oneway in the IDL" is asked of the service the call was routed
//! to, and a call routed to no service is answered `UNKNOWN_METHOD` (unless it came as
//! ONEWAY).
//!
//! When a TTHeader caller sends its timeout (Kitex's `RPC_TIMEOUT` int key), the call's
//! deadline is in `cx.rpc.deadline`, and the [`deadline::Deadline`] layer the server
//! puts around the dispatcher drops the handler's future when it passes (no one waits
//! for the work any more) and answers `INTERNAL_ERROR` a grace later
//! ([`Server::deadline_grace`]), once the caller's own timer has surely fired.
//!
//! # Limits
//!
//! [`Server::limit`] caps the calls in progress and the calls per second
//! ([`LimitConfig`], both off by default, as in Kitex where limits are opt-in). The
//! check comes when a frame is read, before the arguments are decoded (Kitex limits in
//! `OnRead`), and a call over a limit is refused at once, never queued: it is
//! answered with an `INTERNAL_ERROR` whose message starts with [`OVERLOAD_PREFIX`], and
//! this crate's clients take that for [`ErrorKind::Overloaded`]: the call did not run,
//! so it may be retried on another instance.
//!
//! | what | default |
//! |---|---|
//! | calls in progress (limiter) | no limit ([`LimitConfig::max_concurrency`]) |
//! | calls per second (limiter) | no limit ([`LimitConfig::max_qps`]; when set, a token bucket with a burst of a tenth of the rate) |
//! | calls in progress, queued beyond | 10,000 ([`ServerCapacity::max_inflight`]) |
//! | calls at once per TTHeader connection | 128 ([`ServerCapacity::max_inflight_per_connection`]) |
//! | caller's deadline | honoured: the handler is dropped, the answer follows 100 ms later |
//! | frame, header limits | 16,384,000 bytes, 64 KiB ([`ServerConfig::wire`]) |
//! | buffered input, all connections | 1 GiB ([`ServerCapacity::max_buffered_input`]) |
//! | read, idle, drain timeouts | 30 s, 10 min, 10 s ([`ServerTimeouts`]) |
//! | exit wait (registered servers) | 1 s ([`ServerTimeouts::exit_wait`]) |
//! | TLS | off; on, each handshake within the read timeout ([`ServerConfig::tls`]) |
//!
//! [`ErrorKind::Overloaded`]: crate::client::ErrorKind::Overloaded
//!
//! # A graceful stop
//!
//! [`BoundServer::serve_with_shutdown`] stops in four steps,
//! so that no call a client sent is lost and none runs twice:
//!
//! 1. **Deregister, then wait.** A server with a [registry](Server::registry)
//!    deregisters, then keeps serving as before for [`ServerTimeouts::exit_wait`] (1 s
//!    by default): the clients that follow the registry learn that it left and stop
//!    sending to it. An etcd watch brings the news in milliseconds; the second covers
//!    a watcher on a busy machine, and costs a rolling restart one second per
//!    instance. A server without a registry has no one to tell, and goes on at once.
//! 2. **Stop accepting**, and tell each connection: TTHeader replies from now on carry
//!    `crrst=1` (Kitex's mark: Kitex, Volo and this crate's clients send nothing more
//!    on that connection), and a connection that has carried calls at once (a
//!    mux client) gets Kitex's control frame (sequence id 0, `crrst`) at once.
//! 3. **Answer the calls in hand**, and no other: a call read after the drain began is
//!    answered at once with an `INTERNAL_ERROR` whose message starts with
//!    [`CLOSING_PREFIX`], without running (a oneway call runs: its caller could not be
//!    told). This crate's clients take that for
//!    [`ErrorKind::Closing`](crate::client::ErrorKind::Closing) and send the call to
//!    another instance, whatever its idempotency, since it never ran.
//! 4. **Close** each connection 100 ms after its last answer (or after the drain
//!    began), refusing in that time what comes (requests that crossed the news on the
//!    way); everything left when [`ServerTimeouts::drain`] passes is closed.
//!
//! How a client tells a call that the server never ran: by that refusal; by a
//! `crrst` it saw before it sent (it sends no call on such a connection); or because
//! the connection was closed before it wrote (a pooled connection found closed is not
//! used). A request that meets the final close on the way gets a reset, which says
//! nothing: it is retried only if its method is idempotent. Steps 1 and 2 make that a
//! request to a server its client was told had left, twice.
//!
//! # Connections
//!
//! A connection's calls run one at a time on THeader, Framed and Buffered connections
//! (answered in order, as Apache Thrift clients expect), and up to
//! [`ServerCapacity::max_inflight_per_connection`] at once on TTHeader connections
//! (answered as they finish, matched by sequence id, as Kitex's and Volo's mux
//! clients expect). Where they run:
//!
//! - On netpoll-rs (the default transport, with [`ServerConfig::inline_dispatch`], the
//!   default), each call starts on the reactor's poller as soon as its frame is read,
//!   in the manner of Netpoll's `OnRequest`: a call that completes without waiting is
//!   answered from there, and the poller sends the reply at once; a call that waits
//!   moves to a tokio task of its own and is answered when it is done. Such a
//!   connection has no task and no tokio timer of its own: its read and idle timeouts
//!   are deadlines in its poller's one timer heap, and a call that does not wait
//!   allocates nothing.
//! - Otherwise each connection is one tokio task, and its calls run inside it
//!   concurrently, with no task spawned per call. So are TLS connections
//!   ([`ServerConfig::tls`]), on every transport: their handshake runs on that task
//!   too.
//!
//! Both run the same rules, written once in a connection core that does no I/O and
//! reads no clock (framing detection, the call cap, the input budget, the read
//! timeout of a frame counted from its first byte, the idle timeout, which never
//! closes a connection with a call in progress, and the graceful drain); each layout
//! only moves the bytes, runs the calls and keeps the time.
//!
//! Either way a handler with heavy CPU work should move it off with
//! `tokio::task::spawn_blocking` (or `spawn`) so that other calls are not held up.
//!
//! A connection whose first bytes match no protocol the server speaks is closed after
//! one warning through `tracing`: the peer, the bytes seen (up to 16, in hex) and why.
//! The library only emits the event; the application chooses where it goes by
//! installing a `tracing` subscriber (without one, nothing is printed).

mod call;
mod conn;
mod conn_core;
pub mod deadline;
mod facts;
mod fallback;
#[cfg(test)]
mod harness;
mod inflight;
mod inline;
pub mod limit;
pub mod metered;
pub mod multiplex;
mod opening;
pub mod panic;
mod request;
mod run;
mod spare;
mod stack;
mod state;
mod stream;
mod stream_conn;
pub mod trace;

use std::time::Duration;

/// The trait generated dispatchers implement, re-exported so that generated code names
/// one path of this crate.
#[doc(no_inline)]
pub use crate::service::Service;
pub use facts::ServiceFacts;
pub use fallback::{Fallback, with_fallback};
pub use limit::{LimitConfig, Limiter, Overloaded};
pub use multiplex::Multiplex;
pub use opening::{NoStreams, StreamOpening, StreamSupport, Streams, WithStreams};
pub use request::{ServerCall, ServerRequest};
pub use stream_conn::ServesStreams;

use crate::codec::Body;
pub use run::{BoundServer, Server};
pub use stream::{ServerStream, StreamContext, StreamHandler};
pub(crate) use stream_conn::Serving;

use thrift_wire::{ApplicationException, ApplicationExceptionKind, DecodeError};

use crate::config::{Observability, TransportConfig, WireLimits};
use crate::context::ServerContext;

use crate::refusal::{CLOSING_PREFIX, OVERLOAD_PREFIX};

/// What a handler method returns when it fails.
#[derive(Debug)]
pub enum ServerError<E> {
    /// An exception the IDL declares for the method (`throws`): it reaches the caller
    /// in the result struct, as the IDL says.
    User(E),
    /// Anything else: the caller gets a `TApplicationException` (for example
    /// `INTERNAL_ERROR` with a message).
    Application(ApplicationException),
}

impl<E> From<ApplicationException> for ServerError<E> {
    fn from(e: ApplicationException) -> Self {
        ServerError::Application(e)
    }
}

impl<E> ServerError<E> {
    /// An `INTERNAL_ERROR` with `message`.
    pub fn internal(message: impl Into<String>) -> Self {
        ServerError::Application(ApplicationException::new(
            ApplicationExceptionKind::InternalError,
            message.into(),
        ))
    }
}

/// Why a call could not be dispatched to a handler, or the handler failed outside the
/// IDL: each becomes a `TApplicationException` reply (a stream's, its trailer).
///
/// The server's own refusals are values here ([`Overloaded`](Self::Overloaded),
/// [`Closing`](Self::Closing), [`DeadlinePassed`](Self::DeadlinePassed)), not
/// exceptions with a formatted message: a layer
/// matches on them, and they become wire text in one place,
/// [`into_exception`](Self::into_exception), where the reply or trailer also names
/// them ([`refusal`](Self::refusal)).
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// No method of that name (`UNKNOWN_METHOD`).
    #[error("unknown method")]
    UnknownMethod,
    /// The arguments did not decode (`PROTOCOL_ERROR`).
    #[error("arguments: {0}")]
    Decode(#[from] DecodeError),
    /// The handler returned an application error.
    #[error("{}", .0.message.as_str())]
    Application(ApplicationException),
    /// The handler (or a layer beneath [`CatchPanic`](panic::CatchPanic)) panicked,
    /// with this message (`INTERNAL_ERROR`).
    #[error("the handler panicked: {0}")]
    Panic(String),
    /// Refused by a limit of the server ([`Limit`](limit::Limit)): it never ran, and
    /// may go to another instance (`INTERNAL_ERROR`, message starting with
    /// [`OVERLOAD_PREFIX`]).
    #[error("{OVERLOAD_PREFIX}{0}")]
    Overloaded(Overloaded),
    /// Refused because the server is shutting down: it never ran, and may go to
    /// another instance (`INTERNAL_ERROR`, message starting with [`CLOSING_PREFIX`]).
    #[error("{CLOSING_PREFIX}not run")]
    Closing,
    /// Given up by the [`deadline`] layer once the caller's deadline passed
    /// (`INTERNAL_ERROR`, message starting with
    /// [`DEADLINE_PREFIX`](crate::refusal::DEADLINE_PREFIX)).
    #[error("{}{}", crate::refusal::DEADLINE_PREFIX, .0.as_str())]
    DeadlinePassed(deadline::GivenUp),
    /// A stream's handler ended with a business status (Kitex's `BizStatusError`):
    /// its trailer carries the status keys. A call answered with it gets an
    /// `INTERNAL_ERROR` with the status's code and message, since a reply has no place
    /// for them.
    #[error("business status {}: {}", .0.code, .0.message)]
    Biz(crate::stream::BizStatus),
}

impl DispatchError {
    /// The `TApplicationException` the caller gets.
    pub fn into_exception(self, method: &str) -> ApplicationException {
        match self {
            DispatchError::UnknownMethod => ApplicationException::new(
                ApplicationExceptionKind::UnknownMethod,
                format!("unknown method {method}"),
            ),
            DispatchError::Decode(e) => ApplicationException::new(
                ApplicationExceptionKind::ProtocolError,
                format!("decoding the arguments of {method}: {e}"),
            ),
            DispatchError::Application(e) => e,
            DispatchError::Panic(message) => ApplicationException::new(
                ApplicationExceptionKind::InternalError,
                format!("the handler panicked: {message}"),
            ),
            DispatchError::Overloaded(why) => crate::refusal::overloaded(why),
            DispatchError::Closing => crate::refusal::closing(),
            DispatchError::DeadlinePassed(what) => {
                crate::refusal::deadline_passed(method, what.as_str())
            }
            DispatchError::Biz(status) => ApplicationException::new(
                ApplicationExceptionKind::InternalError,
                format!("business status {}: {}", status.code, status.message),
            ),
        }
    }

    /// The refusal this is, if it is one: what the reply (or the stream's trailer)
    /// names under [`HEADER_KEY`](crate::refusal::HEADER_KEY), and what the metrics
    /// and the access log say of the call. Only the typed refusals are: a layer that
    /// refuses returns one of them. An [`Application`](Self::Application) exception
    /// is the handler's answer, whatever its message says (message prefixes are read
    /// only from a peer's reply, by a client).
    pub fn refusal(&self) -> Option<crate::refusal::Refusal> {
        use crate::refusal::Refusal;
        match self {
            DispatchError::Overloaded(_) => Some(Refusal::Overloaded),
            DispatchError::Closing => Some(Refusal::Closing),
            DispatchError::DeadlinePassed(_) => Some(Refusal::DeadlinePassed),
            _ => None,
        }
    }

    /// What a stream's trailer carries for it: an exception (as
    /// [`into_exception`](Self::into_exception) makes it), or the business status.
    pub fn into_handler_error(self, method: &str) -> crate::stream::HandlerError {
        match self {
            DispatchError::Biz(status) => crate::stream::HandlerError::Biz(status),
            DispatchError::Application(ex) => crate::stream::HandlerError::Exception(ex),
            other => crate::stream::HandlerError::Exception(other.into_exception(method)),
        }
    }
}

/// A stream handler's failure as the server's stack carries it: an exception stays
/// one ([`DispatchError::Application`]), a business status stays one
/// ([`DispatchError::Biz`]).
impl From<crate::stream::HandlerError> for DispatchError {
    fn from(e: crate::stream::HandlerError) -> Self {
        match e {
            crate::stream::HandlerError::Exception(ex) => DispatchError::Application(ex),
            crate::stream::HandlerError::Biz(status) => DispatchError::Biz(status),
        }
    }
}

/// What tower middleware fails with (tower's `BoxError`): a [`DispatchError`] that went
/// through it comes back as itself; anything else (tower's timeout, a refused
/// load-shed...) becomes an `INTERNAL_ERROR` with its message. With it, `map_err(
/// DispatchError::from)` puts a tower stack back into the server's error type.
impl From<Box<dyn std::error::Error + Send + Sync>> for DispatchError {
    fn from(e: Box<dyn std::error::Error + Send + Sync>) -> Self {
        match e.downcast::<DispatchError>() {
            Ok(e) => *e,
            Err(e) => DispatchError::Application(ApplicationException::new(
                ApplicationExceptionKind::InternalError,
                e.to_string(),
            )),
        }
    }
}

/// What a [`Server`] needs of the service it runs: a [`Service`] from a call's context
/// and arguments to its reply, failing with a [`DispatchError`] (which the server
/// answers as a `TApplicationException`), that can be shared by every connection.
///
/// It is implemented for every such service and is not meant to be implemented by
/// hand: implement [`Service<ServerContext, ServerRequest>`](Service) instead, as
/// generated `<Service>Server<T>` dispatchers and server layers do.
///
/// The contract with the server:
///
/// - the method's name is in `cx.rpc.method`, the sequence id in `cx.rpc.seq_id`, the
///   caller's deadline (if it sent one) in `cx.rpc.deadline`; the arguments, still
///   encoded, are the [`ServerRequest`], to decode in `cx.protocol`;
/// - the reply goes out in the framing and protocol the request came in, whatever a
///   service does to `cx.framing` and `cx.protocol`; backward metainfo set in
///   `cx.metainfo` goes with it (TTHeader only);
/// - for a call the server must not answer (a oneway method, or a message sent as
///   ONEWAY), the outcome is dropped, success or error.
pub trait Dispatch:
    Service<ServerContext, ServerRequest, Response = Self::Reply, Error = DispatchError>
    + Send
    + Sync
    + 'static
{
    /// The reply of any method of the service (the service's `Response`).
    type Reply: Body;
}

impl<S> Dispatch for S
where
    S: Service<ServerContext, ServerRequest, Error = DispatchError> + Send + Sync + 'static,
    S::Response: Body,
{
    type Reply = S::Response;
}

/// What the IDL says about a service that the server needs before any layer wraps it:
/// its name, and which of its methods are oneway. Generated `<Service>Server<T>`
/// dispatchers implement it; [`Server::new`] and [`Multiplex::service`] read it.
///
/// The server answers no call of a oneway method, whatever the message type says
/// (Apache's Go library sends oneway calls as CALL messages): a reply would be taken
/// by the caller for the reply to its next call.
pub trait ServiceInfo {
    /// The service's name in the IDL (`service EchoService` gives `"EchoService"`).
    const NAME: &'static str;

    /// Whether `method` (its IDL name, as on the wire) is `oneway` in the service or in
    /// one it extends. `false` for a method the service does not have.
    fn is_oneway(method: &str) -> bool;
}

/// Server settings, in groups by concern (see [Configuration](crate#configuration));
/// `ServerConfig::default()` suits most services. The limiter, a policy, is set on
/// the builder: [`Server::limit`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Size limits on requests: frames and TTHeader/THeader headers.
    pub wire: WireLimits,
    /// How many connections, calls and buffered bytes the server holds at once.
    pub capacity: ServerCapacity,
    /// How long a frame may take to arrive, a connection may stay idle, a shutdown
    /// may take.
    pub timeouts: ServerTimeouts,
    /// The sockets and their reactor. The reactor's pollers, and usually the
    /// runtime's workers, are sized from the CPUs the process may use
    /// ([`netpoll_rs::cpus`]); the server logs the sizes at start (`INFO`, "server:
    /// netpoll reactor sized"), reads that budget again every 30 s while it serves, and
    /// warns when it changed: the thread counts stay those chosen at start. Where the
    /// pollers run: see [`inline_dispatch`](Self::inline_dispatch).
    pub transport: TransportConfig,
    /// On netpoll-rs, start each call on the reactor's poller, right where its frame
    /// was read (Netpoll's `OnRequest`): a call that completes without waiting is
    /// answered from there, with no task involved; one that waits moves to a task of
    /// its own. `false`: one task per connection, as on the other transports. Either
    /// way the limits, timeouts and shutdown behave the same. TLS connections
    /// ([`tls`](Self::tls)) are served by a task each either way. Default `true`.
    ///
    /// With `true` the server runs at least one poller per worker thread of its
    /// runtime (more than `transport.reactor.pollers` says, if that is fewer), so that
    /// calls spread over the cores as connection tasks would, each poller on a thread
    /// of its own (Netpoll's layout; a call's first poll runs there, inside the
    /// runtime's context). As tasks of the runtime, each wait of a poller would take
    /// two `epoll_wait`s, tokio's and its own, so each call would cost the server more
    /// CPU than on a thread. With `false` the pollers run as tasks of the runtime,
    /// which wakes the connections' tasks without a thread switch. The price of
    /// `true`: a handler that computes for long before its first await holds up the
    /// other connections of its poller, not only its own.
    pub inline_dispatch: bool,
    /// TLS on the server's TCP connections (certificate, key, client certificates):
    /// see [`crate::transport::tls`]. Each handshake must finish within
    /// [`ServerTimeouts::read`]; TLS connections are served by a task each, whatever
    /// [`inline_dispatch`](Self::inline_dispatch) says. Default `None`: plain TCP.
    pub tls: Option<crate::transport::tls::ServerTls>,
    /// Metrics and the access log. With metrics, the server counts its calls,
    /// connections, bytes and limiter refusals: a
    /// [`MeteredServer`](metered::MeteredServer) around the whole stack, the user's
    /// layers included. The access log writes one line per call (or per `every`
    /// calls), see [`trace`].
    pub observability: Observability,
    /// The limits and window of the streams a server with a
    /// [`StreamHandler`] serves: frames, streams per connection and in progress, the
    /// window it grants (see [`stream`](crate::stream)).
    pub streams: crate::stream::StreamConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            wire: WireLimits::default(),
            capacity: ServerCapacity::default(),
            timeouts: ServerTimeouts::default(),
            transport: TransportConfig::default(),
            inline_dispatch: true,
            tls: None,
            observability: Observability::default(),
            streams: crate::stream::StreamConfig::default(),
        }
    }
}

/// How much a server holds at once: connections, calls, buffered bytes. Past each
/// the server closes (connections, bytes) or makes wait (calls); the limiter, which
/// refuses calls instead, is set with [`Server::limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerCapacity {
    /// Open connections at most, from all clients together; more are closed as soon
    /// as they are accepted. Default 10,000.
    pub max_connections: usize,
    /// Calls handled at once across all connections; more wait. Default 10,000.
    pub max_inflight: usize,
    /// Calls handled at once on one TTHeader connection (a mux client sends
    /// several before the first reply; replies go out as they are ready, matched by
    /// sequence id). THeader, Framed and Buffered connections get one at a time,
    /// answered in order, as Apache Thrift clients expect. Default 128.
    pub max_inflight_per_connection: usize,
    /// Bytes of frames that all connections together may hold, from when a frame's
    /// length is known (its first bytes, for Framed and TTHeader) until its call is
    /// answered; a Buffered message, whose length shows only once all of it is there,
    /// counts as much as has arrived while it arrives. A connection whose next frame
    /// does not fit is closed, so hostile or stalled senders cannot make the server
    /// buffer without bound: per connection the frame limit, across connections this.
    /// Default 1 GiB.
    pub max_buffered_input: usize,
}

impl Default for ServerCapacity {
    fn default() -> Self {
        ServerCapacity {
            max_connections: 10_000,
            max_inflight: 10_000,
            max_inflight_per_connection: 128,
            max_buffered_input: 1 << 30,
        }
    }
}

/// How long a server waits: for a frame, on an idle connection, for a shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerTimeouts {
    /// How long a frame may take to arrive once its first bytes did (a slow or stalled
    /// sender is closed). Default 30 s.
    pub read: Duration,
    /// How long a connection may stay idle between calls; `None`: for ever. Default 10
    /// minutes.
    pub idle: Option<Duration>,
    /// How long a graceful shutdown waits for calls in progress. Default 10 s.
    pub drain: Duration,
    /// How long a server with a [registry](Server::registry) keeps serving after it
    /// deregistered, before it stops accepting and drains (see
    /// [A graceful stop](self#a-graceful-stop)). Default 1 s. A server without a
    /// registry does not wait.
    pub exit_wait: Duration,
}

impl Default for ServerTimeouts {
    fn default() -> Self {
        ServerTimeouts {
            read: Duration::from_secs(30),
            idle: Some(Duration::from_secs(600)),
            drain: run::DEFAULT_DRAIN,
            exit_wait: run::DEFAULT_EXIT_WAIT,
        }
    }
}

#[cfg(test)]
mod tests;
