//! One connection's streams on tokio: the driver of a [`StreamCore`], which holds
//! every rule of the connection (see [`core`](super::core)).
//!
//! A session owns the connection and its core, behind one lock. Three tasks serve
//! it: the reader cuts frames ([`frame_len`]) and gives each to the core, then
//! hands the streams a server's peer opened to its accept loop; the flusher sends
//! what the core and the streams' senders left in the output, once per wake-up, so
//! that the frames of many streams share a send; the timekeeper sleeps on the
//! session's [`Timer`] until the core's next deadline (a stream's, the wait for a
//! server's window) and tells the core the time then. A stream's halves call the
//! core under the lock, writing straight into the connection's output, and wait
//! on the stream's wake-ups, which the core's events fire.
//!
//! The reader never waits for a stream's application, except for a peer that does
//! not take part in flow control (Kitex) whose stream's queue is full: the core
//! says so ([`StreamCore::wants_frame`]) and the reader waits until it has room.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use thrift_codec::{LinkBuffer, Utf8Bytes};
use tokio::sync::{Notify, mpsc};

use super::StreamConfig;
use super::core::{Accepted, Event, Side, StreamCore};
use super::error::{Metadata, StreamError};
use super::frame::frame_len;
pub(crate) use super::shared::StreamShared;
pub(crate) use super::timer::Timer;
use crate::metrics::StreamCounters;
use crate::transport::{Conn, FrameIo, lock};

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
    inner: Mutex<Inner>,
    /// One flush at a time; a flush sends what every writer put in the output.
    flushing: tokio::sync::Mutex<()>,
    /// Told when the reader, held by a full queue, may read again.
    room: Notify,
    /// Tells the reader to stop.
    stop: Notify,
    /// The clock of the core's deadlines and of the closing wait.
    pub(super) timer: Timer,
    /// This side's stream counters, when metrics are on.
    pub(super) metrics: Option<StreamCounters>,
    /// Tells the flusher that frames wait in the output.
    pub(super) flush_wanted: Notify,
    /// Tells the timekeeper that the core's next deadline came sooner than the
    /// one it waits for (or that the connection ended).
    sooner: Notify,
    /// Called once if the connection breaks under open streams.
    on_break: Mutex<Option<OnBreak>>,
}

/// What the session's lock guards: the core, and what the driver keeps beside it.
#[derive(Debug)]
pub(super) struct Inner {
    pub(super) core: StreamCore,
    /// The wake-ups and span of each stream the application holds.
    signals: HashMap<i32, Arc<Signals>>,
    /// Streams the peer opened, for the reader to hand over.
    accepted: Vec<Accepted>,
    /// The deadline the timekeeper waits for.
    armed: Option<Instant>,
}

/// A stream's wake-ups and its `rpc.stream` span.
#[derive(Debug)]
pub(super) struct Signals {
    /// Told when a message, the peer's header, its trailer or an error arrives.
    pub(super) readable: Notify,
    /// Told when credit arrives, the send window is decided, or the stream ends.
    pub(super) writable: Notify,
    pub(super) span: tracing::Span,
}

/// What a session calls when its connection breaks under open streams.
struct OnBreak(Box<dyn FnOnce() + Send>);

impl std::fmt::Debug for OnBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnBreak")
    }
}

/// What a session must do once its lock is let go, from the core's events.
#[derive(Default)]
struct After {
    broken: bool,
    idle: bool,
}

/// What an operation left in the connection's output.
#[derive(Debug, Clone, Copy)]
pub(super) struct Wrote {
    /// It wrote something.
    pub(super) any: bool,
    /// Bytes waiting in the output now.
    pub(super) pending: usize,
}

/// Bytes waiting in a connection's output above which a sender flushes itself (and
/// waits for the socket) instead of leaving it to the flusher.
pub(super) const FLUSH_HIGH_WATER: usize = 256 * 1024;

