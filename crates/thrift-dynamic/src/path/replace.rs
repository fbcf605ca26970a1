//! Writing a message equal to another but for the value at a path.

use thrift_wire::{DecodeErrorKind, Encoder, LinkBuffer, Protocol, TType};

use super::read::{Located, ReadError, locate};
use super::resolve::{ResolvedPath, StepKind};
use super::wire::{Cursor, Format, PathProtocol, skip};

/// Why a value could not be replaced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplaceError {
    /// The path could not be followed through the input.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A list index, a map key, or a struct field before the last step that the input
    /// does not hold: there is nothing to replace there, and nothing is added.
    #[error("at `{path}`: the message holds no value here to replace")]
    Missing {
        /// The path up to the step that is absent.
        path: String,
    },
    /// The new value's bytes are not one whole value of the path's type.
    #[error("at `{path}`: the new value is not one whole {expected:?}: {kind}")]
    BadValue {
        /// The whole path.
        path: String,
        /// The path's wire type.
        expected: TType,
        /// What is wrong with the bytes.
        kind: DecodeErrorKind,
    },
    /// A [`NewValue`] of another type than the path's.
    #[error("at `{path}`: a new {found:?} where the path holds {expected:?}")]
    WrongType {
        /// The whole path.
        path: String,
        /// The path's wire type.
        expected: TType,
        /// The new value's.
        found: TType,
    },
    /// The field to add belongs to a union that already carries a field.
    #[error("at `{path}`: the union already carries a field")]
    UnionOccupied {
        /// The whole path.
        path: String,
    },
}

/// A scalar, string or binary to write at a path
/// ([`ResolvedPath::replace_with`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NewValue<'v> {
    /// A `bool`.
    Bool(bool),
    /// A `byte`.
    I8(i8),
    /// An `i16`.
    I16(i16),
    /// An `i32` or an enum's value.
    I32(i32),
    /// An `i64`.
    I64(i64),
    /// A `double`.
    Double(f64),
    /// A `uuid`, in wire order.
    Uuid([u8; 16]),
    /// A `string`.
    Str(&'v str),
    /// A `binary` (or a string's bytes).
    Binary(&'v [u8]),
}

impl NewValue<'_> {
    /// Its wire type.
    pub fn ttype(&self) -> TType {
        match self {
            NewValue::Bool(_) => TType::Bool,
            NewValue::I8(_) => TType::I8,
            NewValue::I16(_) => TType::I16,
            NewValue::I32(_) => TType::I32,
            NewValue::I64(_) => TType::I64,
            NewValue::Double(_) => TType::Double,
            NewValue::Uuid(_) => TType::Uuid,
            NewValue::Str(_) | NewValue::Binary(_) => TType::Binary,
        }
    }

    /// Its encoding in protocol `P`, by thrift-wire's encoder.
    fn encode<P: Protocol>(&self) -> Vec<u8> {
        let mut buf = LinkBuffer::new();
        {
            let mut e = P::encoder(&mut buf, usize::MAX);
            match *self {
                NewValue::Bool(v) => e.write_bool(v),
                NewValue::I8(v) => e.write_i8(v),
                NewValue::I16(v) => e.write_i16(v),
                NewValue::I32(v) => e.write_i32(v),
                NewValue::I64(v) => e.write_i64(v),
                NewValue::Double(v) => e.write_double(v),
                NewValue::Uuid(v) => e.write_uuid(&v),
                NewValue::Str(v) => e.write_str(v),
                NewValue::Binary(v) => e.write_binary(v),
            }
        }
        let n = buf.len();
        buf.next(n).to_vec()
    }
}

