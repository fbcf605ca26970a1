//! Transports: where frames come from and go to. netpoll-rs (TCP and Unix sockets on
//! the custom reactor) is the default; plain tokio sockets are kept as the baseline
//! that the reactor is measured against (`rpc-bench`). An `shm:/path` address takes
//! shared memory (shm-ipc sessions) whichever kind is configured: see the `shm` module.
//! TLS ([`tls`]) runs over TCP connections of either kind.
//!
//! Host names (`localhost:9090`) are resolved here, each time a connection is made or a
//! server binds: see [`Address`].

mod resolve;
mod shm;
pub mod tls;

pub use resolve::ResolveError;
pub(crate) use shm::ShmDialer;

use std::future::Future;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::{Buf, Bytes};
use thrift_wire::LinkBuffer;

use crate::context::Address;

/// Which sockets carry the calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TransportKind {
    /// netpoll-rs: reads on the reactor into linked buffers, writes inline.
    #[default]
    Netpoll,
    /// tokio's own `TcpStream`/`UnixStream`, read into a buffer of the connection.
    Tokio,
}

/// Bytes asked of the kernel per read on a tokio connection.
const TOKIO_READ_CHUNK: usize = 64 * 1024;
/// Most buffers handed to one vectored write.
const MAX_IOVECS: usize = 64;

/// What connections need from their transport: whole frames in, a buffer to write into,
/// and a flush.
pub(crate) trait FrameIo: Send + Sync {
    /// The next whole frame, `None` at a clean end of stream.
    fn read_frame<F>(&self, frame_len: F) -> impl Future<Output = io::Result<Option<Bytes>>> + Send
    where
        F: FnMut(&mut LinkBuffer) -> io::Result<Option<usize>> + Send;
    /// Gives `f` the output buffer.
    fn write_with<R>(&self, f: impl FnOnce(&mut LinkBuffer) -> R) -> R;
    /// Sends the output.
    fn flush(&self) -> impl Future<Output = io::Result<()>> + Send;
    /// Bytes received and not yet taken as a frame.
    fn input_len(&self) -> usize;
    /// Whether the connection can still be used.
    fn is_open(&self) -> bool;
    /// The peer's address.
    fn peer(&self) -> Option<Address>;
}

/// A connection on either transport.
#[derive(Debug)]
pub(crate) enum Conn {
    Netpoll(netpoll_rs::Connection),
    /// Boxed: its buffers make it much larger than a netpoll-rs handle.
    Tokio(Box<TokioConn>),
    /// A stream of a shared-memory session.
    Shm(Box<shm::ShmConn>),
    /// A TLS session over a TCP connection of either transport.
    Tls(Box<tls::TlsConn>),
}

impl Conn {
    /// [`FrameIo::read_frame`] for the reply to a call this side sent: on netpoll-rs
    /// and shared memory the reply counts as due, and the poller or the session's
    /// reader may poll for it rather than sleep
    /// ([`netpoll_rs::Connection::read_reply`], [`shm_ipc::Session::reply_due`]).
    pub(crate) async fn read_reply<F>(&self, frame_len: F) -> io::Result<Option<Bytes>>
    where
        F: FnMut(&mut LinkBuffer) -> io::Result<Option<usize>> + Send,
    {
        match self {
            Conn::Netpoll(c) => c.read_reply(frame_len).await,
            other => {
                let _due = other.reply_due();
                other.read_frame(frame_len).await
            }
        }
    }

    /// Counts a reply on this connection as due while the guard lives, for a reply
    /// another task reads (a mux call's): on netpoll-rs and shared memory.
    pub(crate) fn reply_due(&self) -> ReplyDue<'_> {
        match self {
            Conn::Netpoll(c) => ReplyDue {
                _netpoll: Some(c.reply_due()),
                _shm: None,
            },
            Conn::Shm(c) => ReplyDue {
                _netpoll: None,
                _shm: Some(c.reply_due()),
            },
            _ => ReplyDue {
                _netpoll: None,
                _shm: None,
            },
        }
    }
}

