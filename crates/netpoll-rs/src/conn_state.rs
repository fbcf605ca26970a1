//! A connection's state machine: its input and output `LinkBuffer`s, edge-triggered
//! readiness kept in user space, the read budget and the high-water mark, partial writes
//! resumed on WRITABLE, the inline handler and its deadline, and the async face's
//! waiting readers and writers.
//!
//! It owns its socket through the [`Socket`] seam and knows no poller: the poller's
//! pieces it needs (settings, read blocks) come in an [`Env`], the time as an argument,
//! and what the poller must do after (wake a task, serve the connection again, close
//! it, schedule a deadline) goes back in a [`Served`] or [`ConnState::take_schedule`].
//! So its tests script a fake socket and move a fake clock (see `tests` below).
//!
//! Nor does it know its poller's driver: it keeps one [`ConnIo`], its slot for the
//! driver, and asks it where the drivers differ (how a flush goes, what is in flight,
//! whether the receive goes on). Input comes two ways, and the state serves both the
//! same: it reads the socket itself while an event left it readable (epoll), and it
//! takes what the driver received for it ([`on_recv`](ConnState::on_recv), io_uring).

use std::io::{self, IoSlice};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::{Buf, Bytes};
use thrift_wire::LinkBuffer;

use crate::config::Config;
use crate::handler::{Handler, Io};
use crate::pool::{BlockPool, Class};
use crate::stats;
use crate::sys::{ConnIo, Lent, Op, Received, SendRoute, Socket};
use crate::timer::{self, Due};

pub(crate) const MAX_IOVECS: usize = 64;

/// The poller's pieces a connection uses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Env<'a> {
    pub(crate) config: &'a Config,
    /// The poller's read blocks.
    pub(crate) pool: &'a BlockPool,
    /// Called on the poller, in its turn: a driver may then take the output (a ring,
    /// with the turn's other submissions) instead of a `sendmsg` now.
    pub(crate) on_poller: bool,
}

/// What the poller must do after serving a connection, once it let go of its lock.
#[derive(Debug, Default)]
#[must_use]
pub(crate) struct Served {
    /// A reader that has what it waited for (or an end or an error).
    pub(crate) wake_read: Option<Waker>,
    /// A writer whose output drained (or failed).
    pub(crate) wake_write: Option<Waker>,
    /// There is more to read now: serve it again on the next turn.
    pub(crate) again: bool,
    /// Close the connection now.
    pub(crate) close: bool,
}

/// What a closed connection leaves to be disposed of outside its lock.
#[derive(Debug)]
pub(crate) struct Closed<S> {
    pub(crate) socket: Option<S>,
    pub(crate) wakers: [Option<Waker>; 2],
    pub(crate) handler: Option<BoxedHandler>,
    pub(crate) error: Option<io::Error>,
}

/// A connection's state, over a socket `S`.
#[derive(Debug)]
pub(crate) struct ConnState<S> {
    /// `None` once closed.
    stream: Option<S>,
    input: LinkBuffer,
    /// The pool class of the input's tail block.
    input_class: Class,
    output: LinkBuffer,
    /// Edge-triggered readiness kept in user space: an edge arrived and no read has
    /// since found the socket empty.
    readable: bool,
    /// A write stopped short (`EAGAIN`); the rest goes when the socket is writable.
    /// Or the driver has a send of this connection's (a ring's, on it or queued for
    /// it), and nobody else writes until it completes.
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
    /// The length of the last frame an async reader took: a backlog of at least two
    /// such frames (and two read chunks) means the reader is behind the socket.
    last_frame: usize,
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
    /// A deadline the poller's timers must come due at or before: it was set, or it
    /// came up and had moved later ([`take_schedule`](Self::take_schedule)).
    schedule: Option<Instant>,
    /// The slot for the poller's driver: what it holds of this connection's I/O.
    io: ConnIo,
}

/// Which of the handler's methods a call is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Input,
    Timer,
}

/// A handler, boxed (`dyn Handler` has no `Debug`).
pub(crate) struct BoxedHandler(Box<dyn Handler>);

impl BoxedHandler {
    /// Tells the handler its connection closed; its panic here has nothing left to end.
    pub(crate) fn closed(mut self, error: Option<io::Error>) {
        let _ = catch_unwind(AssertUnwindSafe(|| self.0.on_close(error)));
    }
}

impl std::fmt::Debug for BoxedHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handler")
    }
}

