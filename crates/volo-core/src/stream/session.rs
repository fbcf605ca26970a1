//! One connection's streams on tokio: the driver of a [`StreamCore`], which holds
//! every rule of the connection (see [`core`](super::core)).
//!
//! A session owns the connection and its core, behind one lock. Its reader
//! ([`Session::read`]) cuts frames ([`frame_len`](super::frame::frame_len)) and
//! gives each to the core; its timekeeper task sleeps on the session's [`Timer`]
//! until the core's next deadline (a stream's, the wait for a server's window) and
//! tells the core the time then. A stream's halves call the core under the lock,
//! writing straight into the connection's output, and wait on the stream's
//! wake-ups, which the core's events fire.
//!
//! A client's session runs its reader in a task, and a flusher task sends what
//! the streams left in the output, once per wake-up. A server's is driven by its
//! accept loop, in one task with the streams' handlers
//! ([`Session::server`]): the loop takes every frame that has arrived, polls the
//! handlers those frames woke, and then flushes once, so the answers of the
//! streams of one connection leave together, as the replies of a mux connection do.
//!
//! The reader never waits for a stream's application, except for a peer that does
//! not take part in flow control (Kitex) whose stream's queue is full: the core
//! says so ([`StreamCore::wants_frame`]) and the reader waits until it has room.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::task::AtomicWaker;
use thrift_wire::{LinkBuffer, Utf8Bytes};
use tokio::sync::Notify;

use super::StreamConfig;
use super::core::{Accepted, Event, Side, StreamCore};
use super::error::StreamError;
pub(crate) use super::timer::Timer;
use crate::metrics::StreamCounters;
use crate::transport::{Conn, FrameIo, lock};

/// One connection's streams.
#[derive(Debug)]
pub(crate) struct Session {
    pub(super) conn: Conn,
    side: Side,
    pub(super) config: StreamConfig,
    inner: Mutex<Inner>,
    /// One flush at a time; a flush sends what every writer put in the output.
    flushing: tokio::sync::Mutex<()>,
    /// Told when the reader, held by a full queue, may read again.
    pub(super) room: Notify,
    /// Tells the reader to stop.
    pub(super) stop: Notify,
    /// The clock of the core's deadlines and of the closing wait.
    pub(super) timer: Timer,
    /// This side's stream counters, when metrics are on.
    pub(super) metrics: Option<StreamCounters>,
    /// Tells the flusher that frames wait in the output (a client's).
    pub(super) flush_wanted: Notify,
    /// Frames wait in the output for the driver's flush (a driven session's).
    dirty: AtomicBool,
    /// The driver, waiting for something to flush (a driven session's).
    driver: AtomicWaker,
    /// Told (all waiters) after each of the driver's flushes, and when the
    /// connection ends: senders far ahead of the socket wait for it.
    pub(super) flushed: Notify,
    /// Tells the timekeeper that the core's next deadline came sooner than the
    /// one it waits for (or that the connection ended).
    pub(super) sooner: Notify,
    /// Called once if the connection breaks under open streams.
    on_break: Mutex<Option<OnBreak>>,
    /// Its caller flushes, once per turn ([`server`](Self::server)); no flusher.
    pub(super) driven: bool,
    /// Becomes `true` once the connection is closed ([`end`](Self::end)).
    pub(super) closed: tokio::sync::watch::Sender<bool>,
}

/// What the session's lock guards: the core, and what the driver keeps beside it.
#[derive(Debug)]
pub(super) struct Inner {
    pub(super) core: StreamCore,
    /// The wake-ups and span of each stream the application holds.
    pub(super) signals: HashMap<i32, Arc<Signals>>,
    /// Streams the peer opened, for the reader to hand over.
    pub(super) accepted: Vec<Accepted>,
    /// The deadline the timekeeper waits for.
    pub(super) armed: Option<Instant>,
    /// Where operations that seldom write write ([`Session::with_core`]).
    aside: LinkBuffer,
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
pub(super) struct After {
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
    /// A session on `conn`, its tasks not started ([`client`](Self::client) and
    /// [`server`](Self::server) start them): its caller flushes when `driven`, a
    /// flusher task otherwise.
    pub(super) fn new(
        conn: Conn,
        side: Side,
        config: StreamConfig,
        timer: Timer,
        metrics: Option<StreamCounters>,
        driven: bool,
    ) -> Arc<Session> {
        Arc::new(Session {
            conn,
            side,
            config,
            inner: Mutex::new(Inner {
                core: StreamCore::new(side, config),
                signals: HashMap::new(),
                accepted: Vec::new(),
                armed: None,
                aside: LinkBuffer::new(),
            }),
            flushing: tokio::sync::Mutex::new(()),
            room: Notify::new(),
            stop: Notify::new(),
            timer,
            metrics,
            flush_wanted: Notify::new(),
            dirty: AtomicBool::new(false),
            driver: AtomicWaker::new(),
            flushed: Notify::new(),
            sooner: Notify::new(),
            on_break: Mutex::new(None),
            driven,
            closed: tokio::sync::watch::Sender::new(false),
        })
    }

