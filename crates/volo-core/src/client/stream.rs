//! Streaming calls' client side (see [`stream`](crate::stream)).
//!
//! A stream is opened through the client stack, as a call is made: a
//! [`Client`](super::Client) built by [`ClientBuilder`](super::ClientBuilder) opens
//! one with [`Client::open_stream`](super::Client::open_stream), and the opening (a
//! [`StreamRequest`]) goes down the same layers as a call (see [`ClientCall`]):
//!
//! - the **balancer** picks an instance per stream from what discovery finds now,
//!   skipping those whose **instance breaker** is open; a failed opening counts
//!   against its instance's breaker, and so does a streaming connection that breaks
//!   under open streams;
//! - **retry**: an opening that never left this side (the connect failed, the
//!   connection was closed before the header was written) is tried again on another
//!   instance, up to the retry policy's retries (it spends none of the retry budget:
//!   it cost no server anything); once the header may have reached a server,
//!   never, whatever the idempotency marks (a server may be running the stream);
//! - the **timeout** bounds the opening (a connect and the header's write), not the
//!   stream: a stream's own deadline is [`ClientStreams::timeout`] or
//!   [`StreamRequest::with_timeout`], counted from its opening;
//! - **spans and metrics**: the opening is an `rpc.client` span and a call in the
//!   call metrics; the stream itself has its `rpc.stream` span and the stream
//!   counters;
//! - **backup requests**: never for a stream.
//!
//! At the bottom, the [`Transport`](super::Transport) keeps streaming connections per
//! instance ([`ClientStreams::connections_per_instance`] of them, opened when first
//! needed, taken in turn), apart from its pools of ping-pong connections; an instance
//! that discovery drops gets no new streams (but for openings that had already
//! found its connections when it was dropped), and its connections close once their
//! last stream ends.
//!
//! [`StreamClient`] opens streams to one address without a stack: what the
//! generated `<Service>StreamClient` types use.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use std::{fmt, io};

use thrift_wire::{Message, Utf8Bytes};

use super::pool::Dialer;
use super::{ClientCall, ClientConfig, Error, ErrorKind, MethodName};
use crate::clock::Clock;
use crate::context::Address;
use crate::metrics::StreamCounters;
use crate::stream::handle::{CancelOnDrop, Receiver, Sender};
use crate::stream::session::{Session, Timer};
use crate::stream::shared::StreamShared;
use crate::stream::{Metadata, StreamConfig, StreamError};

/// A client's stream settings (in [`ClientConfig::streams`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientStreams {
    /// The limits and window of each streaming connection.
    pub session: StreamConfig,
    /// Streaming connections per instance; streams take them in turn, and one whose
    /// stream limit is reached passes a stream to the next. Default 1: streams are
    /// muxed: they share a connection, as with Kitex's StreamX client.
    pub connections_per_instance: usize,
    /// A deadline for every stream, from its opening: when it passes, the stream is
    /// reset (Kitex's deadline code) and its halves fail with
    /// [`StreamError::DeadlineExceeded`]. Default `None`.
    pub timeout: Option<Duration>,
}

impl Default for ClientStreams {
    fn default() -> Self {
        ClientStreams {
            session: StreamConfig::default(),
            connections_per_instance: 1,
            timeout: None,
        }
    }
}

/// A stream's opening, as it goes down a client stack: the method, the metadata of
/// the stream's header, and the stream's own deadline. Cheap to clone (a retry
/// sends it again).
#[derive(Debug, Clone)]
pub struct StreamRequest {
    method: MethodName,
    header: Arc<Metadata>,
    timeout: Option<Duration>,
}

impl StreamRequest {
    /// Opens a stream of `method` with `header` as its header's metadata, and the
    /// client's stream deadline ([`ClientStreams::timeout`]).
    pub fn new(method: impl Into<MethodName>, header: Metadata) -> Self {
        StreamRequest {
            method: method.into(),
            header: Arc::new(header),
            timeout: None,
        }
    }

