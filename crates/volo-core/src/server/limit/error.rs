//! Why a call was refused, and the exception the caller gets for it.

use thrift_wire::ApplicationException;

/// A call refused by a [`Limiter`](super::Limiter): which limit it met.
///
/// Its `Display` is the end of the refusal's message (after
/// [`OVERLOAD_PREFIX`](crate::refusal::OVERLOAD_PREFIX)); [`refusal`] builds the whole
/// exception.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Overloaded {
    /// [`LimitConfig::max_concurrency`](super::LimitConfig::max_concurrency) calls
    /// were in progress already.
    #[error("{limit} calls in progress, the most this server takes at once")]
    Concurrency {
        /// The limit that was met.
        limit: usize,
    },
    /// The calls of the last moments used up
    /// [`LimitConfig::max_qps`](super::LimitConfig::max_qps).
    #[error("above {limit} calls per second")]
    Qps {
        /// The limit that was met, in calls per second.
        limit: u32,
    },
    /// [`StreamConfig::max_in_flight`](crate::stream::StreamConfig::max_in_flight)
    /// streams were in progress already.
    #[error("{limit} streams in progress")]
    Streams {
        /// The limit that was met.
        limit: usize,
    },
}

/// The exception a refused call is answered with: an `INTERNAL_ERROR` whose message is
/// [`OVERLOAD_PREFIX`](crate::refusal::OVERLOAD_PREFIX) followed by why, so that
/// [`is_overload`](crate::refusal::is_overload) (and a client that uses it) knows the
/// call never ran and may be sent elsewhere.
pub fn refusal(why: &Overloaded) -> ApplicationException {
    crate::refusal::overloaded(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refusal::is_overload;
    use thrift_wire::ApplicationExceptionKind;

    #[test]
    fn a_refusal_is_recognised_as_an_overload_and_says_which_limit() {
        let ex = refusal(&Overloaded::Concurrency { limit: 8 });
        assert!(is_overload(&ex));
        assert_eq!(ex.kind, ApplicationExceptionKind::InternalError);
        assert_eq!(
            ex.message.as_str(),
            "server overloaded: 8 calls in progress, the most this server takes at once"
        );

        let ex = refusal(&Overloaded::Qps { limit: 100 });
        assert!(is_overload(&ex));
        assert_eq!(
            ex.message.as_str(),
            "server overloaded: above 100 calls per second"
        );
    }

    #[test]
    fn other_internal_errors_are_not_overloads() {
        let ex = ApplicationException::new(
            ApplicationExceptionKind::InternalError,
            "the handler panicked: server overloaded: no",
        );
        assert!(!is_overload(&ex));
    }
}
