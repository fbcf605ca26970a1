//! Streaming calls' client side (see [`stream`](crate::stream)): [`StreamClient`]
//! opens streams of one service over a few multiplexed connections to one address,
//! on any transport the ping-pong client has (netpoll-rs or tokio TCP and Unix
//! sockets, shared memory, TLS).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use std::{fmt, io};

use thrift_codec::{Message, Utf8Bytes};

use super::ClientConfig;
use super::pool::Dialer;
use crate::clock::Clock;
use crate::context::Address;
use crate::metrics::StreamCounters;
use crate::stream::handle::{CancelOnDrop, Receiver, Sender};
use crate::stream::session::{Session, StreamShared, Timer};
use crate::stream::{Metadata, StreamConfig, StreamError};

/// Opens streams to one address: each stream a [`ClientStream`], many sharing a
/// connection (`connections` of them, opened when first needed, in turn).
pub struct StreamClient {
    service: String,
    dialer: Dialer,
    config: StreamConfig,
    timeout: Option<Duration>,
    timer: Timer,
    /// The client's stream counters, when its configuration has metrics.
    metrics: Option<StreamCounters>,
    slots: Box<[tokio::sync::Mutex<Option<Arc<Session>>>]>,
    next: AtomicUsize,
}

impl fmt::Debug for StreamClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamClient")
            .field("service", &self.service)
            .field("config", &self.config)
            .field("timeout", &self.timeout)
            .field("connections", &self.slots.len())
            .finish_non_exhaustive()
    }
}

impl StreamClient {
    /// A client of `service` (sent as `isn`, as Kitex's client does) at `addr`, with
    /// the transport, TLS and connect timeout of `config` (its framing, protocol and
    /// pool settings do not apply: streams are TTHeader and Binary). Must run inside
    /// a tokio runtime.
    pub fn new(
        service: impl Into<String>,
        addr: Address,
        config: &ClientConfig,
    ) -> io::Result<Self> {
        let reactor = super::transport::reactor_for(config)?;
        Ok(StreamClient {
            service: service.into(),
            dialer: Dialer::new(reactor, addr, config),
            config: StreamConfig::default(),
            timeout: None,
            timer: Timer::default(),
            metrics: config
                .observability
                .metrics
                .as_ref()
                .map(|m| m.streams(false).clone()),
            slots: (0..1).map(|_| tokio::sync::Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
        })
    }

    /// Sets the streams' limits and window.
    pub fn with_config(mut self, config: StreamConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets the clock of the streams' deadlines and of the wait for a server's window
    /// (default the real one; tests give a [`ManualClock`](crate::clock::ManualClock)).
    /// Applies to connections opened afterwards.
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.timer = Timer::new(clock);
        self
    }

    /// Sets how many connections the streams share (default 1).
    pub fn with_connections(mut self, n: usize) -> Self {
        self.slots = (0..n.max(1))
            .map(|_| tokio::sync::Mutex::new(None))
            .collect();
        self
    }

    /// Sets a deadline for every stream, from its opening: when it passes, the stream
    /// is reset (Kitex's deadline code) and its halves fail with
    /// [`StreamError::DeadlineExceeded`]. Default none.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Opens a stream of `method` with `header` as its header's metadata.
    pub async fn open<Req: Message, Resp: Message>(
        &self,
        method: &str,
        header: &Metadata,
    ) -> Result<ClientStream<Req, Resp>, StreamError> {
        self.open_with_timeout(method, header, self.timeout).await
    }

    /// [`open`](Self::open) with a deadline of its own (`None`: none).
    pub async fn open_with_timeout<Req: Message, Resp: Message>(
        &self,
        method: &str,
        header: &Metadata,
        timeout: Option<Duration>,
    ) -> Result<ClientStream<Req, Resp>, StreamError> {
        let method = Utf8Bytes::from(method.to_owned());
        let mut last = None;
        // Each connection in turn, from the next one, until one takes the stream.
        for _ in 0..self.slots.len() {
            let session = self.session().await?;
            match session.open(method.clone(), &self.service, header).await {
                Ok(stream) => {
                    let deadline = timeout.map(|t| expire(&stream, t, &self.timer));
                    return Ok(ClientStream::new(stream, deadline));
                }
                Err(e @ StreamError::Refused(_)) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| StreamError::Refused("no connection".into())))
    }

    /// Streams open across its connections.
    #[cfg(test)]
    pub(crate) fn open_streams(&self) -> usize {
        self.slots
            .iter()
            .filter_map(|s| {
                s.try_lock()
                    .ok()
                    .and_then(|s| s.as_ref().map(|s| s.open_streams()))
            })
            .sum()
    }

    /// The next connection in turn, opened (again) if it is not open.
    async fn session(&self) -> Result<Arc<Session>, StreamError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[i].lock().await;
        if let Some(s) = slot.as_ref().filter(|s| s.is_open()) {
            return Ok(Arc::clone(s));
        }
        let conn = self
            .dialer
            .connect()
            .await
            .map_err(|e| StreamError::Connection {
                kind: io::ErrorKind::ConnectionRefused,
                message: e.to_string(),
            })?;
        let session = Session::client(
            conn,
            self.dialer.reactor().cloned(),
            self.config,
            self.timer.clone(),
            self.metrics.clone(),
        );
        if let Some(old) = slot.replace(Arc::clone(&session)) {
            old.stop();
        }
        Ok(session)
    }
}

