//! One connection's streams: the multiplexer both sides share.
//!
//! A session owns a connection. Its reader task cuts frames ([`frame_len`],
//! [`Frame::decode`]) and routes each by its stream id: a header opens a stream (at a
//! server) or completes one (at a client), data goes to the stream's [`Inbox`], a
//! trailer ends the peer's direction, an rst ends the stream, a meta frame grants
//! credit or acknowledges a window ([`flow`](super::flow)). Writers encode their
//! frame straight into the connection's output buffer, one frame per `write_with`, so
//! frames never interleave, and flush it; one flush runs at a time and sends what
//! every writer put there, so the frames of many streams share a send.
//!
//! The reader never waits for a stream's application, except for a peer that does not
//! take part in flow control (Kitex) whose stream's queue is full: then it waits for
//! room in that queue, as the only brake such a peer leaves (see
//! [`flow`](super::flow)).
//!
//! Bad input is answered as narrowly as it can be: a frame for a stream that is not
//! open (ended, reset, never opened) is dropped with a debug log line; a stream
//! whose peer breaks the protocol (data after its trailer, more than its credit) is
//! reset, alone; a frame that cannot be read, or a stream opened beyond the
//! connection's limit... the former ends the connection, the latter gets its stream
//! refused with an exception in a trailer.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use thrift_codec::{ApplicationException, ApplicationExceptionKind, LinkBuffer, Utf8Bytes};
use tokio::sync::{Notify, mpsc};

use super::StreamConfig;
use super::error::{HandlerError, Metadata, StreamError};
use super::flow::{self, CREDIT_KEY, INITIAL_CREDIT, Inbox, SendWindow, UNCOUNTED_KEY, WINDOW_KEY};
use super::frame::{
    self, BizStatus, Frame, FrameKind, exception_payload, frame_len, read_exception, str_key,
};
use crate::clock::{Clock, SystemClock};
use crate::metrics::StreamCounters;
use crate::transport::{Conn, FrameIo, lock};

/// Which end of the connection this side is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Client,
    Server,
}

/// A stream the peer opened, handed to the server's accept loop.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) stream: Arc<StreamShared>,
    pub(crate) header: Metadata,
    /// The `isn` key: the service the peer named.
    pub(crate) service: Option<Utf8Bytes>,
}

/// One connection's streams.
#[derive(Debug)]
pub(crate) struct Session {
    conn: Conn,
    side: Side,
    config: StreamConfig,
    streams: Mutex<Streams>,
    /// One flush at a time; a flush sends what every writer put in the output.
    flushing: tokio::sync::Mutex<()>,
    /// Told when an application takes a message from a queue the reader may be
    /// waiting on.
    room: Notify,
    /// Tells the reader to stop.
    stop: Notify,
    /// The next stream id a client opens.
    next_id: AtomicI32,
    /// Whether the server takes part in flow control, as its streams have shown
    /// ([`PEER_UNKNOWN`], [`PEER_COUNTED`], [`PEER_UNCOUNTED`]); clients only.
    peer_counts: AtomicU8,
    /// Its client is gone (the connection closes with its last stream).
    orphaned: AtomicBool,
    /// The highest stream id a client opened (servers only): a frame for a higher
    /// one came before its stream's header.
    highest: AtomicI32,
    /// The clock of the decision wait.
    timer: Timer,
    /// This side's stream counters, when metrics are on.
    metrics: Option<StreamCounters>,
    /// Tells the flusher task that messages wait in the output.
    flush_wanted: Notify,
    /// Called once if the connection breaks under open streams.
    on_break: Mutex<Option<OnBreak>>,
    /// The server refused a stream as closing (a client's session): new streams go
    /// on another connection.
    closing: AtomicBool,
    /// A stream was opened on it (its header sent): a break after it is the
    /// connection's, not an opening's (which its opener counts).
    established: AtomicBool,
}

/// What a session calls when its connection breaks under open streams.
struct OnBreak(Box<dyn FnOnce() + Send>);

impl std::fmt::Debug for OnBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnBreak")
    }
}

/// Bytes waiting in a connection's output above which a sender flushes itself (and
/// waits for the socket) instead of leaving it to the flusher.
const FLUSH_HIGH_WATER: usize = 256 * 1024;

/// Longest a session that closes its connection waits for the peer to take what is
/// still in its output (an rst, a trailer).
pub(crate) const CLOSING_FLUSH_WAIT: Duration = Duration::from_secs(1);

/// A sleep of a [`Timer`].
pub(crate) type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Sleeps on a [`Clock`] given as an input (the real one, or a test's).
#[derive(Clone)]
pub(crate) struct Timer(Arc<dyn Fn(Duration) -> Sleep + Send + Sync>);

impl Timer {
    pub(crate) fn new(clock: impl Clock) -> Timer {
        Timer(Arc::new(move |d| {
            Box::pin(clock.sleep_until(clock.now() + d))
        }))
    }

    /// Completes once `d` has passed on the clock.
    pub(crate) fn after(&self, d: Duration) -> Sleep {
        (self.0)(d)
    }
}

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Timer")
    }
}

impl Default for Timer {
    fn default() -> Self {
        Timer::new(SystemClock)
    }
}

/// No stream has shown yet whether the server takes part in flow control.
const PEER_UNKNOWN: u8 = 0;
/// The server granted a window.
const PEER_COUNTED: u8 = 1;
/// The server sent a header with no window before it, or did not grant one in time.
const PEER_UNCOUNTED: u8 = 2;

