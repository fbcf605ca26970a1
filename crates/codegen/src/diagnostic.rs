//! What codegen says about a place in an IDL file: one type for every error and warning.
//!
//! A syntax error from the parser, a meaning error from the resolver (or from following
//! includes) and a warning about something Apache Thrift accepts but that loses meaning
//! all name a file, a 1-based line and column, and what is wrong there, and all print as
//! `file:line:col: message`, the form compilers use, so that editors and terminals can
//! jump to the spot. [`Diagnostic`] is that shape; its [`Severity`] tells an error,
//! which stops the compile, from a warning, which does not (the printed text is the same
//! either way).
//!
//! The names the crate had before it had this type stay, as aliases:
//! [`ParseError`](crate::ParseError) is a `Diagnostic<ParseErrorKind>`, and
//! [`ResolveError`](crate::resolve::ResolveError) and
//! [`Warning`](crate::resolve::Warning) are both a plain `Diagnostic`.

use std::fmt;

/// Whether a [`Diagnostic`] stops the compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Severity {
    /// The IDL cannot be compiled: the compile fails with this diagnostic.
    Error,
    /// The IDL compiles, read the way Apache Thrift reads it, but something is lost or
    /// renamed on the way; [`Builder`](crate::Builder) prints it as a `cargo:warning=`
    /// line.
    Warning,
}

/// A message about a place in an IDL file: an error or a warning.
///
/// `M` is what the message says: a [`ParseErrorKind`](crate::ParseErrorKind) for a
/// syntax error, so that callers can match on it, and text for everything else.
/// `Display` prints `file:line:col: message` whatever the severity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic<M = String> {
    /// Whether it stops the compile.
    pub severity: Severity,
    /// The file, as displayed (the name the caller gave it).
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in characters (a tab counts as one).
    pub col: u32,
    /// What is wrong, or what was accepted and how it is read.
    pub message: M,
}

impl<M> Diagnostic<M> {
    /// An error at `line:col` of the file displayed as `file`.
    pub fn error(file: impl Into<String>, line: u32, col: u32, message: M) -> Self {
        Self::at(Severity::Error, file.into(), line, col, message)
    }

    /// A warning at `line:col` of the file displayed as `file`.
    pub fn warning(file: impl Into<String>, line: u32, col: u32, message: M) -> Self {
        Self::at(Severity::Warning, file.into(), line, col, message)
    }

    fn at(severity: Severity, file: String, line: u32, col: u32, message: M) -> Self {
        Self {
            severity,
            file,
            line,
            col,
            message,
        }
    }

    /// The display name of the file.
    pub fn file_name(&self) -> &str {
        &self.file
    }

    /// The 1-based line.
    pub fn line(&self) -> u32 {
        self.line
    }

    /// The 1-based column, counted in characters (a tab counts as one).
    pub fn col(&self) -> u32 {
        self.col
    }
}

impl<M: fmt::Display> fmt::Display for Diagnostic<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

impl<M: fmt::Debug + fmt::Display> std::error::Error for Diagnostic<M> {}
