//! A connection: its socket, its input and output `LinkBuffer`s, and the async face that
//! tokio tasks use.

use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::{Buf, Bytes};
use mio::Token;
use thrift_codec::LinkBuffer;

use crate::config::Config;
use crate::handler::{Handler, Io};
use crate::poller::{PollerShared, lock};
use crate::pool::Class;
use crate::sys::Stream;
use crate::timer::{self, Due};

/// The most `iovec`s one `sendmsg` takes (`Config::max_iovecs` is clamped to this).
pub(crate) const MAX_IOVECS: usize = 64;

/// What the poller thread and the connection's users share.
#[derive(Debug)]
pub(crate) struct ConnShared {
    pub(crate) token: Token,
    pub(crate) poller: Arc<PollerShared>,
    pub(crate) state: Mutex<ConnState>,
}

#[derive(Debug)]
pub(crate) struct ConnState {
    /// `None` once closed.
    stream: Option<Stream>,
    input: LinkBuffer,
    /// The pool class of the input's tail block.
    input_class: Class,
    output: LinkBuffer,
    /// Edge-triggered readiness kept in user space: an edge arrived and no read has
    /// since found the socket empty.
    readable: bool,
    /// A write stopped short (`EAGAIN`); the rest goes when the socket is writable.
    write_pending: bool,
    /// The peer closed its side and everything before that was read.
    eof: bool,
    /// An event reported the peer's close (or a socket error): read until end of stream.
    peer_closed: bool,
    /// The first socket error, kept for every later call.
    error: Option<(io::ErrorKind, String)>,
    /// Input a waiting reader needs (0 when none waits): the poller wakes it only when
    /// that much is there, or on end of stream or error.
    want: usize,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
    /// Served by a [`Handler`] on the poller ([`Connection::serve_inline`]); stays set
    /// after the handler is gone.
    inline: bool,
    handler: Option<BoxedHandler>,
    /// Input length when the handler last returned: it is called again when there is
    /// more.
    handled_len: usize,
    /// The handler was told of the end of stream.
    handler_saw_eof: bool,
    /// [`InlineHandle::resume`] asked for a call of the handler, new input or not.
    resumed: bool,
    /// The handler (or the peer) ended the connection: no more reads or handler calls;
    /// it closes once the output is sent.
    closing: bool,
    /// The handler's deadline ([`Io::wake_at`]); the poller's timers hold an entry at
    /// or before it.
    deadline: Option<Instant>,
}

/// Which of the handler's methods a call is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Input,
    Timer,
}

/// Where a handler is called from, and when.
#[derive(Debug, Clone, Copy)]
struct Turn {
    /// What the handler sees as [`Io::now`].
    now: Instant,
    /// On the poller itself, which looks at its timers before it waits again; from
    /// anywhere else, the poller must be woken for a deadline earlier than all others.
    on_poller: bool,
}

impl Turn {
    /// A call from outside the poller ([`Connection::serve_inline`],
    /// [`InlineHandle::resume`]), with a clock reading of its own.
    fn elsewhere() -> Self {
        Turn {
            now: Instant::now(),
            on_poller: false,
        }
    }
}

/// A handler, boxed (`dyn Handler` has no `Debug`).
struct BoxedHandler(Box<dyn Handler>);

impl std::fmt::Debug for BoxedHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handler")
    }
}

impl ConnState {
    pub(crate) fn new(stream: Stream) -> Self {
        ConnState {
            stream: Some(stream),
            input: LinkBuffer::new(),
            input_class: None,
            output: LinkBuffer::new(),
            readable: false,
            write_pending: false,
            eof: false,
            peer_closed: false,
            error: None,
            want: 0,
            read_waker: None,
            write_waker: None,
            inline: false,
            handler: None,
            handled_len: 0,
            handler_saw_eof: false,
            resumed: false,
            closing: false,
            deadline: None,
        }
    }

    pub(crate) fn stream_mut(&mut self) -> Option<&mut Stream> {
        self.stream.as_mut()
    }

    fn error(&self) -> Option<io::Error> {
        self.error
            .as_ref()
            .map(|(kind, msg)| io::Error::new(*kind, msg.clone()))
    }

    fn fail(&mut self, e: &io::Error) {
        if self.error.is_none() {
            self.error = Some((e.kind(), e.to_string()));
        }
        self.readable = false;
    }