#[derive(Debug, Default)]
struct Streams {
    open: HashMap<i32, Arc<StreamShared>>,
    /// Set once the reader has ended: why.
    closed: Option<StreamError>,
}

/// The state of one stream, shared by its halves and the session's reader.
#[derive(Debug)]
pub(crate) struct StreamShared {
    pub(crate) id: i32,
    pub(crate) method: Utf8Bytes,
    /// The stream's `rpc.stream` span, with an event per message.
    span: tracing::Span,
    pub(crate) session: Arc<Session>,
    state: Mutex<State>,
    /// Told when a message, the peer's header, its trailer or an error arrives.
    readable: Notify,
    /// Told when credit arrives, the send window is decided, or the stream ends.
    writable: Notify,
}

#[derive(Debug)]
struct State {
    inbox: Inbox,
    /// The peer's header, once it came.
    peer_header: Option<Metadata>,
    send: SendWindow,
    /// Whether the send window is known (a server knows it from the client's header;
    /// a client from the server's).
    send_decided: bool,
    /// What this side's messages cost before the window was decided.
    spent_before: u64,
    /// The peer granted a window (a client's view of a server of this crate): it
    /// also spends credit against this side's window.
    peer_granted: bool,
    /// This side's header is sent (a client's always is; a server's with its first
    /// message, its trailer, or at once to a peer that grants a window).
    header_sent: bool,
    /// What this side's header carries, until sent.
    header_out: Metadata,
    /// What this side's trailer carries.
    trailer_out: Metadata,
    /// This side ended its direction (its trailer is sent).
    sent_trailer: bool,
    /// The outcome of the error this side's trailer carried, if any.
    sent_error: Option<&'static str>,
    /// The peer ended its direction: its trailer's metadata, or its error.
    peer_end: Option<Result<Metadata, StreamError>>,
    /// The stream is over (reset either way, connection failed, deadline).
    reset: Option<StreamError>,
    /// The reset came in the peer's rst.
    reset_by_peer: bool,
}

impl State {
    /// The stream is over for this side's sends.
    fn send_error(&self) -> Option<StreamError> {
        if let Some(e) = &self.reset {
            return Some(e.clone());
        }
        if self.sent_trailer {
            return Some(StreamError::SendClosed);
        }
        // A peer that ended with an error ended the stream; one that ended cleanly
        // still reads this side's messages (a client stream's answer comes last).
        match &self.peer_end {
            Some(Err(e)) => Some(e.clone()),
            _ => None,
        }
    }

    /// Reset, ended by the peer with an error, or ended both ways.
    fn is_over(&self) -> bool {
        self.reset.is_some()
            || matches!(self.peer_end, Some(Err(_)))
            || (self.sent_trailer && self.peer_end.is_some())
    }

    /// How the stream ended (or stands), as its metrics and span name it.
    fn outcome(&self) -> &'static str {
        if let Some(e) = &self.reset {
            return e.outcome();
        }
        if let Some(failure) = self.sent_error {
            return failure;
        }
        match &self.peer_end {
            Some(Err(e)) => e.outcome(),
            _ => "ok",
        }
    }
}

impl Session {
    /// A client's session on `conn`, its reader started. `reactor` (the netpoll-rs
    /// one of `conn`, if it is such a connection) is held until the connection is
    /// closed: a client that goes leaves its streams their connection, and the
    /// connection what it wrote.
    pub(crate) fn client(
        conn: Conn,
        reactor: Option<netpoll_rs::Reactor>,
        config: StreamConfig,
        timer: Timer,
        metrics: Option<StreamCounters>,
    ) -> Arc<Session> {
        let session = Arc::new(Session::new(conn, Side::Client, config, timer, metrics));
        let reader = read_frames(Arc::clone(&session), None, None);
        tokio::spawn(async move {
            reader.await;
            drop(reactor);
        });
        tokio::spawn(flush_later(Arc::clone(&session)));
        session
    }

    /// A server's session on `conn`, whose first frame was `first`, its reader
    /// started: the streams clients open go to `opened`.
    pub(crate) fn server(
        conn: Conn,
        config: StreamConfig,
        first: Bytes,
        opened: mpsc::UnboundedSender<Opened>,
        metrics: Option<StreamCounters>,
    ) -> Arc<Session> {
        let timer = Timer::default();
        let session = Arc::new(Session::new(conn, Side::Server, config, timer, metrics));
        tokio::spawn(read_frames(Arc::clone(&session), Some(first), Some(opened)));
        tokio::spawn(flush_later(Arc::clone(&session)));
        session
    }

    fn new(
        conn: Conn,
        side: Side,
        config: StreamConfig,
        timer: Timer,
        metrics: Option<StreamCounters>,
    ) -> Session {
        Session {
            conn,
            side,
            config,
            streams: Mutex::new(Streams::default()),
            flushing: tokio::sync::Mutex::new(()),
            room: Notify::new(),
            stop: Notify::new(),
            next_id: AtomicI32::new(1),
            peer_counts: AtomicU8::new(PEER_UNKNOWN),
            orphaned: AtomicBool::new(false),
            highest: AtomicI32::new(0),
            timer,
            metrics,
            flush_wanted: Notify::new(),
            on_break: Mutex::new(None),
            established: AtomicBool::new(false),
            closing: AtomicBool::new(false),
        }
    }

