//! Streaming calls over TTHeader, wire-compatible with Kitex's ("StreamX", Kitex
//! v0.12 on): server streams, client streams and bidirectional streams, many per
//! connection.
//!
//! - [`frame`] reads and writes the frames, with their limits and typed errors.
//! - [`flow`] is the flow control of one stream: a credit window that Kitex peers
//!   skip, and a bounded queue either way.
//! - [`core`] holds every rule of one streaming connection without I/O: frames, the
//!   application's operations and the time in; frames and events out.
//! - A session (one per connection, shared by client and server) drives such a
//!   core on tokio: it reads frames into it, runs its timers, and gathers the
//!   writes of its streams into shared sends;
//!   [`StreamClient`](crate::client::StreamClient) opens streams over a pool of such
//!   connections, and a [`Server`](crate::server::Server) given a
//!   [`StreamHandler`](crate::server::StreamHandler) serves them on the same port as
//!   its ping-pong calls: it tells a streaming connection from its first eight
//!   bytes, as Kitex's server does.
//! - [`Sender`] and [`Receiver`] are a stream's typed halves: messages are bare
//!   Binary structs, as Kitex sends them.
//!
//! # Lifecycle
//!
//! A client opens a stream with a header frame (method, service, metadata), sends
//! messages, and ends its direction with an empty trailer ([`Sender::close_send`]).
//! The server's handler gets the header's metadata and both halves; its header goes
//! with its first message or its trailer (as Kitex's), and its trailer when the
//! handler returns: empty when it succeeded, with a `TApplicationException` when it
//! failed ([`StreamHandler`](crate::server::StreamHandler)).
//!
//! How a stream ends otherwise:
//!
//! - **Unknown method or service.** A stream of a method the server's handler does
//!   not serve, or one that names another service in its `isn` key, is reset at
//!   once with an rst carrying an `UNKNOWN_METHOD` exception that names the method,
//!   before any handler runs
//!   ([`StreamHandler::serves_method`](crate::server::StreamHandler::serves_method),
//!   [`service_name`](crate::server::StreamHandler::service_name)); its client
//!   fails with [`StreamError::UnknownMethod`] instead of waiting. (Kitex's server
//!   answers such a stream with nothing.)
//! - **Cancel.** A client whose handle is dropped before the stream ended resets it
//!   with an rst of Kitex's cancel code; the server's halves fail with
//!   [`StreamError::Cancelled`].
//! - **Deadline.** A stream whose client's deadline passes is reset with an rst of
//!   Kitex's deadline code; the server's halves fail with
//!   [`StreamError::DeadlineExceeded`]. No deadline travels on the wire (Kitex sends
//!   none).
//! - **After a client's rst**, the server's handler runs on until it returns; then,
//!   as Kitex's server does, the server sends its header if it sent none, and its
//!   trailer with the handler's outcome: a handler that stopped on the rst's error
//!   (`?`) sends an `INTERNAL_ERROR` whose message begins
//!   `[ttstream error, code=12007]` (the rst's code), the exception Kitex's server
//!   sends for a handler that returns its `Recv` error; one that returned `Ok` sends
//!   an empty trailer. The client, its stream gone, drops both.
//! - **Broken protocol.** A stream whose peer broke the protocol on it (data after
//!   its trailer, a message that does not decode) is reset by this side with
//!   [`StreamError::Protocol`]; nothing more is sent on a stream this side reset.
//! - **Connection closed.** A connection this side closes (a client dropped, once
//!   its last stream ended; a server's, once its handlers returned) first sends what
//!   was written on it, rsts and trailers included, so that a stream reset as its
//!   client goes still reaches the peer as a cancel or a deadline; a peer that takes
//!   nothing gets a second on the session's clock, then the connection closes all
//!   the same. A broken connection fails every stream on it with
//!   [`StreamError::Connection`].
//!
//! # Governance
//!
//! - **The client stack**: a [`Client`](crate::client::Client) opens a stream
//!   through its layers ([`Client::open_stream`](crate::client::Client::open_stream),
//!   and the generated client's streaming methods): discovery and the balancer pick
//!   its instance, the instance breakers count failed openings and connections that
//!   break under open streams, an opening that never left is retried on another
//!   instance (never once its header may have reached a server), the timeout bounds
//!   the opening, and user layers written over
//!   [`ClientCall`](crate::client::ClientCall) see it. See
//!   [`client::stream`](crate::client::stream) for the rules, and
//!   [`ClientStreams`](crate::client::ClientStreams) for the settings.
//! - **Metrics**: with [`Observability::metrics`](crate::config::Observability::metrics)
//!   on either side, streams open, streams ended by outcome, and stream messages and
//!   bytes each way are counted ([`metrics`](crate::metrics) lists the names); a
//!   client's openings are also counted as calls by the stack's metrics layer.
//! - **Traces**: each stream is an `rpc.stream` span (`otel.kind` `client` or
//!   `server`, `rpc.service`, `rpc.method`, `stream.id`, and at its end
//!   `otel.status_code` and `error.type`), with a `TRACE` event per message sent and
//!   received; a client's opening is also the stack's `rpc.client` span, and a
//!   server's stream runs in the server stack's `rpc.server` span from its opening
//!   to its handler's return (the [server stack](crate::server) serves streams as it
//!   serves calls).
//! - **Limits**: a server refuses streams beyond [`StreamConfig::max_in_flight`]
//!   across its connections (as overloaded, by the stack's limit layer, counted
//!   with the outcome `refused`) and beyond
//!   [`StreamConfig::max_streams`] on one connection; its graceful shutdown refuses
//!   new streams and lets those in progress end. A server's stream settings are
//!   [`ServerConfig::streams`](crate::server::ServerConfig::streams).
//! - **Deadlines**: a client's stream deadline
//!   ([`ClientStreams::timeout`](crate::client::ClientStreams::timeout),
//!   [`StreamRequest::with_timeout`](crate::client::StreamRequest::with_timeout),
//!   [`StreamClient::with_timeout`](crate::client::StreamClient::with_timeout))
//!   resets the stream when it passes, on a [`Clock`](crate::clock::Clock) given as
//!   an input.
//! - **Without a stack**: [`StreamClient`](crate::client::StreamClient) opens streams
//!   to one address, with no balancing, breakers or retries: a stream is opened on
//!   its next connection only when the one tried refused it before anything was
//!   sent (its stream limit).

