//! The answers a server gives to calls it did not run to the end, and how a client
//! tells them apart: both sides read this module, so neither depends on the other for
//! it.
//!
//! Each is an `INTERNAL_ERROR` `TApplicationException` whose message starts with a
//! prefix of its own:
//!
//! | refusal | prefix | the call |
//! |---|---|---|
//! | over a limit | [`OVERLOAD_PREFIX`] | never ran; may go to another instance |
//! | the server is closing | [`CLOSING_PREFIX`] | never ran; may go to another instance |
//! | the caller's deadline passed | [`DEADLINE_PREFIX`] | was given up, perhaps half run |

use thrift_codec::{ApplicationException, ApplicationExceptionKind};

/// How a server's limiter starts the message of the `INTERNAL_ERROR` it answers an
/// over-limit call with (before decoding it): clients tell such a refusal, which ran
/// nothing and may be retried elsewhere, from other exceptions by it.
pub const OVERLOAD_PREFIX: &str = "server overloaded: ";

/// How a server that is shutting down starts the message of the `INTERNAL_ERROR` it
/// answers a call with that it will not run (see the server's
/// [graceful stop](crate::server#a-graceful-stop)): this crate's clients take such an
/// answer for [`ErrorKind::Closing`](crate::client::ErrorKind::Closing), a call that
/// never ran, and send it to another instance whatever its idempotency.
pub const CLOSING_PREFIX: &str = "server closing: ";

/// How the message of the exception starts that a server answers a call with once
/// the caller's deadline has passed (see [`Deadline`](crate::server::deadline::Deadline)).
pub const DEADLINE_PREFIX: &str = "the caller's deadline passed: ";

/// Whether `ex` is a limiter's refusal (see [`OVERLOAD_PREFIX`]).
pub fn is_overload(ex: &ApplicationException) -> bool {
    is_internal_with(ex, OVERLOAD_PREFIX)
}

/// Whether `ex` is a closing server's refusal (see [`CLOSING_PREFIX`]).
pub fn is_closing(ex: &ApplicationException) -> bool {
    is_internal_with(ex, CLOSING_PREFIX)
}

/// Whether `ex` is the answer to a call given up at its deadline (see
/// [`DEADLINE_PREFIX`]).
pub fn is_deadline_passed(ex: &ApplicationException) -> bool {
    is_internal_with(ex, DEADLINE_PREFIX)
}

/// The refusal of a call that a closing server will not run.
pub(crate) fn closing() -> ApplicationException {
    internal(
        CLOSING_PREFIX,
        "the call was not run; send it to another instance",
    )
}

/// The refusal of a call over a limit, `why` saying which.
pub(crate) fn overloaded(why: impl std::fmt::Display) -> ApplicationException {
    internal(OVERLOAD_PREFIX, why)
}

/// The answer to a call of `method` given up at its deadline: `what` became of it.
pub(crate) fn deadline_passed(method: &str, what: &str) -> ApplicationException {
    internal(DEADLINE_PREFIX, format_args!("{method} {what}"))
}

fn internal(prefix: &str, rest: impl std::fmt::Display) -> ApplicationException {
    ApplicationException::new(
        ApplicationExceptionKind::InternalError,
        format!("{prefix}{rest}"),
    )
}

fn is_internal_with(ex: &ApplicationException, prefix: &str) -> bool {
    ex.kind == ApplicationExceptionKind::InternalError && ex.message.as_str().starts_with(prefix)
}
