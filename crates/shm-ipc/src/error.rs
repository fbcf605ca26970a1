//! The errors of sessions and streams.

use std::io;
use std::sync::Arc;

/// What a session or stream operation failed with.
///
/// Errors are `Clone`: when a session ends, every pending and later call on it and on
/// its streams returns the same error.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The peer went away without closing the session cleanly (its socket hung up or
    /// reset: a crash, a kill, a dropped connection).
    #[error("the peer closed the session")]
    PeerClosed,
    /// The peer broke the protocol (a lying descriptor, offset, index or frame); the
    /// session is closed.
    #[error("protocol violation by the peer: {0}")]
    Protocol(Violation),
    /// The handshake did not finish within [`Config::handshake_timeout`](crate::Config::handshake_timeout).
    #[error("timed out")]
    Timeout,
    /// Shared memory stayed full for the whole wait of
    /// [`Exhaustion::Wait`](crate::Exhaustion::Wait), or the message can never fit.
    #[error("shared memory exhausted")]
    Exhausted,
    /// The message is longer than [`Config::max_message_len`](crate::Config::max_message_len).
    #[error("message of {0} bytes is over the limit")]
    TooLarge(usize),
    /// This side closed the stream or the session.
    #[error("closed")]
    Closed,
    /// An I/O error on the socket or while setting up the shared memory.
    #[error("i/o: {0}")]
    Io(Arc<io::Error>),
}

impl Error {
    /// Whether this is [`Error::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout)
    }

    /// Whether the peer broke the protocol.
    pub fn is_protocol(&self) -> bool {
        matches!(self, Error::Protocol(_))
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(Arc::new(e))
    }
}

impl From<Violation> for Error {
    fn from(v: Violation) -> Self {
        Error::Protocol(v)
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        let kind = match &e {
            Error::PeerClosed => io::ErrorKind::ConnectionReset,
            Error::Protocol(_) => io::ErrorKind::InvalidData,
            Error::Timeout => io::ErrorKind::TimedOut,
            Error::Exhausted => io::ErrorKind::OutOfMemory,
            Error::TooLarge(_) => io::ErrorKind::InvalidInput,
            Error::Closed => io::ErrorKind::NotConnected,
            Error::Io(inner) => inner.kind(),
        };
        io::Error::new(kind, e)
    }
}

/// Which check a lying or broken peer failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Violation {
    /// The handshake message was malformed or announced an unusable layout.
    #[error("bad handshake: {0}")]
    Handshake(&'static str),
    /// The peer speaks another protocol version.
    #[error("protocol version {0} is not ours")]
    Version(u32),
    /// The announced region layout is out of bounds.
    #[error("bad region layout: {0}")]
    Layout(&'static str),
    /// The peer's shared region is not a sealed memfd of the announced size.
    #[error("bad shared region: {0}")]
    Region(&'static str),
    /// A ring's indices are inconsistent (more entries than capacity).
    #[error("{ring} ring: {what}")]
    RingIndex {
        /// `descriptor` or `release`.
        ring: &'static str,
        /// Which index is off.
        what: &'static str,
    },
    /// A descriptor failed validation.
    #[error("bad descriptor: {0}")]
    Descriptor(&'static str),
    /// A slice index given back to us was not one we had lent.
    #[error("bad slice release: {0}")]
    Release(&'static str),
    /// A control frame on the socket failed validation.
    #[error("bad frame: {0}")]
    Frame(&'static str),
    /// Stream ids out of sequence or of the wrong side.
    #[error("bad stream id {0}")]
    StreamId(u32),
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIE: Violation = Violation::RingIndex {
        ring: "test",
        what: "lie",
    };

    #[test]
    fn io_error_kinds() {
        let k = |e: Error| io::Error::from(e).kind();
        assert_eq!(k(Error::PeerClosed), io::ErrorKind::ConnectionReset);
        assert_eq!(k(Error::Timeout), io::ErrorKind::TimedOut);
        assert_eq!(k(Error::Protocol(LIE)), io::ErrorKind::InvalidData);
        assert_eq!(k(Error::Exhausted), io::ErrorKind::OutOfMemory);
        assert_eq!(k(Error::Closed), io::ErrorKind::NotConnected);
        assert_eq!(
            k(Error::from(io::Error::from(io::ErrorKind::BrokenPipe))),
            io::ErrorKind::BrokenPipe
        );
        assert!(Error::Timeout.is_timeout());
        assert!(Error::from(LIE).is_protocol());
    }
}
