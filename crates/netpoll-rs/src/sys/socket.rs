//! The sockets: TCP and Unix-domain streams behind one type, reads into a buffer's spare
//! capacity, listeners, connects, and the socket options RPC needs. Every socket call of
//! the crate is made here.
//!
//! A connection's state machine makes its calls through the [`Socket`] trait, which
//! [`Stream`] implements, so its tests can script a fake socket instead.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::Path;
use std::time::Duration;

use bytes::BytesMut;
use mio::event::Source;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Interest, Registry, Token};
use nix::sys::socket::{self, MsgFlags, UnixAddr, setsockopt, sockopt};

/// The socket calls of a connection's state machine. [`Stream`] makes them on a real
/// socket; a test's fake returns what its script says. Errors are the kernel's, as they
/// come: `WouldBlock` when the socket has no data or no room, `Interrupted` for a call
/// a signal cut short (the caller tries again).
pub(crate) trait Socket {
    /// Reads at most `max` bytes into `buf`'s spare capacity (which must not be empty)
    /// and extends `buf` by what arrived; `Ok(0)` is end of stream.
    fn read_into(&mut self, buf: &mut BytesMut, max: usize) -> io::Result<usize>;

    /// Sends a prefix of `bufs` (all of them, or less when the socket is nearly full);
    /// returns how many bytes it took.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;

    /// Shuts down the sending side: the peer reads end of stream after the last byte.
    fn shutdown_write(&self) -> io::Result<()>;

    /// The file descriptor, for operations on an io_uring.
    fn raw_fd(&self) -> RawFd;
}

/// A socket a poller watches, which it lets go of when it closes.
pub(crate) trait Registered: Send + 'static {
    /// Stops epoll's watch.
    fn deregister(&mut self, registry: &Registry) -> io::Result<()>;

    /// Ends what the kernel still does on the socket for an io_uring, before it is
    /// closed: a stream is shut down both ways, so a send waiting for room fails at
    /// once and a receive reads its end. (A cancel is not enough: the kernel need not
    /// find a send it is retrying, and closing the descriptor does not end it either,
    /// as the operation holds the socket.) What the kernel had queued still goes out,
    /// then the end, as after a plain close. A listener's watch is cancelled instead.
    fn end_io(&self) {}
}

/// A connected stream socket.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub(crate) fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        let interest = Interest::READABLE | Interest::WRITABLE;
        match self {
            Stream::Tcp(s) => s.register(registry, token, interest),
            Stream::Unix(s) => s.register(registry, token, interest),
        }
    }

    /// Registers again with the same interest: epoll then reports the socket's current
    /// readiness as a new edge, so data that arrived unnoticed is seen on the next turn.
    pub(crate) fn reregister(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        let interest = Interest::READABLE | Interest::WRITABLE;
        match self {
            Stream::Tcp(s) => s.reregister(registry, token, interest),
            Stream::Unix(s) => s.reregister(registry, token, interest),
        }
    }

    pub(crate) fn peer_addr(&self) -> Option<SocketAddr> {
        match self {
            Stream::Tcp(s) => s.peer_addr().ok(),
            Stream::Unix(_) => None,
        }
    }

    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Stream::Tcp(s) => s.local_addr().ok(),
            Stream::Unix(_) => None,
        }
    }

    /// Applies `options` (`TCP_NODELAY` on TCP, buffer sizes).
    pub(crate) fn configure(&self, options: &SocketOptions) -> io::Result<()> {
        if let Stream::Tcp(s) = self {
            s.set_nodelay(options.nodelay)?;
        }
        set_buffer_sizes(self, options.buffers)
    }
}

impl Socket for Stream {
    fn raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }

    fn read_into(&mut self, buf: &mut BytesMut, max: usize) -> io::Result<usize> {
        let spare: &mut [MaybeUninit<u8>] = buf.spare_capacity_mut();
        let take = max.min(spare.len());
        let spare = &mut spare[..take];
        debug_assert!(!spare.is_empty());
        // `recv(2)`, not `read(2)`: the socket call skips the file layer's work, which
        // every read would pay.
        // SAFETY: `spare` is writable memory of `spare.len()` bytes owned by `buf`, which
        // we borrow mutably for the call; `recv(2)` writes at most that many bytes into
        // it and does not keep the pointer. The fd is open: `self` owns it.
        let n =
            unsafe { nix::libc::recv(self.raw_fd(), spare.as_mut_ptr().cast(), spare.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        // SAFETY: the kernel initialised the first `n` (<= spare.len()) bytes after
        // `buf.len()`, so the new length covers only initialised bytes, within capacity.
        unsafe { buf.set_len(buf.len() + n) };
        Ok(n)
    }

    /// `send(2)` for one buffer, `sendmsg(2)` for several (the socket calls, cheaper than
    /// `write`/`writev`), with `MSG_NOSIGNAL`: a peer that is gone is an `EPIPE` error,
    /// never a `SIGPIPE` that would kill a process that did not ignore it.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let flags = MsgFlags::MSG_NOSIGNAL;
        let sent = match bufs {
            [one] => socket::send(self.raw_fd(), one, flags),
            _ => socket::sendmsg::<UnixAddr>(self.raw_fd(), bufs, &[], flags, None),
        };
        sent.map_err(io::Error::from)
    }

    fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Write),
        }
    }
}

impl Registered for Stream {
    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(registry),
            Stream::Unix(s) => s.deregister(registry),
        }
    }

    fn end_io(&self) {
        // A peer that reset the connection first makes this fail; nothing is left
        // to end then.
        let _ = match self {
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
}

impl Registered for ListenSocket {
    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            ListenSocket::Tcp(l) => l.deregister(registry),
            ListenSocket::Unix(l) => l.deregister(registry),
        }
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}