    /// A deadline of the stream's own, from its opening, instead of the client's.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The metadata of the stream's header.
    pub fn header(&self) -> &Metadata {
        &self.header
    }

    /// The stream's own deadline, if it was given one.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
}

impl ClientCall for StreamRequest {
    fn method_name(&self) -> &MethodName {
        &self.method
    }

    fn is_oneway(&self) -> bool {
        false
    }

    fn opens_stream(&self) -> bool {
        true
    }
}

/// A stream the bottom of a client stack opened, its message types not given yet:
/// [`Client::open_stream`](super::Client::open_stream) makes it a [`ClientStream`].
/// Dropped as it is, the stream is reset (cancelled).
pub struct OpenedStream {
    guard: Arc<CancelOnDrop>,
}

impl fmt::Debug for OpenedStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenedStream")
            .field("stream", &self.guard.stream.id)
            .field("method", &self.guard.stream.method)
            .finish()
    }
}

impl OpenedStream {
    /// `stream`, reset (cancelled) if dropped before it ended.
    pub(crate) fn new(stream: Arc<StreamShared>) -> OpenedStream {
        OpenedStream {
            guard: Arc::new(CancelOnDrop { stream }),
        }
    }

    /// The stream id on its connection (for logs).
    pub fn id(&self) -> i32 {
        self.guard.stream.id
    }

    /// The stream with requests of type `Req` and responses of type `Resp`.
    pub fn typed<Req: Message, Resp: Message>(self) -> ClientStream<Req, Resp> {
        let stream = Arc::clone(&self.guard.stream);
        ClientStream {
            sender: Sender::new(Arc::clone(&stream), Some(Arc::clone(&self.guard))),
            receiver: Receiver::new(stream, Some(self.guard)),
        }
    }
}

/// The streaming connections to one instance: `slots` of them, opened when first
/// needed and again after they fail, taken in turn.
///
/// Retired ([`retire`](Self::retire): discovery dropped the instance), it opens no
/// more streams, and its connections close once their last stream ends. An opening
/// under way then (it took a connection, its stream not yet in the connection's
/// table) is let finish first: a connection closed as idle under it would cut the
/// stream it just opened.
pub(crate) struct StreamPool {
    dialer: Dialer,
    config: StreamConfig,
    timer: Timer,
    /// The side's stream counters, when its configuration has metrics.
    metrics: Option<StreamCounters>,
    slots: Box<[tokio::sync::Mutex<Option<Arc<Session>>>]>,
    next: AtomicUsize,
    /// Told when a connection breaks under open streams (the instance breaker).
    on_break: Option<BreakHook>,
    /// Openings under way.
    openings: AtomicUsize,
    /// Retired (its instance left discovery): the openings already headed here go
    /// on, and the last of them to end lets the connections go.
    retired: AtomicBool,
    /// Closed with the client: no new openings at all.
    closed: AtomicBool,
}

/// An opening under way on a [`StreamPool`]; the last one to end after the pool was
/// retired lets its connections go.
pub(crate) struct Opening<'a>(&'a StreamPool);

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        let pool = self.0;
        if pool.openings.fetch_sub(1, Ordering::SeqCst) == 1 && pool.retired.load(Ordering::SeqCst)
        {
            pool.orphan_all();
        }
    }
}

/// What a [`StreamPool`] calls when one of its connections breaks under open
/// streams, with the instance's address.
pub(crate) type BreakHook = Arc<dyn Fn(&Address) + Send + Sync>;

impl fmt::Debug for StreamPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamPool")
            .field("config", &self.config)
            .field("connections", &self.slots.len())
            .finish_non_exhaustive()
    }
}