impl ResolvedPath {
    /// Appends to `out` a copy of `input` (an encoded struct of the path's root type in
    /// protocol `P`) in which the value at this path is `value`, the encoding of one
    /// value of the path's type in `P`. Returns the bytes appended.
    ///
    /// The bytes before and after the old value are copied as two ranges. A struct
    /// field the input lacks is added before its struct's stop (only at the last
    /// step); a missing index or key is [`ReplaceError::Missing`]. `value` is checked
    /// to be one whole value of the right type first; on an error `out` is left as it
    /// was.
    pub fn replace<P: PathProtocol>(
        &self,
        input: &[u8],
        value: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<usize, ReplaceError> {
        let ty = self.ty().ttype();
        check_value::<P>(value, ty).map_err(|kind| ReplaceError::BadValue {
            path: self.path().to_string(),
            expected: ty,
            kind,
        })?;
        let before = out.len();
        match locate::<P>(self, input)? {
            Located::Found(spot) => {
                let (start, end) = spot.range;
                out.reserve(input.len() - (end - start) + value.len());
                out.extend_from_slice(&input[..start]);
                if spot.folded.is_some() {
                    // A Compact bool field: the value is the header's type nibble; the
                    // id (delta or varint) stays as it was.
                    let nibble = if compact_true(value) { 1 } else { 2 };
                    out.push((input[start] & 0xf0) | nibble);
                    out.extend_from_slice(&input[start + 1..]);
                } else {
                    out.extend_from_slice(value);
                    out.extend_from_slice(&input[end..]);
                }
            }
            Located::NoField {
                step,
                stop,
                last_id,
                occupied,
            } if step + 1 == self.steps().len() => {
                let last = &self.steps()[step];
                if last.in_union && occupied {
                    return Err(ReplaceError::UnionOccupied {
                        path: self.path().to_string(),
                    });
                }
                // A missing field is always a field step; anything else is missing too.
                let StepKind::Field(id) = last.kind else {
                    return Err(ReplaceError::Missing {
                        path: self.path().to_string(),
                    });
                };
                out.reserve(input.len() + value.len() + 8);
                out.extend_from_slice(&input[..stop]);
                if ty == TType::Bool {
                    let v = match P::FORMAT {
                        Format::Binary => value.first().is_some_and(|&b| b != 0),
                        Format::Compact => compact_true(value),
                    };
                    P::write_field_header(out, ty, id, last_id, Some(v));
                } else {
                    P::write_field_header(out, ty, id, last_id, None);
                    out.extend_from_slice(value);
                }
                out.extend_from_slice(&input[stop..]);
            }
            Located::NoField { step, .. } | Located::NoElement { step } => {
                return Err(ReplaceError::Missing {
                    path: self.path().prefix(step + 1),
                });
            }
        }
        Ok(out.len() - before)
    }

    /// As [`replace`](ResolvedPath::replace), with a scalar, string or binary that is
    /// encoded here; it must have the path's wire type (a string or binary for a
    /// `string` or `binary`, an `I32` for an enum).
    pub fn replace_with<P: PathProtocol>(
        &self,
        input: &[u8],
        value: NewValue<'_>,
        out: &mut Vec<u8>,
    ) -> Result<usize, ReplaceError> {
        let expected = self.ty().ttype();
        if value.ttype() != expected {
            return Err(ReplaceError::WrongType {
                path: self.path().to_string(),
                expected,
                found: value.ttype(),
            });
        }
        self.replace::<P>(input, &value.encode::<P>(), out)
    }

    /// As [`replace_with`](ResolvedPath::replace_with) with a string.
    pub fn replace_str<P: PathProtocol>(
        &self,
        input: &[u8],
        value: &str,
        out: &mut Vec<u8>,
    ) -> Result<usize, ReplaceError> {
        self.replace_with::<P>(input, NewValue::Str(value), out)
    }
}

/// A Compact bool element's byte: true only when 1, as thrift-wire reads it.
fn compact_true(value: &[u8]) -> bool {
    value.first() == Some(&1)
}

/// Checks that `value` is exactly one value of type `ty`.
fn check_value<P: PathProtocol>(value: &[u8], ty: TType) -> Result<(), DecodeErrorKind> {
    let mut c = Cursor::new(value);
    skip::<P>(&mut c, ty)?;
    match c.remaining() {
        0 => Ok(()),
        n => Err(DecodeErrorKind::TrailingBytes(n)),
    }
}