/// A listening socket.
#[derive(Debug)]
pub(crate) enum ListenSocket {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl ListenSocket {
    pub(crate) fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        match self {
            ListenSocket::Tcp(l) => l.register(registry, token, Interest::READABLE),
            ListenSocket::Unix(l) => l.register(registry, token, Interest::READABLE),
        }
    }

    pub(crate) fn accept(&self) -> io::Result<Stream> {
        match self {
            ListenSocket::Tcp(l) => l.accept().map(|(s, _)| Stream::Tcp(s)),
            ListenSocket::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
        }
    }

    pub(crate) fn raw_fd(&self) -> RawFd {
        match self {
            ListenSocket::Tcp(l) => l.as_raw_fd(),
            ListenSocket::Unix(l) => l.as_raw_fd(),
        }
    }

    /// The address it listens on (TCP only).
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            ListenSocket::Tcp(l) => l.local_addr().ok(),
            ListenSocket::Unix(_) => None,
        }
    }
}

/// Socket options for listeners (applied to each accepted connection) and connects.
#[derive(Debug, Clone, Copy)]
pub struct SocketOptions {
    /// `TCP_NODELAY` (default on: RPC frames should leave at once).
    pub nodelay: bool,
    /// `SO_SNDBUF`/`SO_RCVBUF` (default: the kernel's).
    pub buffers: BufferSizes,
    /// `SO_REUSEPORT` on a TCP listener (default off).
    pub reuse_port: bool,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            nodelay: true,
            buffers: BufferSizes::default(),
            reuse_port: false,
        }
    }
}

/// Socket buffer sizes to ask the kernel for (it may round or double them).
#[derive(Debug, Clone, Copy, Default)]
pub struct BufferSizes {
    /// `SO_SNDBUF`, when set.
    pub send: Option<usize>,
    /// `SO_RCVBUF`, when set.
    pub recv: Option<usize>,
}

fn set_buffer_sizes(fd: &impl AsFd, sizes: BufferSizes) -> io::Result<()> {
    if let Some(n) = sizes.send {
        setsockopt(fd, sockopt::SndBuf, &n)?;
    }
    if let Some(n) = sizes.recv {
        setsockopt(fd, sockopt::RcvBuf, &n)?;
    }
    Ok(())
}

/// A listening TCP socket, non-blocking, with `SO_REUSEADDR` and, when asked,
/// `SO_REUSEPORT` (so several listeners can share a port and the kernel spreads
/// connections among them).
pub(crate) fn tcp_listen(addr: SocketAddr, reuse_port: bool) -> io::Result<ListenSocket> {
    tcp_listener(addr, reuse_port).map(|l| ListenSocket::Tcp(TcpListener::from_std(l)))
}

/// A listening Unix-domain socket at `path`, non-blocking.
pub(crate) fn unix_listen(path: &Path) -> io::Result<ListenSocket> {
    UnixListener::bind(path).map(ListenSocket::Unix)
}

/// Connects to a TCP address, failing with `TimedOut` after `timeout` (blocking the
/// calling thread that long at most); returns the stream non-blocking.
pub(crate) fn tcp_connect(addr: SocketAddr, timeout: Duration) -> io::Result<Stream> {
    let std = std::net::TcpStream::connect_timeout(&addr, timeout)?;
    std.set_nonblocking(true)?;
    Ok(Stream::Tcp(TcpStream::from_std(std)))
}

fn tcp_listener(addr: SocketAddr, reuse_port: bool) -> io::Result<std::net::TcpListener> {
    use nix::sys::socket::{
        AddressFamily, Backlog, SockFlag, SockType, SockaddrIn, SockaddrIn6, bind, listen, socket,
    };
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let fd = socket(
        family,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    if reuse_port {
        setsockopt(&fd, sockopt::ReusePort, &true)?;
    }
    match addr {
        SocketAddr::V4(a) => bind(fd.as_raw_fd(), &SockaddrIn::from(a))?,
        SocketAddr::V6(a) => bind(fd.as_raw_fd(), &SockaddrIn6::from(a))?,
    }
    listen(&fd, Backlog::new(4096).unwrap_or(Backlog::MAXCONN))?;
    Ok(std::net::TcpListener::from(fd))
}

/// Connects a Unix-domain stream socket to `path`, waiting at most `timeout` when the
/// listener's backlog is full (Linux makes a blocking `connect` wait for room, bounded by
/// `SO_SNDTIMEO`); returns it non-blocking. A wait that runs out is `TimedOut`.
pub(crate) fn unix_connect(path: &Path, timeout: Duration) -> io::Result<Stream> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, connect, socket};
    use nix::sys::time::{TimeVal, TimeValLike};
    let addr = UnixAddr::new(path)?;
    let fd = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    // A zero timeval means "wait for ever": the least wait is one microsecond.
    let micros = i64::try_from(timeout.as_micros())
        .unwrap_or(i64::MAX)
        .max(1);
    setsockopt(&fd, sockopt::SendTimeout, &TimeVal::microseconds(micros))?;
    match connect(fd.as_raw_fd(), &addr) {
        Ok(()) => {}
        Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINPROGRESS) => {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "connecting to {}: the listener's backlog stayed full for {timeout:?}",
                    path.display()
                ),
            ));
        }
        Err(e) => return Err(e.into()),
    }
    // Writes are non-blocking from here on; the send timeout no longer applies.
    setsockopt(&fd, sockopt::SendTimeout, &TimeVal::microseconds(0))?;
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    Ok(Stream::Unix(UnixStream::from_std(stream)))
}