impl StreamPool {
    pub(crate) fn new(
        dialer: Dialer,
        streams: &ClientStreams,
        timer: Timer,
        metrics: Option<StreamCounters>,
        on_break: Option<BreakHook>,
    ) -> StreamPool {
        StreamPool {
            dialer,
            config: streams.session,
            timer,
            metrics,
            slots: (0..streams.connections_per_instance.max(1))
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
            on_break,
            openings: AtomicUsize::new(0),
            retired: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    /// Opens a stream of `method` of `service` on the next connection that takes it,
    /// reset once `timeout` (if any) has passed on the pool's clock. An error says
    /// whether the header may have left ([`Error::may_have_run`]).
    pub(crate) async fn open(
        &self,
        method: Utf8Bytes,
        service: &str,
        header: &Metadata,
        timeout: Option<Duration>,
    ) -> Result<Arc<StreamShared>, Error> {
        let Some(_opening) = self.begin_opening() else {
            // The client was closed: nothing left, so another instance may take it.
            let gone = io::Error::new(
                io::ErrorKind::NotConnected,
                "no new streams there: the client was closed",
            );
            return Err(Error::io(gone).with_sent(false));
        };
        let mut last = None;
        // Each connection in turn, from the next one, until one takes the stream.
        for _ in 0..self.slots.len() {
            let session = self.session().await?;
            match session.open(method.clone(), service, header, timeout).await {
                Ok(stream) => return Ok(stream),
                Err(e @ StreamError::Refused(_)) => last = Some(e),
                Err(e) => return Err(open_failed(e)),
            }
        }
        Err(Error::new(
            ErrorKind::Rejected,
            last.unwrap_or_else(|| StreamError::Refused("no connection".into())),
        )
        .with_sent(false))
    }

    /// The next connection in turn, opened (again) if it is not open.
    async fn session(&self) -> Result<Arc<Session>, Error> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[i].lock().await;
        if let Some(s) = slot.as_ref().filter(|s| s.is_open()) {
            return Ok(Arc::clone(s));
        }
        let conn = self.dialer.connect(None).await?;
        let session = Session::client(
            conn,
            self.dialer.reactor().cloned(),
            self.config,
            self.timer.clone(),
            self.metrics.clone(),
        );
        if let Some(hook) = &self.on_break {
            let hook = Arc::clone(hook);
            let addr = self.dialer.address().clone();
            session.on_break(Box::new(move || hook(&addr)));
        }
        if let Some(old) = slot.replace(Arc::clone(&session)) {
            old.stop();
        }
        Ok(session)
    }

    /// Streams open across its connections.
    #[cfg(test)]
    pub(crate) fn open_streams(&self) -> usize {
        self.slots
            .iter()
            .filter_map(|s| {
                s.try_lock()
                    .ok()
                    .and_then(|s| s.as_ref().map(|s| s.open_streams()))
            })
            .sum()
    }

    /// An opening, unless the pool is closed.
    ///
    /// A retired pool still takes it: only an opening that found the pool before its
    /// instance left discovery can reach it (the transport forgets the pool when it
    /// retires it), and the instance, which deregisters before it stops serving, is
    /// still there for it. Refusing it would fail an attempt that raced the change.
    /// (The count goes up before the mark is read, and [`retire`](Self::retire) sets
    /// the mark before it reads the count: one of the two sees the other, so the
    /// connections are let go after the last opening either way.)
    pub(crate) fn begin_opening(&self) -> Option<Opening<'_>> {
        self.openings.fetch_add(1, Ordering::SeqCst);
        let opening = Opening(self);
        (!self.closed.load(Ordering::SeqCst)).then_some(opening)
    }

    /// The connection kept in slot `i`, if any.
    #[cfg(test)]
    pub(crate) fn connection(&self, i: usize) -> Option<Arc<Session>> {
        self.slots[i].try_lock().ok().and_then(|s| s.clone())
    }

