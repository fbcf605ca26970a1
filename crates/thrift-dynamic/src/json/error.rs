//! Why a transcoding failed, and where.

use std::fmt;

use thrift_wire::{DecodeError, TType};

/// Why JSON could not become Thrift, or Thrift JSON, and where: the field path
/// (`requests[3].msg`) and, for JSON input, the byte offset.
///
/// The path is built while the error travels up, so a successful call pays nothing
/// for it.
#[derive(Debug)]
pub struct TranscodeError {
    kind: ErrorKind,
    /// Innermost segment first (pushed while unwinding).
    path: Vec<Segment>,
    offset: Option<usize>,
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Field(String),
    Index(usize),
    Key(String),
    /// A field the descriptor does not name, by id (Thrift input).
    Id(i16),
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The JSON text is not JSON.
    #[error("invalid JSON: expected {expected}")]
    Syntax {
        /// What the grammar allows there.
        expected: &'static str,
    },
    /// The JSON text ends inside a value.
    #[error("the JSON ends early: expected {expected}")]
    Eof {
        /// What the grammar needed next.
        expected: &'static str,
    },
    /// Something follows the top-level value.
    #[error("data after the JSON value")]
    TrailingData,
    /// A JSON value of the wrong kind for the IDL type.
    #[error("expected {expected}, found {found}")]
    WrongType {
        /// What the IDL type takes.
        expected: &'static str,
        /// What the JSON holds.
        found: &'static str,
    },
    /// A number that does not fit the IDL type.
    #[error("number out of range for {ty}")]
    OutOfRange {
        /// The IDL type.
        ty: &'static str,
    },
    /// A string naming no value of the enum.
    #[error("`{name}` is not a value of enum {enum_name}")]
    UnknownEnumName {
        /// The name given.
        name: String,
        /// The enum's Thrift name.
        enum_name: String,
    },
    /// A required field is absent (or `null`).
    #[error("required field `{field}` is missing")]
    MissingRequired {
        /// The field's Thrift name.
        field: String,
    },
    /// A field given twice (a JSON key repeated, or a field id repeated on the wire).
    #[error("field `{field}` is given twice")]
    DuplicateField {
        /// The field's Thrift name.
        field: String,
    },
    /// A union with no field set, or more than one.
    #[error("a union needs exactly one field, found {count}")]
    Union {
        /// How many fields were set.
        count: usize,
    },
    /// A `binary` value that is not base64 (standard alphabet).
    #[error("invalid base64 in a binary value")]
    InvalidBase64,
    /// A `uuid` value that is not 32 hex digits in the 8-4-4-4-12 form.
    #[error("invalid uuid: expected 8-4-4-4-12 hex digits")]
    InvalidUuid,
    /// A JSON string that cannot be text: a bad escape, a lone surrogate, invalid
    /// UTF-8, or a raw control character.
    #[error("invalid JSON string: {reason}")]
    InvalidString {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A double that is NaN or infinite: JSON has no number for it.
    #[error("NaN or an infinity has no JSON form")]
    NonFinite,
    /// A map whose key type has no JSON object-key form (struct, list, set, map keys).
    #[error("map keys of type {ty} have no JSON form")]
    UnsupportedMapKey {
        /// The key type.
        ty: &'static str,
    },
    /// Nesting deeper than the limit.
    #[error("nesting deeper than {0} levels")]
    DepthLimit(usize),
    /// A string, binary or container too large for Thrift's 32-bit lengths.
    #[error("{what} too large for a Thrift length")]
    TooLarge {
        /// Which kind of value.
        what: &'static str,
    },
    /// A container on the wire whose element type is not the declared one.
    #[error("expected {expected:?} elements, found {found:?}")]
    ElementType {
        /// The declared element type.
        expected: TType,
        /// The wire's.
        found: TType,
    },
    /// A result struct asked to carry a field id it does not have.
    #[error("the result struct has no field {id}")]
    NoSuchField {
        /// The id asked for.
        id: i16,
    },
    /// The Thrift bytes do not decode.
    #[error("invalid Thrift: {0}")]
    Thrift(DecodeError),
}

impl TranscodeError {
    pub(crate) fn new(kind: ErrorKind) -> Self {
        TranscodeError {
            kind,
            path: Vec::new(),
            offset: None,
        }
    }

    pub(crate) fn at(kind: ErrorKind, offset: usize) -> Self {
        TranscodeError {
            kind,
            path: Vec::new(),
            offset: Some(offset),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The byte offset in the JSON input where it went wrong (`None` for Thrift input,
    /// and for checks made at the end of an object, such as a missing required field).
    pub fn offset(&self) -> Option<usize> {
        self.offset
    }

    /// The field path from the top-level struct: `requests[3].msg`, map entries as
    /// `counters["k"]`; empty at the top level.
    pub fn path(&self) -> String {
        let mut s = String::new();
        for seg in self.path.iter().rev() {
            match seg {
                Segment::Field(name) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(name);
                }
                Segment::Id(id) => {
                    if !s.is_empty() {
                        s.push('.');
                    }
                    s.push_str(&format!("#{id}"));
                }
                Segment::Index(i) => s.push_str(&format!("[{i}]")),
                Segment::Key(k) => s.push_str(&format!("[{k:?}]")),
            }
        }
        s
    }

    pub(crate) fn in_field(mut self, name: &str) -> Self {
        self.path.push(Segment::Field(name.to_string()));
        self
    }

    pub(crate) fn in_id(mut self, id: i16) -> Self {
        self.path.push(Segment::Id(id));
        self
    }

    pub(crate) fn in_index(mut self, i: usize) -> Self {
        self.path.push(Segment::Index(i));
        self
    }

    pub(crate) fn in_key(mut self, key: String) -> Self {
        self.path.push(Segment::Key(key));
        self
    }
}

impl From<DecodeError> for TranscodeError {
    fn from(e: DecodeError) -> Self {
        TranscodeError::new(ErrorKind::Thrift(e))
    }
}

impl fmt::Display for TranscodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        let path = self.path();
        if !path.is_empty() {
            write!(f, " at `{path}`")?;
        }
        if let Some(offset) = self.offset {
            write!(f, " (JSON byte {offset})")?;
        }
        Ok(())
    }
}

impl std::error::Error for TranscodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Thrift(e) => Some(e),
            _ => None,
        }
    }
}
