//! The state of one stream as its halves hold it, and what they do with it: each
//! operation runs the session's core under its lock, and waits on the stream's
//! wake-ups.

use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use thrift_wire::{LinkBuffer, Utf8Bytes};

use super::core::StreamCore;
use super::error::{HandlerError, Metadata, StreamError};
use super::session::{After, FLUSH_HIGH_WATER, Session, Signals, Wrote};
use crate::transport::FrameIo;

/// A stream the peer opened, handed to the server's accept loop.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) stream: Arc<StreamShared>,
    pub(crate) header: Metadata,
    /// The `isn` key: the service the peer named.
    pub(crate) service: Option<Utf8Bytes>,
}

/// How far off the time a send gives the core may be.
const SEND_CLOCK_TOLERANCE: Duration = Duration::from_millis(10);

/// The state of one stream as its halves hold it: its id, and the session whose
/// core keeps the rest. The core lets the stream go when this is dropped.
#[derive(Debug)]
pub(crate) struct StreamShared {
    pub(crate) id: i32,
    pub(crate) method: Utf8Bytes,
    pub(crate) session: Arc<Session>,
    signals: Arc<Signals>,
}

impl StreamShared {
    pub(super) fn new(
        id: i32,
        method: Utf8Bytes,
        session: Arc<Session>,
        signals: Arc<Signals>,
    ) -> Self {
        StreamShared {
            id,
            method,
            session,
            signals,
        }
    }
}

impl StreamShared {
    /// Runs `f` on the core for this stream; asks the flusher to send what it
    /// wrote.
    fn with_core<R>(&self, f: impl FnOnce(&mut StreamCore, &mut LinkBuffer) -> R) -> (R, Wrote) {
        let (r, wrote) = self.session.with_core(f);
        if wrote.any {
            self.session.want_flush();
        }
        (r, wrote)
    }

    /// Leaves the session's table, without telling the peer.
    pub(crate) fn forget(&self) {
        let id = self.id;
        self.session.with_core(|core, _| core.forget(id));
    }

    /// Ends the stream with `error` here, and tells the peer with an rst unless the
    /// stream was over already. Wakes both halves.
    pub(crate) fn reset(&self, error: StreamError) {
        let id = self.id;
        self.with_core(|core, out| core.reset(out, id, error));
    }

    /// Whether the stream is over (both directions ended, or reset).
    pub(crate) fn is_over(&self) -> bool {
        self.session.inner().core.is_over(self.id)
    }

    /// The peer's header, waiting for it.
    pub(crate) async fn header(&self) -> Result<Metadata, StreamError> {
        loop {
            if let Poll::Ready(header) = self.session.inner().core.peer_header(self.id) {
                return header;
            }
            self.signals.readable.notified().await;
        }
    }

    /// The peer's trailer, once its direction ended cleanly.
    pub(crate) fn trailer(&self) -> Option<Metadata> {
        self.session.inner().core.peer_trailer(self.id)
    }

    /// Sets what this side's header carries (before its first message).
    pub(crate) fn set_header(&self, header: Metadata) {
        self.session.inner().core.set_header(self.id, header);
    }

    /// Sets what this side's trailer carries.
    pub(crate) fn set_trailer(&self, trailer: Metadata) {
        self.session.inner().core.set_trailer(self.id, trailer);
    }

    /// The next message, `Ok(None)` once the peer ended its direction cleanly.
    pub(crate) async fn recv(&self) -> Result<Option<Bytes>, StreamError> {
        let id = self.id;
        loop {
            if let (Poll::Ready(got), _) = self.with_core(|core, out| core.recv(out, id)) {
                return got;
            }
            self.signals.readable.notified().await;
        }
    }