    /// No new streams but those of the openings already headed here: each connection
    /// closes once its last stream ends, and no sooner than those openings end.
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
        if self.openings.load(Ordering::SeqCst) == 0 {
            self.orphan_all();
        }
    }

    /// No new openings at all (a pool made after the client's streams were closed).
    pub(crate) fn shut(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.retire();
    }

    /// No new streams; waits until each connection has closed once its last stream
    /// ended, and what was written on it (an rst, a trailer) has been sent.
    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.retired.store(true, Ordering::SeqCst);
        let mut closing = Vec::new();
        for slot in &self.slots {
            // Waits for a connection being opened in the slot.
            if let Some(s) = slot.lock().await.take() {
                s.orphan();
                closing.push(s);
            }
        }
        for s in closing {
            s.closed().await;
        }
    }

    /// Lets each connection go: it closes once its last stream ends.
    fn orphan_all(&self) {
        for slot in &self.slots {
            // Locked now: another caller of this is letting it go.
            if let Ok(mut slot) = slot.try_lock()
                && let Some(s) = slot.take()
            {
                s.orphan();
            }
        }
    }
}

impl Drop for StreamPool {
    fn drop(&mut self) {
        for slot in &mut self.slots {
            if let Some(s) = slot.get_mut().take() {
                // Streams still open keep their connection until the last one ends.
                s.orphan();
            }
        }
    }
}

/// The error of a stream whose opening failed with `e`: a connection's stream limit
/// stays [`StreamError::Refused`]; any other failure is [`StreamError::Open`].
pub(crate) fn open_error(e: Error) -> StreamError {
    use std::error::Error as _;
    if let Some(refused @ StreamError::Refused(_)) =
        e.source().and_then(|s| s.downcast_ref::<StreamError>())
    {
        return refused.clone();
    }
    StreamError::Open {
        kind: e.kind(),
        instance: e.instance().cloned(),
        message: e.to_string(),
    }
}

/// A client [`Error`] for an opening that failed on a connection: it closed or
/// failed before the header was written, so nothing left (another instance may take
/// the stream). A connection that ends once the header was written fails the stream
/// itself, not its opening.
fn open_failed(e: StreamError) -> Error {
    match e {
        StreamError::Connection { kind, message } => {
            Error::io(io::Error::new(kind, message)).with_sent(false)
        }
        StreamError::Encode(message) => Error::encode(message),
        other => Error::new(ErrorKind::Io, other).with_sent(false),
    }
}

/// Opens streams of one service to one address, over a few mux connections
/// (`connections` of them, opened when first needed, in turn), without a client
/// stack: no discovery, balancing, breakers, retries or layers. A
/// [`Client`](super::Client) opens streams through its stack
/// ([`Client::open_stream`](super::Client::open_stream)).
pub struct StreamClient {
    service: String,
    pool: StreamPool,
    timeout: Option<Duration>,
}

