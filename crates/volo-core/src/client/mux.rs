//! Mux connections: many calls in flight on one connection, each reply matched
//! to its call by the sequence id in its TTHeader.
//!
//! Each connection has one reader task that cuts reply frames and hands each to the
//! call waiting on its sequence id. Callers encode their request straight into the
//! connection's output buffer (one message per `write_with`, so messages never
//! interleave) and leave the send to the connection's flusher task, which yields once
//! (so that the callers ready at the same moment, such as those whose replies one
//! read brought, write theirs first) and then sends everything in one write: the
//! calls that arrive together share a send, and the server reads them together. A
//! call alone on its connection (no other waits for a reply) sends its own request at
//! once, as nobody would share the write; a caller whose connection has more than 256
//! KiB waiting flushes itself and waits for the socket; a oneway call flushes itself
//! too, as it has no reply to wait for. A reply that no call waits for any more (its call timed out or was dropped) is read and discarded. When the
//! connection fails, every call waiting on it fails at once and the pool opens a new one
//! for the next call.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use tokio::sync::{Notify, oneshot};

use super::pool::Dialer;
use super::{ClientConfig, Error};
use crate::codec::ttheader::HeaderLimits;
use crate::codec::{FrameSplitter, Limits, Protocol};
use crate::context::Address;
use crate::envelope;
use crate::transport::{Conn, FrameIo};

/// The connections to one peer, handed out in turn.
#[derive(Debug)]
pub(crate) struct MuxPool {
    dialer: Dialer,
    protocol: Protocol,
    limits: Limits,
    /// `ClientConfig::wire.header`: what a control frame's header may hold.
    header_limits: HeaderLimits,
    /// A slot per connection; a slot's lock is held while it connects, so callers that
    /// find it empty wait for that one connect instead of each opening their own.
    slots: Box<[tokio::sync::Mutex<Option<Arc<MuxConn>>>]>,
    next: AtomicUsize,
}

impl MuxPool {
    pub(crate) fn new(
        reactor: Option<netpoll_rs::Reactor>,
        addr: Address,
        config: &ClientConfig,
    ) -> Self {
        MuxPool {
            dialer: Dialer::new(reactor, addr, config),
            protocol: config.format.protocol,
            limits: config.wire.frame,
            header_limits: config.wire.header,
            slots: (0..config.pool.mux_per_instance.max(1))
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// The next connection in turn, opened (again) if it is not open (within
    /// `connect_timeout`, else the client's).
    pub(crate) async fn get(
        &self,
        connect_timeout: Option<std::time::Duration>,
    ) -> Result<Arc<MuxConn>, Error> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[i].lock().await;
        if let Some(conn) = slot.as_ref().filter(|c| c.is_open()) {
            return Ok(Arc::clone(conn));
        }
        let conn = self.dialer.connect(connect_timeout).await?;
        let splitter =
            FrameSplitter::new(crate::codec::Framing::TTHeader, self.protocol, self.limits);
        let mux = MuxConn::start(conn, splitter, self.header_limits);
        if let Some(old) = slot.replace(Arc::clone(&mux)) {
            // One the server is closing still gets the replies of its calls, then ends.
            if !old.is_closing() {
                old.stop();
            }
        }
        Ok(mux)
    }
}

impl Drop for MuxPool {
    fn drop(&mut self) {
        for slot in &mut self.slots {
            if let Some(conn) = slot.get_mut().take() {
                conn.stop();
            }
        }
    }
}

/// One mux connection.
#[derive(Debug)]
pub(crate) struct MuxConn {
    conn: Conn,
    waiting: Mutex<Waiting>,
    seq: AtomicI32,
    /// One flush at a time: a connection wakes one flusher when its socket drains.
    flushing: tokio::sync::Mutex<()>,
    /// Tells the flusher task that requests wait in the output.
    flush_wanted: Notify,
    /// Tells the reader to stop (the pool is gone or replaced this connection).
    stop: Notify,
    /// The server said it is closing the connection (`crrst`): no new call goes on it,
    /// and it ends once the calls on it have their replies.
    closing: AtomicBool,
}

/// The calls waiting for replies, by sequence id; `closed` once the reader has ended.
#[derive(Debug, Default)]
struct Waiting {
    calls: HashMap<i32, oneshot::Sender<io::Result<Bytes>>>,
    closed: Option<(io::ErrorKind, String)>,
}

impl MuxConn {
    /// Wraps `conn` and starts its reader task, which reads control frames within
    /// `header_limits`.
    fn start(conn: Conn, splitter: FrameSplitter, header_limits: HeaderLimits) -> Arc<Self> {
        let mux = Arc::new(MuxConn {
            conn,
            waiting: Mutex::new(Waiting::default()),
            seq: AtomicI32::new(1),
            flushing: tokio::sync::Mutex::new(()),
            flush_wanted: Notify::new(),
            stop: Notify::new(),
            closing: AtomicBool::new(false),
        });
        tokio::spawn(read_replies(Arc::clone(&mux), splitter, header_limits));
        tokio::spawn(flush_later(Arc::clone(&mux)));
        mux
    }

    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether calls can still be made on it.
    pub(crate) fn is_open(&self) -> bool {
        !self.is_closing() && self.waiting().closed.is_none() && self.conn.is_open()
    }

