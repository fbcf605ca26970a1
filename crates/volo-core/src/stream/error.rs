//! What a stream's halves return when the stream did not go as planned, and the
//! metadata its header and trailer carry.

use std::io;

use thrift_wire::{ApplicationException, ApplicationExceptionKind, Utf8Bytes};

use super::flow::{CREDIT_KEY, WINDOW_KEY};
use super::frame::{BizStatus, str_key};

/// Kitex's error code for a stream cancelled by its caller (the type id of the
/// exception an rst carries).
pub const CODE_CANCELED: i32 = 12007;
/// Kitex's error code for a stream whose deadline passed.
pub const CODE_DEADLINE: i32 = 12015;
/// Kitex's error code for a stream reset for a reason of its own (also used here for
/// a peer that broke the protocol on one stream).
pub const CODE_RESET: i32 = 12013;

/// Why a stream ended other than cleanly, or why an operation on it failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The stream was cancelled: the other side dropped it or said so (an rst with
    /// Kitex's code 12007), or this side's handle was dropped.
    #[error("the stream was cancelled: {0}")]
    Cancelled(String),
    /// The caller's deadline for the stream passed (here or, said in an rst with
    /// Kitex's code 12015, at the peer).
    #[error("the stream's deadline passed")]
    DeadlineExceeded,
    /// The peer reset the stream with this error (an rst).
    #[error("the peer reset the stream: {0}")]
    Reset(ApplicationException),
    /// The peer ended the stream with an error: the exception in its trailer (a
    /// handler's error, a stream refused).
    #[error("the stream ended with an error: {0}")]
    Application(ApplicationException),
    /// The stream's method, or the service it named (its `isn` key), is not served
    /// there: an `UNKNOWN_METHOD` exception in an rst (a server of this crate resets
    /// such a stream at once, before any handler runs) or in a trailer (a handler's
    /// [`HandlerError::unknown_method`]). The message is the server's and names the
    /// method.
    #[error("the stream's method is not served: {0}")]
    UnknownMethod(String),
    /// The peer ended the stream with a business status error (`biz-status` keys).
    #[error("the stream ended with business status {} ({})", .0.code, .0.message)]
    Biz(BizStatus),
    /// The connection carrying the stream broke or closed.
    #[error("the stream's connection failed: {message}")]
    Connection {
        /// What kind of failure.
        kind: io::ErrorKind,
        /// What happened.
        message: String,
    },
    /// The peer broke the streaming protocol on this stream (data after its
    /// trailer, more than its credit); the stream was reset.
    #[error("the peer broke the stream protocol: {0}")]
    Protocol(String),
    /// A message could not be decoded as the method's type.
    #[error("a stream message did not decode: {0}")]
    Decode(String),
    /// A message could not be encoded (beyond the size limits).
    #[error("a stream message could not be encoded: {0}")]
    Encode(String),
    /// A message was sent after this side ended its direction.
    #[error("the stream's sending side is closed")]
    SendClosed,
    /// The stream could not be opened (the connection's stream limit, the client
    /// closed).
    #[error("the stream could not be opened: {0}")]
    Refused(String),
    /// The client stack failed the stream's opening: no instance, every breaker open,
    /// the connect failed, the opening's timeout passed... (the client's
    /// [`Error`](crate::client::Error), by kind).
    #[error("the stream could not be opened: {message}")]
    Open {
        /// What kind of failure.
        kind: crate::error_kind::ErrorKind,
        /// The instance that failed, when one was picked.
        instance: Option<crate::context::Address>,
        /// What happened.
        message: String,
    },
}

impl StreamError {
    pub(crate) fn connection(e: &io::Error) -> StreamError {
        StreamError::Connection {
            kind: e.kind(),
            message: e.to_string(),
        }
    }

    /// The outcome a stream that ended with this error has in its metrics and span.
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            StreamError::Cancelled(_) => "cancelled",
            StreamError::DeadlineExceeded => "deadline_exceeded",
            StreamError::Reset(_) => "reset",
            StreamError::Application(_) => "application_error",
            StreamError::Biz(_) => "biz_error",
            StreamError::Connection { .. } => "connection_error",
            StreamError::Protocol(_) | StreamError::Decode(_) | StreamError::Encode(_) => {
                "protocol_error"
            }
            StreamError::SendClosed => "ok",
            StreamError::Refused(_) | StreamError::Open { .. } | StreamError::UnknownMethod(_) => {
                "refused"
            }
        }
    }

    /// The error an rst's exception stands for.
    pub(crate) fn from_rst(e: ApplicationException) -> StreamError {
        match (e.kind, e.kind.id()) {
            (_, CODE_CANCELED) => StreamError::Cancelled(e.message.to_string()),
            (_, CODE_DEADLINE) => StreamError::DeadlineExceeded,
            (ApplicationExceptionKind::UnknownMethod, _) => {
                StreamError::UnknownMethod(e.message.to_string())
            }
            _ => StreamError::Reset(e),
        }
    }

    /// The error a trailer's exception stands for.
    pub(crate) fn from_trailer(e: ApplicationException) -> StreamError {
        match e.kind {
            ApplicationExceptionKind::UnknownMethod => {
                StreamError::UnknownMethod(e.message.to_string())
            }
            _ => StreamError::Application(e),
        }
    }

    /// The exception an rst for this error carries.
    pub(crate) fn to_rst(&self) -> ApplicationException {
        let code = match self {
            StreamError::Cancelled(_) => CODE_CANCELED,
            StreamError::DeadlineExceeded => CODE_DEADLINE,
            StreamError::UnknownMethod(message) => {
                let kind = ApplicationExceptionKind::UnknownMethod;
                return ApplicationException::new(kind, message.clone());
            }
            _ => CODE_RESET,
        };
        ApplicationException::new(ApplicationExceptionKind::from_id(code), self.to_string())
    }
}

