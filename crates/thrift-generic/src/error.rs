//! Why a generic call failed.

use std::io;

use bytes::Bytes;
use thrift_dynamic::value::{StructValue, ValueError};
use thrift_dynamic::{StreamingMode, TranscodeError};
use volo_core::client::{Error, ErrorKind};
use volo_core::stream::StreamError;

/// Why a generic call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenericError {
    /// The IDL has no service of that name.
    #[error("the IDL has no service {0}")]
    UnknownService(String),
    /// The service has no method of that name (nothing was sent).
    #[error("{service} has no method {method}")]
    UnknownMethod {
        /// The service.
        service: String,
        /// The method asked for.
        method: String,
    },
    /// A call of a streaming method: it is opened as a stream
    /// ([`GenericStreamClient`](crate::GenericStreamClient)), not called (nothing was
    /// sent).
    #[error("{method} is a {mode} streaming method: open a stream of it")]
    Streaming {
        /// The method.
        method: String,
        /// Which way its messages go.
        mode: StreamingMode,
    },
    /// A stream of a method that is not a streaming one: it is called
    /// ([`GenericClient`](crate::GenericClient)), not opened as a stream (nothing was
    /// sent).
    #[error("{method} is not a streaming method: call it")]
    NotStreaming {
        /// The method.
        method: String,
    },
    /// A second request on a server stream, which takes one (nothing was sent).
    #[error("{method} is a server stream: it takes one request")]
    SecondRequest {
        /// The method.
        method: String,
    },
    /// A stream message given as JSON does not transcode into the method's request
    /// struct (nothing was sent): the error names the field path, what was expected
    /// and the offset.
    #[error("the JSON request of {method}: {source}")]
    JsonMessage {
        /// The method.
        method: String,
        /// What does not fit, and where.
        #[source]
        source: TranscodeError,
    },
    /// The arguments do not fit the method's arguments struct (nothing was sent).
    #[error("the arguments of {method}: {source}")]
    Args {
        /// The method.
        method: String,
        /// What does not fit, and where.
        #[source]
        source: ValueError,
    },
    /// The JSON arguments do not transcode into the method's arguments struct (nothing
    /// was sent): the error names the field path, what was expected and the offset.
    #[error("the JSON arguments of {method}: {source}")]
    JsonArgs {
        /// The method.
        method: String,
        /// What does not fit, and where.
        #[source]
        source: TranscodeError,
    },
    /// A call in Kitex's one-argument JSON form
    /// ([`call_json_arg`](crate::GenericClient::call_json_arg)) of a method that does
    /// not take exactly one argument (nothing was sent).
    #[error("{method} takes {count} arguments, not one")]
    NotOneArgument {
        /// The method.
        method: String,
        /// How many arguments it takes.
        count: usize,
    },
    /// The reply's result struct (or a stream's response struct) does not transcode
    /// into JSON.
    #[error("the reply of {method} as JSON: {source}")]
    JsonReply {
        /// The method.
        method: String,
        /// What did not read.
        #[source]
        source: TranscodeError,
    },
    /// The reply's result struct does not read as the IDL describes it.
    #[error("the reply of {method}: {source}")]
    Reply {
        /// The method.
        method: String,
        /// What did not read.
        #[source]
        source: ValueError,
    },
    /// The method threw one of the exceptions its IDL declares.
    #[error("{method} threw {exception} (as {field})")]
    Declared {
        /// The method.
        method: String,
        /// The result struct's field that carried it.
        field: String,
        /// The exception's type name.
        exception: String,
        /// The exception's fields.
        value: StructValue,
    },
    /// The method threw one of the exceptions its IDL declares, given as JSON (a
    /// [`call_json`](crate::GenericClient::call_json)).
    #[error("{method} threw {exception} (as {field})")]
    DeclaredJson {
        /// The method.
        method: String,
        /// The result struct's field that carried it.
        field: String,
        /// The exception's type name.
        exception: String,
        /// The exception as a JSON object keyed by field name.
        json: Bytes,
    },
    /// A method that returns a value answered with neither a value nor a declared
    /// exception (Apache's `MISSING_RESULT`).
    #[error("the reply of {0} carries no result")]
    MissingResult(String),
    /// The call itself failed: connection, timeout, protocol, or an application
    /// exception (see [`volo_core::client::Error::kind`]). A stream's failures that
    /// a call also has come as these too: see [`GenericError::from_stream`].
    #[error(transparent)]
    Call(#[from] Error),
    /// The client of a stream could not be made (its transport: a reactor that did
    /// not start).
    #[error("making the stream client: {0}")]
    Setup(#[source] io::Error),
    /// A stream ended in a way a call cannot: a business status in its trailer, a
    /// reset or cancel, a refusal to open it (see [`GenericError::from_stream`]).
    #[error(transparent)]
    Stream(StreamError),
}

impl GenericError {
    /// A stream's failure, as the failure of a call where a call can fail the same
    /// way, so that callers tell them apart by one [`ErrorKind`]:
    ///
    /// | stream | as |
    /// |---|---|
    /// | an exception in the trailer ([`StreamError::Application`]) | [`Error::application`]: `Application`, or `Overloaded`, `Closing`, `Timeout` for those refusals of the server |
    /// | its deadline passed | `Timeout` |
    /// | the connection failed | `Io` |
    /// | a message that did not decode, the peer broke the protocol | `Protocol` |
    /// | a message too large to encode | `Encode` |
    /// | the client failed to open it ([`StreamError::Open`]: no instance, a failed connect...) | its kind |
    /// | a business status in the trailer, a reset, a cancel, a refusal to open | [`GenericError::Stream`], as it is |
    ///
    /// A connection that fails while a stream is being opened is `Connect`
    /// (nothing reached the server).
    pub fn from_stream(e: StreamError) -> Self {
        let call = match e {
            StreamError::Application(ex) => Error::application(ex),
            StreamError::DeadlineExceeded => Error::new(ErrorKind::Timeout, e),
            StreamError::Connection { kind, message } => Error::io(io::Error::new(kind, message)),
            StreamError::Protocol(_) | StreamError::Decode(_) => Error::protocol(e),
            StreamError::Encode(_) => Error::encode(e),
            // The client's own failure to open it (no instance, a failed connect...).
            StreamError::Open { kind, message, .. } => Error::new(kind, message),
            other => return GenericError::Stream(other),
        };
        GenericError::Call(call)
    }
}
