//! What runs a session: its reader and its end, its timekeeper task, and a
//! client's flusher task.

use std::io;
use std::sync::Arc;

use bytes::Bytes;

use super::StreamConfig;
use super::core::Side;
use super::error::StreamError;
use super::frame::frame_len;
use super::session::{CLOSING_FLUSH_WAIT, Session, Timer};
use crate::metrics::StreamCounters;
use crate::transport::{Conn, FrameIo};

/// Frames read in a row before the reader yields to other work.
const READ_RUN: u32 = 64;

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
        let session = Session::new(conn, Side::Client, config, timer, metrics, false);
        tokio::spawn(flush_later(Arc::clone(&session)));
        tokio::spawn(keep_time(Arc::clone(&session)));
        let reader = Arc::clone(&session).read(None);
        let ender = Arc::clone(&session);
        tokio::spawn(async move {
            let error = reader.await;
            ender.end(error).await;
            drop(reactor);
        });
        session
    }

    /// A server's session on `conn`, driven by its caller in a task of the
    /// caller's: it polls [`read`](Self::read) (started with the connection's first
    /// frame), takes the streams the peer opened ([`take_opened`](Self::take_opened))
    /// and runs them, and flushes ([`flush`](Self::flush)) once
    /// [`poll_flush_wanted`](Self::poll_flush_wanted) says that frames wait, after the
    /// streams ready in that turn have written theirs: they leave in one send.
    /// [`end`](Self::end) closes it.
    pub(crate) fn server(
        conn: Conn,
        config: StreamConfig,
        metrics: Option<StreamCounters>,
    ) -> Arc<Session> {
        let session = Session::new(conn, Side::Server, config, Timer::default(), metrics, true);
        tokio::spawn(keep_time(Arc::clone(&session)));
        session
    }

    /// Gives the core frames until the connection ends or the session is stopped;
    /// then every stream still open fails, and the error is returned. It yields
    /// now and then to a caller that polls it beside other work.
    pub(crate) async fn read(self: Arc<Self>, first: Option<Bytes>) -> StreamError {
        let limits = self.config.frame;
        let mut first = first;
        let mut run = 0u32;
        loop {
            if !self.inner().core.wants_frame() {
                // A peer that does not take part in flow control filled a queue: the
                // only brake it leaves.
                tokio::select! {
                    biased;
                    () = self.room.notified() => continue,
                    () = self.stop.notified() => return self.lose(closed_here()),
                }
            }
            let bytes = match first.take() {
                Some(b) => Ok(Some(b)),
                // A frame already in the input is taken without a look at `stop`.
                None => tokio::select! {
                    biased;
                    read = self.conn.read_frame(|input| match input.peek(4) {
                        Some(head) => frame_len(head, &limits)
                            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
                        None => Ok(None),
                    }) => read,
                    () = self.stop.notified() => return self.lose(closed_here()),
                },
            };
            let bytes = match bytes {
                Ok(Some(b)) => b,
                Ok(None) => {
                    return self.lose(StreamError::Connection {
                        kind: io::ErrorKind::UnexpectedEof,
                        message: "the peer closed the connection".into(),
                    });
                }
                Err(e) => return self.lose(StreamError::connection(&e)),
            };
            let (handled, wrote) = self.with_core(|core, out| core.handle_input(out, &bytes));
            if let Err(e) = handled {
                return self.lose(e);
            }
            if wrote.any {
                self.want_flush();
            }
            run = run.wrapping_add(1);
            if run.is_multiple_of(READ_RUN) {
                tokio::task::yield_now().await;
            }
        }
    }

    /// The connection ended with `error`: every stream still open fails with it;
    /// the flusher and the timekeeper end.
    fn lose(&self, error: StreamError) -> StreamError {
        self.with_core(|core, _| core.connection_lost(error.clone()));
        self.want_flush();
        self.flushed.notify_waiters();
        self.sooner.notify_one();
        error
    }

    /// Closes the connection, which ended with `error` (or is ended here): sends
    /// what the output holds first (an rst, a trailer), waiting at most
    /// [`CLOSING_FLUSH_WAIT`] on the session's clock for a peer that does not read.
    pub(crate) async fn end(&self, error: StreamError) {
        self.lose(error);
        tokio::select! {
            _ = self.flush() => {}
            () = self.timer.after(CLOSING_FLUSH_WAIT) => {
                tracing::debug!("stream connection: the peer took no output before the close");
            }
        }
        self.conn.close();
        self.closed.send_replace(true);
    }
}

/// The error of a session this side stopped.
pub(crate) fn closed_here() -> StreamError {
    StreamError::Connection {
        kind: io::ErrorKind::ConnectionAborted,
        message: "the session was closed here".into(),
    }
}

/// The flusher: sends what senders left in the output, once per wake-up, until the
/// connection has ended (a failed send fails the connection, which the reader
/// sees).
pub(super) async fn flush_later(session: Arc<Session>) {
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
pub(super) async fn keep_time(session: Arc<Session>) {
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
                    session.want_flush();
                }
            }
            () = session.sooner.notified() => {}
        }
    }
}