pub mod core;
pub mod error;
pub mod flow;
pub mod frame;
pub(crate) mod handle;
pub(crate) mod session;
pub(crate) mod shared;
pub(crate) mod tasks;
#[cfg(test)]
pub(crate) mod tests;
mod timer;

pub use error::{HandlerError, Metadata, StreamError};
pub use frame::{BizStatus, Frame, FrameError, FrameKind, FrameLimits};
pub use handle::{Receiver, Sender};

/// Limits and windows of a side's streaming connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamConfig {
    /// Limits on received frames (16 MiB a frame by default).
    pub frame: FrameLimits,
    /// The window this side grants per stream to a peer that takes part, and the most
    /// bytes of cost ([`flow::cost`]) a stream's queue holds from one that does not.
    /// Default 256 KiB; never less than [`flow::INITIAL_CREDIT`] (64 KiB).
    pub window: u64,
    /// Streams open at once on one connection; a server refuses more (an exception in
    /// a trailer), a client tries its next connection. Default 1024.
    pub max_streams: usize,
    /// How long a client whose initial credit ([`flow::INITIAL_CREDIT`]) is spent
    /// waits for the server to grant a window before it stops counting its sends on
    /// that stream (a Kitex server never grants one; see [`flow`]). Default 100 ms.
    pub decision_wait: std::time::Duration,
    /// (Server) Streams in progress at once across all connections; more are
    /// refused with an `INTERNAL_ERROR` in a trailer whose message starts with
    /// [`OVERLOAD_PREFIX`](crate::refusal::OVERLOAD_PREFIX), as the call limiter
    /// refuses calls. Default `None`: no limit beyond `max_streams` per connection.
    pub max_in_flight: Option<usize>,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            frame: FrameLimits::default(),
            window: 256 * 1024,
            max_streams: 1024,
            decision_wait: std::time::Duration::from_millis(100),
            max_in_flight: None,
        }
    }
}