/// A reply counted as due while it lives (see [`Conn::reply_due`]); on the other
/// transports it counts nothing.
#[derive(Debug)]
pub(crate) struct ReplyDue<'a> {
    _netpoll: Option<netpoll_rs::ReplyDue<'a>>,
    _shm: Option<shm_ipc::ReplyDue<'a>>,
}

impl FrameIo for Conn {
    async fn read_frame<F>(&self, frame_len: F) -> io::Result<Option<Bytes>>
    where
        F: FnMut(&mut LinkBuffer) -> io::Result<Option<usize>> + Send,
    {
        match self {
            Conn::Netpoll(c) => c.read_frame(frame_len).await,
            Conn::Tokio(c) => c.read_frame(frame_len).await,
            Conn::Shm(c) => c.read_frame(frame_len).await,
            // Boxed, so that plain connections' futures do not grow by the TLS one's.
            Conn::Tls(c) => Box::pin(c.read_frame(frame_len)).await,
        }
    }

    fn write_with<R>(&self, f: impl FnOnce(&mut LinkBuffer) -> R) -> R {
        match self {
            Conn::Netpoll(c) => c.write_with(f),
            Conn::Tokio(c) => f(&mut lock(&c.output)),
            Conn::Shm(c) => c.write_with(f),
            Conn::Tls(c) => c.write_with(f),
        }
    }

    async fn flush(&self) -> io::Result<()> {
        match self {
            Conn::Netpoll(c) => c.flush().await,
            Conn::Tokio(c) => c.flush().await,
            Conn::Shm(c) => c.flush().await,
            Conn::Tls(c) => Box::pin(c.flush()).await,
        }
    }

    fn input_len(&self) -> usize {
        match self {
            Conn::Netpoll(c) => c.input_len(),
            Conn::Tokio(c) => lock(&c.input).len(),
            Conn::Shm(c) => c.input_len(),
            Conn::Tls(c) => c.input_len(),
        }
    }

    fn is_open(&self) -> bool {
        match self {
            // Not usable once the peer is gone either: the poller reads the end of
            // stream of a connection idle in a pool, and a request sent on it could
            // get no reply.
            Conn::Netpoll(c) => c.is_open() && !c.is_peer_closed(),
            Conn::Tokio(c) => !*lock(&c.closed),
            Conn::Shm(c) => c.is_open(),
            Conn::Tls(c) => c.is_open(),
        }
    }

    fn peer(&self) -> Option<Address> {
        match self {
            Conn::Netpoll(c) => c.peer_addr().map(Address::Tcp),
            Conn::Tokio(c) => c.peer.clone(),
            Conn::Shm(c) => Some(c.peer()),
            Conn::Tls(c) => c.peer(),
        }
    }
}

/// Locks `m`; a lock poisoned by a thread that panicked holding it is taken all the
/// same. The crate's other modules lock through this one too.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Conn {
    /// Closes the connection at once, without sending what its output still holds.
    /// A tokio socket is shut down both ways (a flush waiting for room fails, the peer
    /// reads the end); its descriptor goes with its last handle.
    pub(crate) fn close(&self) {
        match self {
            Conn::Netpoll(c) => c.close(),
            Conn::Tokio(c) => c.close(),
            Conn::Shm(c) => c.close(),
            Conn::Tls(c) => c.close(),
        }
    }
}

/// The frame at the front of `input`, taken out, once `frame_len` says it is whole.
fn take_frame<F>(input: &Mutex<LinkBuffer>, frame_len: &mut F) -> io::Result<Option<Bytes>>
where
    F: FnMut(&mut LinkBuffer) -> io::Result<Option<usize>>,
{
    take_frame_from(&mut lock(input), frame_len)
}

/// [`take_frame`] on a buffer already locked.
pub(crate) fn take_frame_from<F>(
    input: &mut LinkBuffer,
    frame_len: &mut F,
) -> io::Result<Option<Bytes>>
where
    F: FnMut(&mut LinkBuffer) -> io::Result<Option<usize>>,
{
    if input.is_empty() {
        return Ok(None);
    }
    match frame_len(input)? {
        Some(n) if n > 0 && input.len() >= n => Ok(Some(input.next(n))),
        _ => Ok(None),
    }
}

