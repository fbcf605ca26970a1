//! The one error type [`VoloClient`](crate::VoloClient)'s calls return.

use crate::echo::EchoError;

/// What a call through [`VoloClient`](crate::VoloClient) can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// Volo's client failed: connecting, I/O, a protocol error or an application exception.
    #[error("volo client: {0}")]
    Client(#[source] Box<volo_thrift::ClientError>),
    /// The server answered `echo_or_fail` with the IDL's `EchoError`.
    #[error("EchoError {{ code: {:?}, message: {:?} }}", .0.code, .0.message)]
    Echo(EchoError),
}

impl CallError {
    /// The IDL's `EchoError`, when the server answered with one.
    pub fn echo_error(&self) -> Option<&EchoError> {
        match self {
            Self::Echo(e) => Some(e),
            Self::Client(_) => None,
        }
    }

    /// Volo's client error, when the call failed below the IDL.
    pub fn client_error(&self) -> Option<&volo_thrift::ClientError> {
        match self {
            Self::Client(e) => Some(e),
            Self::Echo(_) => None,
        }
    }
}

impl From<volo_thrift::ClientError> for CallError {
    fn from(e: volo_thrift::ClientError) -> Self {
        Self::Client(Box::new(e))
    }
}
