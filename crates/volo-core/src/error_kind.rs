//! The kinds of a client's failures: below both the client, whose errors carry one,
//! and the streams, whose failed openings do.

/// What kind of failure a client's [`Error`](crate::client::Error) is (and a
/// stream's failed opening, [`StreamError::Open`](crate::stream::StreamError::Open)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Connecting failed or timed out: the request never left.
    Connect,
    /// Reading or writing failed after the connection was made (the connection is
    /// dropped); the request may have reached the server.
    Io,
    /// The call's deadline passed.
    Timeout,
    /// A circuit breaker is open: for the service (the call was not sent) or for every
    /// instance that could take it.
    CircuitOpen,
    /// Discovery found no instance that can take the call.
    NoInstance,
    /// The reply was not a valid reply (bad framing, header or message).
    Protocol,
    /// The request could not be encoded (too large for the frame limit...).
    Encode,
    /// The server answered with a `TApplicationException`.
    Application,
    /// The server refused the call before running it (its limiter).
    Overloaded,
    /// A layer refused the call (its cause says why).
    Rejected,
    /// The server is shutting down and refused the call without running it (see
    /// [`CLOSING_PREFIX`](crate::refusal::CLOSING_PREFIX)): another instance may take
    /// it, whatever its idempotency.
    Closing,
}