/// Longest a session that closes its connection waits for the peer to take what is
/// still in its output (an rst, a trailer).
pub(crate) const CLOSING_FLUSH_WAIT: Duration = Duration::from_secs(1);

impl Session {
    /// A client's session on `conn`, its tasks started. `reactor` (the netpoll-rs
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
        let session = Session::new(conn, Side::Client, config, timer, metrics);
        let reader = read_frames(Arc::clone(&session), None, None);
        tokio::spawn(async move {
            reader.await;
            drop(reactor);
        });
        session
    }

    /// A server's session on `conn`, whose first frame was `first`, its tasks
    /// started: the streams clients open go to `opened`.
    pub(crate) fn server(
        conn: Conn,
        config: StreamConfig,
        first: Bytes,
        opened: mpsc::UnboundedSender<Opened>,
        metrics: Option<StreamCounters>,
    ) -> Arc<Session> {
        let session = Session::new(conn, Side::Server, config, Timer::default(), metrics);
        tokio::spawn(read_frames(Arc::clone(&session), Some(first), Some(opened)));
        session
    }

    /// A session with its flusher and timekeeper started (its reader is the
    /// caller's to start).
    fn new(
        conn: Conn,
        side: Side,
        config: StreamConfig,
        timer: Timer,
        metrics: Option<StreamCounters>,
    ) -> Arc<Session> {
        let session = Arc::new(Session {
            conn,
            side,
            config,
            inner: Mutex::new(Inner {
                core: StreamCore::new(side, config),
                signals: HashMap::new(),
                accepted: Vec::new(),
                armed: None,
            }),
            flushing: tokio::sync::Mutex::new(()),
            room: Notify::new(),
            stop: Notify::new(),
            timer,
            metrics,
            flush_wanted: Notify::new(),
            sooner: Notify::new(),
            on_break: Mutex::new(None),
        });
        tokio::spawn(flush_later(Arc::clone(&session)));
        tokio::spawn(keep_time(Arc::clone(&session)));
        session
    }

    pub(super) fn inner(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// Runs `f` on the core with the connection's output, then acts on the core's
    /// events: wakes the streams concerned, counts, and, once the lock is let go,
    /// tells of a break or stops an idle connection.
    pub(super) fn with_core<R>(
        &self,
        f: impl FnOnce(&mut StreamCore, &mut LinkBuffer) -> R,
    ) -> (R, Wrote) {
        let mut after = After::default();
        let done = {
            let mut inner = self.inner();
            let done = self.conn.write_with(|out| {
                let before = out.len();
                let r = f(&mut inner.core, out);
                let wrote = Wrote {
                    any: out.len() > before,
                    pending: out.len(),
                };
                (r, wrote)
            });
            self.settle(&mut inner, &mut after);
            done
        };
        self.act(after);
        done
    }

    /// Tells of a break, or stops an idle connection (with the lock let go).
    fn act(&self, after: After) {
        if after.broken
            && let Some(OnBreak(f)) = lock(&self.on_break).take()
        {
            f();
        }
        if after.idle {
            self.stop();
        }
    }

    /// The application let stream `id` go: the core forgets it.
    pub(super) fn release(&self, id: i32) {
        let mut after = After::default();
        {
            let mut inner = self.inner();
            inner.core.release(id);
            self.settle(&mut inner, &mut after);
            inner.signals.remove(&id);
        }
        self.act(after);
    }

    /// Acts on the core's events (under the lock).
    fn settle(&self, inner: &mut Inner, after: &mut After) {
        while let Some(event) = inner.core.poll_event() {
            let signals = |id| inner.signals.get(&id);
            match event {
                Event::Opened(accepted) => {
                    if let Some(m) = &self.metrics {
                        m.open.inc();
                    }
                    inner.accepted.push(accepted);
                }
                Event::Refused(_) => {
                    if let Some(m) = &self.metrics {
                        m.refused();
                    }
                }
                Event::Message { id, len } => {
                    if let Some(m) = &self.metrics {
                        m.received.inc();
                        m.received_bytes.inc_by(len as u64);
                    }
                    if let Some(s) = signals(id) {
                        if !s.span.is_disabled() {
                            tracing::trace!(parent: &s.span, bytes = len, "stream message received");
                        }
                        s.readable.notify_one();
                    }
                }
                Event::Readable(id) => {
                    if let Some(s) = signals(id) {
                        s.readable.notify_one();
                    }
                }
                Event::Writable(id) => {
                    if let Some(s) = signals(id) {
                        s.writable.notify_one();
                    }
                }
                Event::Ended { id, outcome } => {
                    if let Some(m) = &self.metrics {
                        m.ended(outcome);
                    }
                    if let Some(s) = signals(id)
                        && !s.span.is_disabled()
                    {
                        match outcome {
                            "ok" => s.span.record("otel.status_code", "OK"),
                            failure => s
                                .span
                                .record("otel.status_code", "ERROR")
                                .record("error.type", failure),
                        };
                    }
                }
                Event::Room => self.room.notify_one(),
                Event::Broken => after.broken = true,
                Event::Idle => after.idle = true,
            }
        }
        let due = inner.core.poll_timeout();
        if due.is_some_and(|due| inner.armed.is_none_or(|at| due < at)) {
            self.sooner.notify_one();
        }
    }

    /// A stream's halves' state for stream `id`, kept with the core's until the
    /// last half goes.
    fn adopt(
        self: &Arc<Self>,
        inner: &mut Inner,
        id: i32,
        method: Utf8Bytes,
        service: &str,
    ) -> Arc<StreamShared> {
        let span = tracing::info_span!(
            "rpc.stream",
            otel.name = %format_args!("{service}/{method}"),
            otel.kind = match self.side {
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
        let signals = Arc::new(Signals {
            readable: Notify::new(),
            writable: Notify::new(),
            span,
        });
        inner.signals.insert(id, Arc::clone(&signals));
        Arc::new(StreamShared::new(id, method, Arc::clone(self), signals))
    }

    /// Whether streams can still be opened on it.
    pub(crate) fn is_open(&self) -> bool {
        self.inner().core.is_open() && self.conn.is_open()
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
        self.inner().core.open_streams()
    }

    /// Stops the reader: every stream fails, what is in the output is sent (for at
    /// most [`CLOSING_FLUSH_WAIT`]), and the connection closes.
    pub(crate) fn stop(&self) {
        self.stop.notify_one();
    }

    /// Opens a stream (client side): registers it and sends its header. With a
    /// `timeout`, the stream is reset (Kitex's deadline code) once it has passed on
    /// the session's clock.
    pub(crate) async fn open(
        self: &Arc<Self>,
        method: Utf8Bytes,
        service: &str,
        header: &Metadata,
        timeout: Option<Duration>,
    ) -> Result<Arc<StreamShared>, StreamError> {
        let deadline = timeout.map(|t| self.timer.now() + t);
        let mut after = After::default();
        let stream = {
            let mut inner = self.inner();
            let opened = self.conn.write_with(|out| {
                (inner.core).open(out, method.clone(), service, header, deadline)
            });
            let stream = opened.map(|id| self.adopt(&mut inner, id, method, service));
            self.settle(&mut inner, &mut after);
            stream
        };
        self.act(after);
        let stream = stream?;
        if let Some(m) = &self.metrics {
            m.open.inc();
        }
        // A connection that fails while the header is written fails before it left.
        if let Err(e) = self.flush().await {
            stream.forget();
            return Err(e);
        }
        Ok(stream)
    }

    /// Sends what is in the output, after any flush in progress.
    pub(crate) async fn flush(&self) -> Result<(), StreamError> {
        let _turn = self.flushing.lock().await;
        self.conn
            .flush()
            .await
            .map_err(|e| StreamError::connection(&e))
    }

    /// Calls `f` once if the connection breaks (fails, or the peer closes it) while
    /// streams are open on it, one of which was opened; not when this side closes it.
    pub(crate) fn on_break(&self, f: Box<dyn FnOnce() + Send>) {
        *lock(&self.on_break) = Some(OnBreak(f));
    }

    /// Its client is gone: the connection closes once no stream is open on it.
    pub(crate) fn orphan(&self) {
        self.with_core(|core, _| core.orphan());
    }

    /// Hands the streams the peer opened to the accept loop; one it cannot take is
    /// refused.
    fn hand_over(self: &Arc<Self>, opened: Option<&mpsc::UnboundedSender<Opened>>) {
        let accepted = std::mem::take(&mut self.inner().accepted);
        for a in accepted {
            let service = a.service.as_deref().unwrap_or_default();
            let stream = self.adopt(&mut self.inner(), a.id, a.method, service);
            let delivered = opened.is_some_and(|tx| {
                tx.send(Opened {
                    stream: Arc::clone(&stream),
                    header: a.header,
                    service: a.service,
                })
                .is_ok()
            });
            if !delivered {
                stream.reset(StreamError::Refused(
                    "the server is not accepting streams".into(),
                ));
            }
        }
    }
}

/// The error of a session this side stopped.
fn closed_here() -> StreamError {
    StreamError::Connection {
        kind: io::ErrorKind::ConnectionAborted,
        message: "the session was closed here".into(),
    }
}

/// The reader: gives the core frames until the connection ends or the session is
/// stopped, then fails every stream still open, sends what the output holds
/// (waiting at most [`CLOSING_FLUSH_WAIT`] on the session's clock for a peer that
/// does not read), and closes the connection.
async fn read_frames(
    session: Arc<Session>,
    first: Option<Bytes>,
    opened: Option<mpsc::UnboundedSender<Opened>>,
) {
    let limits = session.config.frame;
    let mut first = first;
    let error = loop {
        if !session.inner().core.wants_frame() {
            // A peer that does not take part in flow control filled a queue: the
            // only brake it leaves.
            tokio::select! {
                () = session.room.notified() => continue,
                () = session.stop.notified() => break closed_here(),
            }
        }
        let bytes = match first.take() {
            Some(b) => Ok(Some(b)),
            None => tokio::select! {
                read = session.conn.read_frame(|input| match input.peek(4) {
                    Some(head) => frame_len(head, &limits)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
                    None => Ok(None),
                }) => read,
                () = session.stop.notified() => break closed_here(),
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
        let now = session.timer.now();
        let (handled, wrote) = session.with_core(|core, out| core.handle_input(out, &bytes, now));
        session.hand_over(opened.as_ref());
        if let Err(e) = handled {
            break e;
        }
        if wrote.any {
            session.flush_wanted.notify_one();
        }
    };
    session.with_core(|core, _| core.connection_lost(error));
    // The flusher and the timekeeper end too.
    session.flush_wanted.notify_one();
    session.sooner.notify_one();
    drop(opened);
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
/// connection has ended (a failed send fails the connection, which the reader
/// sees).
async fn flush_later(session: Arc<Session>) {
    loop {
        session.flush_wanted.notified().await;
        if session.inner().core.closed().is_some() {
            return;
        }
        if session.flush().await.is_err() {
            session.conn.close();
            return;
        }
    }
}

/// The timekeeper: sleeps until the core's next deadline and tells the core the
/// time then, until the connection has ended.
async fn keep_time(session: Arc<Session>) {
    loop {
        let due = {
            let mut inner = session.inner();
            if inner.core.closed().is_some() {
                return;
            }
            inner.armed = inner.core.poll_timeout();
            inner.armed
        };
        let Some(at) = due else {
            session.sooner.notified().await;
            continue;
        };
        tokio::select! {
            () = session.timer.sleep_until(at) => {
                let now = session.timer.now();
                let (_, wrote) = session.with_core(|core, out| core.handle_timeout(out, now));
                if wrote.any {
                    session.flush_wanted.notify_one();
                }
            }
            () = session.sooner.notified() => {}
        }
    }
}
