//! The one error a client call fails with, below the IDL: what kind of failure, which
//! instance it came from, whether the server may have run the call, and the cause.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::time::Duration;

use thrift_wire::{ApplicationException, ApplicationExceptionKind};

use crate::context::Address;
pub use crate::error_kind::ErrorKind;

/// A cause of any type, as the source of an [`Error`].
pub type BoxError = Box<dyn StdError + Send + Sync>;

/// Why a call failed below the IDL (the declared exceptions are
/// [`ClientError::User`](super::ClientError::User)): match on [`kind`](Error::kind) or
/// ask `is_timeout()`-style questions; the instance that failed and the cause chain
/// ([`std::error::Error::source`]) come with it.
pub struct Error {
    inner: Box<Inner>,
}

struct Inner {
    kind: ErrorKind,
    instance: Option<Address>,
    /// Whether the request may have reached a server (so a retry may run it twice).
    sent: bool,
    timeout: Option<Duration>,
    application: Option<ApplicationException>,
    source: Option<BoxError>,
}

impl Error {
    /// An error of `kind` caused by `source`. Layers use it to fail a call; whether the
    /// request may have been sent follows from the kind (not for `Connect`,
    /// `CircuitOpen`, `NoInstance`, `Encode`, `Rejected`, `Overloaded` and `Closing`).
    #[cold]
    pub fn new(kind: ErrorKind, source: impl Into<BoxError>) -> Self {
        Self::build(kind, Some(source.into()))
    }

    fn build(kind: ErrorKind, source: Option<BoxError>) -> Self {
        let sent = matches!(
            kind,
            ErrorKind::Io | ErrorKind::Timeout | ErrorKind::Protocol | ErrorKind::Application
        );
        Error {
            inner: Box::new(Inner {
                kind,
                instance: None,
                sent,
                timeout: None,
                application: None,
                source,
            }),
        }
    }

    /// Connecting to `addr` failed.
    #[cold]
    pub fn connect(addr: Address, source: io::Error) -> Self {
        Self::build(ErrorKind::Connect, Some(source.into())).with_instance(addr)
    }

    /// Reading or writing failed.
    #[cold]
    pub fn io(source: io::Error) -> Self {
        Self::build(ErrorKind::Io, Some(source.into()))
    }

    /// The call's deadline (`after` from its start) passed.
    #[cold]
    pub fn timeout(after: Duration) -> Self {
        let mut e = Self::build(ErrorKind::Timeout, None);
        e.inner.timeout = Some(after);
        e
    }

    /// No instance can take the call.
    #[cold]
    pub fn no_instance() -> Self {
        Self::build(ErrorKind::NoInstance, None)
    }

    /// A breaker is open (`what` says which).
    #[cold]
    pub fn circuit_open(what: impl Into<BoxError>) -> Self {
        Self::build(ErrorKind::CircuitOpen, Some(what.into()))
    }

    /// The reply was not valid.
    #[cold]
    pub fn protocol(source: impl Into<BoxError>) -> Self {
        Self::build(ErrorKind::Protocol, Some(source.into()))
    }

    /// The request could not be encoded.
    #[cold]
    pub fn encode(source: impl Into<BoxError>) -> Self {
        Self::build(ErrorKind::Encode, Some(source.into()))
    }

    /// The server answered with `ex`. Three answers of our server are told apart: an
    /// over-limit refusal from its limiter is [`ErrorKind::Overloaded`], and the
    /// refusal of a server that is shutting down [`ErrorKind::Closing`] (neither call
    /// ran); its word that the caller's deadline passed is [`ErrorKind::Timeout`] (as
    /// gRPC's `DEADLINE_EXCEEDED` is). Here they are told by the exception's message;
    /// a reply whose header names its refusal is told by that (see
    /// [`refusal`](crate::refusal)).
    #[cold]
    pub fn application(ex: ApplicationException) -> Self {
        let kind = refusal_kind(crate::refusal::Refusal::of_reply(&ex, None));
        let mut e = Self::build(kind, None);
        e.inner.application = Some(ex);
        e
    }

