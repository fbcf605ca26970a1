//! Handlers that run on the poller itself, in the manner of Netpoll's `OnRequest`.
//!
//! The async face ([`Connection::read_frame`](crate::Connection::read_frame) and
//! [`flush`](crate::Connection::flush)) hands every frame from the poller to a tokio task
//! through a waker. For work that is short and never waits (an echo, a proxy that
//! forwards frames, a client's closed loop), that hand-over is most of the cost. A
//! [`Handler`] skips it: the poller calls it right after it read new input, with the
//! connection's input and output buffers, and sends what it wrote with an inline
//! vectored send (`sendmsg`) as soon as it returns. No task, no waker, no thread
//! switch.
//!
//! The price is the poller's time: while a handler runs, no other connection of that
//! poller is served, so a handler must not block or compute for long (hand such work to
//! a runtime instead, as the async face does).
//!
//! # Deadlines
//!
//! A handler can ask to be called at a time of its choosing, to end a connection that
//! sent nothing for too long or a request that took too long, with no timer or task of
//! its own: [`Io::wake_at`] sets the connection's one deadline, and once it has passed
//! the poller calls [`Handler::on_timer`]. The poller keeps every connection's deadline
//! in one heap, and waits in `epoll_wait` (or, on a runtime, on one sleep) no longer
//! than the earliest of them. [`Io::now`] is the time the poller read once for its
//! turn, so handlers need not read a clock: a deadline is `io.now() + timeout`.
//!
//! A deadline fires at the poller's first turn at or after it: never early, and late by
//! the time the poller takes to get there (a millisecond of timer granularity, plus the
//! other connections' work in that turn). A connection that closed fires no deadline.
//! To arm a deadline before the first input arrives, call
//! [`InlineHandle::resume`](crate::InlineHandle::resume) after
//! [`serve_inline`](crate::Connection::serve_inline): the handler is called with no new
//! input and sets it there.

use std::io;
use std::time::Instant;

use thrift_wire::LinkBuffer;

/// Serves a connection from the poller (see [`Connection::serve_inline`]).
///
/// [`Connection::serve_inline`]: crate::Connection::serve_inline
pub trait Handler: Send + 'static {
    /// New input is in `io.input()`, or the peer closed its side
    /// ([`Io::peer_closed`]). Take whole frames from the input (what is left stays for
    /// the next call) and write answers into `io.output()`: they are sent when this
    /// returns. Called again only when more input arrives.
    fn on_input(&mut self, io: &mut Io<'_>);

    /// The deadline set with [`Io::wake_at`] has passed (`io.now()` is at or after it).
    /// The deadline is cleared before the call: set a new one to be called again. What
    /// is written to `io.output()` is sent when this returns, and [`Io::close`] closes
    /// the connection, as from [`on_input`](Self::on_input). Not called once the
    /// connection is closing (after `Io::close` or the peer's close). Does nothing by
    /// default.
    fn on_timer(&mut self, io: &mut Io<'_>) {
        let _ = io;
    }

    /// The connection closed: after [`Io::close`] or the peer's close (once the output
    /// was sent), on a socket error (`Some`), or when the reactor shut down. Called once;
    /// the handler is dropped after it.
    fn on_close(&mut self, error: Option<io::Error>) {
        let _ = error;
    }
}

/// A handler's view of its connection during [`Handler::on_input`] and
/// [`Handler::on_timer`].
#[derive(Debug)]
pub struct Io<'a> {
    pub(crate) input: &'a mut LinkBuffer,
    pub(crate) output: &'a mut LinkBuffer,
    pub(crate) peer_closed: bool,
    pub(crate) close: bool,
    pub(crate) need: usize,
    pub(crate) now: Instant,
    /// The connection's deadline: its current one going in, the one to keep coming out.
    pub(crate) deadline: Option<Instant>,
}

impl Io<'_> {
    /// The bytes received and not yet taken (`peek`, `next`, `skip`...).
    pub fn input(&mut self) -> &mut LinkBuffer {
        self.input
    }

    /// The output buffer (`insert` for zero-copy `Bytes`, `write`, `malloc`...); it is
    /// flushed when the handler returns.
    pub fn output(&mut self) -> &mut LinkBuffer {
        self.output
    }

    /// The peer closed its side: no more input comes. The connection closes once the
    /// output is sent.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// Closes the connection once the output written so far is sent; the handler is not
    /// called again.
    pub fn close(&mut self) {
        self.close = true;
    }

    /// The frame at the front of the input is `total` bytes long: keep reading until it
    /// is all there even past [`Config::input_high_water`](crate::Config). Holds until
    /// the next call.
    pub fn need(&mut self, total: usize) {
        self.need = total;
    }

    /// The time now, as far as deadlines go: on the poller, the clock reading it took
    /// once for this turn (shared by every handler it calls in the turn); when the
    /// handler is called from [`serve_inline`](crate::Connection::serve_inline) or
    /// [`InlineHandle::resume`](crate::InlineHandle::resume), a reading taken for that
    /// call.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Sets the connection's one deadline, replacing any earlier one (earlier or later
    /// than it); `None` clears it. Once `at` has passed, the poller calls
    /// [`Handler::on_timer`]. A deadline already past fires on the poller's next turn.
    pub fn wake_at(&mut self, at: Option<Instant>) {
        self.deadline = at;
    }

    /// The deadline set now (by [`wake_at`](Self::wake_at) in this call or an earlier
    /// one), if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}
