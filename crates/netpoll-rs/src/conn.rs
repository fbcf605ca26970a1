//! A connection on the reactor: its state machine ([`ConnState`]) over a real socket,
//! registered with a poller, and the faces its users see: the async one that tokio
//! tasks use ([`Connection`]) and the handle on one served inline ([`InlineHandle`]).

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use bytes::Bytes;
use mio::Token;
use thrift_wire::LinkBuffer;

use crate::conn_state::{ConnState, Env, Served};
use crate::handler::Handler;
use crate::poller::{Entry, Outbox, PollerShared, ReplyDue};
use crate::sync::lock;
use crate::sys::{Ready, Received, Stream};

/// What the poller thread and the connection's users share.
#[derive(Debug)]
pub(crate) struct ConnShared {
    token: Token,
    poller: Arc<PollerShared>,
    state: Mutex<ConnState<Stream>>,
}

impl ConnShared {
    /// Registers `stream` with `poller`, under a fresh token.
    pub(crate) fn register(poller: &Arc<PollerShared>, stream: Stream) -> io::Result<Connection> {
        let shared = poller.insert(|token| {
            Arc::new(ConnShared {
                token,
                poller: Arc::clone(poller),
                state: Mutex::new(ConnState::new(stream, poller.io.conn_io())),
            })
        })?;
        let registered = {
            let mut st = lock(&shared.state);
            match st.stream_mut() {
                // Watched by epoll, or (on a ring) its receive asked for.
                Some(s) => poller.io.register_stream(s, shared.token).inspect(|()| {
                    shared.driver_ops(&mut st, None);
                }),
                None => Err(io::Error::other("the connection closed while registering")),
            }
        };
        // Dropped on an error, it closes and leaves the slab.
        let conn = Connection { shared };
        registered?;
        Ok(conn)
    }

    /// The poller's pieces, for a call from another thread.
    fn env(&self) -> Env<'_> {
        Env {
            config: &self.poller.config,
            pool: &self.poller.pool,
            on_poller: false,
        }
    }

    /// The poller's pieces, for a call in its turn.
    fn poller_env(&self) -> Env<'_> {
        Env {
            on_poller: true,
            ..self.env()
        }
    }

    /// Queues what the state asks of the poller's driver (a ring's receives and
    /// sends; nothing under epoll), while its lock is held: in `out` on the poller,
    /// else with the driver's queue (which wakes the poller).
    fn driver_ops(&self, st: &mut ConnState<Stream>, out: Option<&mut Outbox>) {
        let max_iovecs = self.poller.config.max_iovecs;
        match out {
            Some(out) => st.take_ops(self.token, max_iovecs, &mut out.ops),
            None => self
                .poller
                .io
                .queue_with(|ops| st.take_ops(self.token, max_iovecs, ops)),
        }
    }

    /// The state, locked.
    fn state(&self) -> MutexGuard<'_, ConnState<Stream>> {
        lock(&self.state)
    }

    /// Schedules the deadline the state machine asks for, while its lock is held (the
    /// poller's timers are locked after a connection's state, never before).
    fn schedule(&self, st: &mut ConnState<Stream>, on_poller: bool) {
        if let Some(at) = st.take_schedule() {
            self.poller.schedule(self.token, at, on_poller);
        }
    }

    /// What the poller does after serving the connection: schedule, let go of the lock,
    /// wake, close. Returns whether to serve it again on the next turn.
    fn served(
        &self,
        mut st: MutexGuard<'_, ConnState<Stream>>,
        served: Served,
        out: &mut Outbox,
    ) -> bool {
        self.schedule(&mut st, true);
        self.driver_ops(&mut st, Some(out));
        drop(st);
        for w in [served.wake_read, served.wake_write].into_iter().flatten() {
            w.wake();
        }
        if served.close {
            self.close();
        }
        served.again && !served.close
    }

    /// Closes the socket (deregistered first) and wakes whoever waits; later calls fail
    /// with `NotConnected`. Unsent output is dropped.
    fn close(&self) {
        let closed = self.state().close(self.env());
        if let Some(stream) = closed.socket {
            self.poller.release(self.token, stream);
        }
        self.poller.remove(self.token);
        for w in closed.wakers.into_iter().flatten() {
            w.wake();
        }
        if let Some(handler) = closed.handler {
            handler.closed(closed.error);
        }
    }
}

