//! The words the poller and its drivers share: what an event says of a socket, what a
//! completion brought, and what an entry asks of a driver that does the I/O itself.
//! Nothing here names a driver's own types, so the poller, the connections and the
//! listeners speak to every driver in these terms.

use std::any::Any;
use std::fmt;
use std::io;
use std::os::fd::RawFd;

use bytes::Bytes;
use mio::Token;
use thrift_wire::LinkBuffer;

/// What a readiness event says of a socket.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ready {
    /// Data (or the peer's close, or an error) to read.
    pub(crate) readable: bool,
    /// Room to write (or an error to find by writing).
    pub(crate) writable: bool,
    /// The peer closed its side, or the socket failed.
    pub(crate) closed: bool,
}

/// What a receive completion brought a connection.
#[derive(Debug)]
pub(crate) enum Received<'a> {
    /// Bytes; `more` while the receive stays armed.
    Data(&'a [u8], bool),
    /// The peer closed its side: end of stream (the receive ended).
    Eof,
    /// The receive ended without data: cancelled, or the buffer ring ran dry for a
    /// moment (the connection arms it again).
    Ended,
    /// The socket failed (the receive ended).
    Failed(io::Error),
}

/// What a driver hands the poller for one token, in a turn.
#[derive(Debug)]
pub(crate) enum Event<'a> {
    /// Readiness (epoll).
    Ready(Ready),
    /// A receive completed (io_uring).
    Recv(Received<'a>),
    /// A send completed: all of it went (`rest` empty), or `rest` is what the kernel
    /// did not take, or it failed (io_uring).
    Sent(io::Result<Vec<Bytes>>),
    /// The watch on a listening socket fired; `more` while it stays armed (io_uring).
    Listen(bool),
}

/// What a connection lends its driver slot while the slot takes what the connection
/// asks of the driver ([`ConnIo::take_ops`](super::ConnIo::take_ops)): a send takes
/// its nodes out of `output`, and with none to take the pending write ends.
#[derive(Debug)]
pub(crate) struct Lent<'a> {
    pub(crate) token: Token,
    /// `None` once the socket closed (the close cancels what is on the ring).
    pub(crate) fd: Option<RawFd>,
    pub(crate) output: &'a mut LinkBuffer,
    pub(crate) write_pending: &'a mut bool,
    /// The most nodes one send takes.
    pub(crate) max_iovecs: usize,
}

/// What a connection or listener asks of a driver that does the I/O itself (the
/// ring): queued in the poller's turn, or from another thread with the poller's
/// [`Remote`](super::Remote). A readiness driver is never asked anything.
pub(crate) enum Op {
    /// Arm the multishot receive on a connection's socket.
    Recv { token: Token, fd: RawFd },
    /// Send these nodes, in order (the connection has no other send in flight).
    Send {
        token: Token,
        fd: RawFd,
        chunks: Vec<Bytes>,
    },
    /// Cancel the connection's receive (its input is above the high-water mark).
    CancelRecv { token: Token },
    /// Watch a listening socket for connections to accept.
    Listen { token: Token, fd: RawFd },
    /// The socket of `token` closed: cancel its operations and drop `owner` (which owns
    /// the file descriptor) once the submissions before this went in.
    Close {
        token: Token,
        owner: Box<dyn Any + Send>,
    },
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Recv { token, fd } => write!(f, "Recv({token:?}, fd {fd})"),
            Op::Send { token, chunks, .. } => {
                write!(f, "Send({token:?}, {} chunks)", chunks.len())
            }
            Op::CancelRecv { token } => write!(f, "CancelRecv({token:?})"),
            Op::Listen { token, fd } => write!(f, "Listen({token:?}, fd {fd})"),
            Op::Close { token, .. } => write!(f, "Close({token:?})"),
        }
    }
}
