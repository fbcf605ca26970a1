//! A connection core driven by a test: bytes in, bytes out, a fake clock, calls polled
//! by hand. No socket, no runtime, no sleep: what the server does with a byte sequence
//! and a time is tested here exactly, and the drivers' socket tests need only check
//! the wiring.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use thrift_wire::LinkBuffer;

use super::call::Done;
use super::conn_core::{ConnCore, Expired, Next};
use super::state::ServerState;
use super::{Dispatch, Server, ServerConfig};
use crate::context::Address;
use crate::test_support::TestService;

type Call<R> = Pin<Box<dyn Future<Output = Done<R>> + Send>>;

/// How the harness's connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Closed {
    /// The core failed it: its error's text.
    Error(String),
    /// A timeout passed.
    Timeout(Expired),
}

/// One connection of a server, on a [`ConnCore`], driven the way the poller's driver
/// drives it: each call is polled once when it starts, and again when the test says
/// ([`Harness::poll_calls`]).
pub(crate) struct Harness<D: Dispatch> {
    core: ConnCore<D>,
    input: LinkBuffer,
    output: LinkBuffer,
    /// The fake clock.
    pub(crate) now: Instant,
    calls: Vec<Call<D::Reply>>,
    /// Bytes the core asked for before the next frame can be cut.
    pub(crate) need: Option<usize>,
    pub(crate) closed: Option<Closed>,
    /// The bytes of what the core's `start` gave for the last call and of the call it
    /// made (see [`start_call`](super::call::start_call)).
    pub(crate) sizes: Option<(usize, usize)>,
}

impl Harness<super::deadline::Deadline<TestService>> {
    /// A connection to a server of [`TestService`] with `config` and the limiter
    /// `limit`, and the service's shared state (its gate, counters).
    pub(crate) fn test_service(
        config: ServerConfig,
        limit: super::LimitConfig,
    ) -> (Self, Arc<SharedTest>) {
        let service = TestService::default();
        let handles = Arc::new(SharedTest {
            gate: Arc::clone(&service.gate.0),
            notified: Arc::clone(&service.notified),
            gauge: Arc::clone(&service.gauge),
        });
        let shared = Arc::new(
            Server::new(service)
                .config(config)
                .limit(limit)
                .into_shared(),
        );
        (Harness::new(shared), handles)
    }
}

/// What a test reaches of its [`TestService`].
pub(crate) struct SharedTest {
    pub(crate) gate: Arc<tokio::sync::Semaphore>,
    pub(crate) notified: Arc<std::sync::atomic::AtomicUsize>,
    pub(crate) gauge: Arc<crate::test_support::Gauge>,
}

impl<D: Dispatch> Harness<D> {
    /// A connection (from a fixed peer) of the server whose connections share `shared`.
    pub(crate) fn new(shared: Arc<ServerState<D>>) -> Self {
        let now = Instant::now();
        let peer = Address::Tcp(std::net::SocketAddr::from(([127, 0, 0, 1], 4000)));
        Harness {
            core: ConnCore::new(shared, Some(peer), now),
            input: LinkBuffer::new(),
            output: LinkBuffer::new(),
            now,
            calls: Vec::new(),
            need: None,
            closed: None,
            sizes: None,
        }
    }

    /// Another connection of the same server (same limits, same budget).
    pub(crate) fn sibling(&self) -> Self {
        let mut h = Harness::new(Arc::clone(self.core.shared()));
        h.now = self.now;
        h
    }

    /// The peer sends `bytes`.
    pub(crate) fn send(&mut self, bytes: &[u8]) {
        assert!(self.closed.is_none(), "sending on a closed connection");
        self.input.write(bytes);
        self.turn();
    }

    /// The clock moves on by `by`; the core's timeout runs if it is due.
    pub(crate) fn advance(&mut self, by: Duration) {
        self.now += by;
        if self.closed.is_none()
            && let Err(why) = self.core.handle_timeout(self.now)
        {
            self.closed = Some(Closed::Timeout(why));
        }
    }

    /// When the core next needs the time.
    pub(crate) fn deadline(&self) -> Option<Duration> {
        self.core
            .poll_timeout()
            .map(|due| due.saturating_duration_since(self.now))
    }

    /// The server shuts down.
    pub(crate) fn shutdown(&mut self) {
        self.core.shutdown(&mut self.output, self.now);
        self.turn();
    }

    /// Polls the calls in progress again (after the test let some go on), answers
    /// those done, and takes more frames.
    pub(crate) fn poll_calls(&mut self) {
        self.turn();
    }

    /// Calls in progress.
    pub(crate) fn in_progress(&self) -> usize {
        self.calls.len()
    }

    /// What the server wrote since the last call.
    pub(crate) fn take_output(&mut self) -> Vec<u8> {
        let n = self.output.len();
        self.output.next(n).to_vec()
    }

    /// Bytes received and not yet taken.
    pub(crate) fn buffered(&self) -> usize {
        self.input.len()
    }

    /// What the poller's driver does with new input: answers the calls that are
    /// done, then cuts frames and starts their calls while the core wants them.
    fn turn(&mut self) {
        if self.closed.is_some() {
            return;
        }
        if let Err(e) = self.serve() {
            self.closed = Some(Closed::Error(e.to_string()));
        }
    }

    fn serve(&mut self) -> std::io::Result<()> {
        let mut cx = Context::from_waker(Waker::noop());
        let mut i = 0;
        while i < self.calls.len() {
            if let Poll::Ready(done) = self.calls[i].as_mut().poll(&mut cx) {
                drop(self.calls.remove(i));
                self.core.finish(&mut self.output, done, self.now)?;
            } else {
                i += 1;
            }
        }
        self.need = None;
        loop {
            match self.core.next_frame(&mut self.input, self.now)? {
                Next::Frame(frame) => {
                    if let Some(make) = self.core.start(&mut self.output, frame, self.now)? {
                        let made = std::mem::size_of_val(&make);
                        let mut call: Call<D::Reply> = Box::pin(make());
                        self.sizes = Some((made, std::mem::size_of_val(&*call)));
                        match call.as_mut().poll(&mut cx) {
                            Poll::Ready(done) => {
                                self.core.finish(&mut self.output, done, self.now)?;
                            }
                            Poll::Pending => self.calls.push(call),
                        }
                    }
                }
                Next::Need(len) => {
                    self.need = Some(len);
                    return Ok(());
                }
                Next::Wait => return Ok(()),
            }
        }
    }
}

/// The test's side of the connection: writing sends, reading takes what the server
/// wrote. A read with nothing written fails with `WouldBlock` while the connection is
/// open (the server has nothing more to say: no call of the harness waits on a
/// clock), and gives end of stream once it is closed.
impl<D: Dispatch> std::io::Write for Harness<D> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.send(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<D: Dispatch> std::io::Read for Harness<D> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.output.is_empty() {
            return match self.closed {
                Some(_) => Ok(0),
                None => Err(std::io::ErrorKind::WouldBlock.into()),
            };
        }
        let n = buf.len().min(self.output.len());
        buf[..n].copy_from_slice(&self.output.next(n));
        Ok(n)
    }
}