impl ConnShared {
    /// Serves the connection in the poller's turn: `f` on its state, then what the
    /// poller must do after; listed in `out.again` when it has more to read.
    fn serve_turn(
        self: Arc<Self>,
        out: &mut Outbox,
        f: impl FnOnce(&mut ConnState<Stream>, Env<'_>) -> Served,
    ) {
        let mut st = self.state();
        let served = f(&mut st, self.poller_env());
        if self.served(st, served, out) {
            out.again.push(self);
        }
    }
}

impl Entry for ConnShared {
    fn on_event(self: Arc<Self>, ready: Ready, now: Instant, out: &mut Outbox) {
        self.serve_turn(out, |st, env| {
            st.on_event(env, ready.readable, ready.writable, ready.closed, now)
        });
    }

    fn on_timer(self: Arc<Self>, now: Instant, out: &mut Outbox) {
        self.serve_turn(out, |st, env| st.on_timer(env, now));
    }

    fn on_recv(self: Arc<Self>, received: Received<'_>, now: Instant, out: &mut Outbox) {
        self.serve_turn(out, |st, env| st.on_recv(env, received, now));
    }

    fn on_sent(self: Arc<Self>, rest: io::Result<Vec<Bytes>>, now: Instant, out: &mut Outbox) {
        self.serve_turn(out, |st, env| st.on_sent(env, rest, now));
    }

    fn close(&self) {
        ConnShared::close(self);
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
        let shared = &self.shared;
        poll_fn(|cx| {
            let mut st = shared.state();
            let polled = st.poll_frame(shared.env(), cx, &mut frame_len);
            shared.driver_ops(&mut st, None);
            polled
        })
        .await
    }

    /// [`read_frame`](Self::read_frame) for a reply this side is owed: a client's
    /// after it sent a call. While it waits, the connection's poller counts a reply
    /// as due, and (with [`Config::adaptive_spin`](crate::Config::adaptive_spin)) may
    /// poll for it for up to twice the usual delay of a reply instead of sleeping:
    /// the reply is picked up without a wake-up. A read that is not owed anything (a
    /// server's, waiting for the next request) should stay with `read_frame`.
    pub async fn read_reply<F>(&self, frame_len: F) -> io::Result<Option<Bytes>>
    where
        F: FnMut(&mut LinkBuffer) -> io::Result<Option<usize>>,
    {
        let _due = self.reply_due();
        self.read_frame(frame_len).await
    }

    /// Counts a reply on this connection as due until the guard is dropped, for a
    /// reply that another task reads (a mux client's calls, whose replies one reader
    /// routes): see [`read_reply`](Self::read_reply).
    pub fn reply_due(&self) -> ReplyDue<'_> {
        self.shared.poller.reply_due()
    }

    /// Gives `f` the input received so far, to `peek`, `next` or `skip` in it directly
    /// (the reader side of Netpoll's API; what `f` leaves stays for later reads). Taking
    /// input may lift the high-water pause, so reading resumes right after. Does not
    /// wait: [`read_frame`](Self::read_frame) is the way to wait for input.
    pub fn with_input<R>(&self, f: impl FnOnce(&mut LinkBuffer) -> R) -> R {
        let mut st = self.shared.state();
        let out = f(st.input());
        st.consumed(self.shared.env());
        self.shared.driver_ops(&mut st, None);
        out
    }

    /// Queues `bytes` for sending, without copying them.
    pub fn write(&self, bytes: Bytes) {
        self.shared.state().output().insert(bytes);
    }

    /// Gives `f` the output buffer to write into (`LinkBuffer::write`, `malloc`,
    /// `BufMut`...), e.g. to encode a message in place.
    pub fn write_with<R>(&self, f: impl FnOnce(&mut LinkBuffer) -> R) -> R {
        f(self.shared.state().output())
    }

    /// Sends the queued output: `sendmsg` on this thread now, and if the socket fills up,
    /// the rest from the poller when it drains. Resolves once all of it is in the
    /// kernel.
    pub async fn flush(&self) -> io::Result<()> {
        let shared = &self.shared;
        poll_fn(|cx| {
            let mut st = shared.state();
            let polled = st.poll_flush(shared.env(), cx);
            shared.driver_ops(&mut st, None);
            polled
        })
        .await
    }

    /// Flushes, then shuts down the sending side: the peer reads end of stream after the
    /// last byte, and this side can still read what the peer sends.
    pub async fn close_write(&self) -> io::Result<()> {
        self.flush().await?;
        self.shared.state().shutdown_write()
    }