impl Drop for StreamClient {
    fn drop(&mut self) {
        for slot in &mut self.slots {
            if let Some(s) = slot.get_mut().take() {
                // Streams still open keep their connection until the last one ends.
                s.orphan();
            }
        }
    }
}

/// Resets `stream` with a deadline error once `timeout` has passed, unless it ended
/// first: a timer task, stopped when the stream's handle goes.
fn expire(
    stream: &Arc<StreamShared>,
    timeout: Duration,
    timer: &Timer,
) -> tokio::task::AbortHandle {
    let stream = Arc::downgrade(stream);
    let passed = timer.after(timeout);
    tokio::spawn(async move {
        passed.await;
        if let Some(stream) = stream.upgrade()
            && !stream.is_over()
        {
            stream.reset(StreamError::DeadlineExceeded);
        }
    })
    .abort_handle()
}

/// A client's stream: it sends requests and receives responses, and is reset
/// (cancelled) if dropped before it ended. [`split`](Self::split) gives its halves,
/// to send and receive from different tasks.
#[derive(Debug)]
pub struct ClientStream<Req, Resp> {
    sender: Sender<Req>,
    receiver: Receiver<Resp>,
}

impl<Req: Message, Resp: Message> ClientStream<Req, Resp> {
    fn new(stream: Arc<StreamShared>, deadline: Option<tokio::task::AbortHandle>) -> Self {
        let guard = Arc::new(CancelOnDrop {
            stream: Arc::clone(&stream),
            deadline,
        });
        ClientStream {
            sender: Sender::new(Arc::clone(&stream), Some(Arc::clone(&guard))),
            receiver: Receiver::new(stream, Some(guard)),
        }
    }

    /// Sends a request.
    pub async fn send(&mut self, request: &Req) -> Result<(), StreamError> {
        self.sender.send(request).await
    }

    /// Ends the requests (an empty trailer).
    pub async fn close_send(&mut self) -> Result<(), StreamError> {
        self.sender.close_send().await
    }

    /// The next response; `Ok(None)` once the server ended the stream cleanly.
    pub async fn recv(&mut self) -> Result<Option<Resp>, StreamError> {
        self.receiver.recv().await
    }

    /// The server's header.
    pub async fn header(&self) -> Result<Metadata, StreamError> {
        self.receiver.header().await
    }

    /// The server's trailer, once it ended the stream cleanly.
    pub fn trailer(&self) -> Option<Metadata> {
        self.receiver.trailer()
    }

    /// The two halves; the stream is reset if both go before it ended.
    pub fn split(self) -> (Sender<Req>, Receiver<Resp>) {
        (self.sender, self.receiver)
    }

    /// The receiving half, as a `futures::Stream` of responses.
    pub fn receiver(&mut self) -> &mut Receiver<Resp> {
        &mut self.receiver
    }
}
