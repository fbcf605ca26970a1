//! Why a generic call failed.

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
    /// A method that returns a value answered with neither a value nor a declared
    /// exception (Apache's `MISSING_RESULT`).
    #[error("the reply of {0} carries no result")]
    MissingResult(String),
    /// The call itself failed: connection, timeout, protocol, or an application
    /// exception (see [`volo_core::client::Error::kind`]).
    #[error(transparent)]
    Call(#[from] volo_core::client::Error),
}