    /// The same error, an answer of the server told apart by the refusal its reply's
    /// header named (`said`, the value under [`HEADER_KEY`](crate::refusal::HEADER_KEY))
    /// rather than by its message. Other errors are left as they are.
    #[cold]
    pub(crate) fn with_refusal_said(mut self, said: &str) -> Self {
        if let Some(ex) = &self.inner.application {
            self.inner.kind = refusal_kind(crate::refusal::Refusal::of_reply(ex, Some(said)));
        }
        self
    }

    /// The same error, naming the instance it came from.
    pub fn with_instance(mut self, addr: Address) -> Self {
        self.inner.instance = Some(addr);
        self
    }

    /// The same error, saying that the request may (or did not) reach a server.
    pub fn with_sent(mut self, sent: bool) -> Self {
        self.inner.sent = sent;
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.inner.kind
    }

    /// The instance that failed, when one was picked.
    pub fn instance(&self) -> Option<&Address> {
        self.inner.instance.as_ref()
    }

    /// The exception the server sent, for [`ErrorKind::Application`],
    /// [`ErrorKind::Overloaded`] and [`ErrorKind::Closing`].
    pub fn application_exception(&self) -> Option<&ApplicationException> {
        self.inner.application.as_ref()
    }

    /// The deadline passed.
    pub fn is_timeout(&self) -> bool {
        self.inner.kind == ErrorKind::Timeout
    }

    /// A circuit breaker refused the call.
    pub fn is_circuit_open(&self) -> bool {
        self.inner.kind == ErrorKind::CircuitOpen
    }

    /// Whether the request may have reached a server, so that a retry could run the
    /// call twice (retried only for methods marked idempotent).
    pub fn may_have_run(&self) -> bool {
        self.inner.sent
    }

    /// Whether another attempt (on another instance) may succeed where this one failed:
    /// connection failures, I/O errors, timeouts, an open instance breaker, a server's
    /// over-limit refusal, a closing server's refusal. Whether it is *safe* to retry
    /// is [`may_have_run`]'s question.
    ///
    /// [`may_have_run`]: Error::may_have_run
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.inner.kind,
            ErrorKind::Connect
                | ErrorKind::Io
                | ErrorKind::Timeout
                | ErrorKind::Overloaded
                | ErrorKind::Closing
                | ErrorKind::CircuitOpen
        )
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.inner.kind);
        if let Some(i) = &self.inner.instance {
            d.field("instance", i);
        }
        if let Some(a) = &self.inner.application {
            d.field("application", a);
        }
        if let Some(s) = &self.inner.source {
            d.field("source", s);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.inner.kind {
            ErrorKind::Connect => f.write_str("connecting failed")?,
            ErrorKind::Io => f.write_str("the connection failed")?,
            ErrorKind::Timeout => match self.inner.timeout {
                Some(t) => write!(f, "the call timed out after {t:?}")?,
                None => f.write_str("the call timed out")?,
            },
            ErrorKind::CircuitOpen => f.write_str("circuit open")?,
            ErrorKind::NoInstance => f.write_str("no instance of the service to call")?,
            ErrorKind::Protocol => f.write_str("bad reply")?,
            ErrorKind::Encode => f.write_str("encoding the request failed")?,
            ErrorKind::Application | ErrorKind::Overloaded | ErrorKind::Closing => {
                if let Some(a) = &self.inner.application {
                    write!(
                        f,
                        "application exception {:?}: {}",
                        a.kind,
                        a.message.as_str()
                    )?;
                }
            }
            ErrorKind::Rejected => f.write_str("the call was refused")?,
        }
        if let Some(i) = &self.inner.instance {
            write!(f, " ({i})")?;
        }
        if let Some(s) = &self.inner.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.inner
            .source
            .as_ref()
            .map(|s| &**s as &(dyn StdError + 'static))
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::io(e)
    }
}

/// Why a generated client method failed: an exception the IDL declares for it, or an
/// [`Error`] below the IDL.
#[derive(Debug)]
pub enum ClientError<E> {
    /// An exception the IDL declares for the method.
    User(E),
    /// The call failed below the IDL (transport, timeout, breaker, application
    /// exception...).
    Rpc(Error),
}

impl<E> ClientError<E> {
    /// The `MISSING_RESULT` error: a reply with neither a result nor an exception.
    pub fn missing_result(method: &str) -> Self {
        ClientError::Rpc(Error::application(ApplicationException::new(
            ApplicationExceptionKind::MissingResult,
            format!("{method}: the reply has no result"),
        )))
    }

    /// The RPC error, unless this is a declared exception.
    pub fn rpc(&self) -> Option<&Error> {
        match self {
            ClientError::Rpc(e) => Some(e),
            ClientError::User(_) => None,
        }
    }

    /// The deadline passed.
    pub fn is_timeout(&self) -> bool {
        self.rpc().is_some_and(Error::is_timeout)
    }

    /// A circuit breaker refused the call.
    pub fn is_circuit_open(&self) -> bool {
        self.rpc().is_some_and(Error::is_circuit_open)
    }

    /// See [`Error::is_retryable`]; a declared exception is an answer, not retryable.
    pub fn is_retryable(&self) -> bool {
        self.rpc().is_some_and(Error::is_retryable)
    }

    /// The instance that failed.
    pub fn instance(&self) -> Option<&Address> {
        self.rpc().and_then(Error::instance)
    }

    /// The `TApplicationException` the server sent, if that is what this is.
    pub fn application_exception(&self) -> Option<&ApplicationException> {
        self.rpc().and_then(Error::application_exception)
    }
}

impl<E> From<Error> for ClientError<E> {
    fn from(e: Error) -> Self {
        ClientError::Rpc(e)
    }
}

impl<E: fmt::Display> fmt::Display for ClientError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::User(e) => write!(f, "{e}"),
            ClientError::Rpc(e) => write!(f, "{e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> StdError for ClientError<E> {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            ClientError::User(_) => None,
            ClientError::Rpc(e) => Some(e),
        }
    }
}

