//! The path language's parser: text in, [`FieldPath`] or a [`ParseError`] naming the
//! column out.

use std::fmt;

use super::{FieldPath, MAX_PATH_LEN, MAX_STEPS, Step};

/// Why a path's text does not parse, and the column (in characters, from 1) where it
/// stops making sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("path column {column}: {kind}")]
pub struct ParseError {
    /// Where, in characters from the start of the text (the first is 1).
    pub column: usize,
    /// What went wrong there.
    pub kind: ParseErrorKind,
}

/// What a path's text got wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// Something other than what the grammar allows at this point.
    #[error("expected {expected}, found {found}")]
    Expected {
        /// What the grammar allows here.
        expected: &'static str,
        /// What is there instead.
        found: Found,
    },
    /// A text longer than [`MAX_PATH_LEN`] bytes.
    #[error("path of {len} bytes is longer than the limit of {max}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// More steps than [`MAX_STEPS`].
    #[error("more than {max} steps")]
    TooManySteps {
        /// The limit.
        max: usize,
    },
    /// A field id (`#n`) outside `i16`.
    #[error("field id out of range for i16")]
    FieldIdOutOfRange,
    /// An integer subscript outside `i64`.
    #[error("integer out of range for i64")]
    IntegerOutOfRange,
    /// A `\u` escape that names no character (a lone surrogate).
    #[error("\\u escape that names no character")]
    InvalidUnicodeEscape,
}

/// What stands where the parser expected something else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// This character.
    Char(char),
    /// The end of the text.
    End,
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Char(c) => write!(f, "{c:?}"),
            Found::End => f.write_str("the end of the path"),
        }
    }
}

/// Parses `text` (see the grammar in the [module docs](super)).
pub(super) fn parse(text: &str) -> Result<FieldPath, ParseError> {
    if text.len() > MAX_PATH_LEN {
        return Err(ParseError {
            column: 1,
            kind: ParseErrorKind::TooLong {
                len: text.len(),
                max: MAX_PATH_LEN,
            },
        });
    }
    let mut p = Parser {
        chars: text.chars().peekable(),
        column: 1,
    };
    let mut steps = Vec::new();
    steps.push(p.field()?);
    loop {
        let column = p.column;
        let step = match p.peek() {
            None => break,
            Some('.') => {
                p.bump();
                p.field()?
            }
            Some('[') => {
                p.bump();
                let step = p.subscript()?;
                p.expect(']', "`]`")?;
                step
            }
            Some(_) => return Err(p.error("`.`, `[` or the end of the path")),
        };
        if steps.len() == MAX_STEPS {
            return Err(ParseError {
                column,
                kind: ParseErrorKind::TooManySteps { max: MAX_STEPS },
            });
        }
        steps.push(step);
    }
    Ok(FieldPath { steps })
}

struct Parser<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    /// The column of the next character.
    column: usize,
}