    /// Whether the server said it is closing the connection.
    fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// The server said it is closing the connection: no new call goes on it.
    pub(crate) fn retire(&self) {
        self.closing.store(true, Ordering::Release);
    }

    pub(crate) fn conn(&self) -> &Conn {
        &self.conn
    }

    fn stop(&self) {
        self.stop.notify_one();
    }

    /// A sequence id for a call; with `reply`, the call waits for its reply under it.
    pub(crate) fn register(self: &Arc<Self>, reply: bool) -> io::Result<MuxCall> {
        let mut waiting = self.waiting();
        if let Some((kind, why)) = &waiting.closed {
            return Err(io::Error::new(*kind, why.clone()));
        }
        if self.is_closing() {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the server is closing the connection",
            ));
        }
        loop {
            let seq = self.seq.fetch_add(1, Ordering::Relaxed);
            // 0 is the server's, for its control frames.
            if seq == 0 {
                continue;
            }
            if !reply {
                return Ok(MuxCall {
                    mux: Arc::clone(self),
                    seq,
                    reply: None,
                    alone: false,
                });
            }
            // After the ids wrap, one may still be waiting from long ago: skip it.
            if let std::collections::hash_map::Entry::Vacant(slot) = waiting.calls.entry(seq) {
                let (tx, rx) = oneshot::channel();
                slot.insert(tx);
                return Ok(MuxCall {
                    mux: Arc::clone(self),
                    seq,
                    reply: Some(rx),
                    alone: waiting.calls.len() == 1,
                });
            }
        }
    }

    /// Sends what is in the output, after any flush in progress.
    pub(crate) async fn flush(&self) -> io::Result<()> {
        let _turn = self.flushing.lock().await;
        self.conn.flush().await
    }

    /// A request was written: the flusher sends it with the others written by then.
    /// The caller sends it now instead when its call was `alone` on the connection
    /// (no other call waits for a reply, so no other request is likely to share the
    /// write, and the flusher's turn would only delay it: at one caller that cost 7%
    /// of the calls per second), or when the bytes waiting in the output are above
    /// the mark; then it waits for the socket.
    async fn sent(&self, alone: bool) -> io::Result<()> {
        if alone || self.conn.write_with(|out| out.len()) > FLUSH_HIGH_WATER {
            return self.flush().await;
        }
        self.flush_wanted.notify_one();
        Ok(())
    }
}

/// Bytes waiting in a connection's output above which a caller flushes itself.
const FLUSH_HIGH_WATER: usize = 256 * 1024;