impl fmt::Debug for StreamClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamClient")
            .field("service", &self.service)
            .field("pool", &self.pool)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl StreamClient {
    /// A client of `service` (sent as `isn`, as Kitex's client does) at `addr`, with
    /// the transport, TLS, connect timeout and stream settings of `config` (its
    /// framing, protocol and pool settings do not apply: streams are TTHeader and
    /// Binary). Must run inside a tokio runtime.
    pub fn new(
        service: impl Into<String>,
        addr: Address,
        config: &ClientConfig,
    ) -> io::Result<Self> {
        let reactor = super::pool::reactor_for(config)?;
        let metrics = config
            .observability
            .metrics
            .as_ref()
            .map(|m| m.streams(false).clone());
        Ok(StreamClient {
            service: service.into(),
            pool: StreamPool::new(
                Dialer::new(reactor, addr, config),
                &config.streams,
                Timer::default(),
                metrics,
                None,
            ),
            timeout: config.streams.timeout,
        })
    }

    /// Sets the streams' limits and window.
    pub fn with_config(mut self, config: StreamConfig) -> Self {
        self.pool.config = config;
        self
    }

    /// Sets the clock of the streams' deadlines and of the wait for a server's window
    /// (default the real one; tests give a [`ManualClock`](crate::clock::ManualClock)).
    /// Applies to connections opened afterwards.
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.pool.timer = Timer::new(clock);
        self
    }

    /// Sets how many connections the streams share (default 1).
    pub fn with_connections(mut self, n: usize) -> Self {
        self.pool.slots = (0..n.max(1))
            .map(|_| tokio::sync::Mutex::new(None))
            .collect();
        self
    }

    /// Sets a deadline for every stream, from its opening: when it passes, the stream
    /// is reset (Kitex's deadline code) and its halves fail with
    /// [`StreamError::DeadlineExceeded`]. Default none.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The deadline of its streams, if it gives them one.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Opens a stream of `method` with `header` as its header's metadata.
    pub async fn open<Req: Message, Resp: Message>(
        &self,
        method: &str,
        header: &Metadata,
    ) -> Result<ClientStream<Req, Resp>, StreamError> {
        self.open_with_timeout(method, header, self.timeout).await
    }

    /// [`open`](Self::open) with a deadline of its own (`None`: none).
    pub async fn open_with_timeout<Req: Message, Resp: Message>(
        &self,
        method: &str,
        header: &Metadata,
        timeout: Option<Duration>,
    ) -> Result<ClientStream<Req, Resp>, StreamError> {
        let method = Utf8Bytes::from(method.to_owned());
        let stream = self
            .pool
            .open(method, &self.service, header, timeout)
            .await
            .map_err(open_error)?;
        Ok(OpenedStream::new(stream).typed())
    }

    /// Closes the client: no new streams (an opening fails with
    /// [`StreamError::Open`]); once the streams open on a connection have ended,
    /// what was written on it (a dropped stream's rst, a deadline's) is sent and the
    /// connection closed. Returns when every connection is closed.
    ///
    /// Dropping the client closes its connections the same way, but in the
    /// background: a program that exits right after would cut the rsts still on
    /// their way, and the server would see a closed connection instead of a cancel
    /// or a deadline. Await this before exiting. It waits for streams still open, so
    /// end or drop them first (a peer that takes nothing holds each connection at
    /// most a second more, on the client's clock).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Streams open across its connections.
    #[cfg(test)]
    pub(crate) fn open_streams(&self) -> usize {
        self.pool.open_streams()
    }
}

/// A client's stream: it sends requests and receives responses, and is reset
/// (cancelled) if dropped before it ended. [`split`](Self::split) gives its halves,
/// to send and receive from different tasks.
#[derive(Debug)]
pub struct ClientStream<Req, Resp> {
    sender: Sender<Req>,
    receiver: Receiver<Resp>,
}

impl<Req: Message, Resp: Message> ClientStream<Req, Resp> {
    /// Sends a request.
    pub async fn send(&mut self, request: &Req) -> Result<(), StreamError> {
        self.sender.send(request).await
    }

    /// Ends the requests (an empty trailer).
    pub async fn close_send(&mut self) -> Result<(), StreamError> {
        self.sender.close_send().await
    }

    /// The next response; `Ok(None)` once the server ended the stream cleanly.
    pub async fn recv(&mut self) -> Result<Option<Resp>, StreamError> {
        self.receiver.recv().await
    }

    /// The server's header.
    pub async fn header(&self) -> Result<Metadata, StreamError> {
        self.receiver.header().await
    }

    /// The server's trailer, once it ended the stream cleanly.
    pub fn trailer(&self) -> Option<Metadata> {
        self.receiver.trailer()
    }

    /// The two halves; the stream is reset if both go before it ended.
    pub fn split(self) -> (Sender<Req>, Receiver<Resp>) {
        (self.sender, self.receiver)
    }

    /// The receiving half, as a `futures::Stream` of responses.
    pub fn receiver(&mut self) -> &mut Receiver<Resp> {
        &mut self.receiver
    }
}