/// The kind of an application exception that is `refusal` (or none).
fn refusal_kind(refusal: Option<crate::refusal::Refusal>) -> ErrorKind {
    use crate::refusal::Refusal;
    match refusal {
        Some(Refusal::Overloaded) => ErrorKind::Overloaded,
        Some(Refusal::Closing) => ErrorKind::Closing,
        Some(Refusal::DeadlinePassed) => ErrorKind::Timeout,
        None => ErrorKind::Application,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_answer_the_questions_users_ask() {
        let addr: Address = "127.0.0.1:1".parse().unwrap();
        let e = Error::connect(addr.clone(), io::ErrorKind::ConnectionRefused.into());
        assert!(e.is_retryable() && !e.may_have_run() && !e.is_timeout());
        assert_eq!(e.instance(), Some(&addr));
        assert!(e.source().is_some(), "the io::Error is the source");
        assert!(e.to_string().contains("127.0.0.1:1"), "{e}");

        let t = Error::timeout(Duration::from_millis(20)).with_instance(addr);
        assert!(t.is_timeout() && t.is_retryable() && t.may_have_run());
        assert!(t.to_string().contains("20ms"), "{t}");

        let a = Error::application(ApplicationException::new(
            ApplicationExceptionKind::InternalError,
            "boom",
        ));
        assert_eq!(a.kind(), ErrorKind::Application);
        assert!(!a.is_retryable() && a.may_have_run());

        let late = Error::application(ApplicationException::new(
            ApplicationExceptionKind::InternalError,
            format!("{}a 5 ms timeout", crate::refusal::DEADLINE_PREFIX),
        ));
        assert!(late.is_timeout() && late.application_exception().is_some());
        let refused = Error::application(ApplicationException::new(
            ApplicationExceptionKind::InternalError,
            format!("{}too many calls", crate::refusal::OVERLOAD_PREFIX),
        ));
        assert_eq!(refused.kind(), ErrorKind::Overloaded);
        assert!(refused.is_retryable() && !refused.may_have_run());

        let c: ClientError<String> = Error::circuit_open("service EchoService").into();
        assert!(c.is_circuit_open() && c.is_retryable() && !c.is_timeout());
        let u: ClientError<String> = ClientError::User("declared".into());
        assert!(!u.is_retryable() && u.rpc().is_none());
    }
}