impl<S: Socket> ConnState<S> {
    /// A connection's state, with its slot for the poller's driver (which may ask
    /// for something at once: see [`take_ops`](Self::take_ops)).
    pub(crate) fn new(stream: S, io: ConnIo) -> Self {
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
            last_frame: 0,
            read_waker: None,
            write_waker: None,
            inline: false,
            handler: None,
            handled_len: 0,
            handler_saw_eof: false,
            resumed: false,
            closing: false,
            deadline: None,
            schedule: None,
            io,
        }
    }

    pub(crate) fn stream(&self) -> Option<&S> {
        self.stream.as_ref()
    }

    pub(crate) fn stream_mut(&mut self) -> Option<&mut S> {
        self.stream.as_mut()
    }

    /// The bytes received and not yet taken.
    pub(crate) fn input(&mut self) -> &mut LinkBuffer {
        &mut self.input
    }

    /// The bytes queued and not yet in the kernel.
    pub(crate) fn output(&mut self) -> &mut LinkBuffer {
        &mut self.output
    }

    /// Output not yet sent: the queued bytes, and those the driver holds (a send on
    /// the ring).
    pub(crate) fn unsent(&self) -> usize {
        self.output.len() + self.io.in_flight()
    }

    /// Whether the socket is still open on this side.
    pub(crate) fn is_open(&self) -> bool {
        self.stream.is_some()
    }

    /// Served by a handler ([`serve_inline`](Self::serve_inline)).
    pub(crate) fn is_inline(&self) -> bool {
        self.inline
    }

    /// Whether nothing more will arrive: the peer closed its side (an event said so, or
    /// its end of stream was read) or the socket failed.
    pub(crate) fn is_peer_closed(&self) -> bool {
        self.peer_closed || self.eof || self.error.is_some()
    }

    /// The deadline the poller's timers must come due at or before, once: set by the
    /// handler, or come up and moved later. The caller schedules it.
    pub(crate) fn take_schedule(&mut self) -> Option<Instant> {
        self.schedule.take()
    }

    pub(crate) fn error(&self) -> Option<io::Error> {
        self.error
            .as_ref()
            .map(|(kind, msg)| io::Error::new(*kind, msg.clone()))
    }

    pub(crate) fn fail(&mut self, e: &io::Error) {
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
            || (self.inline && self.write_pending && self.unsent() >= high_water)
    }

    /// Takes input as far as the driver lets the connection: tells the driver whether
    /// to go on receiving (a ring's receive), then reads the socket while an event
    /// left it readable. Returns whether anything changed for a reader.
    pub(crate) fn fill(&mut self, env: Env<'_>) -> bool {
        self.update_recv(env.config.input_high_water);
        self.read_socket(env)
    }

    /// Reads while the socket has data (an event said so, and no read has found it
    /// empty since), at most `reads_per_turn` times and up to the input limit.
    /// Returns whether anything changed for a reader.
    fn read_socket(&mut self, env: Env<'_>) -> bool {
        let Config {
            reads_per_turn,
            input_high_water,
            ..
        } = *env.config;
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
            let asked = self.make_room(env.pool);
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
                    stats::count_read();
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
    pub(crate) fn consumed(&mut self, env: Env<'_>) {
        self.fill(env);
        self.give_back_block(env.pool);
    }

    fn give_back_block(&mut self, pool: &BlockPool) {
        if self.input.is_empty() && !self.readable && self.input.tail_mut().capacity() > 0 {
            let block = std::mem::take(self.input.tail_mut());
            pool.give(block, self.input_class.take());
        }
    }

    /// Readies the input's tail block for the next read and returns how many bytes to
    /// ask for. The block needs room for the rest of the frame a reader awaits, when its
    /// length is known, else for a quarter of a read chunk. A block whose frames are all
    /// gone is reused in place. Otherwise:
    /// - as a rule, the unconsumed bytes move to a pooled block of the class that holds
    ///   the whole awaited frame (or, with no frame awaited, as much again as is unread):
    ///   one copy, of less than the frame, so that the frame ends up in one block and is
    ///   handed out without a copy, and a reader behind a burst has its backlog copied
    ///   once per doubling, not at every read;
    /// - but when an async reader is behind the socket (it is not waiting for a frame,
    ///   and two read chunks and two of its last frame's length wait for it: a reader
    ///   that just took a frame and has not asked for the next one yet is not behind),
    ///   its backlog stays in its block, which
    ///   joins the input's chain, and reading goes on in a new block. Only a frame that
    ///   straddles the two is copied, when it is taken. Moving it instead copied the
    ///   whole backlog at every new block: near the high-water mark, as many bytes as
    ///   were read, into blocks above the largest class.
    ///
    /// The old block goes back to the pool, to be reused once its frames are gone.
    fn make_room(&mut self, pool: &BlockPool) -> usize {
        let read_chunk = pool.block_size();
        // The awaited frame's bytes still to come (0 when none is awaited).
        let rest = self.want.saturating_sub(self.input.len());
        let enough = if rest > 0 { rest } else { read_chunk / 4 };
        let behind = !self.inline
            && self.want == 0
            && self.input.len() >= 2 * self.last_frame.max(read_chunk);
        let tail = self.input.tail_mut();
        let spare = |t: &bytes::BytesMut| t.capacity() - t.len();
        // Reclaiming a block moves its unconsumed bytes to its front: not a backlog's.
        let roomy =
            spare(tail) >= enough || (!behind && tail.capacity() > 0 && tail.try_reclaim(enough));
        if !roomy {
            let (block, class) = if behind {
                self.input.freeze_tail();
                pool.take(read_chunk)
            } else {
                let more = if rest > 0 {
                    enough.max(read_chunk)
                } else {
                    tail.len().max(read_chunk)
                };
                let (mut block, class) = pool.take(tail.len() + more);
                block.extend_from_slice(tail);
                tail.clear();
                (block, class)
            };
            let old = std::mem::replace(self.input.tail_mut(), block);
            let old_class = std::mem::replace(&mut self.input_class, class);
            pool.give(old, old_class);
        }
        spare(self.input.tail_mut()).min(read_chunk.max(rest))
    }

    /// Appends bytes a receive completion brought, into the input's pooled blocks as
    /// a read would have put them.
    fn feed(&mut self, pool: &BlockPool, mut data: &[u8]) {
        while !data.is_empty() {
            let room = self.make_room(pool).max(1);
            let take = room.min(data.len());
            self.input.tail_mut().extend_from_slice(&data[..take]);
            data = &data[take..];
        }
    }

    /// Tells the driver whether the connection takes input now: not while reading is
    /// paused (the input is above its mark, or the connection is closing) or after
    /// the end (of stream, an error, the close). A ring arms or cancels its receive to
    /// match.
    fn update_recv(&mut self, high_water: usize) {
        let paused = self.read_paused(high_water);
        let ended = self.eof || self.error.is_some() || self.stream.is_none();
        self.io.set_reading(!paused && !ended);
    }

    /// What the connection asks of its poller's driver since the last call (a ring's
    /// receive to arm or cancel, its output to send, taken out of it here), into
    /// `out`. For the caller to queue, under this lock, so that two connections'
    /// requests never cross.
    pub(crate) fn take_ops(&mut self, token: mio::Token, max_iovecs: usize, out: &mut Vec<Op>) {
        let lent = Lent {
            token,
            fd: self.stream.as_ref().map(S::raw_fd),
            output: &mut self.output,
            write_pending: &mut self.write_pending,
            max_iovecs,
        };
        self.io.take_ops(lent, out);
    }

    /// A receive completion for this connection, in the turn that read the clock at
    /// `now`: its bytes join the input (or the end of stream, or the error, is
    /// noted), then the connection is served as after an event.
    pub(crate) fn on_recv(&mut self, env: Env<'_>, received: Received<'_>, now: Instant) -> Served {
        let more = match received {
            Received::Data(data, more) => {
                stats::count_read();
                self.feed(env.pool, data);
                more
            }
            Received::Eof => {
                self.eof = true;
                self.peer_closed = true;
                false
            }
            Received::Ended => false,
            Received::Failed(e) => {
                self.fail(&e);
                false
            }
        };
        if !more {
            self.io.recv_ended();
        }
        if self.stream.is_none() {
            return Served::default();
        }
        self.serve(env, now, None, true)
    }

    /// This connection's send by the driver (on the ring) completed: `rest` is what
    /// the kernel did not take (it goes back in front of the output and is sent
    /// again), or the error.
    pub(crate) fn on_sent(
        &mut self,
        env: Env<'_>,
        rest: io::Result<Vec<Bytes>>,
        now: Instant,
    ) -> Served {
        let Some(taken) = self.io.sent(rest, &mut self.output) else {
            return Served::default();
        };
        self.write_pending = false;
        match taken {
            Ok(()) => stats::count_write(),
            Err(e) => self.fail(&e),
        }
        if self.stream.is_none() {
            return Served::default();
        }
        // All sent, or failed: the flushing task is told; else the rest goes out.
        let done =
            self.error.is_some() || self.output.is_empty() || self.flush_inline(env).is_err();
        let wake_write = if done { self.write_waker.take() } else { None };
        self.serve(env, now, wake_write, true)
    }

    /// Calls the inline handler: its `on_timer` for [`Call::Timer`], its `on_input` if
    /// there is input it has not seen (or an end of stream it was not told of), then
    /// sends what it wrote. Returns whether the connection should close now: an error,
    /// or it is closing and the output is all sent.
    fn run_handler(&mut self, env: Env<'_>, now: Instant, call: Call) -> bool {
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
                now,
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
            if deadline != self.deadline {
                self.deadline = deadline;
                self.schedule = deadline;
            }
            // The peer's close ends the connection once `on_input` was told of it.
            if close || self.handler_saw_eof {
                self.closing = true;
                self.readable = false;
            }
        }
        if !self.output.is_empty() && !self.write_pending && self.flush_inline(env).is_err() {
            return true;
        }
        self.give_back_block(env.pool);
        self.closing && self.output.is_empty() && !self.write_pending
    }

    /// Writes queued output with `sendmsg` until it is all gone or the socket is full
    /// (then `write_pending` is set and the poller finishes on WRITABLE). Never sends a
    /// byte twice: what the kernel took is consumed from the output.
    ///
    /// The driver says how it goes ([`ConnIo::send_route`]): under io_uring the
    /// poller leaves the output to the ring (a send it submits with the rest of its
    /// turn), and another thread calls `sendmsg` itself unless a send is on the ring
    /// already, handing the rest to the ring when the socket is full.
    fn flush_inline(&mut self, env: Env<'_>) -> io::Result<()> {
        if let Some(e) = self.error() {
            return Err(e);
        }
        let idle = self.write_pending || self.output.is_empty();
        match self.io.send_route(env.on_poller, idle) {
            SendRoute::Now => {}
            SendRoute::Nothing => return Ok(()),
            SendRoute::Driver => {
                self.write_pending = true;
                return Ok(());
            }
        }
        let max_iovecs = env.config.max_iovecs;
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
                Ok(written) => {
                    stats::count_write();
                    output.advance(written);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        match outcome {
            Ok(full) => {
                self.write_pending = full;
                self.io.sent_now(full);
                Ok(())
            }
            Err(e) => {
                self.fail(&e);
                Err(e)
            }
        }
    }

    /// The poller's handling of one event, in the turn that read the clock at `now`.
    pub(crate) fn on_event(
        &mut self,
        env: Env<'_>,
        readable: bool,
        writable: bool,
        closed: bool,
        now: Instant,
    ) -> Served {
        let mut wake_write = None;
        if readable {
            self.readable = true;
        }
        if closed {
            self.peer_closed = true;
        }
        // Output first: sending it may lift an inline handler's pause on reading.
        if writable && self.write_pending {
            self.write_pending = false;
            let failed = self.flush_inline(env).is_err();
            if failed || self.output.is_empty() {
                wake_write = self.write_waker.take();
            }
        }
        self.serve(env, now, wake_write, false)
    }

    /// The poller's timers say this connection's deadline may have come at `now`: if it
    /// has, the handler's `on_timer` runs, then the connection is served as after an
    /// event. A deadline that moved later is to be scheduled again
    /// ([`take_schedule`](Self::take_schedule)); a cleared one does nothing.
    pub(crate) fn on_timer(&mut self, env: Env<'_>, now: Instant) -> Served {
        match timer::due(self.deadline, now) {
            Due::Cancelled => return Served::default(),
            Due::Later(at) => {
                self.schedule = Some(at);
                return Served::default();
            }
            Due::Fire => self.deadline = None,
        }
        if self.stream.is_none() {
            return Served::default();
        }
        // What it says (close, an error) the serving below finds in the state.
        self.run_handler(env, now, Call::Timer);
        self.serve(env, now, None, false)
    }

    /// Reads what the socket has, wakes a reader that has what it waits for, calls the
    /// inline handler for new input, tells the driver whether to go on receiving, and
    /// says whether to serve the connection again on the next turn (it has more to
    /// read). `delivered`: the driver's completion (a receive, a send) may have
    /// changed what a reader waits for.
    fn serve(
        &mut self,
        env: Env<'_>,
        now: Instant,
        mut wake_write: Option<Waker>,
        delivered: bool,
    ) -> Served {
        let mut wake_read = None;
        if self.readable || delivered {
            self.read_socket(env);
            let ready = self.eof
                || self.error.is_some()
                || (self.want > 0 && self.input.len() >= self.want);
            if ready {
                wake_read = self.read_waker.take();
            }
        }
        let close = self.run_handler(env, now, Call::Input);
        self.update_recv(env.config.input_high_water);
        // Only a socket read here has more to read on the next turn.
        let again = self.readable
            && !close
            && !self.read_paused(env.config.input_high_water)
            && self.stream.is_some();
        if self.error.is_some() {
            wake_read = wake_read.or_else(|| self.read_waker.take());
            wake_write = wake_write.or_else(|| self.write_waker.take());
        }
        Served {
            wake_read,
            wake_write,
            again,
            close,
        }
    }

    /// Takes the next whole frame out of the input (zero-copy when it lies in one
    /// block), reading more first if the socket has it. `frame_len` returns the frame's
    /// total length once it can tell. `Ok(None)` is the peer's close between frames,
    /// after all it sent; a close inside a frame is `UnexpectedEof`. Pending (with
    /// `cx`'s waker kept for the poller) while the frame is not all there.
    pub(crate) fn poll_frame<F>(
        &mut self,
        env: Env<'_>,
        cx: &Context<'_>,
        frame_len: &mut F,
    ) -> Poll<io::Result<Option<Bytes>>>
    where
        F: FnMut(&mut LinkBuffer) -> io::Result<Option<usize>>,
    {
        loop {
            let need = match frame_len(&mut self.input) {
                Ok(need) => need,
                Err(e) => return Poll::Ready(Err(e)),
            };
            if let Some(n) = need
                && n > 0
                && self.input.len() >= n
            {
                let frame = self.input.next(n);
                self.want = 0;
                self.last_frame = n;
                self.consumed(env);
                return Poll::Ready(Ok(Some(frame)));
            }
            self.want = need
                .unwrap_or(self.input.len() + 1)
                .max(self.input.len() + 1);
            if self.fill(env) {
                continue;
            }
            if let Some(e) = self.error() {
                return Poll::Ready(Err(e));
            }
            // Closed here (or by the reactor's shutdown): later calls fail, as
            // `close` says, even when the peer's end had been read before.
            if self.stream.is_none() {
                return Poll::Ready(Err(closed()));
            }
            if self.eof {
                self.want = 0;
                return Poll::Ready(if self.input.is_empty() {
                    Ok(None)
                } else {
                    Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "the peer closed the connection {} bytes into a frame",
                            self.input.len()
                        ),
                    ))
                });
            }
            set_waker(&mut self.read_waker, cx);
            return Poll::Pending;
        }
    }

    /// Sends the queued output now, as far as the socket takes it; ready once it is all
    /// in the kernel, pending (with `cx`'s waker kept for the poller, which sends the
    /// rest on WRITABLE) while the socket is full.
    pub(crate) fn poll_flush(&mut self, env: Env<'_>, cx: &Context<'_>) -> Poll<io::Result<()>> {
        if !self.write_pending
            && let Err(e) = self.flush_inline(env)
        {
            return Poll::Ready(Err(e));
        }
        if let Some(e) = self.error() {
            return Poll::Ready(Err(e));
        }
        if self.output.is_empty() && !self.write_pending {
            return Poll::Ready(Ok(()));
        }
        if self.stream.is_none() {
            return Poll::Ready(Err(closed()));
        }
        set_waker(&mut self.write_waker, cx);
        Poll::Pending
    }

    /// Shuts down the sending side of the socket.
    pub(crate) fn shutdown_write(&self) -> io::Result<()> {
        match &self.stream {
            Some(s) => s.shutdown_write(),
            None => Err(closed()),
        }
    }

    /// Hands the connection to `handler`, and calls it at once (with `now` for its
    /// clock) if input came before it. Returns whether the connection should close now.
    pub(crate) fn serve_inline(
        &mut self,
        env: Env<'_>,
        handler: impl Handler,
        now: Instant,
    ) -> bool {
        self.inline = true;
        self.handler = Some(BoxedHandler(Box::new(handler)));
        let close = self.stream.is_none() || self.run_handler(env, now, Call::Input);
        // What the handler took may let a paused receive go on.
        self.update_recv(env.config.input_high_water);
        close
    }

    /// Calls the handler as if input had arrived, with `now` for its clock
    /// ([`InlineHandle::resume`](crate::InlineHandle::resume)). `None` when closed or
    /// no handler is there (it was not called), else whether the connection should
    /// close now.
    pub(crate) fn resume(&mut self, env: Env<'_>, now: Instant) -> Option<bool> {
        if self.stream.is_none() || self.handler.is_none() {
            return None;
        }
        self.resumed = true;
        let close = self.run_handler(env, now, Call::Input);
        self.update_recv(env.config.input_high_water);
        Some(close)
    }

    /// Closes: takes the socket, the waiting tasks' wakers and the handler out, for the
    /// caller to deregister, wake and tell outside the lock. Unsent output is dropped;
    /// later calls fail with `NotConnected`.
    pub(crate) fn close(&mut self, env: Env<'_>) -> Closed<S> {
        let socket = self.stream.take();
        self.readable = false;
        self.deadline = None;
        self.schedule = None;
        self.give_back_block(env.pool);
        Closed {
            socket,
            wakers: [self.read_waker.take(), self.write_waker.take()],
            handler: self.handler.take(),
            error: self.error(),
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

/// The state machine over a scripted fake socket, with a fake clock: short reads,
/// short writes, `WouldBlock`, `Interrupted`, end of stream and errors, in the order a
/// test says. No real socket, no sleep.
#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use bytes::{BufMut, BytesMut};
    use io::ErrorKind;

    use super::*;

    /// What the fake's next read does.
    #[derive(Debug)]
    enum Read {
        /// Data in the kernel buffer: a read takes as much of it as it asks for (less is
        /// a short read); the rest stays for the next read.
        Data(Vec<u8>),
        /// End of stream, for this read and every later one.
        Eof,
        Fail(ErrorKind),
    }

    /// What the fake's next write does.
    #[derive(Debug)]
    enum Write {
        /// The socket takes at most this many bytes.
        Take(usize),
        Fail(ErrorKind),
    }

    /// A socket that does what its scripts say: with no read scripted a read would
    /// block, with no write scripted a write takes everything.
    #[derive(Debug, Default)]
    struct Fake {
        reads: VecDeque<Read>,
        writes: VecDeque<Write>,
        /// Every byte a write took, in order.
        sent: Vec<u8>,
        read_calls: usize,
        write_calls: usize,
    }

    impl Socket for Fake {
        fn raw_fd(&self) -> std::os::fd::RawFd {
            -1
        }

        fn read_into(&mut self, buf: &mut BytesMut, max: usize) -> io::Result<usize> {
            self.read_calls += 1;
            let max = max.min(buf.capacity() - buf.len());
            assert!(max > 0, "a read into no room");
            match self.reads.pop_front() {
                None => Err(ErrorKind::WouldBlock.into()),
                Some(Read::Data(mut data)) => {
                    let n = data.len().min(max);
                    buf.put_slice(&data[..n]);
                    if n < data.len() {
                        self.reads.push_front(Read::Data(data.split_off(n)));
                    }
                    Ok(n)
                }
                Some(Read::Eof) => {
                    self.reads.push_front(Read::Eof);
                    Ok(0)
                }
                Some(Read::Fail(kind)) => Err(kind.into()),
            }
        }

        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            self.write_calls += 1;
            let room = match self.writes.pop_front() {
                None => usize::MAX,
                Some(Write::Take(n)) => n,
                Some(Write::Fail(kind)) => return Err(kind.into()),
            };
            let before = self.sent.len();
            for b in bufs {
                let n = b.len().min(room - (self.sent.len() - before));
                self.sent.extend_from_slice(&b[..n]);
            }
            Ok(self.sent.len() - before)
        }

        fn shutdown_write(&self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Settings for the tests: small reads, so a few hundred bytes show the budgets.
    fn config() -> Config {
        Config {
            read_chunk: 512,
            reads_per_turn: 4,
            input_high_water: 1024 * 1024,
            ..Config::default()
        }
        .sanitized()
    }

    /// What a poller lends its connections.
    struct Rig {
        config: Config,
        pool: BlockPool,
    }

    impl Rig {
        fn new(config: Config) -> Rig {
            let pool = BlockPool::new(config.read_chunk, 8);
            Rig { config, pool }
        }

        fn env(&self) -> Env<'_> {
            Env {
                config: &self.config,
                pool: &self.pool,
                on_poller: true,
            }
        }
    }

    /// A fresh connection over a fake socket that will do `reads`.
    fn conn(reads: impl IntoIterator<Item = Read>) -> ConnState<Fake> {
        ConnState::new(
            Fake {
                reads: reads.into_iter().collect(),
                ..Fake::default()
            },
            ConnIo::Epoll,
        )
    }

    fn fake(c: &mut ConnState<Fake>) -> &mut Fake {
        c.stream_mut().expect("open")
    }

    /// An edge: readable (`r`), writable (`w`), the peer's close (`closed`).
    fn event(
        c: &mut ConnState<Fake>,
        env: Env<'_>,
        r: bool,
        w: bool,
        closed: bool,
        now: Instant,
    ) -> Served {
        c.on_event(env, r, w, closed, now)
    }

    fn bytes(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
    }

    /// Frames are a 4-byte big-endian length and that many bytes.
    fn frame(body: &[u8]) -> Vec<u8> {
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body);
        f
    }

    fn frame_len(b: &mut LinkBuffer) -> io::Result<Option<usize>> {
        Ok(b.peek(4)
            .map(|h| 4 + u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize))
    }

    fn cx() -> Context<'static> {
        Context::from_waker(Waker::noop())
    }

    fn kind<T: std::fmt::Debug>(p: Poll<io::Result<T>>) -> ErrorKind {
        match p {
            Poll::Ready(Err(e)) => e.kind(),
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn a_short_read_empties_the_socket_until_the_next_edge() {
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        let mut c = conn([Read::Data(bytes(100, 1)), Read::Data(bytes(50, 2))]);
        let served = event(&mut c, env, true, false, false, t0);
        assert_eq!(
            fake(&mut c).read_calls,
            1,
            "100 of 512 asked: the socket is empty"
        );
        assert_eq!(c.input().len(), 100);
        assert!(!served.again);
        // Another turn without an edge reads nothing, though the fake has more.
        let _ = event(&mut c, env, false, false, false, t0);
        assert_eq!(fake(&mut c).read_calls, 1);
        // The next edge does.
        let _ = event(&mut c, env, true, false, false, t0);
        assert_eq!(c.input().len(), 150);
    }

    #[test]
    fn reads_stop_at_the_turn_budget_and_ask_for_another_turn() {
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        let mut c = conn([Read::Data(bytes(100_000, 3))]);
        let served = event(&mut c, env, true, false, false, t0);
        assert_eq!(fake(&mut c).read_calls, rig.config.reads_per_turn);
        assert!(served.again, "every read was full: there may be more");
        let first = c.input().len();
        // The next turn (listed in `again`, no new edge) reads on.
        let served = event(&mut c, env, false, false, false, t0);
        assert_eq!(fake(&mut c).read_calls, 2 * rig.config.reads_per_turn);
        assert!(served.again);
        assert!(c.input().len() > first);
    }

    #[test]
    fn would_block_ends_readiness_and_interrupted_is_retried() {
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        let mut c = conn([
            Read::Fail(ErrorKind::Interrupted),
            Read::Data(bytes(512, 4)),
        ]);
        let served = event(&mut c, env, true, false, false, t0);
        // Interrupted, then a full read (so it reads again), then WouldBlock.
        assert_eq!(fake(&mut c).read_calls, 3);
        assert_eq!(c.input().len(), 512);
        assert!(!served.again);
        assert!(c.error().is_none());
        let _ = event(&mut c, env, false, false, false, t0);
        assert_eq!(fake(&mut c).read_calls, 3, "no edge since WouldBlock");
    }

    #[test]
    fn input_above_the_high_water_mark_pauses_reading_until_it_is_taken() {
        let config = Config {
            input_high_water: 1024,
            reads_per_turn: 16,
            ..config()
        };
        let (rig, t0) = (Rig::new(config), Instant::now());
        let env = rig.env();
        let mut c = conn([Read::Data(bytes(100_000, 5))]);
        let served = event(&mut c, env, true, false, false, t0);
        let held = c.input().len();
        assert!((1024..1024 + 2048).contains(&held), "{held} bytes held");
        assert!(!served.again, "paused: no other turn until it is taken");
        let calls = fake(&mut c).read_calls;
        let _ = event(&mut c, env, true, false, false, t0);
        assert_eq!(
            fake(&mut c).read_calls,
            calls,
            "an edge does not lift the pause"
        );
        assert_eq!(c.input().len(), held);
        c.input().skip(held);
        c.consumed(env);
        assert!(
            fake(&mut c).read_calls > calls,
            "taking input resumes reading"
        );
        assert!(c.input().len() >= 1024);
    }

    #[test]
    fn a_backlog_no_reader_has_taken_stays_in_the_block_it_was_read_into() {
        use bytes::Buf;
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        let frames: Vec<Vec<u8>> = (0..40).map(|i| frame(&bytes(100, i))).collect();
        let total: usize = frames.iter().map(Vec::len).sum();
        let mut c = conn([Read::Data(frames.concat())]);
        let mut served = event(&mut c, env, true, false, false, t0);
        // Up to two read chunks are moved as ever (a reader may just be late); past
        // that the reader is behind, and what it has not taken stays put.
        assert!(c.input().len() >= 2 * rig.config.read_chunk);
        let first = c.input().chunk().as_ptr();
        for _ in 0..100 {
            if !served.again {
                break;
            }
            served = event(&mut c, env, false, false, false, t0);
        }
        assert_eq!(c.input().len(), total, "all of it read, no reader waiting");
        assert_eq!(
            c.input().chunk().as_ptr(),
            first,
            "the backlog was moved (copied) to make room"
        );
        let mut len = frame_len;
        for (i, want) in frames.iter().enumerate() {
            match c.poll_frame(env, &cx(), &mut len) {
                Poll::Ready(Ok(Some(f))) => assert_eq!(f[..], want[..], "frame {i}"),
                other => panic!("frame {i}: {other:?}"),
            }
        }
        assert!(c.input().is_empty());
    }

    #[test]
    fn the_peer_close_comes_after_all_buffered_input() {
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        let (one, two) = (frame(&bytes(30, 6)), frame(&bytes(700, 7)));
        let mut c = conn([Read::Data([one.clone(), two.clone()].concat()), Read::Eof]);
        // The event says the peer closed: short reads go on to its end of stream.
        let _ = event(&mut c, env, true, false, true, t0);
        assert!(c.is_peer_closed());
        let mut len = frame_len;
        for want in [one, two] {
            match c.poll_frame(env, &cx(), &mut len) {
                Poll::Ready(Ok(Some(f))) => assert_eq!(f[..], want[..]),
                other => panic!("expected a frame, got {other:?}"),
            }
        }
        assert!(matches!(
            c.poll_frame(env, &cx(), &mut len),
            Poll::Ready(Ok(None))
        ));

        // A close inside a frame is an error, after the whole frames before it.
        let whole = frame(b"whole");
        let mut c = conn([
            Read::Data([&whole[..], &frame(b"cut")[..5]].concat()),
            Read::Eof,
        ]);
        let _ = event(&mut c, env, true, false, true, t0);
        assert!(
            matches!(c.poll_frame(env, &cx(), &mut len), Poll::Ready(Ok(Some(f))) if f[..] == whole[..])
        );
        assert_eq!(
            kind(c.poll_frame(env, &cx(), &mut len)),
            ErrorKind::UnexpectedEof
        );
    }

    #[test]
    fn a_read_error_comes_after_the_input_before_it_and_stays() {
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        let f = frame(b"before the reset");
        let mut c = conn([
            Read::Data(f.clone()),
            Read::Fail(ErrorKind::ConnectionReset),
        ]);
        let _ = event(&mut c, env, true, false, true, t0);
        let mut len = frame_len;
        assert!(
            matches!(c.poll_frame(env, &cx(), &mut len), Poll::Ready(Ok(Some(g))) if g[..] == f[..])
        );
        for _ in 0..2 {
            assert_eq!(
                kind(c.poll_frame(env, &cx(), &mut len)),
                ErrorKind::ConnectionReset
            );
        }
        assert_eq!(kind(c.poll_flush(env, &cx())), ErrorKind::ConnectionReset);
        assert_eq!(fake(&mut c).read_calls, 2, "no read after the error");
    }

    #[test]
    fn a_partial_write_resumes_on_writable_from_where_it_stopped() {
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        let parts = [bytes(100, 8), bytes(200, 9), bytes(300, 10)];
        let mut c = conn([]);
        for p in &parts {
            c.output().insert(Bytes::from(p.clone()));
        }
        fake(&mut c).writes = [Write::Take(150), Write::Fail(ErrorKind::WouldBlock)].into();
        assert!(c.poll_flush(env, &cx()).is_pending());
        assert_eq!(fake(&mut c).sent, parts.concat()[..150]);
        assert_eq!(c.output().len(), 450);
        // Until the socket is writable, nobody writes (the poller will).
        let calls = fake(&mut c).write_calls;
        assert!(c.poll_flush(env, &cx()).is_pending());
        let _ = event(&mut c, env, false, false, false, t0);
        assert_eq!(fake(&mut c).write_calls, calls);
        // WRITABLE: a short write, a signal, then room for the rest.
        fake(&mut c).writes = [
            Write::Take(10),
            Write::Fail(ErrorKind::Interrupted),
            Write::Take(1000),
        ]
        .into();
        let served = event(&mut c, env, false, true, false, t0);
        assert!(served.wake_write.is_some(), "the flushing task is woken");
        assert_eq!(
            fake(&mut c).sent,
            parts.concat(),
            "every byte once, in order"
        );
        assert!(matches!(c.poll_flush(env, &cx()), Poll::Ready(Ok(()))));
    }

    #[test]
    fn write_errors_stay_and_a_write_of_nothing_is_one() {
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        for (script, want) in [
            (Write::Fail(ErrorKind::BrokenPipe), ErrorKind::BrokenPipe),
            (Write::Take(0), ErrorKind::WriteZero),
        ] {
            let mut c = conn([]);
            c.output().write(b"lost");
            fake(&mut c).writes = [script].into();
            assert_eq!(kind(c.poll_flush(env, &cx())), want);
            assert_eq!(kind(c.poll_flush(env, &cx())), want, "kept");
            let mut len = frame_len;
            assert_eq!(kind(c.poll_frame(env, &cx(), &mut len)), want);
            let _ = event(&mut c, env, true, true, false, t0);
            assert_eq!(fake(&mut c).read_calls, 0, "a failed socket is not read");
        }
    }

    /// A handler made of two closures, for `on_input` and `on_timer`.
    struct Hooks<I, T>(I, T);

    impl<I, T> Handler for Hooks<I, T>
    where
        I: FnMut(&mut Io<'_>) + Send + 'static,
        T: FnMut(&mut Io<'_>) + Send + 'static,
    {
        fn on_input(&mut self, io: &mut Io<'_>) {
            (self.0)(io)
        }

        fn on_timer(&mut self, io: &mut Io<'_>) {
            (self.1)(io)
        }
    }

    /// An inline handler that echoes its input and, per frame, sets a deadline that
    /// many milliseconds from `io.now()` (0: clears it); its timer writes `T` and
    /// records the `io.now()` it saw.
    fn timed(fired: &Arc<Mutex<Vec<Instant>>>) -> impl Handler {
        let fired = Arc::clone(fired);
        Hooks(
            |io: &mut Io<'_>| {
                while let Ok(Some(len)) = frame_len(io.input()) {
                    if io.input().len() < len {
                        break;
                    }
                    let f = io.input().next(len);
                    let ms = u64::from(f[4]);
                    let now = io.now();
                    io.wake_at((ms > 0).then(|| now + Duration::from_millis(ms)));
                    io.output().insert(f);
                }
            },
            move |io: &mut Io<'_>| {
                fired.lock().unwrap().push(io.now());
                io.output().write(b"T");
            },
        )
    }

    /// A connection served by `timed`, whose first frame, at `t0`, sets a deadline `ms`
    /// later.
    fn timed_conn(
        env: Env<'_>,
        fired: &Arc<Mutex<Vec<Instant>>>,
        t0: Instant,
        ms: u8,
    ) -> ConnState<Fake> {
        let mut c = conn([Read::Data(frame(&[ms]))]);
        assert!(!c.serve_inline(env, timed(fired), t0));
        let _ = event(&mut c, env, true, false, false, t0);
        c
    }

    #[test]
    fn a_deadline_fires_at_its_time_and_not_before() {
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        let ms = Duration::from_millis;
        let fired = Arc::new(Mutex::new(Vec::new()));
        let mut c = timed_conn(env, &fired, t0, 50);
        assert_eq!(fake(&mut c).sent, frame(&[50]), "echoed");
        assert_eq!(
            c.take_schedule(),
            Some(t0 + ms(50)),
            "for the poller's timers"
        );
        assert_eq!(c.take_schedule(), None, "once");
        // Due early (the poller woke for another reason): nothing happens.
        let _ = c.on_timer(env, t0 + ms(49));
        assert!(fired.lock().unwrap().is_empty());
        assert_eq!(c.take_schedule(), Some(t0 + ms(50)), "scheduled again");
        let served = c.on_timer(env, t0 + ms(51));
        assert_eq!(
            *fired.lock().unwrap(),
            [t0 + ms(51)],
            "io.now() is the turn's"
        );
        assert_eq!(
            fake(&mut c).sent,
            [&frame(&[50])[..], b"T"].concat(),
            "sent"
        );
        assert!(!served.close);
        assert_eq!(
            c.take_schedule(),
            None,
            "cleared before the call, not set again"
        );
        let _ = c.on_timer(env, t0 + ms(1000));
        assert_eq!(fired.lock().unwrap().len(), 1, "once");
    }

    #[test]
    fn a_deadline_moved_later_or_cleared_does_not_fire_early() {
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        let ms = Duration::from_millis;
        let fired = Arc::new(Mutex::new(Vec::new()));
        let mut c = timed_conn(env, &fired, t0, 50);
        assert_eq!(c.take_schedule(), Some(t0 + ms(50)));
        // 10 ms later a frame moves it to 10 + 200.
        fake(&mut c).reads.push_back(Read::Data(frame(&[200])));
        let _ = event(&mut c, env, true, false, false, t0 + ms(10));
        assert_eq!(c.take_schedule(), Some(t0 + ms(210)));
        let _ = c.on_timer(env, t0 + ms(50));
        assert!(fired.lock().unwrap().is_empty(), "moved later");
        let _ = c.on_timer(env, t0 + ms(210));
        assert_eq!(*fired.lock().unwrap(), [t0 + ms(210)]);
        // Set again, then cleared: the entry that comes due finds nothing.
        fake(&mut c).reads.push_back(Read::Data(frame(&[5])));
        let _ = event(&mut c, env, true, false, false, t0 + ms(300));
        fake(&mut c).reads.push_back(Read::Data(frame(&[0])));
        let _ = event(&mut c, env, true, false, false, t0 + ms(301));
        let _ = c.on_timer(env, t0 + ms(305));
        assert_eq!(fired.lock().unwrap().len(), 1, "cleared");
        assert_eq!(c.take_schedule(), None);
    }

    #[test]
    fn on_timer_closes_once_its_output_is_sent() {
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        let handler = Hooks(
            |io: &mut Io<'_>| {
                let now = io.now();
                io.wake_at(Some(now));
            },
            |io: &mut Io<'_>| {
                io.output().write(b"timed out");
                io.close();
            },
        );
        let mut c = conn([]);
        fake(&mut c).writes = [Write::Take(3), Write::Fail(ErrorKind::WouldBlock)].into();
        assert_eq!(c.resume(env, t0), None, "no handler yet");
        assert!(!c.serve_inline(env, handler, t0));
        assert_eq!(c.resume(env, t0), Some(false));
        assert_eq!(c.take_schedule(), Some(t0));
        let served = c.on_timer(env, t0);
        assert!(!served.close, "output is left");
        assert_eq!(fake(&mut c).sent, b"tim");
        let served = event(&mut c, env, false, true, false, t0);
        assert!(served.close, "sent: close now");
        assert_eq!(fake(&mut c).sent, b"timed out");
        let closed = c.close(env);
        assert!(closed.socket.is_some() && closed.handler.is_some());
        assert!(!c.is_open());
    }

    #[test]
    fn an_inline_handler_sees_all_input_then_the_peer_close() {
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = Arc::clone(&seen);
        let handler = Hooks(
            move |io: &mut Io<'_>| {
                let n = io.input().len();
                let closed = io.peer_closed();
                s.lock().unwrap().push((n, closed));
                let all = io.input().next(n);
                io.output().insert(all);
            },
            |_: &mut Io<'_>| {},
        );
        let data = bytes(3000, 11);
        let mut c = conn([Read::Data(data.clone()), Read::Eof]);
        assert!(!c.serve_inline(env, handler, t0));
        // The read budget spreads it over turns; the close is told with the last bytes.
        let mut served = event(&mut c, env, true, false, true, t0);
        for _ in 0..10 {
            if !served.again {
                break;
            }
            served = event(&mut c, env, false, false, false, t0);
        }
        let seen = seen.lock().unwrap();
        assert_eq!(seen.iter().map(|s| s.0).sum::<usize>(), 3000, "{seen:?}");
        let told: Vec<bool> = seen.iter().map(|s| s.1).collect();
        assert_eq!(told.iter().filter(|&&t| t).count(), 1, "{seen:?}");
        assert_eq!(told.last(), Some(&true), "{seen:?}");
        assert_eq!(fake(&mut c).sent, data);
        assert!(served.close);
    }

    /// A connection as an io_uring poller serves it, over a fake socket (the ring does
    /// the reads; direct writes go to the fake).
    fn ring_conn() -> ConnState<Fake> {
        ConnState::new(Fake::default(), ConnIo::uring())
    }

    fn ring_ops(c: &mut ConnState<Fake>, max_iovecs: usize) -> Vec<Op> {
        let mut ops = Vec::new();
        c.take_ops(mio::Token(7), max_iovecs, &mut ops);
        ops
    }

    fn describe(ops: &[Op]) -> Vec<String> {
        ops.iter()
            .map(|op| match op {
                Op::Recv { .. } => "recv".to_string(),
                Op::CancelRecv { .. } => "cancel".to_string(),
                Op::Send { chunks, .. } => {
                    format!("send {}", chunks.iter().map(Bytes::len).sum::<usize>())
                }
                Op::Listen { .. } => "listen".to_string(),
                Op::Close { .. } => "close".to_string(),
            })
            .collect()
    }

    #[test]
    fn a_ring_connection_arms_its_receive_once_and_never_reads_itself() {
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        let mut c = ring_conn();
        assert_eq!(describe(&ring_ops(&mut c, 64)), ["recv"]);
        assert!(ring_ops(&mut c, 64).is_empty(), "asked once");
        let f = frame(&bytes(3000, 1));
        let _ = c.on_recv(env, Received::Data(&f[..1000], true), t0);
        let _ = c.on_recv(env, Received::Data(&f[1000..], true), t0);
        let mut len = frame_len;
        match c.poll_frame(env, &cx(), &mut len) {
            Poll::Ready(Ok(Some(got))) => assert_eq!(got[..], f[..]),
            other => panic!("expected the frame, got {other:?}"),
        }
        assert_eq!(fake(&mut c).read_calls, 0, "the ring reads, not the socket");
        assert!(
            ring_ops(&mut c, 64).is_empty(),
            "the receive is still armed"
        );
    }

    #[test]
    fn a_ring_receive_is_cancelled_at_the_mark_and_armed_again_when_input_is_taken() {
        let config = Config {
            input_high_water: 4096,
            ..config()
        };
        let (rig, t0) = (Rig::new(config), Instant::now());
        let env = rig.env();
        let mut c = ring_conn();
        let _ = ring_ops(&mut c, 64);
        let _ = c.on_recv(env, Received::Data(&bytes(5000, 2), true), t0);
        assert_eq!(describe(&ring_ops(&mut c, 64)), ["cancel"]);
        // Data the kernel had already taken still arrives, then the cancel's end.
        let _ = c.on_recv(env, Received::Data(&bytes(100, 3), true), t0);
        let _ = c.on_recv(env, Received::Ended, t0);
        assert!(ring_ops(&mut c, 64).is_empty(), "paused: nothing armed");
        assert_eq!(c.input().len(), 5100, "nothing lost");
        c.input().skip(5100);
        c.consumed(env);
        assert_eq!(
            describe(&ring_ops(&mut c, 64)),
            ["recv"],
            "taken: armed again"
        );
        // A receive that ends for want of buffers is armed again at once.
        let _ = c.on_recv(env, Received::Ended, t0);
        assert_eq!(describe(&ring_ops(&mut c, 64)), ["recv"]);
        // End of stream ends it for good.
        let served = c.on_recv(env, Received::Eof, t0);
        assert!(served.wake_read.is_none(), "nobody waits");
        assert!(ring_ops(&mut c, 64).is_empty());
        assert!(c.is_peer_closed());
    }

    #[test]
    fn a_ring_send_takes_the_output_whole_and_a_short_one_goes_again_in_order() {
        let (rig, t0) = (Rig::new(config()), Instant::now());
        let env = rig.env();
        let mut c = ring_conn();
        let _ = ring_ops(&mut c, 64);
        let fired = Arc::new(Mutex::new(Vec::new()));
        assert!(!c.serve_inline(env, timed(&fired), t0));
        let _ = ring_ops(&mut c, 64);
        let (a, b) = (frame(&bytes(300, 4)), frame(&bytes(500, 5)));
        let both = [a.clone(), b.clone()].concat();
        let _ = c.on_recv(env, Received::Data(&both, true), t0);
        assert_eq!(fake(&mut c).write_calls, 0, "on the poller: no sendmsg");
        let ops = ring_ops(&mut c, 1);
        assert_eq!(
            describe(&ops),
            [format!("send {}", a.len())],
            "one node per iovec"
        );
        assert_eq!(c.unsent(), both.len(), "in flight counts as unsent");
        // While it is on the ring, a flush from elsewhere waits and sends nothing.
        assert!(
            c.poll_flush(
                Env {
                    on_poller: false,
                    ..env
                },
                &cx()
            )
            .is_pending()
        );
        assert_eq!(fake(&mut c).write_calls, 0);
        // The kernel took 100 bytes: the rest goes back in front, and out again.
        let Op::Send { chunks, .. } = ops.into_iter().next().unwrap() else {
            unreachable!()
        };
        let rest = vec![chunks[0].slice(100..)];
        let served = c.on_sent(env, Ok(rest), t0);
        assert!(served.wake_write.is_none(), "not all sent yet");
        let ops = ring_ops(&mut c, 64);
        let Op::Send { chunks, .. } = &ops[0] else {
            panic!("{:?}", describe(&ops))
        };
        assert_eq!(chunks.concat(), both[100..].to_vec());
        let served = c.on_sent(env, Ok(Vec::new()), t0);
        assert!(served.wake_write.is_some(), "the waiting flush is woken");
        assert_eq!(c.unsent(), 0);
        assert!(matches!(
            c.poll_flush(
                Env {
                    on_poller: false,
                    ..env
                },
                &cx()
            ),
            Poll::Ready(Ok(()))
        ));
    }

    #[test]
    fn a_ring_flush_from_another_thread_calls_sendmsg_and_hands_a_full_socket_to_the_ring() {
        let (rig, _) = (Rig::new(config()), Instant::now());
        let env = Env {
            on_poller: false,
            ..rig.env()
        };
        let mut c = ring_conn();
        let _ = ring_ops(&mut c, 64);
        c.output().write(&bytes(1000, 6));
        fake(&mut c).writes = [Write::Take(400), Write::Fail(ErrorKind::WouldBlock)].into();
        assert!(c.poll_flush(env, &cx()).is_pending());
        assert_eq!(fake(&mut c).sent, bytes(1000, 6)[..400]);
        assert_eq!(describe(&ring_ops(&mut c, 64)), ["send 600"]);
        let served = c.on_sent(
            env,
            Err(io::Error::from(ErrorKind::ConnectionReset)),
            Instant::now(),
        );
        assert!(served.wake_write.is_some());
        assert_eq!(kind(c.poll_flush(env, &cx())), ErrorKind::ConnectionReset);
    }
}
