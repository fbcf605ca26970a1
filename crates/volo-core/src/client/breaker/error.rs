//! Which breaker refused a call: the source of an [`Error::circuit_open`].
//!
//! [`Error::circuit_open`]: crate::client::Error::circuit_open

use crate::context::Address;

/// The breaker that refused a call, found as the source of an
/// [`Error`](crate::client::Error) whose kind is
/// [`CircuitOpen`](crate::client::ErrorKind::CircuitOpen).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CircuitOpen {
    /// The breaker of the callee service (the name, as in the call's context): the
    /// call was not sent.
    #[error("the breaker of service {0:?} is open")]
    Service(String),
    /// The breaker of this instance: the call was not sent to it.
    #[error("the breaker of instance {0} is open")]
    Instance(Address),
}