    fn streams(&self) -> MutexGuard<'_, Streams> {
        lock(&self.streams)
    }

    /// Whether streams can still be opened on it.
    pub(crate) fn is_open(&self) -> bool {
        !self.closing.load(Ordering::Relaxed)
            && self.streams().closed.is_none()
            && self.conn.is_open()
    }

    /// The window this side grants: the configured one, at least
    /// [`INITIAL_CREDIT`].
    fn window(&self) -> u64 {
        self.config.window.max(INITIAL_CREDIT)
    }

    /// The largest message a frame can carry under this side's limits.
    pub(crate) fn max_message(&self) -> usize {
        self.config.frame.max_frame
    }

    /// Whether its connection is still open (not closed here, not failed).
    #[cfg(test)]
    pub(crate) fn conn_is_open(&self) -> bool {
        self.conn.is_open()
    }

    /// Streams open on it.
    #[cfg(test)]
    pub(crate) fn open_streams(&self) -> usize {
        self.streams().open.len()
    }

    /// Stops the reader: every stream fails, what is in the output is sent (for at
    /// most [`CLOSING_FLUSH_WAIT`]), and the connection closes.
    pub(crate) fn stop(&self) {
        self.stop.notify_one();
    }

    /// Opens a stream (client side): registers it and sends its header.
    pub(crate) async fn open(
        self: &Arc<Self>,
        method: Utf8Bytes,
        service: &str,
        header: &Metadata,
    ) -> Result<Arc<StreamShared>, StreamError> {
        let stream = {
            let mut streams = self.streams();
            if let Some(e) = &streams.closed {
                return Err(e.clone());
            }
            if streams.open.len() >= self.config.max_streams {
                return Err(StreamError::Refused(format!(
                    "{} streams are open on the connection, its limit",
                    streams.open.len()
                )));
            }
            let id = loop {
                let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                // Ids are positive; after they wrap, skip any still open.
                if id > 0 && !streams.open.contains_key(&id) {
                    break id;
                }
                if id <= 0 {
                    self.next_id.store(1, Ordering::Relaxed);
                }
            };
            // A server known not to take part (one stream already told) is not asked.
            let counted = self.peer_counts.load(Ordering::Relaxed) != PEER_UNCOUNTED;
            let inbox = Inbox::new(self.window(), counted).map_err(protocol)?;
            let send = match counted {
                true => SendWindow::new(INITIAL_CREDIT).map_err(protocol)?,
                false => SendWindow::unlimited(),
            };
            let stream =
                StreamShared::new(id, method, service, Arc::clone(self), inbox, send, !counted);
            self.register(&mut streams, &stream);
            stream
        };
        let mut frame = Frame::new(FrameKind::Header, stream.id).with_method(stream.method.clone());
        frame.meta.push((
            Utf8Bytes::from_static(str_key::SERVICE),
            Utf8Bytes::from(service.to_owned()),
        ));
        frame.meta.extend(header.pairs().iter().cloned());
        {
            let mut st = stream.state();
            if !st.send_decided {
                frame.meta.push((
                    Utf8Bytes::from_static(WINDOW_KEY),
                    Utf8Bytes::from(self.window().to_string()),
                ));
            }
            st.header_sent = true;
        }
        // A connection that fails while the header is written fails before it left.
        if let Err(e) = self.send_frame(&frame).await {
            stream.forget();
            return Err(e);
        }
        // Under the table's lock, as the reader's end takes the table: either the
        // stream counts as opened there (a break from now on is the connection's,
        // told by the reader), or the connection ended while the header went: the
        // reader reset the stream with its error, for its halves to return, and the
        // break is told here.
        let ended = {
            let streams = self.streams();
            if streams.closed.is_none() {
                self.established.store(true, Ordering::Relaxed);
            }
            streams.closed.clone()
        };
        if let Some(error) = ended
            && is_break(&error)
            && let Some(OnBreak(f)) = lock(&self.on_break).take()
        {
            f();
        }
        Ok(stream)
    }

    /// Writes `frame` and flushes.
    async fn send_frame(&self, frame: &Frame) -> Result<(), StreamError> {
        self.write_frame(frame)?;
        self.flush().await
    }

    /// Writes `frame` into the output (not sent until a flush).
    fn write_frame(&self, frame: &Frame) -> Result<(), StreamError> {
        self.conn
            .write_with(|out| frame.encode(out))
            .map(drop)
            .map_err(|e| StreamError::Encode(e.to_string()))
    }

    /// Sends what is in the output, after any flush in progress.
    pub(crate) async fn flush(&self) -> Result<(), StreamError> {
        let _turn = self.flushing.lock().await;
        self.conn
            .flush()
            .await
            .map_err(|e| StreamError::connection(&e))
    }

    /// Sends an rst for stream `id` carrying `error` (best effort: the connection may
    /// be gone), without waiting for the send.
    fn rst_later(self: &Arc<Self>, id: i32, method: &Utf8Bytes, error: &StreamError) {
        let frame = rst_frame(id, method, error);
        if self.write_frame(&frame).is_ok() {
            let session = Arc::clone(self);
            // Outside a runtime (a handle dropped at exit) it goes with the next flush.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = session.flush().await;
                });
            }
        }
    }

    fn remove(&self, id: i32) {
        let (removed, idle) = {
            let mut streams = self.streams();
            let removed = streams.open.remove(&id);
            (removed, streams.open.is_empty())
        };
        if let Some(stream) = removed {
            stream.ended();
        }
        // The reader may be waiting for room in that stream's queue.
        self.room.notify_one();
        if idle && self.orphaned.load(Ordering::Acquire) {
            self.stop();
        }
    }

    /// Puts `stream` in the table (counted open).
    fn register(&self, streams: &mut Streams, stream: &Arc<StreamShared>) {
        streams.open.insert(stream.id, Arc::clone(stream));
        if let Some(m) = &self.metrics {
            m.open.inc();
        }
    }

    /// Calls `f` once if the connection breaks (fails, or the peer closes it) while
    /// streams are open on it, one of which was opened; not when this side closes it.
    pub(crate) fn on_break(&self, f: Box<dyn FnOnce() + Send>) {
        *lock(&self.on_break) = Some(OnBreak(f));
    }

    /// Its client is gone: the connection closes once no stream is open on it.
    pub(crate) fn orphan(&self) {
        self.orphaned.store(true, Ordering::Release);
        if self.streams().open.is_empty() {
            self.stop();
        }
    }
}