/// What a read returns at the peer's end of stream with `left` bytes of a frame read.
pub(crate) fn end_of_stream(left: usize) -> io::Result<Option<Bytes>> {
    if left == 0 {
        Ok(None)
    } else {
        Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the peer closed the connection {left} bytes into a frame"),
        ))
    }
}

/// A tokio socket with its own input and output buffers. Used by one call at a time;
/// the locks are never held across an await.
#[derive(Debug)]
pub(crate) struct TokioConn {
    stream: TokioStream,
    input: Mutex<LinkBuffer>,
    output: Mutex<LinkBuffer>,
    /// End of stream or an error was seen.
    closed: Mutex<bool>,
    peer: Option<Address>,
}

#[derive(Debug)]
enum TokioStream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl TokioConn {
    pub(crate) fn tcp(stream: tokio::net::TcpStream) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        let peer = stream.peer_addr().ok().map(Address::Tcp);
        Ok(Self::new(TokioStream::Tcp(stream), peer))
    }

    pub(crate) fn unix(stream: tokio::net::UnixStream) -> Self {
        Self::new(TokioStream::Unix(stream), None)
    }

    fn new(stream: TokioStream, peer: Option<Address>) -> Self {
        TokioConn {
            stream,
            input: Mutex::new(LinkBuffer::new()),
            output: Mutex::new(LinkBuffer::new()),
            closed: Mutex::new(false),
            peer,
        }
    }

    async fn readable(&self) -> io::Result<()> {
        match &self.stream {
            TokioStream::Tcp(s) => s.readable().await,
            TokioStream::Unix(s) => s.readable().await,
        }
    }

    async fn writable(&self) -> io::Result<()> {
        match &self.stream {
            TokioStream::Tcp(s) => s.writable().await,
            TokioStream::Unix(s) => s.writable().await,
        }
    }

    /// One non-blocking read into the input; `Ok(0)` is end of stream.
    fn try_read(&self) -> io::Result<usize> {
        let mut input = lock(&self.input);
        let tail = input.tail_mut();
        tail.reserve(TOKIO_READ_CHUNK);
        match &self.stream {
            TokioStream::Tcp(s) => s.try_read_buf(tail),
            TokioStream::Unix(s) => s.try_read_buf(tail),
        }
    }

    /// Marks it closed and shuts the socket down both ways: the peer reads the end
    /// after what the kernel took, and a flush waiting for room fails.
    fn close(&self) {
        *lock(&self.closed) = true;
        let fd = match &self.stream {
            TokioStream::Tcp(s) => s.as_fd(),
            TokioStream::Unix(s) => s.as_fd(),
        };
        crate::sys::shutdown_both(fd);
    }

    fn fail<T>(&self, e: io::Error) -> io::Result<T> {
        *lock(&self.closed) = true;
        Err(e)
    }

    pub(crate) async fn read_frame<F>(&self, mut frame_len: F) -> io::Result<Option<Bytes>>
    where
        F: FnMut(&mut LinkBuffer) -> io::Result<Option<usize>>,
    {
        loop {
            match take_frame(&self.input, &mut frame_len) {
                Ok(Some(frame)) => return Ok(Some(frame)),
                Ok(None) => {}
                Err(e) => return self.fail(e),
            }
            match self.try_read() {
                Ok(0) => {
                    *lock(&self.closed) = true;
                    return end_of_stream(lock(&self.input).len());
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if let Err(e) = self.readable().await {
                        return self.fail(e);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(e),
            }
        }
    }

    pub(crate) async fn flush(&self) -> io::Result<()> {
        loop {
            let written = {
                let mut output = lock(&self.output);
                if output.is_empty() {
                    return Ok(());
                }
                let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
                let n = output.chunks_vectored(&mut iov);
                let written = match &self.stream {
                    TokioStream::Tcp(s) => s.try_write_vectored(&iov[..n]),
                    TokioStream::Unix(s) => s.try_write_vectored(&iov[..n]),
                };
                if let Ok(k) = written {
                    output.advance(k);
                }
                written
            };
            match written {
                Ok(0) => return self.fail(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if let Err(e) = self.writable().await {
                        return self.fail(e);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(e),
            }
        }
    }
}

/// Where a server's connections come from.
#[derive(Debug)]
pub(crate) enum Acceptor {
    Netpoll(netpoll_rs::Listener),
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
    Shm(shm::ShmAcceptor),
}

impl Acceptor {
    /// Listens on `addr` with `kind`; the netpoll listener goes on `reactor`. A host
    /// name is resolved, and the first of its addresses that can be bound is.
    pub(crate) async fn bind(
        kind: TransportKind,
        addr: &Address,
        reactor: Option<&netpoll_rs::Reactor>,
    ) -> io::Result<(Acceptor, Address)> {
        let acceptor = match (kind, addr, reactor) {
            (_, Address::Shm(p), _) => Acceptor::Shm(shm::ShmAcceptor::bind(p)?),
            (TransportKind::Netpoll, _, None) => {
                return Err(io::Error::other("a netpoll transport needs a reactor"));
            }
            (_, Address::Tcp(a), _) => Self::bind_tcp(kind, *a, reactor).await?,
            (_, Address::Host { name, port }, _) => {
                let mut last = None;
                let mut bound = None;
                for a in resolve::resolve(name, *port).await? {
                    match Self::bind_tcp(kind, a, reactor).await {
                        Ok(acceptor) => {
                            bound = Some(acceptor);
                            break;
                        }
                        Err(e) => last = Some(e),
                    }
                }
                match (bound, last) {
                    (Some(acceptor), _) => acceptor,
                    (None, Some(e)) => return Err(e),
                    (None, None) => return Err(resolve::no_address(name, *port)),
                }
            }
            (TransportKind::Netpoll, Address::Unix(p), Some(r)) => {
                Acceptor::Netpoll(r.listen_unix(p)?)
            }
            (TransportKind::Tokio, Address::Unix(p), _) => {
                Acceptor::Unix(tokio::net::UnixListener::bind(p)?)
            }
        };
        let local = match &acceptor {
            Acceptor::Netpoll(l) => l.local_addr().map(Address::Tcp),
            Acceptor::Tcp(l) => l.local_addr().ok().map(Address::Tcp),
            Acceptor::Unix(_) | Acceptor::Shm(_) => None,
        };
        Ok((acceptor, local.unwrap_or_else(|| addr.clone())))
    }

    async fn bind_tcp(
        kind: TransportKind,
        addr: SocketAddr,
        reactor: Option<&netpoll_rs::Reactor>,
    ) -> io::Result<Acceptor> {
        match (kind, reactor) {
            (TransportKind::Netpoll, Some(r)) => r.listen_tcp(addr).map(Acceptor::Netpoll),
            (TransportKind::Netpoll, None) => {
                Err(io::Error::other("a netpoll transport needs a reactor"))
            }
            (TransportKind::Tokio, _) => {
                tokio::net::TcpListener::bind(addr).await.map(Acceptor::Tcp)
            }
        }
    }

    /// Whether its connections are TCP ones (which TLS applies to).
    pub(crate) fn is_tcp(&self) -> bool {
        match self {
            // Only a TCP listener has a socket address.
            Acceptor::Netpoll(l) => l.local_addr().is_some(),
            Acceptor::Tcp(_) => true,
            Acceptor::Unix(_) | Acceptor::Shm(_) => false,
        }
    }

    pub(crate) async fn accept(&self) -> io::Result<Conn> {
        match self {
            Acceptor::Netpoll(l) => l.accept().await.map(Conn::Netpoll),
            Acceptor::Tcp(l) => {
                let (s, _) = l.accept().await?;
                TokioConn::tcp(s).map(|c| Conn::Tokio(Box::new(c)))
            }
            Acceptor::Unix(l) => {
                let (s, _) = l.accept().await?;
                Ok(Conn::Tokio(Box::new(TokioConn::unix(s))))
            }
            Acceptor::Shm(l) => l.accept().await,
        }
    }

    /// Stops listening.
    pub(crate) fn close(self) {
        match &self {
            Acceptor::Netpoll(l) => l.close(),
            Acceptor::Shm(l) => l.close(),
            Acceptor::Tcp(_) | Acceptor::Unix(_) => {}
        }
    }
}

/// Connects to `addr` with `kind`, within `timeout`; an `shm:` address through
/// `shm_dialer` (its session is shared by the connections it makes). A host name is
/// resolved and its addresses tried in turn; with `tls`, a TCP connection then runs
/// its TLS handshake. Resolving, connecting and the handshake share the timeout.
pub(crate) async fn connect(
    kind: TransportKind,
    addr: &Address,
    reactor: Option<&netpoll_rs::Reactor>,
    shm_dialer: &ShmDialer,
    timeout: Duration,
    tls: Option<&tls::ClientTls>,
) -> io::Result<Conn> {
    let deadline = tokio::time::Instant::now() + timeout;
    let conn = match addr {
        Address::Shm(path) => return shm_dialer.connect(path, timeout).await,
        Address::Unix(path) => return connect_unix(kind, path, reactor, timeout).await,
        Address::Tcp(a) => connect_tcp(kind, vec![*a], reactor, deadline).await?,
        Address::Host { name, port } => {
            let addrs = tokio::time::timeout_at(deadline, resolve::resolve(name, *port))
                .await
                .map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("resolving {addr} took longer than the connect timeout"),
                    )
                })??;
            connect_tcp(kind, addrs, reactor, deadline).await?
        }
    };
    match tls {
        Some(tls) => tls::connect(conn, tls, addr, deadline).await,
        None => Ok(conn),
    }
}