    /// How much input may pile up: the high-water mark, or more when one frame needs it.
    fn input_limit(&self, high_water: usize) -> usize {
        high_water.max(self.want)
    }

    /// Reading stops: the input is at its limit, the connection is closing, or (for an
    /// inline handler, which writes without waiting) the peer does not take the output
    /// and that is above the high-water mark too, so a peer that sends without reading
    /// cannot make the output grow without bound.
    fn read_paused(&self, high_water: usize) -> bool {
        self.input.len() >= self.input_limit(high_water)
            || self.closing
            || (self.inline && self.write_pending && self.output.len() >= high_water)
    }

    /// Reads while the socket has data, at most `reads_per_turn` times and up to the
    /// input limit. Returns whether anything changed for a reader.
    fn fill(&mut self, poller: &PollerShared) -> bool {
        let Config {
            reads_per_turn,
            input_high_water,
            ..
        } = *poller.config;
        let mut changed = false;
        for _ in 0..reads_per_turn {
            // After end of stream or an error there is nothing more to read, however many
            // events (a later WRITABLE still carries RDHUP) mark the socket readable.
            if self.eof || self.error.is_some() {
                self.readable = false;
                break;
            }
            if !self.readable || self.read_paused(input_high_water) {
                break;
            }
            if self.stream.is_none() {
                break;
            }
            let asked = self.make_room(poller);
            let Some(stream) = self.stream.as_mut() else {
                break;
            };
            match stream.read_into(self.input.tail_mut(), asked) {
                Ok(0) => {
                    self.eof = true;
                    self.readable = false;
                    changed = true;
                }
                Ok(n) => {
                    changed = true;
                    // A short read emptied the socket; the next arrival is a new edge.
                    // Not so once the peer closed: its end of stream (or the error)
                    // behind the data already raised its edge, and no other comes.
                    if n < asked && !self.peer_closed {
                        self.readable = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.fail(&e);
                    changed = true;
                }
            }
        }
        changed
    }

    /// After a consumer took input: reading resumes if the high-water mark had paused
    /// it, and when all input is consumed and no read follows at once, the input block
    /// goes back to the pool, so an idle connection holds none.
    fn consumed(&mut self, poller: &PollerShared) {
        self.fill(poller);
        self.give_back_block(poller);
    }

    fn give_back_block(&mut self, poller: &PollerShared) {
        if self.input.is_empty() && !self.readable && self.input.tail_mut().capacity() > 0 {
            let block = std::mem::take(self.input.tail_mut());
            poller.pool.give(block, self.input_class.take());
        }
    }

    /// Readies the input's tail block for the next read and returns how many bytes to
    /// ask for. The block needs room for the rest of the frame a reader awaits, when its
    /// length is known, else for a quarter of a read chunk. A block whose frames are all
    /// gone is reused in place; otherwise the tail moves to a pooled block of the class
    /// that holds the whole frame (or a read chunk), taking the unconsumed bytes along
    /// (one copy, of less than the frame), so that the frame ends up in one block and is
    /// handed out without a copy. The old block goes back to the pool.
    fn make_room(&mut self, poller: &PollerShared) -> usize {
        let read_chunk = poller.pool.block_size();
        // The awaited frame's bytes still to come (0 when none is awaited).
        let rest = self.want.saturating_sub(self.input.len());
        let enough = if rest > 0 { rest } else { read_chunk / 4 };
        let tail = self.input.tail_mut();
        let spare = |t: &bytes::BytesMut| t.capacity() - t.len();
        let roomy = spare(tail) >= enough || (tail.capacity() > 0 && tail.try_reclaim(enough));
        if !roomy {
            let (mut block, class) = poller.pool.take(tail.len() + enough.max(read_chunk));
            block.extend_from_slice(tail);
            let mut old = std::mem::replace(tail, block);
            old.clear();
            let old_class = std::mem::replace(&mut self.input_class, class);
            poller.pool.give(old, old_class);
        }
        spare(self.input.tail_mut()).min(read_chunk.max(rest))
    }

    /// Calls the inline handler: its `on_timer` for [`Call::Timer`], its `on_input` if
    /// there is input it has not seen (or an end of stream it was not told of), then
    /// sends what it wrote. Returns whether the connection should close now: an error,
    /// or it is closing and the output is all sent.
    fn run_handler(&mut self, poller: &PollerShared, token: Token, turn: Turn, call: Call) -> bool {
        if !self.inline {
            return false;
        }
        if self.error.is_some() {
            return true;
        }
        let fresh = call == Call::Timer
            || self.input.len() > self.handled_len
            || (self.eof && !self.handler_saw_eof)
            || std::mem::take(&mut self.resumed);
        if fresh
            && !self.closing
            && let Some(handler) = self.handler.as_mut()
        {
            let mut io = Io {
                input: &mut self.input,
                output: &mut self.output,
                peer_closed: self.eof,
                close: false,
                need: 0,
                now: turn.now,
                deadline: self.deadline,
            };
            // A panic in the handler ends its connection, not the poller.
            let outcome = catch_unwind(AssertUnwindSafe(|| match call {
                Call::Input => handler.0.on_input(&mut io),
                Call::Timer => handler.0.on_timer(&mut io),
            }));
            let (close, need, deadline) = (io.close, io.need, io.deadline);
            // A timer's call leaves what `on_input` knows as it was: input that came
            // with it still goes to `on_input`.
            if call == Call::Input {
                self.want = need;
                self.handled_len = self.input.len();
                self.handler_saw_eof = self.eof;
            } else if need > 0 {
                self.want = need;
            }
            if outcome.is_err() {
                self.fail(&io::Error::other("the connection's handler panicked"));
                return true;
            }
            self.set_deadline(deadline, poller, token, turn.on_poller);
            // The peer's close ends the connection once `on_input` was told of it.
            if close || self.handler_saw_eof {
                self.closing = true;
                self.readable = false;
            }
        }
        if !self.output.is_empty()
            && !self.write_pending
            && self.flush_inline(poller.config.max_iovecs).is_err()
        {
            return true;
        }
        self.give_back_block(poller);
        self.closing && self.output.is_empty()
    }

    /// Keeps the handler's deadline, and makes sure the poller's timers come due at or
    /// before it. A deadline earlier than all the others, set from outside the poller,
    /// wakes the poller, which may be waiting for a later one (or none).
    fn set_deadline(
        &mut self,
        deadline: Option<Instant>,
        poller: &PollerShared,
        token: Token,
        on_poller: bool,
    ) {
        if deadline == self.deadline {
            return;
        }
        self.deadline = deadline;
        if let Some(at) = deadline {
            let earliest = lock(&poller.timers).schedule(token, at);
            if earliest && !on_poller {
                // A failed wake leaves the deadline to the poller's next turn.
                let _ = poller.waker.wake();
            }
        }
    }

    /// Writes queued output with `sendmsg` until it is all gone or the socket is full
    /// (then `write_pending` is set and the poller finishes on WRITABLE). Never sends a
    /// byte twice: what the kernel took is consumed from the output.
    fn flush_inline(&mut self, max_iovecs: usize) -> io::Result<()> {
        if let Some(e) = self.error() {
            return Err(e);
        }
        let ConnState { stream, output, .. } = self;
        let Some(stream) = stream.as_mut() else {
            return Err(closed());
        };
        let outcome = loop {
            if output.is_empty() {
                break Ok(false);
            }
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let k = max_iovecs.clamp(1, MAX_IOVECS);
            let n = output.chunks_vectored(&mut iov[..k]);
            match stream.write_vectored(&iov[..n]) {
                Ok(0) => {
                    break Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "the socket took no bytes",
                    ));
                }
                Ok(written) => output.advance(written),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        match outcome {
            Ok(full) => {
                self.write_pending = full;
                Ok(())
            }
            Err(e) => {
                self.fail(&e);
                Err(e)
            }
        }
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the connection is closed")
}

fn set_waker(slot: &mut Option<Waker>, cx: &Context<'_>) {
    match slot {
        Some(w) if w.will_wake(cx.waker()) => {}
        _ => *slot = Some(cx.waker().clone()),
    }
}

impl ConnShared {
    /// The poller's handling of one event, in the turn that read the clock at `now`.
    /// Connections that still have data to read after their turn's budget go into
    /// `again`, to be served on the next turn.
    pub(crate) fn on_event(
        self: &Arc<Self>,
        readable: bool,
        writable: bool,
        closed: bool,
        now: Instant,
        again: &mut Vec<Arc<Self>>,
    ) {
        let config = &self.poller.config;
        let mut st = lock(&self.state);
        let mut wake_write = None;
        if readable {
            st.readable = true;
        }
        if closed {
            st.peer_closed = true;
        }
        // Output first: sending it may lift an inline handler's pause on reading.
        if writable && st.write_pending {
            st.write_pending = false;
            let failed = st.flush_inline(config.max_iovecs).is_err();
            if failed || st.output.is_empty() {
                wake_write = st.write_waker.take();
            }
        }
        self.serve(st, now, wake_write, again);
    }

    /// The poller's timers say this connection's deadline may have come at `now`: if it
    /// has (it may have moved later, or been cleared), the handler's `on_timer` runs,
    /// then the connection is served as after an event.
    pub(crate) fn on_timer(self: &Arc<Self>, now: Instant, again: &mut Vec<Arc<Self>>) {
        let mut st = lock(&self.state);
        match timer::due(st.deadline, now) {
            Due::Cancelled => return,
            Due::Later(at) => {
                lock(&self.poller.timers).schedule(self.token, at);
                return;
            }
            Due::Fire => st.deadline = None,
        }
        if st.stream.is_none() {
            return;
        }
        let turn = Turn {
            now,
            on_poller: true,
        };
        // What it says (close, an error) the serving below finds in the state.
        st.run_handler(&self.poller, self.token, turn, Call::Timer);
        self.serve(st, now, None, again);
    }

    /// Reads what the socket has, wakes a reader that has what it waits for, calls the
    /// inline handler for new input, and lists the connection for another turn if it
    /// has more to read.
    fn serve(
        self: &Arc<Self>,
        mut st: MutexGuard<'_, ConnState>,
        now: Instant,
        mut wake_write: Option<Waker>,
        again: &mut Vec<Arc<Self>>,
    ) {
        let config = &self.poller.config;
        let mut wake_read = None;
        if st.readable {
            st.fill(&self.poller);
            let ready = st.eof || st.error.is_some() || (st.want > 0 && st.input.len() >= st.want);
            if ready {
                wake_read = st.read_waker.take();
            }
        }
        let turn = Turn {
            now,
            on_poller: true,
        };
        let close_now = st.run_handler(&self.poller, self.token, turn, Call::Input);
        if st.readable
            && !close_now
            && !st.read_paused(config.input_high_water)
            && st.stream.is_some()
        {
            again.push(Arc::clone(self));
        }
        if st.error.is_some() {
            wake_read = wake_read.or_else(|| st.read_waker.take());
            wake_write = wake_write.or_else(|| st.write_waker.take());
        }
        drop(st);
        if let Some(w) = wake_read {
            w.wake();
        }
        if let Some(w) = wake_write {
            w.wake();
        }
        if close_now {
            self.close();
        }
    }

    /// Closes the socket (deregistered first) and wakes whoever waits; later calls fail
    /// with `NotConnected`. Unsent output is dropped.
    pub(crate) fn close(&self) {
        let (stream, wakers, handler, error) = {
            let mut st = lock(&self.state);
            let stream = st.stream.take();
            st.readable = false;
            st.deadline = None;
            st.give_back_block(&self.poller);
            (
                stream,
                [st.read_waker.take(), st.write_waker.take()],
                st.handler.take(),
                st.error(),
            )
        };
        if let Some(mut stream) = stream {
            let _ = stream.deregister(&self.poller.registry);
            drop(stream);
        }
        lock(&self.poller.slab).remove(self.token);
        lock(&self.poller.timers).remove(self.token);
        for w in wakers.into_iter().flatten() {
            w.wake();
        }
        if let Some(mut handler) = handler {
            // Its panic here has nothing left to end.
            let _ = catch_unwind(AssertUnwindSafe(|| handler.0.on_close(error)));
        }
    }
}

/// A connection on the reactor. Its socket is read by a poller thread into the input
/// buffer; tasks take whole frames out with [`read_frame`](Self::read_frame), queue
/// output with [`write`](Self::write) and send it with [`flush`](Self::flush), which
/// calls `sendmsg` right away on the caller's thread and involves the poller only when
/// the socket is full.
///
/// Dropping it closes the socket; output not yet flushed is dropped with it.
#[derive(Debug)]
pub struct Connection {
    shared: Arc<ConnShared>,
}

impl Connection {
    pub(crate) fn new(shared: Arc<ConnShared>) -> Self {
        Connection { shared }
    }

    /// Waits for a whole frame and takes it out of the input: zero-copy when it lies in
    /// one buffer block. `frame_len` looks at the input (it may `peek`) and returns the
    /// frame's total length once it can tell, `None` while it needs more bytes.
    ///
    /// Returns `Ok(None)` when the peer closed the connection between frames; a close in
    /// the middle of a frame is `UnexpectedEof`. Everything the peer sent before closing
    /// is delivered first.
    pub async fn read_frame<F>(&self, mut frame_len: F) -> io::Result<Option<Bytes>>
    where
        F: FnMut(&mut LinkBuffer) -> io::Result<Option<usize>>,
    {
        poll_fn(|cx| self.poll_read_frame(cx, &mut frame_len)).await
    }

    fn poll_read_frame<F>(
        &self,
        cx: &mut Context<'_>,
        frame_len: &mut F,
    ) -> Poll<io::Result<Option<Bytes>>>
    where
        F: FnMut(&mut LinkBuffer) -> io::Result<Option<usize>>,
    {
        let mut st = lock(&self.shared.state);
        loop {
            let need = match frame_len(&mut st.input) {
                Ok(need) => need,
                Err(e) => return Poll::Ready(Err(e)),
            };
            if let Some(n) = need
                && n > 0
                && st.input.len() >= n
            {
                let frame = st.input.next(n);
                st.want = 0;
                st.consumed(&self.shared.poller);
                return Poll::Ready(Ok(Some(frame)));
            }
            st.want = need.unwrap_or(st.input.len() + 1).max(st.input.len() + 1);
            if st.fill(&self.shared.poller) {
                continue;
            }
            if let Some(e) = st.error() {
                return Poll::Ready(Err(e));
            }
            if st.eof {
                st.want = 0;
                return Poll::Ready(if st.input.is_empty() {
                    Ok(None)
                } else {
                    Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "the peer closed the connection {} bytes into a frame",
                            st.input.len()
                        ),
                    ))
                });
            }
            if st.stream.is_none() {
                return Poll::Ready(Err(closed()));
            }
            set_waker(&mut st.read_waker, cx);
            return Poll::Pending;
        }
    }

    /// Gives `f` the input received so far, to `peek`, `next` or `skip` in it directly
    /// (the reader side of Netpoll's API; what `f` leaves stays for later reads). Taking
    /// input may lift the high-water pause, so reading resumes right after. Does not
    /// wait: [`read_frame`](Self::read_frame) is the way to wait for input.
    pub fn with_input<R>(&self, f: impl FnOnce(&mut LinkBuffer) -> R) -> R {
        let mut st = lock(&self.shared.state);
        let out = f(&mut st.input);
        st.consumed(&self.shared.poller);
        out
    }

    /// Queues `bytes` for sending, without copying them.
    pub fn write(&self, bytes: Bytes) {
        lock(&self.shared.state).output.insert(bytes);
    }

    /// Gives `f` the output buffer to write into (`LinkBuffer::write`, `malloc`,
    /// `BufMut`...), e.g. to encode a message in place.
    pub fn write_with<R>(&self, f: impl FnOnce(&mut LinkBuffer) -> R) -> R {
        f(&mut lock(&self.shared.state).output)
    }

    /// Sends the queued output: `sendmsg` on this thread now, and if the socket fills up,
    /// the rest from the poller when it drains. Resolves once all of it is in the
    /// kernel.
    pub async fn flush(&self) -> io::Result<()> {
        poll_fn(|cx| self.poll_flush(cx)).await
    }

    fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let max_iovecs = self.shared.poller.config.max_iovecs;
        let mut st = lock(&self.shared.state);
        if !st.write_pending
            && let Err(e) = st.flush_inline(max_iovecs)
        {
            return Poll::Ready(Err(e));
        }
        if let Some(e) = st.error() {
            return Poll::Ready(Err(e));
        }
        if st.output.is_empty() {
            return Poll::Ready(Ok(()));
        }
        if st.stream.is_none() {
            return Poll::Ready(Err(closed()));
        }
        set_waker(&mut st.write_waker, cx);
        Poll::Pending
    }

    /// Flushes, then shuts down the sending side: the peer reads end of stream after the
    /// last byte, and this side can still read what the peer sends.
    pub async fn close_write(&self) -> io::Result<()> {
        self.flush().await?;
        let st = lock(&self.shared.state);
        match &st.stream {
            Some(s) => s.shutdown_write(),
            None => Err(closed()),
        }
    }

    /// Bytes received and not yet taken.
    pub fn input_len(&self) -> usize {
        lock(&self.shared.state).input.len()
    }

    /// Bytes of input buffer this connection holds (0 while it has no unconsumed input
    /// and its block is back in the poller's pool).
    pub fn input_capacity(&self) -> usize {
        lock(&self.shared.state).input.tail_mut().capacity()
    }

    /// Bytes queued and not yet in the kernel.
    pub fn output_len(&self) -> usize {
        lock(&self.shared.state).output.len()
    }

    /// The peer's address (TCP only).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        lock(&self.shared.state).stream.as_ref()?.peer_addr()
    }

    /// This end's address (TCP only).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        lock(&self.shared.state).stream.as_ref()?.local_addr()
    }

    /// Whether the socket is still open on this side.
    pub fn is_open(&self) -> bool {
        lock(&self.shared.state).stream.is_some()
    }

    /// Whether the peer closed its side (an event said so, or its end of stream was
    /// read) or the socket failed: nothing more will arrive. The poller notices it
    /// while nobody reads, so an idle connection whose peer went away says so here
    /// though it is still [open](Self::is_open) on this side (a pool must not lend it
    /// for a request that could get no reply).
    pub fn is_peer_closed(&self) -> bool {
        let st = lock(&self.shared.state);
        st.peer_closed || st.eof || st.error.is_some()
    }

    /// Closes the socket now (as dropping does).
    pub fn close(&self) {
        self.shared.close();
    }

    /// Hands the connection to `handler`, which from now on runs on the poller each time
    /// input arrives (see [`Handler`]); output already queued is sent now, and input
    /// already received goes to the handler at once, on this thread. The connection
    /// stays open until the handler closes it, the peer closes its side (once the
    /// output is sent), a socket error, or the reactor's shutdown; then
    /// [`Handler::on_close`] is called.
    ///
    /// Take an [`inline_handle`](Self::inline_handle) first to call the handler again
    /// from elsewhere (when work it handed off is done) or to close the connection.
    pub fn serve_inline(self, handler: impl Handler) {
        let close_now = {
            let mut st = lock(&self.shared.state);
            st.inline = true;
            st.handler = Some(BoxedHandler(Box::new(handler)));
            let mut close_now = st.stream.is_none()
                || st.run_handler(
                    &self.shared.poller,
                    self.shared.token,
                    Turn::elsewhere(),
                    Call::Input,
                );
            // Data that came while no one read (its edge already taken) gets a new edge,
            // so the poller reads it.
            if !close_now
                && let Some(stream) = st.stream.as_mut()
                && let Err(e) = stream.reregister(&self.shared.poller.registry, self.shared.token)
            {
                st.fail(&e);
                close_now = true;
            }
            close_now
        };
        if close_now {
            self.shared.close();
        }
        // Dropping `self` leaves an inline connection open.
    }

    /// A handle for the connection once it is served by a handler: to call the handler
    /// again from elsewhere, or to close it. Until [`serve_inline`](Self::serve_inline)
    /// its [`resume`](InlineHandle::resume) does nothing.
    pub fn inline_handle(&self) -> InlineHandle {
        InlineHandle {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// A handle on a connection served by a [`Handler`] (see
/// [`Connection::inline_handle`]), for the threads and tasks around it.
#[derive(Debug, Clone)]
pub struct InlineHandle {
    shared: Arc<ConnShared>,
}

impl InlineHandle {
    /// Calls the handler now, on this thread, as if input had arrived (with the input
    /// in hand, possibly none new), and sends what it wrote: the way for work that a
    /// handler handed off to deliver its result, which the handler then writes.
    /// Returns `false` when the connection is closed or has no handler yet (the
    /// handler was not called).
    ///
    /// It takes the connection's lock, which the handler holds while it runs: never
    /// call it from the connection's own handler.
    pub fn resume(&self) -> bool {
        let close_now = {
            let mut st = lock(&self.shared.state);
            if st.stream.is_none() || st.handler.is_none() {
                return false;
            }
            st.resumed = true;
            st.run_handler(
                &self.shared.poller,
                self.shared.token,
                Turn::elsewhere(),
                Call::Input,
            )
        };
        if close_now {
            self.shared.close();
        }
        true
    }

    /// Closes the connection now; unsent output is dropped, and the handler's
    /// [`Handler::on_close`] is called.
    pub fn close(&self) {
        self.shared.close();
    }

    /// Whether the socket is still open on this side.
    pub fn is_open(&self) -> bool {
        lock(&self.shared.state).stream.is_some()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let inline = lock(&self.shared.state).inline;
        if !inline {
            self.shared.close();
        }
    }
}
