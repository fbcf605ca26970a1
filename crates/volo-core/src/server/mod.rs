//! The server: what generated code implements ([`Dispatch`]), the errors a handler
//! returns ([`ServerError`]), and the server that runs it.
//!
//! Generated code, for each IDL service, writes a trait with one `async fn` per method
//! (the user implements it) and a dispatcher, `<Service>Server<S>`, that implements
//! [`Dispatch`]: it decodes a call's arguments by method name, calls the user's method,
//! and returns the reply as one value of a per-service reply type.
//!
//! A connection's calls run one at a time on Framed and Buffered connections (answered
//! in order, as Apache Thrift clients expect), and up to
//! [`ServerConfig::max_inflight_per_connection`] at once on TTHeader connections
//! (answered as they finish, matched by sequence id, as Kitex's and Volo's multiplexing
//! clients expect). Where they run:
//!
//! - On netpoll-rs (the default transport, with [`ServerConfig::inline_dispatch`], the
//!   default), each call starts on the reactor's poller as soon as its frame is read,
//!   in the manner of Netpoll's `OnRequest`: a call that completes without waiting is
//!   answered from there, and the poller sends the reply at once; a call that waits
//!   moves to a tokio task of its own and is answered when it is done.
//! - Otherwise each connection is one tokio task, and its calls run inside it
//!   concurrently, with no task spawned per call.
//!
//! Either way a handler with heavy CPU work should move it off with
//! `tokio::task::spawn_blocking` (or `spawn`) so that other calls are not held up.

mod conn;
mod inline;
mod request;
mod run;

use std::future::Future;
use std::time::Duration;

pub use request::ServerRequest;
pub use run::{BoundServer, Server};

use thrift_codec::{ApplicationException, ApplicationExceptionKind, DecodeError, Decoder};
use thrift_codec::{Encoder, Message, Sizer};

use crate::context::ServerContext;

/// How a server's limiter starts the message of the `INTERNAL_ERROR` it answers an
/// over-limit call with (before decoding it): clients tell such a refusal, which ran
/// nothing and may be retried elsewhere, from other exceptions by it.
pub const OVERLOAD_PREFIX: &str = "server overloaded: ";

/// Whether `ex` is a limiter's refusal (see [`OVERLOAD_PREFIX`]).
pub fn is_overload(ex: &ApplicationException) -> bool {
    ex.kind == ApplicationExceptionKind::InternalError
        && ex.message.as_str().starts_with(OVERLOAD_PREFIX)
}

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
/// IDL: each becomes a `TApplicationException` reply.
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

/// A reply body that can be written in any protocol: the result struct of whichever
/// method was called. Every [`Message`] is one; generated reply enums forward to the
/// result struct they hold.
pub trait EncodeReply: Send + Sync {
    /// Exact encoded size.
    fn size<S: Sizer>(&self, s: &mut S) -> usize;
    /// Writes it.
    fn encode<E: Encoder>(&self, e: &mut E);
}

impl<M: Message + Send + Sync> EncodeReply for M {
    fn size<S: Sizer>(&self, s: &mut S) -> usize {
        Message::size(self, s)
    }

    fn encode<E: Encoder>(&self, e: &mut E) {
        Message::encode(self, e)
    }
}

/// A service as the server sees it: calls in by method name, replies out. Generated
/// `<Service>Server<S>` types implement it.
pub trait Dispatch: Send + Sync + 'static {
    /// The reply of any method of the service.
    type Reply: EncodeReply;

    /// Handles one call of `method`: decodes its arguments from `args` (the rest of the
    /// message after its header), runs the handler, returns the reply (for a oneway
    /// method, a value that is not sent).
    fn dispatch<D: Decoder + Send>(
        &self,
        cx: &mut ServerContext,
        method: &str,
        args: &mut D,
    ) -> impl Future<Output = Result<Self::Reply, DispatchError>> + Send;
}

/// Server settings; `ServerConfig::default()` suits most services.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Frame size limit (default 16,384,000 bytes, Apache Thrift's).
    pub limits: crate::codec::Limits,
    /// TTHeader header limits (default 64 KiB).
    pub header_limits: crate::codec::ttheader::HeaderLimits,
    /// Open connections at most; more are closed as soon as they are accepted. Default
    /// 10,000.
    pub max_connections: usize,
    /// Calls handled at once across all connections; more wait. Default 10,000.
    pub max_inflight: usize,
    /// Calls handled at once on one TTHeader connection (a multiplexing client sends
    /// several before the first reply; replies go out as they are ready, matched by
    /// sequence id). Framed and Buffered connections get one at a time, answered in
    /// order, as Apache Thrift clients expect. Default 128.
    pub max_inflight_per_connection: usize,
    /// Bytes of frames that all connections together may hold, from when a frame's
    /// length is known (its first bytes, for Framed and TTHeader) until its call is
    /// answered; a Buffered message, whose length shows only once all of it is there,
    /// counts as much as has arrived while it arrives. A connection whose next frame
    /// does not fit is closed, so hostile or stalled senders cannot make the server
    /// buffer without bound: per connection the frame limit, across connections this.
    /// Default 1 GiB.
    pub max_buffered_input: usize,
    /// How long a frame may take to arrive once its first bytes did (a slow or stalled
    /// sender is closed). Default 30 s.
    pub read_timeout: Duration,
    /// How long a connection may stay idle between calls; `None`: for ever. Default 10
    /// minutes.
    pub idle_timeout: Option<Duration>,
    /// How long a graceful shutdown waits for calls in progress. Default 10 s.
    pub drain_timeout: Duration,
    /// The sockets: netpoll-rs (default) or plain tokio (the measured baseline).
    pub transport: crate::transport::TransportKind,
    /// On netpoll-rs, start each call on the reactor's poller, right where its frame
    /// was read (Netpoll's `OnRequest`): a call that completes without waiting is
    /// answered from there, with no task involved; one that waits moves to a task of
    /// its own. `false`: one task per connection, as on the other transports. Either
    /// way the limits, timeouts and shutdown behave the same. Default `true`.
    ///
    /// With `true` the server runs at least one poller per worker thread of its
    /// runtime (more than `reactor.pollers` says, if that is fewer), so that calls
    /// spread over the workers as connection tasks would. The price: a handler that
    /// computes for long before its first await holds up the other connections of its
    /// poller, not only its own.
    pub inline_dispatch: bool,
    /// The reactor's settings (its pollers run as tasks of the server's runtime).
    pub reactor: netpoll_rs::Config,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            limits: crate::codec::Limits::default(),
            header_limits: crate::codec::ttheader::HeaderLimits::default(),
            max_connections: 10_000,
            max_inflight: 10_000,
            max_inflight_per_connection: 128,
            max_buffered_input: 1 << 30,
            read_timeout: Duration::from_secs(30),
            idle_timeout: Some(Duration::from_secs(600)),
            drain_timeout: run::DEFAULT_DRAIN,
            transport: crate::transport::TransportKind::Netpoll,
            inline_dispatch: true,
            reactor: netpoll_rs::Config::default(),
        }
    }
}

#[cfg(test)]
mod tests;