/// The flusher: once per wake-up, after one yield (the callers ready now write
/// first), sends what the callers left in the output; it ends with the reader (a
/// failed send fails the connection, which the reader then sees).
async fn flush_later(mux: Arc<MuxConn>) {
    loop {
        mux.flush_wanted.notified().await;
        if mux.waiting().closed.is_some() {
            return;
        }
        tokio::task::yield_now().await;
        if mux.flush().await.is_err() {
            mux.conn.close();
            mux.stop();
            return;
        }
    }
}

/// A call's place on a mux connection: its sequence id, and the reply when it
/// comes. Dropped before the reply came (a timeout, a cancelled call), it gives the id
/// up, and the reply is discarded when it arrives.
#[derive(Debug)]
pub(crate) struct MuxCall {
    mux: Arc<MuxConn>,
    seq: i32,
    reply: Option<oneshot::Receiver<io::Result<Bytes>>>,
    /// No other call waited for a reply on the connection when this one was made.
    alone: bool,
}

impl MuxCall {
    pub(crate) fn seq_id(&self) -> i32 {
        self.seq
    }

    /// Its request was written: sends it, now or with the others (see
    /// [`MuxConn::sent`]).
    pub(crate) async fn sent(&self) -> io::Result<()> {
        self.mux.sent(self.alone).await
    }

    pub(crate) fn mux(&self) -> &MuxConn {
        &self.mux
    }

    /// The reply frame.
    pub(crate) async fn reply(&mut self) -> io::Result<Bytes> {
        let Some(rx) = self.reply.as_mut() else {
            return Err(io::Error::other("a oneway call has no reply"));
        };
        // The connection's poller may poll for it rather than sleep while it is due.
        let _due = self.mux.conn.reply_due();
        let reply = rx.await.unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the connection's reader stopped",
            ))
        });
        self.reply = None;
        reply
    }
}

impl Drop for MuxCall {
    fn drop(&mut self) {
        if self.reply.is_some() {
            self.mux.waiting().calls.remove(&self.seq);
        }
    }
}

/// The reader task: routes each reply frame to its call until the connection ends or
/// the pool stops it, then fails every call still waiting.
async fn read_replies(mux: Arc<MuxConn>, mut splitter: FrameSplitter, header_limits: HeaderLimits) {
    let (kind, why) = loop {
        let frame = tokio::select! {
            frame = mux.conn.read_frame(|input| Ok(splitter.frame_len(input)?)) => frame,
            () = mux.stop.notified() => {
                break (io::ErrorKind::ConnectionAborted, "the client closed the connection".to_string());
            }
        };
        let frame = match frame {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                break (
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection".to_string(),
                );
            }
            Err(e) => break (e.kind(), format!("reading replies: {e}")),
        };
        let Some(seq) = envelope::ttheader_seq_id(&frame) else {
            break (
                io::ErrorKind::InvalidData,
                format!("a reply frame of {} bytes has no TTHeader", frame.len()),
            );
        };
        if seq == 0 {
            // A control frame: Kitex's server says so when it closes the connection.
            if envelope::control_says_closing(&frame, &header_limits) {
                mux.retire();
            }
        } else if let Some(tx) = mux.waiting().calls.remove(&seq) {
            // The call may have given up just now: then the reply goes nowhere.
            let _ = tx.send(Ok(frame));
        }
        if mux.is_closing() {
            // Closing: done once no call waits (checked and marked in one go, so that
            // no call is registered in between).
            let mut waiting = mux.waiting();
            if waiting.calls.is_empty() {
                waiting.closed = Some((
                    io::ErrorKind::ConnectionAborted,
                    "the server closed the connection".to_string(),
                ));
                drop(waiting);
                mux.conn.close();
                mux.flush_wanted.notify_one();
                return;
            }
        }
    };
    let calls = {
        let mut waiting = mux.waiting();
        waiting.closed = Some((kind, why.clone()));
        std::mem::take(&mut waiting.calls)
    };
    for (_, tx) in calls {
        let _ = tx.send(Err(io::Error::new(kind, why.clone())));
    }
    mux.conn.close();
    // The flusher ends too.
    mux.flush_wanted.notify_one();
}