    /// Bytes received and not yet taken.
    pub fn input_len(&self) -> usize {
        self.shared.state().input().len()
    }

    /// Bytes of input buffer this connection holds (0 while it has no unconsumed input
    /// and its block is back in the poller's pool).
    pub fn input_capacity(&self) -> usize {
        self.shared.state().input().tail_mut().capacity()
    }

    /// Bytes queued and not yet sent (under io_uring, those of the send on the ring
    /// count until it completes).
    pub fn output_len(&self) -> usize {
        self.shared.state().unsent()
    }

    /// The peer's address (TCP only).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.shared.state().stream()?.peer_addr()
    }

    /// This end's address (TCP only).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.shared.state().stream()?.local_addr()
    }

    /// Whether the socket is still open on this side.
    pub fn is_open(&self) -> bool {
        self.shared.state().is_open()
    }

    /// Whether the peer closed its side (an event said so, or its end of stream was
    /// read) or the socket failed: nothing more will arrive. The poller notices it
    /// while nobody reads, so an idle connection whose peer went away says so here
    /// though it is still [open](Self::is_open) on this side (a pool must not lend it
    /// for a request that could get no reply).
    pub fn is_peer_closed(&self) -> bool {
        self.shared.state().is_peer_closed()
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
            let mut st = self.shared.state();
            // Called off the poller, the handler gets a clock reading of its own.
            let mut close_now = st.serve_inline(self.shared.env(), handler, Instant::now());
            // Data that came while no one read (its edge already taken) gets a new edge,
            // so the poller reads it. (A ring's receive is armed already.)
            if !close_now
                && let Some(stream) = st.stream_mut()
                && let Err(e) = self.shared.poller.io.rearm(stream, self.shared.token)
            {
                st.fail(&e);
                close_now = true;
            }
            self.shared.schedule(&mut st, false);
            self.shared.driver_ops(&mut st, None);
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
            let mut st = self.shared.state();
            let Some(close_now) = st.resume(self.shared.env(), Instant::now()) else {
                return false;
            };
            self.shared.schedule(&mut st, false);
            self.shared.driver_ops(&mut st, None);
            close_now
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
        self.shared.state().is_open()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let inline = self.shared.state().is_inline();
        if !inline {
            self.shared.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::io::Write;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use super::*;
    use crate::poller::MAX_DUE_SPUN;
    use crate::{Config, Reactor};

    /// Frames of a 4-byte big-endian length and that many bytes.
    fn frame_len(buf: &mut LinkBuffer) -> io::Result<Option<usize>> {
        Ok(buf
            .peek(4)
            .map(|h| 4 + u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize))
    }

    /// A reply counts as due on the poller while a reader waits for it, and no longer
    /// once the reader has it or gives up (its future dropped).
    #[test]
    fn a_reply_is_due_while_its_reader_waits_and_not_after() {
        let reactor = Reactor::new(Config {
            pollers: 1,
            ..Config::default()
        })
        .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let conn = reactor.connect_tcp(addr, Duration::from_secs(5)).unwrap();
        let (mut peer, _) = listener.accept().unwrap();
        let due = || conn.shared.poller.replies_due();
        let mut cx = Context::from_waker(Waker::noop());

        assert!(!due());
        {
            let mut read = pin!(conn.read_reply(frame_len));
            assert!(read.as_mut().poll(&mut cx).is_pending());
            assert!(due(), "the reader waits");
        }
        assert!(!due(), "the reader gave up");

        peer.write_all(&[0, 0, 0, 2, b'o', b'k']).unwrap();
        let mut read = pin!(conn.read_reply(frame_len));
        let started = std::time::Instant::now();
        let got = loop {
            if let Poll::Ready(got) = read.as_mut().poll(&mut cx) {
                break got.unwrap().unwrap();
            }
            assert!(due(), "the reader waits");
            assert!(started.elapsed() < Duration::from_secs(10), "no reply");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(&got[..], b"\0\0\0\x02ok");
        assert!(!due(), "the reader has its reply");

        // More replies due than a poller spins for: none counts until one is taken.
        let mut guards: Vec<_> = (0..MAX_DUE_SPUN).map(|_| conn.reply_due()).collect();
        assert!(due(), "{MAX_DUE_SPUN} due");
        guards.push(conn.reply_due());
        assert!(!due(), "one more than the poller spins for");
        guards.pop();
        assert!(due());
        drop(guards);
        assert!(!due());
        reactor.shutdown();
    }
}
