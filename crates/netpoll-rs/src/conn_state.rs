//! A connection's state machine: its input and output `LinkBuffer`s, edge-triggered
//! readiness kept in user space, the read budget and the high-water mark, partial writes
//! resumed on WRITABLE, the inline handler and its deadline, and the async face's
//! waiting readers and writers.
//!
//! It owns its socket through the [`Socket`] seam and knows no poller: the poller's
//! pieces it needs (settings, read blocks) come in an [`Env`], the time as an argument,
//! and what the poller must do after (wake a task, serve the connection again, close
//! it, schedule a deadline) goes back in a [`Served`] or [`ConnState::take_schedule`].
//! So it can be tested with a scripted fake socket and a fake clock.

use std::io::{self, IoSlice};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::{Buf, Bytes};
use thrift_codec::LinkBuffer;

use crate::config::Config;
use crate::handler::{Handler, Io};
use crate::pool::{BlockPool, Class};
use crate::sys::Socket;
use crate::timer::{self, Due};

pub(crate) const MAX_IOVECS: usize = 64;

/// The poller's pieces a connection uses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Env<'a> {
    pub(crate) config: &'a Config,
    /// The poller's read blocks.
    pub(crate) pool: &'a BlockPool,
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
    /// A deadline the poller's timers must come due at or before: it was set, or it
    /// came up and had moved later ([`take_schedule`](Self::take_schedule)).
    schedule: Option<Instant>,
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
    pub(crate) fn new(stream: S) -> Self {
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
            schedule: None,
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
            || (self.inline && self.write_pending && self.output.len() >= high_water)
    }

    /// Reads while the socket has data, at most `reads_per_turn` times and up to the
    /// input limit. Returns whether anything changed for a reader.
    pub(crate) fn fill(&mut self, env: Env<'_>) -> bool {
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
    /// gone is reused in place; otherwise the tail moves to a pooled block of the class
    /// that holds the whole frame (or a read chunk), taking the unconsumed bytes along
    /// (one copy, of less than the frame), so that the frame ends up in one block and is
    /// handed out without a copy. The old block goes back to the pool.
    fn make_room(&mut self, pool: &BlockPool) -> usize {
        let read_chunk = pool.block_size();
        // The awaited frame's bytes still to come (0 when none is awaited).
        let rest = self.want.saturating_sub(self.input.len());
        let enough = if rest > 0 { rest } else { read_chunk / 4 };
        let tail = self.input.tail_mut();
        let spare = |t: &bytes::BytesMut| t.capacity() - t.len();
        let roomy = spare(tail) >= enough || (tail.capacity() > 0 && tail.try_reclaim(enough));
        if !roomy {
            let (mut block, class) = pool.take(tail.len() + enough.max(read_chunk));
            block.extend_from_slice(tail);
            let mut old = std::mem::replace(tail, block);
            old.clear();
            let old_class = std::mem::replace(&mut self.input_class, class);
            pool.give(old, old_class);
        }
        spare(self.input.tail_mut()).min(read_chunk.max(rest))
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
        if !self.output.is_empty()
            && !self.write_pending
            && self.flush_inline(env.config.max_iovecs).is_err()
        {
            return true;
        }
        self.give_back_block(env.pool);
        self.closing && self.output.is_empty()
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
            let failed = self.flush_inline(env.config.max_iovecs).is_err();
            if failed || self.output.is_empty() {
                wake_write = self.write_waker.take();
            }
        }
        self.serve(env, now, wake_write)
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
        self.serve(env, now, None)
    }

    /// Reads what the socket has, wakes a reader that has what it waits for, calls the
    /// inline handler for new input, and says whether to serve the connection again on
    /// the next turn (it has more to read).
    fn serve(&mut self, env: Env<'_>, now: Instant, mut wake_write: Option<Waker>) -> Served {
        let mut wake_read = None;
        if self.readable {
            self.fill(env);
            let ready = self.eof
                || self.error.is_some()
                || (self.want > 0 && self.input.len() >= self.want);
            if ready {
                wake_read = self.read_waker.take();
            }
        }
        let close = self.run_handler(env, now, Call::Input);
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
            if self.stream.is_none() {
                return Poll::Ready(Err(closed()));
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
            && let Err(e) = self.flush_inline(env.config.max_iovecs)
        {
            return Poll::Ready(Err(e));
        }
        if let Some(e) = self.error() {
            return Poll::Ready(Err(e));
        }
        if self.output.is_empty() {
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
        self.stream.is_none() || self.run_handler(env, now, Call::Input)
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
        Some(self.run_handler(env, now, Call::Input))
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