    /// Sends one message of `size` bytes that `encode` writes, waiting while the
    /// peer's credit is spent.
    pub(crate) async fn send_with(
        &self,
        size: usize,
        encode: impl FnOnce(&mut LinkBuffer),
    ) -> Result<(), StreamError> {
        let id = self.id;
        let mut encode = Some(encode);
        let wrote = loop {
            // Only a client's wait for the server's window (100 ms by default)
            // starts from it: a tick of the coarse clock is close enough.
            let now = self.session.timer.now_within(SEND_CLOCK_TOLERANCE);
            let (sent, wrote) = self.session.with_output(|core, out| {
                let encode = |out: &mut LinkBuffer| {
                    if let Some(encode) = encode.take() {
                        encode(out);
                    }
                };
                core.send(out, id, size, encode, now)
            });
            match sent {
                Poll::Ready(sent) => break sent.map(|()| wrote)?,
                Poll::Pending => self.signals.writable.notified().await,
            }
        };
        if let Some(m) = &self.session.metrics {
            m.sent.inc();
            m.sent_bytes.inc_by(size as u64);
        }
        if !self.signals.span.is_disabled() {
            tracing::trace!(parent: &self.signals.span, bytes = size, "stream message sent");
        }
        if self.session.driven {
            // The driver sends what the streams wrote once their turn is over. A
            // sender far ahead of the socket waits for the driver's next flush
            // (a wait the driver's turn ends on, so that it flushes), and any
            // sender gives way now and then, so that one that never waits for
            // credit (a peer that does not count) cannot hold the connection's
            // task.
            if wrote.pending > FLUSH_HIGH_WATER {
                let flushed = self.session.flushed.notified();
                self.session.want_flush();
                flushed.await;
            } else {
                self.session.want_flush();
                tokio::task::coop::consume_budget().await;
            }
            Ok(())
        } else if wrote.pending > FLUSH_HIGH_WATER {
            // The socket is behind: this sender waits for it.
            self.session.flush().await
        } else {
            // Sent by the flusher once the tasks ready now have written theirs: the
            // messages of many streams share a send.
            self.session.want_flush();
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
        let id = self.id;
        let (closed, _) =
            (self.session).with_core(|core, out| core.close_send(out, id, error, after_rst));
        closed?;
        if self.session.driven {
            // Sent with what the other streams write in this turn.
            self.session.want_flush();
            return Ok(());
        }
        self.session.flush().await
    }

    /// Waits until the stream is reset (cancelled, deadline, connection), for a
    /// handler that wants to stop early.
    pub(crate) async fn reset_reason(&self) -> StreamError {
        loop {
            if let Some(e) = self.session.inner().core.reset_reason(self.id) {
                return e;
            }
            self.signals.writable.notified().await;
        }
    }

    /// The server's handler is done and its trailer sent: whatever the client still
    /// sends on the stream is dropped as a closed stream's.
    pub(crate) fn finish(&self) {
        self.forget();
        self.signals.readable.notify_one();
    }

    /// The cost of the messages queued.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> u64 {
        self.session.inner().core.queued(self.id)
    }
}

impl Drop for StreamShared {
    fn drop(&mut self) {
        self.session.release(self.id);
    }
}

/// What makes a stream's shared state: a stream this side opens, and those the
/// peer opened.
impl Session {
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
            let stream = opened.map(|id| {
                let signals = self.signals(&mut inner, id, &method, service);
                Arc::new(StreamShared::new(id, method, Arc::clone(self), signals))
            });
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

    /// The streams the peer opened since the last call, for the caller to run or
    /// refuse.
    pub(crate) fn take_opened(self: &Arc<Self>) -> Vec<Opened> {
        let mut inner = self.inner();
        let accepted = std::mem::take(&mut inner.accepted);
        let mut opened = Vec::with_capacity(accepted.len());
        for a in accepted {
            let signals = match inner.signals.get(&a.id) {
                Some(s) => Arc::clone(s),
                None => {
                    let service = a.service.as_deref().unwrap_or_default();
                    self.signals(&mut inner, a.id, &a.method, service)
                }
            };
            opened.push(Opened {
                stream: Arc::new(StreamShared::new(a.id, a.method, Arc::clone(self), signals)),
                header: a.header,
                service: a.service,
            });
        }
        opened
    }
}