    pub(super) fn inner(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// Runs `f` on the core with an output of the session's own, moved into the
    /// connection's output only if `f` wrote there (most operations write nothing:
    /// taking a message, a data frame arriving), then acts on the core's events as
    /// [`with_output`](Self::with_output) does. The move happens under the core's
    /// lock, so frames keep their order.
    pub(super) fn with_core<R>(
        &self,
        f: impl FnOnce(&mut StreamCore, &mut LinkBuffer) -> R,
    ) -> (R, Wrote) {
        let mut after = After::default();
        let done = {
            let mut guard = self.inner();
            let inner = &mut *guard;
            let r = f(&mut inner.core, &mut inner.aside);
            let wrote = match inner.aside.is_empty() {
                true => Wrote {
                    any: false,
                    pending: 0,
                },
                false => self.conn.write_with(|out| {
                    while let Some(node) = inner.aside.pop_node() {
                        out.insert(node);
                    }
                    Wrote {
                        any: true,
                        pending: out.len(),
                    }
                }),
            };
            self.settle(inner, &mut after);
            (r, wrote)
        };
        self.act(after);
        done
    }

    /// Runs `f` on the core with the connection's output (for a message, encoded
    /// straight into it), then acts on the core's events: wakes the streams
    /// concerned, counts, and, once the lock is let go, tells of a break or stops
    /// an idle connection.
    pub(super) fn with_output<R>(
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
    pub(super) fn act(&self, after: After) {
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
    pub(super) fn settle(&self, inner: &mut Inner, after: &mut After) {
        while let Some(event) = inner.core.poll_event() {
            match event {
                Event::Opened(accepted) => {
                    if let Some(m) = &self.metrics {
                        m.open.inc();
                    }
                    // Its wake-ups and span now: frames read in the same turn may
                    // be for it already.
                    let service = accepted.service.as_deref().unwrap_or_default();
                    self.signals(inner, accepted.id, &accepted.method, service);
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
                    if let Some(s) = inner.signals.get(&id) {
                        if !s.span.is_disabled() {
                            tracing::trace!(parent: &s.span, bytes = len, "stream message received");
                        }
                        s.readable.notify_one();
                    }
                }
                Event::Readable(id) => {
                    if let Some(s) = inner.signals.get(&id) {
                        s.readable.notify_one();
                    }
                }
                Event::Writable(id) => {
                    if let Some(s) = inner.signals.get(&id) {
                        s.writable.notify_one();
                    }
                }
                Event::Ended { id, outcome } => {
                    if let Some(m) = &self.metrics {
                        m.ended(outcome);
                    }
                    if let Some(s) = inner.signals.get(&id)
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

    /// The wake-ups and span of stream `id`, kept until the last of its halves
    /// goes.
    pub(super) fn signals(
        &self,
        inner: &mut Inner,
        id: i32,
        method: &Utf8Bytes,
        service: &str,
    ) -> Arc<Signals> {
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
        signals
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

    /// Sends what is in the output, after any flush in progress.
    pub(crate) async fn flush(&self) -> Result<(), StreamError> {
        let _turn = self.flushing.lock().await;
        let flushed = self.conn.flush().await;
        self.flushed.notify_waiters();
        flushed.map_err(|e| StreamError::connection(&e))
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

    /// Waits until the connection is closed: its reader has ended and what was in
    /// its output (an rst, a trailer) has been sent, or the closing wait passed.
    pub(crate) async fn closed(&self) {
        let mut closed = self.closed.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = closed.wait_for(|closed| *closed).await;
    }

    /// Asks for what waits in the output to be sent: by the flusher, or (driven)
    /// by the driver once its turn is over.
    pub(super) fn want_flush(&self) {
        if !self.driven {
            self.flush_wanted.notify_one();
        } else if !self.dirty.swap(true, Ordering::AcqRel)
            && let Some(driver) = self.driver.take()
        {
            // Written outside the driver's turn (its turn takes the waker first).
            driver.wake();
        }
    }

    /// (Driven) A turn begins: what the turn writes needs no wake-up, as the
    /// driver looks at the end of it ([`poll_flush_wanted`](Self::poll_flush_wanted)).
    pub(crate) fn begin_turn(&self) {
        drop(self.driver.take());
    }

    /// (Driven) Ready once something waits in the output for a flush; until then
    /// `cx` is woken when something is written.
    pub(crate) fn poll_flush_wanted(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.driver.register(cx.waker());
        if self.dirty.swap(false, Ordering::AcqRel) {
            drop(self.driver.take());
            return Poll::Ready(());
        }
        Poll::Pending
    }
}