/// Whether a session that ended with `error` broke (failed, or the peer closed it),
/// rather than being closed here.
fn is_break(error: &StreamError) -> bool {
    !matches!(error, StreamError::Connection { kind, .. } if *kind == io::ErrorKind::ConnectionAborted)
}

fn protocol(e: flow::FlowError) -> StreamError {
    StreamError::Protocol(e.to_string())
}

/// An rst frame for `id` carrying `error`.
fn rst_frame(id: i32, method: &Utf8Bytes, error: &StreamError) -> Frame {
    let mut frame = Frame::new(FrameKind::Rst, id).with_method(method.clone());
    if let Ok(payload) = exception_payload(&error.to_rst(), method, id) {
        frame.payload = payload;
    }
    frame
}

impl StreamShared {
    fn new(
        id: i32,
        method: Utf8Bytes,
        service: &str,
        session: Arc<Session>,
        inbox: Inbox,
        send: SendWindow,
        send_decided: bool,
    ) -> Arc<Self> {
        let span = tracing::info_span!(
            "rpc.stream",
            otel.name = %format_args!("{service}/{method}"),
            otel.kind = match session.side {
                Side::Client => "client",
                Side::Server => "server",
            },
            rpc.system = crate::trace::RPC_SYSTEM,
            rpc.service = service,
            rpc.method = %method,
            stream.id = id,
            otel.status_code = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        Arc::new(StreamShared {
            id,
            method,
            span,
            session,
            state: Mutex::new(State {
                inbox,
                peer_header: None,
                send,
                send_decided,
                spent_before: 0,
                peer_granted: false,
                header_sent: false,
                header_out: Metadata::new(),
                trailer_out: Metadata::new(),
                sent_trailer: false,
                sent_error: None,
                peer_end: None,
                reset: None,
                reset_by_peer: false,
            }),
            readable: Notify::new(),
            writable: Notify::new(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Counts the stream ended and closes its span with its outcome.
    fn ended(&self) {
        let outcome = self.state().outcome();
        if let Some(m) = &self.session.metrics {
            m.ended(outcome);
        }
        if !self.span.is_disabled() {
            match outcome {
                "ok" => self.span.record("otel.status_code", "OK"),
                failure => self
                    .span
                    .record("otel.status_code", "ERROR")
                    .record("error.type", failure),
            };
        }
    }

    /// Leaves the session's table, without telling the peer.
    pub(crate) fn forget(&self) {
        self.session.remove(self.id);
    }

    /// Ends the stream with `error` here, and tells the peer with an rst unless the
    /// stream was over already. Wakes both halves.
    pub(crate) fn reset(&self, error: StreamError) {
        {
            let mut st = self.state();
            if !st.is_over() {
                // In the output before anyone sees the stream reset or gone: the
                // last stream of a client that went stops its session, which sends
                // what its output holds, then closes.
                self.session.rst_later(self.id, &self.method, &error);
                st.reset = Some(error);
            }
        }
        self.forget();
        self.readable.notify_one();
        self.writable.notify_one();
    }

    /// Whether the stream is over (both directions ended, or reset).
    pub(crate) fn is_over(&self) -> bool {
        self.state().is_over()
    }

    /// The peer's header, waiting for it.
    pub(crate) async fn header(&self) -> Result<Metadata, StreamError> {
        loop {
            {
                let st = self.state();
                if let Some(h) = &st.peer_header {
                    return Ok(h.clone());
                }
                if let Some(e) = &st.reset {
                    return Err(e.clone());
                }
                if let Some(end) = &st.peer_end {
                    // A peer that ended without a header sent none.
                    return end.clone().map(|_| Metadata::new());
                }
            }
            self.readable.notified().await;
        }
    }

    /// The peer's trailer, once its direction ended cleanly.
    pub(crate) fn trailer(&self) -> Option<Metadata> {
        match &self.state().peer_end {
            Some(Ok(m)) => Some(m.clone()),
            _ => None,
        }
    }

    /// Sets what this side's header carries (before its first message).
    pub(crate) fn set_header(&self, header: Metadata) {
        self.state().header_out = header;
    }

    /// Sets what this side's trailer carries.
    pub(crate) fn set_trailer(&self, trailer: Metadata) {
        self.state().trailer_out = trailer;
    }

    /// The next message, `Ok(None)` once the peer ended its direction cleanly.
    pub(crate) async fn recv(&self) -> Result<Option<Bytes>, StreamError> {
        loop {
            let popped = {
                let mut st = self.state();
                let held = !st.inbox.has_room();
                match st.inbox.pop() {
                    Some((message, grant)) => Some((message, grant, held)),
                    None => {
                        if let Some(e) = &st.reset {
                            return Err(e.clone());
                        }
                        if let Some(end) = &st.peer_end {
                            return end.clone().map(|_| None);
                        }
                        None
                    }
                }
            };
            if let Some((message, grant, held)) = popped {
                if held {
                    self.session.room.notify_one();
                }
                if let Some(n) = grant {
                    self.grant(n).await;
                }
                return Ok(Some(message));
            }
            self.readable.notified().await;
        }
    }

    /// Grants the peer `n` more bytes of credit (a meta frame).
    async fn grant(&self, n: u64) {
        let mut frame = Frame::new(FrameKind::Meta, self.id).with_method(self.method.clone());
        frame.meta.push((
            Utf8Bytes::from_static(CREDIT_KEY),
            Utf8Bytes::from(n.to_string()),
        ));
        // A failed send fails the connection, which the reader reports.
        let _ = self.session.send_frame(&frame).await;
    }

    /// Waits for credit for a message of `size` bytes and spends it; writes this
    /// side's header first when it is not sent yet. Returns the header to write, if
    /// any.
    async fn take_credit(&self, size: usize) -> Result<Option<Frame>, StreamError> {
        let cost = size as u64 + flow::MESSAGE_COST;
        loop {
            let undecided = {
                let mut st = self.state();
                if let Some(e) = st.send_error() {
                    return Err(e);
                }
                if st.send.can_send() {
                    st.send.spend(cost);
                    if !st.send_decided {
                        st.spent_before += cost;
                    }
                    return Ok(self.header_due(&mut st));
                }
                !st.send_decided
            };
            if !undecided {
                self.writable.notified().await;
                continue;
            }
            // The initial credit is spent and the server has not said whether it takes
            // part: a Kitex server says nothing until its first message or its end,
            // which may wait for this side's messages. Past the wait, stop counting.
            let wait = self.session.timer.after(self.session.config.decision_wait);
            tokio::select! {
                () = self.writable.notified() => {}
                () = wait => self.opt_out().await?,
            }
        }
    }

    /// Stops counting this stream's sends: tells the server so (a meta frame with
    /// [`UNCOUNTED_KEY`], which a Kitex server ignores), before any message beyond
    /// the initial credit.
    async fn opt_out(&self) -> Result<(), StreamError> {
        {
            let mut st = self.state();
            if st.send_decided {
                return Ok(());
            }
            st.send_decided = true;
            st.send = SendWindow::unlimited();
        }
        self.session
            .peer_counts
            .store(PEER_UNCOUNTED, Ordering::Relaxed);
        tracing::debug!(
            stream = self.id,
            "the server granted no window in time; sends are not counted"
        );
        let mut frame = Frame::new(FrameKind::Meta, self.id).with_method(self.method.clone());
        frame
            .meta
            .push((Utf8Bytes::from_static(UNCOUNTED_KEY), Utf8Bytes::new()));
        self.session.send_frame(&frame).await
    }

    /// This side's header frame, if it is still to be sent (it is marked sent).
    fn header_due(&self, st: &mut State) -> Option<Frame> {
        if st.header_sent {
            return None;
        }
        st.header_sent = true;
        let mut frame = Frame::new(FrameKind::Header, self.id).with_method(self.method.clone());
        frame.meta = std::mem::take(&mut st.header_out).pairs().to_vec();
        Some(frame)
    }

    /// Sends one message of `size` bytes that `encode` writes.
    pub(crate) async fn send_with(
        &self,
        size: usize,
        encode: impl FnOnce(&mut LinkBuffer),
    ) -> Result<(), StreamError> {
        let header = self.take_credit(size).await?;
        let written = self.session.conn.write_with(|out| {
            if let Some(h) = &header {
                h.encode(out)?;
            }
            frame::write_head(FrameKind::Data, self.id, Some(&self.method), &[], size, out)?;
            encode(out);
            Ok::<_, frame::FrameError>(out.len())
        });
        let pending = written.map_err(|e| StreamError::Encode(e.to_string()))?;
        if let Some(m) = &self.session.metrics {
            m.sent.inc();
            m.sent_bytes.inc_by(size as u64);
        }
        if !self.span.is_disabled() {
            tracing::trace!(parent: &self.span, bytes = size, "stream message sent");
        }
        if pending > FLUSH_HIGH_WATER {
            // The socket is behind: this sender waits for it.
            self.session.flush().await
        } else {
            // Sent by the flusher once the tasks ready now have written theirs: the
            // messages of many streams share a send.
            self.session.flush_wanted.notify_one();
            Ok(())
        }
    }

    /// Ends this side's direction: a trailer with `error`'s exception or business
    /// status, if any, after this side's header if it was not sent. Nothing is sent
    /// on a stream that is over.
    pub(crate) async fn close_send(&self, error: Option<&HandlerError>) -> Result<(), StreamError> {
        self.send_trailer(error, false).await
    }

    /// The server's handler returned with `error`: its trailer, as
    /// [`close_send`](Self::close_send) sends it, and on a stream the client reset
    /// with an rst too, as Kitex's server sends one when its handler returns after
    /// the client's rst. Nothing is sent after a reset of another kind (this side's,
    /// a failed connection).
    pub(crate) async fn handler_returned(
        &self,
        error: Option<&HandlerError>,
    ) -> Result<(), StreamError> {
        self.send_trailer(error, true).await
    }

    /// [`close_send`](Self::close_send), also after the peer's rst if `after_rst`.
    async fn send_trailer(
        &self,
        error: Option<&HandlerError>,
        after_rst: bool,
    ) -> Result<(), StreamError> {
        let (header, trailer) = {
            let mut st = self.state();
            if let Some(e) = &st.reset
                && !(after_rst && st.reset_by_peer)
            {
                return Err(e.clone());
            }
            if st.sent_trailer {
                return Ok(());
            }
            st.sent_trailer = true;
            let header = self.header_due(&mut st);
            let mut trailer =
                Frame::new(FrameKind::Trailer, self.id).with_method(self.method.clone());
            trailer.meta = std::mem::take(&mut st.trailer_out).pairs().to_vec();
            st.sent_error = error.map(|e| match e {
                HandlerError::Exception(_) => "application_error",
                HandlerError::Biz(_) => "biz_error",
            });
            match error {
                Some(HandlerError::Exception(e)) => {
                    if let Ok(payload) = exception_payload(e, &self.method, self.id) {
                        trailer.payload = payload;
                    }
                }
                Some(HandlerError::Biz(status)) => status.put(&mut trailer),
                None => {}
            }
            (header, trailer)
        };
        if self.is_over() {
            self.forget();
        }
        if let Some(h) = &header {
            self.session.write_frame(h)?;
        }
        self.session.send_frame(&trailer).await
    }

    /// Waits until the stream is reset (cancelled, deadline, connection), for a
    /// handler that wants to stop early.
    pub(crate) async fn reset_reason(&self) -> StreamError {
        loop {
            if let Some(e) = &self.state().reset {
                return e.clone();
            }
            self.writable.notified().await;
        }
    }

    /// The server's handler is done and its trailer sent: whatever the client still
    /// sends on the stream is dropped as a closed stream's.
    pub(crate) fn finish(&self) {
        self.forget();
        self.readable.notify_one();
    }

    /// The cost of the messages queued.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> u64 {
        self.state().inbox.queued()
    }

    /// Whether this stream's queue can take another message now.
    fn has_room(&self) -> bool {
        self.state().inbox.has_room()
    }
}

/// The reader: routes frames until the connection ends or the session is stopped,
/// then fails every stream still open, sends what the output holds (waiting at most
/// [`CLOSING_FLUSH_WAIT`] on the session's clock for a peer that does not read), and
/// closes the connection.
async fn read_frames(
    session: Arc<Session>,
    first: Option<Bytes>,
    opened: Option<mpsc::UnboundedSender<Opened>>,
) {
    let limits = session.config.frame;
    let mut first = first;
    let error = loop {
        let bytes = match first.take() {
            Some(b) => Ok(Some(b)),
            None => tokio::select! {
                read = session.conn.read_frame(|input| match input.peek(4) {
                    Some(head) => frame_len(head, &limits)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
                    None => Ok(None),
                }) => read,
                () = session.stop.notified() => {
                    break StreamError::Connection {
                        kind: io::ErrorKind::ConnectionAborted,
                        message: "the session was closed here".into(),
                    };
                }
            },
        };
        let bytes = match bytes {
            Ok(Some(b)) => b,
            Ok(None) => {
                break StreamError::Connection {
                    kind: io::ErrorKind::UnexpectedEof,
                    message: "the peer closed the connection".into(),
                };
            }
            Err(e) => break StreamError::connection(&e),
        };
        let frame = match Frame::decode(&bytes, &limits) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "stream connection: a frame that cannot be read; closing");
                break StreamError::Connection {
                    kind: io::ErrorKind::InvalidData,
                    message: format!("a frame that cannot be read: {e}"),
                };
            }
        };
        if let Some(stream) = route(&session, frame, opened.as_ref()).await {
            // The brake for a peer that does not take part in flow control: wait for
            // room in the queue just filled (or for the stream to go).
            while !stream.has_room() && !stream.is_over() {
                tokio::select! {
                    () = session.room.notified() => {}
                    () = session.stop.notified() => {
                        session.stop.notify_one();
                        break;
                    }
                }
            }
        }
    };
    let open = {
        let mut streams = session.streams();
        streams.closed = Some(error.clone());
        std::mem::take(&mut streams.open)
    };
    let broken =
        !open.is_empty() && session.established.load(Ordering::Relaxed) && is_break(&error);
    if broken && let Some(OnBreak(f)) = lock(&session.on_break).take() {
        f();
    }
    // The flusher ends too.
    session.flush_wanted.notify_one();
    for (_, stream) in open {
        {
            let mut st = stream.state();
            if st.reset.is_none() {
                st.reset = Some(error.clone());
            }
        }
        stream.ended();
        stream.readable.notify_one();
        stream.writable.notify_one();
    }
    // What was written (an rst, a trailer) leaves before the close, unless the peer
    // does not take it in time.
    tokio::select! {
        _ = session.flush() => {}
        () = session.timer.after(CLOSING_FLUSH_WAIT) => {
            tracing::debug!("stream connection: the peer took no output before the close");
        }
    }
    session.conn.close();
}

/// The flusher: sends what senders left in the output, once per wake-up, until the
/// reader has ended (a failed send fails the connection, which the reader sees).
async fn flush_later(session: Arc<Session>) {
    loop {
        session.flush_wanted.notified().await;
        if session.streams().closed.is_some() {
            return;
        }
        if session.flush().await.is_err() {
            session.conn.close();
            return;
        }
    }
}

/// Routes one frame; returns the stream whose queue it filled, if the reader must
/// wait for room there.
async fn route(
    session: &Arc<Session>,
    frame: Frame,
    opened: Option<&mpsc::UnboundedSender<Opened>>,
) -> Option<Arc<StreamShared>> {
    let stream = session.streams().open.get(&frame.stream_id).cloned();
    let Some(stream) = stream else {
        if frame.kind == FrameKind::Header && session.side == Side::Server {
            session
                .highest
                .fetch_max(frame.stream_id, Ordering::Relaxed);
            accept(session, frame, opened).await;
        } else if session.side == Side::Server
            && frame.stream_id > session.highest.load(Ordering::Relaxed)
            && frame.kind != FrameKind::Rst
        {
            // Never opened: the peer sent a stream's frames before its header.
            let error = StreamError::Protocol(format!(
                "a {:?} frame before the stream's header",
                frame.kind
            ));
            tracing::warn!(stream = frame.stream_id, error = %error, "stream connection: resetting a stream");
            let method = frame.method.unwrap_or_default();
            session.rst_later(frame.stream_id, &method, &error);
        } else {
            // Ended here already (reset, finished): what was in flight is dropped.
            tracing::debug!(
                stream = frame.stream_id,
                kind = ?frame.kind,
                "stream connection: a frame for a stream that is not open; dropped"
            );
        }
        return None;
    };
    match frame.kind {
        FrameKind::Header => {
            if session.side == Side::Server {
                tracing::debug!(stream = stream.id, "a second header for a stream; dropped");
                return None;
            }
            header_arrived(&stream, frame).await;
            None
        }
        FrameKind::Data => data_arrived(&stream, frame.payload),
        FrameKind::Trailer => {
            if session.side == Side::Client
                && frame.meta_value(crate::refusal::HEADER_KEY)
                    == Some(crate::refusal::Refusal::Closing.as_str())
            {
                // The server is shutting down: its connection takes no new stream.
                session.closing.store(true, Ordering::Relaxed);
            }
            let end = match (BizStatus::of(&frame), frame.payload.is_empty()) {
                (Some(status), _) => Err(StreamError::Biz(status)),
                (None, true) => Ok(Metadata::from_frame(frame.meta)),
                (None, false) => Err(match read_exception(frame.payload) {
                    Ok(e) => StreamError::from_trailer(e),
                    Err(e) => StreamError::Protocol(format!("a trailer's payload: {e}")),
                }),
            };
            let over = {
                let mut st = stream.state();
                if st.peer_end.is_none() {
                    st.peer_end = Some(end);
                }
                st.is_over()
            };
            if over {
                stream.forget();
            }
            stream.readable.notify_one();
            stream.writable.notify_one();
            None
        }
        FrameKind::Rst => {
            let error = if frame.payload.is_empty() {
                StreamError::Cancelled("the peer reset the stream".into())
            } else {
                match read_exception(frame.payload) {
                    Ok(e) => StreamError::from_rst(e),
                    Err(e) => StreamError::Protocol(format!("an rst's payload: {e}")),
                }
            };
            {
                let mut st = stream.state();
                if st.reset.is_none() {
                    st.reset = Some(error);
                    st.reset_by_peer = true;
                }
            }
            stream.forget();
            stream.readable.notify_one();
            stream.writable.notify_one();
            None
        }
        FrameKind::Meta => {
            if session.side == Side::Client
                && let Some(value) = frame.meta_value(WINDOW_KEY)
            {
                window_arrived(&stream, value).await;
            }
            meta_arrived(&stream, &frame);
            None
        }
    }
}

/// A server's new stream: registered, refused beyond the limit, and handed to the
/// accept loop.
async fn accept(
    session: &Arc<Session>,
    frame: Frame,
    opened: Option<&mpsc::UnboundedSender<Opened>>,
) {
    let id = frame.stream_id;
    let method = frame.method.clone().unwrap_or_default();
    let window = match frame.meta_value(WINDOW_KEY).map(flow::parse_window) {
        None => None,
        Some(Some(Ok(w))) => Some(w),
        Some(_) => {
            refuse(
                session,
                id,
                &method,
                "its window is not a decimal number of at most 1 GiB",
            )
            .await;
            return;
        }
    };
    let service = frame
        .meta_value(str_key::SERVICE)
        .map(|s| Utf8Bytes::from(s.to_owned()));
    let (inbox, send) = match window {
        Some(w) => (Inbox::new(session.window(), true), SendWindow::new(w)),
        None => (
            Inbox::new(session.window(), false),
            Ok(SendWindow::unlimited()),
        ),
    };
    let (Ok(inbox), Ok(send)) = (inbox, send) else {
        refuse(session, id, &method, "its window is above the limit").await;
        return;
    };
    let counted = window.is_some();
    let registered = {
        let mut streams = session.streams();
        let n = streams.open.len();
        if n >= session.config.max_streams {
            Err(n)
        } else {
            let isn = service.as_deref().unwrap_or_default();
            let stream = StreamShared::new(
                id,
                method.clone(),
                isn,
                Arc::clone(session),
                inbox,
                send,
                true,
            );
            session.register(&mut streams, &stream);
            Ok(stream)
        }
    };
    let stream = match registered {
        Ok(stream) => stream,
        Err(n) => {
            tracing::warn!(
                stream = id,
                open = n,
                "stream connection: a stream beyond the limit; refused"
            );
            let why = format!("{n} streams are open on the connection, its limit");
            refuse(session, id, &method, &why).await;
            return;
        }
    };
    if counted {
        // A peer that takes part learns this side's window at once, in a meta frame:
        // the header waits for the handler's metadata, as Kitex's does.
        let mut frame = Frame::new(FrameKind::Meta, id).with_method(stream.method.clone());
        frame.meta.push((
            Utf8Bytes::from_static(WINDOW_KEY),
            Utf8Bytes::from(session.window().to_string()),
        ));
        let _ = session.send_frame(&frame).await;
    }
    let delivered = opened.is_some_and(|tx| {
        tx.send(Opened {
            stream: Arc::clone(&stream),
            header: Metadata::from_frame(frame.meta),
            service,
        })
        .is_ok()
    });
    if !delivered {
        stream.reset(StreamError::Refused(
            "the server is not accepting streams".into(),
        ));
    }
}

/// Ends a stream the server will not serve: a trailer with an exception, as a
/// handler's error travels, so that any client reads it.
async fn refuse(session: &Arc<Session>, id: i32, method: &Utf8Bytes, why: &str) {
    if let Some(m) = &session.metrics {
        m.refused();
    }
    let error = ApplicationException::new(
        ApplicationExceptionKind::InternalError,
        format!("stream refused: {why}"),
    );
    let mut frame = Frame::new(FrameKind::Trailer, id).with_method(method.clone());
    if let Ok(p) = exception_payload(&error, method, id) {
        frame.payload = p;
    }
    let _ = session.send_frame(&frame).await;
}

/// A client's stream gets the server's header. A server that has not granted a
/// window by now (Kitex's) takes no part in flow control: the client's sends are not
/// limited and its queue holds the reader when full.
async fn header_arrived(stream: &Arc<StreamShared>, frame: Frame) {
    {
        let mut st = stream.state();
        if st.peer_header.is_some() {
            return;
        }
        if !st.send_decided {
            st.send_decided = true;
            st.send = SendWindow::unlimited();
            stream
                .session
                .peer_counts
                .store(PEER_UNCOUNTED, Ordering::Relaxed);
        }
        if !st.peer_granted {
            // It counts nothing of this side's either (a server of this crate grants
            // its window before its header): the queue holds the reader.
            st.inbox.uncount();
        }
        st.peer_header = Some(Metadata::from_frame(frame.meta));
    }
    stream.readable.notify_one();
    stream.writable.notify_one();
}

/// A client's stream gets the server's window (a meta frame, before any header): it
/// counts what it sent so far against it from now on.
async fn window_arrived(stream: &Arc<StreamShared>, value: &str) {
    let decided = {
        let mut st = stream.state();
        st.peer_granted = true;
        if st.send_decided {
            // This side stopped counting before the window came.
            return;
        }
        let send = match flow::parse_window(value) {
            Some(Ok(w)) => SendWindow::new(w).map_err(protocol),
            Some(Err(e)) => Err(protocol(e)),
            None => Err(StreamError::Protocol(format!("a window of {value:?}"))),
        };
        send.map(|mut send| {
            send.spend(st.spent_before);
            st.send = send;
            st.send_decided = true;
            stream
                .session
                .peer_counts
                .store(PEER_COUNTED, Ordering::Relaxed);
        })
    };
    if let Err(e) = decided {
        stream.reset(e);
        return;
    }
    stream.writable.notify_one();
}

/// A message for a stream: queued, or the stream reset for a broken rule. Returns the
/// stream when its queue is full now (the reader waits).
fn data_arrived(stream: &Arc<StreamShared>, payload: Bytes) -> Option<Arc<StreamShared>> {
    let len = payload.len();
    let pushed = {
        let mut st = stream.state();
        if st.peer_end.is_some() {
            Err(StreamError::Protocol(
                "a message after the peer's trailer".into(),
            ))
        } else if st.reset.is_some() {
            return None;
        } else {
            st.inbox
                .push(payload)
                .map_err(protocol)
                .map(|()| !st.inbox.has_room())
        }
    };
    match pushed {
        Ok(full) => {
            if let Some(m) = &stream.session.metrics {
                m.received.inc();
                m.received_bytes.inc_by(len as u64);
            }
            if !stream.span.is_disabled() {
                tracing::trace!(parent: &stream.span, bytes = len, "stream message received");
            }
            stream.readable.notify_one();
            full.then(|| Arc::clone(stream))
        }
        Err(e) => {
            tracing::warn!(stream = stream.id, error = %e, "stream connection: resetting a stream");
            stream.reset(e);
            None
        }
    }
}

/// A meta frame: credit granted, or a window acknowledged.
fn meta_arrived(stream: &Arc<StreamShared>, frame: &Frame) {
    if frame.meta_value(UNCOUNTED_KEY).is_some() && stream.session.side == Side::Server {
        // The client stopped counting (it did not get this side's window in time):
        // its messages are held by the reader from now on.
        stream.state().inbox.uncount();
    }
    if let Some(value) = frame.meta_value(CREDIT_KEY) {
        let granted = match flow::parse_window(value) {
            Some(Ok(n)) => stream.state().send.grant(n).map_err(protocol),
            _ => Err(StreamError::Protocol(format!("a credit of {value:?}"))),
        };
        match granted {
            Ok(()) => stream.writable.notify_one(),
            Err(e) => stream.reset(e),
        }
    }
}
