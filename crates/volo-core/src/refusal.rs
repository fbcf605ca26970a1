//! The answers a server gives to calls it did not run to the end, and how a client
//! tells them apart: both sides read this module, so neither depends on the other for
//! it.
//!
//! Each is an `INTERNAL_ERROR` `TApplicationException`. A reply framed with a header
//! (TTHeader or THeader) also names the refusal under the string key [`HEADER_KEY`],
//! and that is what a client goes by; the message starts with a prefix of its own,
//! which a client reads only when the reply says nothing else (Framed and Buffered
//! replies, older servers):
//!
//! | refusal | [`HEADER_KEY`] | message prefix | the call |
//! |---|---|---|---|
//! | over a limit | `overloaded` | [`OVERLOAD_PREFIX`] | never ran; may go to another instance |
//! | the server is closing | `closing` | [`CLOSING_PREFIX`] | never ran; may go to another instance |
//! | the caller's deadline passed | `deadline` | [`DEADLINE_PREFIX`] | was given up, perhaps half run |
//!
//! Kitex has no key of its own for these, so the key is this crate's. A Kitex client
//! sees the `INTERNAL_ERROR` with its message, and the key among the reply's backward
//! metainfo (as it takes any string key it does not know); so does this crate's
//! client, in [`ClientContext`](crate::client::ClientContext)'s metainfo.

use thrift_wire::{ApplicationException, ApplicationExceptionKind};

/// The string header key (TTHeader `str_kv`, THeader info) under which a server's
/// exception reply names its refusal: `overloaded`, `closing` or `deadline` (see
/// [`Refusal::as_str`]).
pub const HEADER_KEY: &str = "refusal";

/// Why a server answered a call with an exception instead of running it to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Over one of the server's limits; the call never ran.
    Overloaded,
    /// The server is shutting down; the call never ran.
    Closing,
    /// The caller's deadline passed; the call was given up, perhaps half run.
    DeadlinePassed,
}

impl Refusal {
    /// Its value under [`HEADER_KEY`].
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Overloaded => "overloaded",
            Refusal::Closing => "closing",
            Refusal::DeadlinePassed => "deadline",
        }
    }

    /// The refusal a [`HEADER_KEY`] value names; `None` for any other value.
    pub fn from_header(value: &str) -> Option<Refusal> {
        [
            Refusal::Overloaded,
            Refusal::Closing,
            Refusal::DeadlinePassed,
        ]
        .into_iter()
        .find(|r| r.as_str() == value)
    }

    /// The refusal `ex` is by its kind and message alone (the fallback for a reply
    /// without [`HEADER_KEY`]).
    pub fn from_message(ex: &ApplicationException) -> Option<Refusal> {
        if is_overload(ex) {
            Some(Refusal::Overloaded)
        } else if is_closing(ex) {
            Some(Refusal::Closing)
        } else if is_deadline_passed(ex) {
            Some(Refusal::DeadlinePassed)
        } else {
            None
        }
    }

    /// The refusal an exception reply is: the one its header names (`said`, the value
    /// under [`HEADER_KEY`], when the reply had one), read from its message only when
    /// the header says nothing. Only an `INTERNAL_ERROR` is a refusal.
    pub fn of_reply(ex: &ApplicationException, said: Option<&str>) -> Option<Refusal> {
        if ex.kind != ApplicationExceptionKind::InternalError {
            return None;
        }
        match said {
            Some(value) => Refusal::from_header(value),
            None => Refusal::from_message(ex),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn internal(message: &str) -> ApplicationException {
        ApplicationException::new(ApplicationExceptionKind::InternalError, message.to_string())
    }

    #[test]
    fn each_refusal_reads_back_from_its_header_value_and_from_its_message() {
        let made = [
            (Refusal::Overloaded, overloaded("too many")),
            (Refusal::Closing, closing()),
            (
                Refusal::DeadlinePassed,
                deadline_passed("echo", "was given up"),
            ),
        ];
        for (refusal, ex) in made {
            assert_eq!(Refusal::from_header(refusal.as_str()), Some(refusal));
            assert_eq!(Refusal::from_message(&ex), Some(refusal));
            assert_eq!(Refusal::of_reply(&ex, None), Some(refusal));
        }
        assert_eq!(Refusal::from_header("busy"), None);
    }

    #[test]
    fn a_header_decides_over_the_message_which_is_read_only_without_one() {
        let plain = internal("busy");
        let says_overload = internal(&format!("{OVERLOAD_PREFIX}busy"));
        assert_eq!(
            Refusal::of_reply(&plain, Some("overloaded")),
            Some(Refusal::Overloaded)
        );
        assert_eq!(Refusal::of_reply(&plain, None), None);
        assert_eq!(
            Refusal::of_reply(&says_overload, Some("closing")),
            Some(Refusal::Closing)
        );
        assert_eq!(
            Refusal::of_reply(&says_overload, Some("something else")),
            None,
            "a header naming no refusal this crate knows"
        );
        assert_eq!(
            Refusal::of_reply(&says_overload, None),
            Some(Refusal::Overloaded)
        );
    }

    #[test]
    fn only_an_internal_error_is_a_refusal() {
        let ex = ApplicationException::new(
            ApplicationExceptionKind::UnknownMethod,
            format!("{OVERLOAD_PREFIX}busy"),
        );
        assert_eq!(Refusal::of_reply(&ex, Some("overloaded")), None);
        assert_eq!(Refusal::of_reply(&ex, None), None);
    }
}