/// Keys this crate uses for flow control or the frame itself: not the application's.
fn is_internal(key: &str) -> bool {
    matches!(key, WINDOW_KEY | CREDIT_KEY)
        || key == str_key::SERVICE
        || key == str_key::BIZ_STATUS
        || key == str_key::BIZ_MESSAGE
        || key == str_key::BIZ_EXTRA
}

/// The string pairs of a stream's header or trailer: user headers, and Kitex's
/// metainfo (`RPC_TRANSIT_*`, `RPC_PERSIST_*`) as they travel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    pairs: Vec<(Utf8Bytes, Utf8Bytes)>,
}

impl Metadata {
    /// No pairs.
    pub fn new() -> Self {
        Metadata::default()
    }

    /// Sets `key` to `value` (replacing an earlier value).
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        let key = key.into();
        self.pairs.retain(|(k, _)| k.as_str() != key.as_str());
        self.pairs
            .push((Utf8Bytes::from(key), Utf8Bytes::from(value.into())));
        self
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        super::frame::last_value(&self.pairs, key)
    }

    /// The pairs, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// How many pairs.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The application's pairs of a received frame.
    pub(crate) fn from_frame(meta: Vec<(Utf8Bytes, Utf8Bytes)>) -> Metadata {
        let mut pairs = meta;
        pairs.retain(|(k, _)| !is_internal(k));
        Metadata { pairs }
    }

    /// Adds a pair at the end, as it is (a key already there keeps its place; the
    /// last value is the one read).
    pub(crate) fn push(&mut self, key: Utf8Bytes, value: Utf8Bytes) {
        self.pairs.push((key, value));
    }

    pub(crate) fn pairs(&self) -> &[(Utf8Bytes, Utf8Bytes)] {
        &self.pairs
    }
}

/// How a stream handler fails: what its trailer carries.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HandlerError {
    /// A `TApplicationException` in the trailer's payload (Kitex's handler errors
    /// travel so; its client returns them as errors).
    Exception(ApplicationException),
    /// Business status keys in the trailer (Kitex's `BizStatusError`).
    Biz(BizStatus),
}

impl HandlerError {
    /// An `INTERNAL_ERROR` with `message`: what a handler's own failure should be.
    pub fn internal(message: impl Into<String>) -> Self {
        HandlerError::Exception(ApplicationException::new(
            ApplicationExceptionKind::InternalError,
            message.into(),
        ))
    }

    /// An `UNKNOWN_METHOD` for `method`.
    pub fn unknown_method(method: &str) -> Self {
        HandlerError::Exception(ApplicationException::new(
            ApplicationExceptionKind::UnknownMethod,
            format!("unknown streaming method {method}"),
        ))
    }
}

impl From<ApplicationException> for HandlerError {
    fn from(e: ApplicationException) -> Self {
        HandlerError::Exception(e)
    }
}

impl From<BizStatus> for HandlerError {
    fn from(s: BizStatus) -> Self {
        HandlerError::Biz(s)
    }
}

impl From<StreamError> for HandlerError {
    /// A handler that stops on a failed stream operation (`?`). A stream the peer
    /// reset (cancelled, past its deadline, another rst) ends with an
    /// `INTERNAL_ERROR` whose message starts with the rst's code as
    /// `[ttstream error, code=N]`: what Kitex's server (v0.16) puts in the trailer it
    /// sends after a client's rst when its handler returns the error its `Recv`
    /// gave. Any other failure is an `INTERNAL_ERROR` with the error's text. (Nothing
    /// is sent on a stream reset here or whose connection failed.)
    fn from(e: StreamError) -> Self {
        let rst = match e {
            StreamError::Reset(rst) => rst,
            StreamError::Cancelled(_) | StreamError::DeadlineExceeded => e.to_rst(),
            e => return HandlerError::internal(e.to_string()),
        };
        HandlerError::internal(format!(
            "[ttstream error, code={}] {}",
            rst.kind.id(),
            rst.message
        ))
    }
}
