//! Why a generic call failed.

use bytes::Bytes;
use thrift_dynamic::TranscodeError;
use thrift_dynamic::value::{StructValue, ValueError};

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
    /// The reply's result struct does not transcode into JSON.
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
    /// exception (see [`volo_core::client::Error::kind`]).
    #[error(transparent)]
    Call(#[from] volo_core::client::Error),
}
