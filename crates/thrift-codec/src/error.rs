//! Errors of encoding and decoding.

use std::fmt;

use crate::ttype::TType;

/// Why a decode failed, without the place it failed at (see [`DecodeError::path`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The input ended in the middle of a value.
    #[error("unexpected end of input: needed {needed} more bytes, {remaining} remain")]
    UnexpectedEof {
        /// Bytes the value needed.
        needed: usize,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A string, binary or container length was negative.
    #[error("negative length {0}")]
    NegativeLength(i64),
    /// A length claims more bytes than the input has left, counting the minimum wire size
    /// of each element; nothing was allocated for it.
    #[error("length {len} needs at least {needed} bytes but only {remaining} remain")]
    LengthExceedsInput {
        /// The length read from the wire (elements or bytes).
        len: u64,
        /// The fewest bytes that many elements can occupy.
        needed: u64,
        /// Bytes that were left.
        remaining: usize,
    },
    /// A type id that names no Thrift type.
    #[error("invalid type id {0}")]
    InvalidType(u8),
    /// A container whose element type holds no value (`stop` or `void`).
    #[error("invalid container element type {0:?}")]
    InvalidElementType(TType),
    /// A non-empty list, set or map whose element type is not the declared one.
    #[error("expected elements of type {expected:?}, found {found:?}")]
    UnexpectedElementType {
        /// The declared element type.
        expected: TType,
        /// The type on the wire.
        found: TType,
    },
    /// A string that is not UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// Structs and containers nested deeper than the decoder's limit.
    #[error("nesting deeper than the limit of {0}")]
    DepthLimitExceeded(usize),
    /// A varint longer than its type allows.
    #[error("varint longer than {0} bytes")]
    VarintTooLong(usize),
    /// A field declared `required` was absent.
    #[error("required field is missing")]
    MissingRequiredField,
    /// A union with no field set, or with more than one.
    #[error("union must have exactly one field set, found {0}")]
    InvalidUnion(usize),
    /// A message header whose protocol id or version is not the one expected.
    #[error("bad protocol version or id {0:#x}")]
    BadVersion(u32),
    /// A message header whose message type is not call, reply, exception or oneway.
    #[error("invalid message type {0}")]
    InvalidMessageType(u8),
    /// A message or frame larger than the configured limit.
    #[error("size {size} exceeds the limit of {limit}")]
    SizeLimitExceeded {
        /// The size read from the wire.
        size: u64,
        /// The configured limit.
        limit: u64,
    },
    /// Bytes left over after a value that should have filled the input.
    #[error("{0} trailing bytes after the value")]
    TrailingBytes(usize),
    /// JSON protocol: the text at `offset` is not what the protocol expects there (a
    /// syntax error, a bad escape, a type name that names no type, invalid base64...).
    #[error("invalid JSON at byte {offset}: expected {expected}")]
    InvalidJson {
        /// What the protocol expected.
        expected: &'static str,
        /// Where in the input, in bytes from its start.
        offset: usize,
    },
    /// JSON protocol: a number that its Thrift type cannot hold (an `i8` of 300, a
    /// `bool` of 2, a `double` literal too large to be finite).
    #[error("the number at byte {offset} is out of range for {ty:?}")]
    NumberOutOfRange {
        /// The type the number was read as.
        ty: TType,
        /// Where in the input, in bytes from its start.
        offset: usize,
    },
}

/// A decode failure: what went wrong and the field path it happened at.
///
/// The path is built on the way out (cold path only), so that successful decodes pay
/// nothing for it: each struct that sees a field fail adds `Struct.field`. Boxed so that
/// `Result<T, DecodeError>` stays one pointer wide.
#[derive(Clone, PartialEq, Eq)]
pub struct DecodeError {
    inner: Box<Inner>,
}

#[derive(Clone, PartialEq, Eq)]
struct Inner {
    kind: DecodeErrorKind,
    /// Innermost first: `(struct name, field name)`.
    path: Vec<(&'static str, &'static str)>,
}

impl DecodeError {
    /// A new error with an empty path.
    #[cold]
    pub fn new(kind: DecodeErrorKind) -> Self {
        DecodeError {
            inner: Box::new(Inner {
                kind,
                path: Vec::new(),
            }),
        }
    }

    /// Records that the error happened inside field `field` of struct `ty`. Called by
    /// generated code as the error travels outwards.
    #[cold]
    pub fn push(mut self, ty: &'static str, field: &'static str) -> Self {
        self.inner.path.push((ty, field));
        self
    }

    /// A missing `required` field `field` of struct `ty`.
    #[cold]
    pub fn missing(ty: &'static str, field: &'static str) -> Self {
        DecodeError::new(DecodeErrorKind::MissingRequiredField).push(ty, field)
    }

    /// What went wrong.
    pub fn kind(&self) -> &DecodeErrorKind {
        &self.inner.kind
    }

    /// The field path, outermost first, as `Struct.field` pairs joined by `/`:
    /// `MyTest.ano/Ano.num`. Empty when the error was not inside a field.
    pub fn path(&self) -> String {
        let mut out = String::new();
        for (i, (ty, field)) in self.inner.path.iter().rev().enumerate() {
            if i > 0 {
                out.push('/');
            }
            out.push_str(ty);
            out.push('.');
            out.push_str(field);
        }
        out
    }
}

impl From<DecodeErrorKind> for DecodeError {
    #[cold]
    fn from(kind: DecodeErrorKind) -> Self {
        DecodeError::new(kind)
    }
}

impl fmt::Debug for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecodeError")
            .field("kind", &self.inner.kind)
            .field("path", &self.path())
            .finish()
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "failed to decode Thrift value")?;
        if !self.inner.path.is_empty() {
            write!(f, " at {}", self.path())?;
        }
        write!(f, ": {}", self.inner.kind)
    }
}

impl std::error::Error for DecodeError {}

impl From<DecodeError> for std::io::Error {
    fn from(e: DecodeError) -> Self {
        let kind = match e.kind() {
            DecodeErrorKind::UnexpectedEof { .. } => std::io::ErrorKind::UnexpectedEof,
            _ => std::io::ErrorKind::InvalidData,
        };
        std::io::Error::new(kind, e)
    }
}

/// An encode failure. Encoding itself cannot fail once the size is known; what can fail
/// is the size: Thrift lengths are `i32`, so nothing larger than the limit is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The value encodes to more bytes than the limit allows.
    #[error("encoded size {size} exceeds the limit of {limit}")]
    SizeLimitExceeded {
        /// The exact encoded size.
        size: usize,
        /// The limit in force.
        limit: usize,
    },
}

impl From<EncodeError> for std::io::Error {
    fn from(e: EncodeError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e)
    }
}