impl Parser<'_> {
    fn peek(&mut self) -> Option<char> {
        self.chars.peek().copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.next();
        if c.is_some() {
            self.column += 1;
        }
        c
    }

    fn error(&mut self, expected: &'static str) -> ParseError {
        let found = self.peek().map_or(Found::End, Found::Char);
        ParseError {
            column: self.column,
            kind: ParseErrorKind::Expected { expected, found },
        }
    }

    fn at(&self, column: usize, kind: ParseErrorKind) -> ParseError {
        ParseError { column, kind }
    }

    fn expect(&mut self, c: char, expected: &'static str) -> Result<(), ParseError> {
        if self.peek() == Some(c) {
            self.bump();
            Ok(())
        } else {
            Err(self.error(expected))
        }
    }

    /// `ident` or `#id`.
    fn field(&mut self) -> Result<Step, ParseError> {
        match self.peek() {
            Some('#') => {
                self.bump();
                let column = self.column;
                let id = self.integer("a field id")?;
                i16::try_from(id)
                    .map(Step::Id)
                    .map_err(|_| self.at(column, ParseErrorKind::FieldIdOutOfRange))
            }
            Some(c) if c == '_' || c.is_ascii_alphabetic() => {
                let mut name = String::new();
                while let Some(c) = self.peek() {
                    if c == '_' || c.is_ascii_alphanumeric() {
                        name.push(c);
                        self.bump();
                    } else {
                        break;
                    }
                }
                Ok(Step::Name(name))
            }
            _ => Err(self.error("a field name or `#id`")),
        }
    }

    /// An integer or a string, inside brackets.
    fn subscript(&mut self) -> Result<Step, ParseError> {
        match self.peek() {
            Some('"') => {
                self.bump();
                self.string().map(Step::Str)
            }
            Some(c) if c == '-' || c.is_ascii_digit() => {
                self.integer("an integer or a string").map(Step::Int)
            }
            _ => Err(self.error("an integer or a string")),
        }
    }

    /// `-?[0-9]+`, within `i64`.
    fn integer(&mut self, expected: &'static str) -> Result<i64, ParseError> {
        let column = self.column;
        let negative = self.peek() == Some('-');
        if negative {
            self.bump();
        }
        if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
            return Err(self.error(expected));
        }
        // Accumulated negatively, so that i64::MIN is reachable.
        let mut value: i64 = 0;
        let mut overflow = false;
        while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
            self.bump();
            match value
                .checked_mul(10)
                .and_then(|v| v.checked_sub(i64::from(d)))
            {
                Some(v) => value = v,
                None => overflow = true,
            }
        }
        let value = if negative {
            Some(value)
        } else {
            value.checked_neg()
        };
        match value {
            Some(v) if !overflow => Ok(v),
            _ => Err(self.at(column, ParseErrorKind::IntegerOutOfRange)),
        }
    }

    /// The rest of a JSON-style string, after its opening quote.
    fn string(&mut self) -> Result<String, ParseError> {
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err(self.error("`\"` closing the string")),
                Some('"') => {
                    self.bump();
                    return Ok(out);
                }
                Some('\\') => {
                    self.bump();
                    out.push(self.escape()?);
                }
                Some(c) if (c as u32) < 0x20 => {
                    return Err(
                        self.error("a character or an escape (control characters are escaped)")
                    );
                }
                Some(c) => {
                    out.push(c);
                    self.bump();
                }
            }
        }
    }

    /// One escape after its backslash.
    fn escape(&mut self) -> Result<char, ParseError> {
        let c = match self.peek() {
            Some('"') => '"',
            Some('\\') => '\\',
            Some('/') => '/',
            Some('b') => '\u{8}',
            Some('f') => '\u{c}',
            Some('n') => '\n',
            Some('r') => '\r',
            Some('t') => '\t',
            Some('u') => {
                let column = self.column - 1;
                self.bump();
                let first = self.hex4()?;
                let code = if (0xd800..0xdc00).contains(&first) {
                    // A high surrogate: a low one must follow as `\uXXXX`.
                    if self.peek() != Some('\\') {
                        return Err(self.at(column, ParseErrorKind::InvalidUnicodeEscape));
                    }
                    self.bump();
                    self.expect('u', "`u` of a low surrogate's escape")?;
                    let second = self.hex4()?;
                    if !(0xdc00..0xe000).contains(&second) {
                        return Err(self.at(column, ParseErrorKind::InvalidUnicodeEscape));
                    }
                    0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00)
                } else {
                    first
                };
                return char::from_u32(code)
                    .ok_or_else(|| self.at(column, ParseErrorKind::InvalidUnicodeEscape));
            }
            _ => return Err(self.error("an escape: one of `\"\\/bfnrt` or `u`")),
        };
        self.bump();
        Ok(c)
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let mut v = 0;
        for _ in 0..4 {
            match self.peek().and_then(|c| c.to_digit(16)) {
                Some(d) => {
                    self.bump();
                    v = v * 16 + d;
                }
                None => return Err(self.error("a hexadecimal digit")),
            }
        }
        Ok(v)
    }
}

/// Writes `s` as a JSON-style string literal, quotes included.
pub(super) fn write_string(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if (c as u32) < 0x20 || c == '\u{7f}' => write!(f, "\\u{:04x}", c as u32)?,
            c => write!(f, "{c}")?,
        }
    }
    f.write_str("\"")
}
