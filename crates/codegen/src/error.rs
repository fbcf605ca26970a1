//! The errors that the IDL parser returns.
//!
//! Every failure names the file (the display name the caller gave to
//! [`parse`](crate::parse)), the 1-based line and column of the offending token or
//! character, and what went wrong, e.g.
//! `echo.thrift:12:5: found '}', expected a field type`. It is a
//! [`Diagnostic`] whose message is a [`ParseErrorKind`], so that callers can tell the
//! kinds of syntax error apart.

use crate::diagnostic::Diagnostic;

/// A syntax error in a Thrift IDL file, with its position: a [`Diagnostic`] (always of
/// severity [`Error`](crate::Severity::Error)) that says what went wrong as a
/// [`ParseErrorKind`].
///
/// `Display` prints `file:line:col: message`, the form compilers use, so that
/// editors and terminals can jump to the spot.
pub type ParseError = Diagnostic<ParseErrorKind>;

impl Diagnostic<ParseErrorKind> {
    /// Builds a syntax error at `line:col` (both 1-based) of the file displayed as
    /// `file`; the same as [`Diagnostic::error`].
    pub fn new(file: impl Into<String>, line: u32, col: u32, kind: ParseErrorKind) -> Self {
        Self::error(file, line, col, kind)
    }

    /// What went wrong.
    pub fn kind(&self) -> &ParseErrorKind {
        &self.message
    }
}

/// What went wrong, without the position (see [`ParseError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The parser met a token that the grammar does not allow at that point.
    #[error("found {found}, expected {expected}")]
    Unexpected {
        /// The offending token as written in the source, e.g. `'}'`,
        /// `string literal "x"` or `end of file`.
        found: String,
        /// What the grammar allows there, e.g. `a field type`.
        expected: String,
    },
    /// A character that starts no token, such as `@` or `$`.
    #[error("unexpected character {0:?}")]
    UnexpectedChar(char),
    /// A string literal without its closing quote on the same line.
    #[error("unterminated string literal")]
    UnterminatedString,
    /// A `/* ... */` comment without its closing `*/`.
    #[error("unterminated block comment")]
    UnterminatedComment,
    /// An unknown or malformed escape sequence inside a string literal, as written.
    #[error("invalid escape sequence '{0}' in string literal")]
    InvalidEscape(String),
    /// A malformed number, such as `0x`, `1.` or `12abc`, as written.
    #[error("invalid number literal '{0}'")]
    InvalidNumber(String),
    /// An integer outside the range of `i64`, or a double too large for `f64`.
    #[error("number literal '{0}' is out of range")]
    NumberOutOfRange(String),
    /// Container types or constant literals nested deeper than the limit.
    #[error("nesting deeper than {0} levels")]
    TooDeep(usize),
}

/// Shortens source text that goes into an error message to at most 40 characters.
pub(crate) fn truncate(text: &str) -> String {
    const MAX: usize = 40;
    if text.chars().count() <= MAX {
        text.to_owned()
    } else {
        let mut short: String = text.chars().take(MAX - 3).collect();
        short.push_str("...");
        short
    }
}
