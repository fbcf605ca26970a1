//! A connection: its socket, its input and output `LinkBuffer`s, and the async face that
//! tokio tasks use.

use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes};
use mio::Token;
use thrift_codec::LinkBuffer;

use crate::config::Config;
use crate::poller::{PollerShared, lock};
use crate::sys::Stream;

/// The most `iovec`s one `writev` takes (`Config::max_iovecs` is clamped to this).
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
}

impl ConnState {
    pub(crate) fn new(stream: Stream) -> Self {
        ConnState {
            stream: Some(stream),
            input: LinkBuffer::new(),
            output: LinkBuffer::new(),
            readable: false,
            write_pending: false,
            eof: false,
            peer_closed: false,
            error: None,
            want: 0,
            read_waker: None,
            write_waker: None,
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

    /// Reads while the socket has data, at most `reads_per_turn` times and up to the
    /// input limit. Returns whether anything changed for a reader.
    fn fill(&mut self, poller: &PollerShared) -> bool {
        let Config {
            read_chunk,
            reads_per_turn,
            input_high_water,
            ..
        } = *poller.config;
        let limit = self.input_limit(input_high_water);
        let mut changed = false;
        for _ in 0..reads_per_turn {
            // After end of stream or an error there is nothing more to read, however many
            // events (a later WRITABLE still carries RDHUP) mark the socket readable.
            if self.eof || self.error.is_some() {
                self.readable = false;
                break;
            }
            if !self.readable || self.input.len() >= limit {
                break;
            }
            let Some(stream) = self.stream.as_mut() else {
                break;
            };
            let tail = self.input.tail_mut();
            if tail.capacity() == 0 {
                *tail = poller.pool.take();
            }
            // Reuses the block in place when the frames cut from it are gone.
            tail.reserve(read_chunk);
            let asked = (tail.capacity() - tail.len()).min(read_chunk);
            match stream.read_into(tail, asked) {
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
        if self.input.is_empty() && !self.readable {
            poller.pool.give(std::mem::take(self.input.tail_mut()));
        }
    }

    /// Writes queued output with `writev` until it is all gone or the socket is full
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
    /// The poller's handling of one event. Connections that still have data to read
    /// after their turn's budget go into `again`, to be served on the next turn.
    pub(crate) fn on_event(
        self: &Arc<Self>,
        readable: bool,
        writable: bool,
        closed: bool,
        again: &mut Vec<Arc<Self>>,
    ) {
        let config = &self.poller.config;
        let mut st = lock(&self.state);
        let mut wake_read = None;
        let mut wake_write = None;
        if readable {
            st.readable = true;
        }
        if closed {
            st.peer_closed = true;
        }
        if st.readable {
            st.fill(&self.poller);
            let limit = st.input_limit(config.input_high_water);
            let ready = st.eof || st.error.is_some() || (st.want > 0 && st.input.len() >= st.want);
            if ready {
                wake_read = st.read_waker.take();
            }
            if st.readable && st.input.len() < limit && st.stream.is_some() {
                again.push(Arc::clone(self));
            }
        }
        if writable && st.write_pending {
            st.write_pending = false;
            let failed = st.flush_inline(config.max_iovecs).is_err();
            if failed || st.output.is_empty() {
                wake_write = st.write_waker.take();
            }
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
    }

    /// Closes the socket (deregistered first) and wakes whoever waits; later calls fail
    /// with `NotConnected`. Unsent output is dropped.
    pub(crate) fn close(&self) {
        let (stream, wakers) = {
            let mut st = lock(&self.state);
            let stream = st.stream.take();
            st.readable = false;
            (stream, [st.read_waker.take(), st.write_waker.take()])
        };
        if let Some(mut stream) = stream {
            let _ = stream.deregister(&self.poller.registry);
            drop(stream);
        }
        lock(&self.poller.slab).remove(self.token);
        for w in wakers.into_iter().flatten() {
            w.wake();
        }
    }
}

/// A connection on the reactor. Its socket is read by a poller thread into the input
/// buffer; tasks take whole frames out with [`read_frame`](Self::read_frame), queue
/// output with [`write`](Self::write) and send it with [`flush`](Self::flush), which
/// calls `writev` right away on the caller's thread and involves the poller only when
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

    /// Sends the queued output: `writev` on this thread now, and if the socket fills up,
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

    /// Closes the socket now (as dropping does).
    pub fn close(&self) {
        self.shared.close();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shared.close();
    }
}
