//! Why a run failed, as the exit status and the one line on stderr that say so.

use std::process::ExitCode;

use thrift_generic::GenericError;
use volo_core::client::{Error, ErrorKind};
use volo_core::stream::StreamError;

/// What kind of failure ends the run, which is its exit status (see the
/// [crate docs](crate#exit-status)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// A usage or IDL error: status 1.
    Usage = 1,
    /// A connection or protocol failure, a timeout: status 2.
    Transport = 2,
    /// A `TApplicationException` from the server: status 3.
    Application = 3,
    /// A declared exception: status 4.
    Declared = 4,
}

/// A failed run: its status, and the message printed after `thrift-call: `.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: Status,
    pub(crate) message: String,
}

impl Failure {
    /// A usage or IDL error.
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Failure {
            status: Status::Usage,
            message: message.into(),
        }
    }

    /// A failure to reach the server or to read its reply.
    pub(crate) fn transport(message: impl Into<String>) -> Self {
        Failure {
            status: Status::Transport,
            message: message.into(),
        }
    }

    /// clap's error, on one line: its message up to the usage, the lines joined
    /// (`the following required arguments were not provided: --idl <FILE>`).
    pub(crate) fn from_clap(e: &clap::Error) -> Self {
        let text = e.render().to_string();
        let message = text
            .lines()
            .map(str::trim)
            .take_while(|l| !l.starts_with("Usage:"))
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let message = message.strip_prefix("error: ").unwrap_or(&message);
        Failure::usage(format!("{message} (see --help)"))
    }

    /// Why a call failed, by what failed.
    pub(crate) fn from_call(e: GenericError) -> Self {
        let status = match &e {
            GenericError::UnknownService(_)
            | GenericError::UnknownMethod { .. }
            | GenericError::Args { .. }
            | GenericError::JsonArgs { .. }
            | GenericError::Streaming { .. }
            | GenericError::NotStreaming { .. }
            | GenericError::SecondRequest { .. }
            | GenericError::JsonMessage { .. }
            | GenericError::Setup(_) => Status::Usage,
            GenericError::Declared { .. } | GenericError::DeclaredJson { .. } => Status::Declared,
            // The server's own word, as an application exception is.
            GenericError::MissingResult(_) | GenericError::Stream(StreamError::Biz(_)) => {
                Status::Application
            }
            GenericError::Call(e) => call_status(e),
            // A reply that does not read as the IDL says, and what may come.
            _ => Status::Transport,
        };
        Failure {
            status,
            message: e.to_string(),
        }
    }

    /// Prints the message on stderr, on one line, and gives the status.
    pub(crate) fn report(self) -> ExitCode {
        let line = self.message.replace(['\r', '\n'], " ");
        eprintln!("thrift-call: {line}");
        ExitCode::from(self.status as u8)
    }
}

/// The status of a call that failed below the IDL.
fn call_status(e: &Error) -> Status {
    match e.kind() {
        // The server's word that the deadline passed comes as an application
        // exception too, but it is a timeout.
        ErrorKind::Timeout => Status::Transport,
        // The request could not be encoded: nothing was sent.
        ErrorKind::Encode => Status::Usage,
        _ if e.application_exception().is_some() => Status::Application,
        _ => Status::Transport,
    }
}