fn connect_timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "connect timed out")
}

fn no_reactor() -> io::Error {
    io::Error::other("a netpoll transport needs a reactor")
}

/// Connects to the first of `addrs` that accepts, trying them in turn, by `deadline`;
/// fails with the last error.
async fn connect_tcp(
    kind: TransportKind,
    addrs: Vec<SocketAddr>,
    reactor: Option<&netpoll_rs::Reactor>,
    deadline: tokio::time::Instant,
) -> io::Result<Conn> {
    let mut last = None;
    match (kind, reactor) {
        (TransportKind::Netpoll, Some(reactor)) => {
            let reactor = reactor.clone();
            let deadline = deadline.into_std();
            // The reactor's connects block for up to the timeout: off the runtime's
            // threads.
            tokio::task::spawn_blocking(move || {
                for a in addrs {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        return Err(connect_timed_out());
                    }
                    match reactor.connect_tcp(a, left) {
                        Ok(c) => return Ok(Conn::Netpoll(c)),
                        Err(e) => last = Some(e),
                    }
                }
                Err(last.unwrap_or_else(connect_timed_out))
            })
            .await
            .map_err(|e| io::Error::other(format!("the connect task failed: {e}")))?
        }
        (TransportKind::Netpoll, None) => Err(no_reactor()),
        (TransportKind::Tokio, _) => {
            for a in addrs {
                match tokio::time::timeout_at(deadline, tokio::net::TcpStream::connect(a)).await {
                    Ok(Ok(s)) => return TokioConn::tcp(s).map(|c| Conn::Tokio(Box::new(c))),
                    Ok(Err(e)) => last = Some(e),
                    Err(_) => return Err(connect_timed_out()),
                }
            }
            Err(last.unwrap_or_else(connect_timed_out))
        }
    }
}

/// Connects to the Unix socket at `path` within `timeout`.
async fn connect_unix(
    kind: TransportKind,
    path: &std::sync::Arc<std::path::Path>,
    reactor: Option<&netpoll_rs::Reactor>,
    timeout: Duration,
) -> io::Result<Conn> {
    match (kind, reactor) {
        (TransportKind::Netpoll, Some(reactor)) => {
            let reactor = reactor.clone();
            let path = std::sync::Arc::clone(path);
            tokio::task::spawn_blocking(move || reactor.connect_unix(&path, timeout))
                .await
                .map_err(|e| io::Error::other(format!("the connect task failed: {e}")))?
                .map(Conn::Netpoll)
        }
        (TransportKind::Netpoll, None) => Err(no_reactor()),
        (TransportKind::Tokio, _) => {
            tokio::time::timeout(timeout, tokio::net::UnixStream::connect(path))
                .await
                .map_err(|_| connect_timed_out())?
                .map(|s| Conn::Tokio(Box::new(TokioConn::unix(s))))
        }
    }
}

#[cfg(test)]
mod tests;
