//! Finding the value a resolved path names in an encoded struct, and reading it.

use std::ops::Range;

use bytes::Bytes;
use thrift_wire::{DecodeErrorKind, TType, Utf8Bytes};

use super::resolve::{MapKey, ResolvedPath, StepKind};
use super::wire::{
    Cursor, Format, PathProtocol, binary_content, read_integer, skip, skip_elements,
};

/// Why a path could not be followed through an encoded struct, or its value not read
/// as asked: the path prefix where it happened and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at `{path}`: {kind}")]
pub struct ReadError {
    /// The path up to and including the step that failed.
    pub path: String,
    /// What went wrong.
    pub kind: ReadErrorKind,
}

/// What went wrong following a path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadErrorKind {
    /// The bytes are not a well-formed encoding (cut short, a bad type id, a length
    /// past the end, nesting past the limit...), in thrift-wire's terms.
    #[error("malformed input: {0}")]
    Wire(DecodeErrorKind),
    /// The field is on the wire with another type than the IDL's.
    #[error("the field has wire type {found:?} where the IDL says {expected:?}")]
    WrongType {
        /// The type the IDL gives it.
        expected: TType,
        /// The type on the wire.
        found: TType,
    },
    /// A non-empty list, set or map whose element (or key) type is not the IDL's.
    #[error("elements of wire type {found:?} where the IDL says {expected:?}")]
    WrongElementType {
        /// The type the IDL gives them.
        expected: TType,
        /// The type on the wire.
        found: TType,
    },
    /// A value read as another type than its own (e.g. `i64()` of a string).
    #[error("the value is {found:?}, read as {wanted:?}")]
    NotA {
        /// The type it was read as.
        wanted: TType,
        /// Its type.
        found: TType,
    },
    /// A string whose bytes are not UTF-8.
    #[error("the string is not valid UTF-8")]
    InvalidUtf8,
}

impl ReadError {
    #[cold]
    pub(super) fn at(path: &ResolvedPath, step: usize, kind: ReadErrorKind) -> Self {
        ReadError {
            path: path.path().prefix(step + 1),
            kind,
        }
    }
}

/// Where the value is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Spot {
    pub(super) range: (usize, usize),
    pub(super) ty: TType,
    /// A Compact `bool` field's value, held in its header (`range` is the header).
    pub(super) folded: Option<bool>,
}

/// What a walk found: the value, or where it would have been.
#[derive(Debug, Clone, Copy)]
pub(super) enum Located {
    Found(Spot),
    /// Struct field `step` is not there; `stop` is the offset of its struct's stop
    /// byte, `last_id` the id of the struct's last field (0 if none), `occupied` whether
    /// the struct has any field.
    NoField {
        step: usize,
        stop: usize,
        last_id: i16,
        occupied: bool,
    },
    /// Index or key `step` is not there.
    NoElement {
        step: usize,
    },
}

/// Walks `input` along `path`.
pub(super) fn locate<P: PathProtocol>(
    path: &ResolvedPath,
    input: &[u8],
) -> Result<Located, ReadError> {
    let steps = path.steps();
    let mut c = Cursor::new(input);
    for (i, step) in steps.iter().enumerate() {
        let wire = |kind| ReadError::at(path, i, ReadErrorKind::Wire(kind));
        let expected = step.ty.ttype();
        match &step.kind {
            StepKind::Field(id) => {
                c.enter().map_err(wire)?;
                let mut last_id = 0;
                let mut occupied = false;
                loop {
                    let at = c.pos;
                    let h = P::field_header(&mut c, &mut last_id).map_err(wire)?;
                    if h.ty == TType::Stop {
                        return Ok(Located::NoField {
                            step: i,
                            stop: at,
                            last_id,
                            occupied,
                        });
                    }
                    occupied = true;
                    if h.id == *id {
                        if h.ty != expected {
                            return Err(ReadError::at(
                                path,
                                i,
                                ReadErrorKind::WrongType {
                                    expected,
                                    found: h.ty,
                                },
                            ));
                        }
                        if h.folded.is_some() {
                            // Only a bool is folded, and nothing follows a bool.
                            return Ok(Located::Found(Spot {
                                range: (at, c.pos),
                                ty: h.ty,
                                folded: h.folded,
                            }));
                        }
                        break;
                    }
                    if h.folded.is_none() {
                        skip::<P>(&mut c, h.ty).map_err(wire)?;
                    }
                }
            }
            StepKind::Index(n) => {
                let h = P::list_header(&mut c).map_err(wire)?;
                c.enter().map_err(wire)?;
                check_elements(path, i, h.elem, expected, h.len)?;
                if *n >= h.len {
                    return Ok(Located::NoElement { step: i });
                }
                skip_elements::<P>(&mut c, h.elem, *n).map_err(wire)?;
            }
            StepKind::Key(key) => {
                let h = P::map_header(&mut c).map_err(wire)?;
                c.enter().map_err(wire)?;
                let key_ty = match key {
                    MapKey::Int { ty, .. } => *ty,
                    MapKey::Bytes(_) => TType::Binary,
                };
                check_elements(path, i, h.key, key_ty, h.len)?;
                check_elements(path, i, h.elem, expected, h.len)?;
                // A key that occurs twice takes its last value, as thrift-wire's map
                // decoding does; so the map is read to its end.
                let mut found = None;
                for _ in 0..h.len {
                    let matches = match key {
                        MapKey::Bytes(k) => {
                            let len = P::binary_len(&mut c).map_err(wire)?;
                            c.take(len).map_err(wire)? == k.as_slice()
                        }
                        MapKey::Int { value, ty } => {
                            P::integer(&mut c, *ty).map_err(wire)? == *value
                        }
                    };
                    let at = c.pos;
                    skip::<P>(&mut c, h.elem).map_err(wire)?;
                    if matches {
                        found = Some(at);
                    }
                }
                match found {
                    Some(at) => c.pos = at,
                    None => return Ok(Located::NoElement { step: i }),
                }
            }
        }
    }
    let last = steps.len() - 1;
    let ty = path.ty().ttype();
    let start = c.pos;
    skip::<P>(&mut c, ty).map_err(|kind| ReadError::at(path, last, ReadErrorKind::Wire(kind)))?;
    Ok(Located::Found(Spot {
        range: (start, c.pos),
        ty,
        folded: None,
    }))
}

/// Checks the element (or key) type of a container against the IDL's.
fn check_elements(
    path: &ResolvedPath,
    step: usize,
    found: TType,
    expected: TType,
    len: usize,
) -> Result<(), ReadError> {
    if len == 0 || found == expected {
        Ok(())
    } else {
        Err(ReadError::at(
            path,
            step,
            ReadErrorKind::WrongElementType { expected, found },
        ))
    }
}

impl ResolvedPath {
    /// The value this path names in `input`, an encoded struct of the path's root type
    /// in protocol `P`; `None` when the message does not carry it. Reads nothing after
    /// the value, decodes nothing but headers before it (see the [module
    /// docs](super)).
    pub fn read<'a, P: PathProtocol>(
        &'a self,
        input: &'a [u8],
    ) -> Result<Option<Value<'a>>, ReadError> {
        self.read_in::<P>(Source::Slice(input))
    }

    /// As [`read`](ResolvedPath::read), from `Bytes`: the value's [`bytes`](Value::bytes),
    /// [`string`](Value::string) and [`encoded`](Value::encoded) are then slices of
    /// `input`, without a copy.
    pub fn read_shared<'a, P: PathProtocol>(
        &'a self,
        input: &'a Bytes,
    ) -> Result<Option<Value<'a>>, ReadError> {
        self.read_in::<P>(Source::Shared(input))
    }

    fn read_in<'a, P: PathProtocol>(
        &'a self,
        source: Source<'a>,
    ) -> Result<Option<Value<'a>>, ReadError> {
        Ok(match locate::<P>(self, source.slice())? {
            Located::Found(spot) => Some(Value {
                source,
                range: spot.range.0..spot.range.1,
                ty: spot.ty,
                folded: spot.folded,
                format: P::FORMAT,
                path: self,
            }),
            Located::NoField { .. } | Located::NoElement { .. } => None,
        })
    }
}

#[derive(Debug, Clone, Copy)]
enum Source<'a> {
    Slice(&'a [u8]),
    Shared(&'a Bytes),
}

impl<'a> Source<'a> {
    fn slice(self) -> &'a [u8] {
        match self {
            Source::Slice(s) => s,
            Source::Shared(b) => b.as_ref(),
        }
    }
}

/// A value found in an encoded struct: where it is, its wire type, and accessors that
/// decode it alone.
#[derive(Debug, Clone)]
pub struct Value<'a> {
    source: Source<'a>,
    range: Range<usize>,
    ty: TType,
    folded: Option<bool>,
    format: Format,
    path: &'a ResolvedPath,
}

impl<'a> Value<'a> {
    /// Its byte range in the input: the whole encoded value (a string's length prefix
    /// included; for a Compact `bool` field, the field header that holds it).
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }

    /// Its wire type (the IDL's, which the walk checked).
    pub fn ttype(&self) -> TType {
        self.ty
    }

    /// Its encoded bytes (see [`range`](Value::range)).
    pub fn raw(&self) -> &'a [u8] {
        &self.source.slice()[self.range.clone()]
    }

    /// Its encoded bytes as `Bytes`: a slice of the input where it was `Bytes`
    /// ([`ResolvedPath::read_shared`]), a copy otherwise. For a struct, this is the
    /// struct's encoding, decodable on its own.
    pub fn encoded(&self) -> Bytes {
        self.shared(self.range.clone())
    }

    fn shared(&self, range: Range<usize>) -> Bytes {
        match self.source {
            Source::Shared(b) => b.slice(range),
            Source::Slice(s) => Bytes::copy_from_slice(&s[range]),
        }
    }

    #[cold]
    fn error(&self, kind: ReadErrorKind) -> ReadError {
        ReadError {
            path: self.path.path().to_string(),
            kind,
        }
    }

    fn expect(&self, wanted: TType) -> Result<(), ReadError> {
        if self.ty == wanted {
            Ok(())
        } else {
            Err(self.error(ReadErrorKind::NotA {
                wanted,
                found: self.ty,
            }))
        }
    }

    fn integer(&self, ty: TType) -> Result<i64, ReadError> {
        self.expect(ty)?;
        read_integer(self.format, self.raw(), ty).map_err(|k| self.error(ReadErrorKind::Wire(k)))
    }

    fn fixed<const N: usize>(&self, ty: TType) -> Result<[u8; N], ReadError> {
        self.expect(ty)?;
        self.raw().first_chunk::<N>().copied().ok_or_else(|| {
            self.error(ReadErrorKind::Wire(DecodeErrorKind::UnexpectedEof {
                needed: N,
                remaining: self.range.len(),
            }))
        })
    }

    /// A `bool` (Compact's element bytes are true only when 1, Binary's when not 0).
    pub fn bool(&self) -> Result<bool, ReadError> {
        if let Some(v) = self.folded {
            return Ok(v);
        }
        let [b] = self.fixed::<1>(TType::Bool)?;
        Ok(match self.format {
            Format::Binary => b != 0,
            Format::Compact => b == 1,
        })
    }

    /// A `byte`.
    pub fn i8(&self) -> Result<i8, ReadError> {
        self.fixed::<1>(TType::I8).map(|[b]| b as i8)
    }

    /// An `i16`.
    pub fn i16(&self) -> Result<i16, ReadError> {
        self.integer(TType::I16).map(|v| v as i16)
    }

    /// An `i32` (or an enum's value).
    pub fn i32(&self) -> Result<i32, ReadError> {
        self.integer(TType::I32).map(|v| v as i32)
    }

    /// An `i64`.
    pub fn i64(&self) -> Result<i64, ReadError> {
        self.integer(TType::I64)
    }

    /// A `double`.
    pub fn double(&self) -> Result<f64, ReadError> {
        let bytes = self.fixed::<8>(TType::Double)?;
        Ok(f64::from_bits(match self.format {
            Format::Binary => u64::from_be_bytes(bytes),
            Format::Compact => u64::from_le_bytes(bytes),
        }))
    }

    /// A `uuid`, in wire order.
    pub fn uuid(&self) -> Result<[u8; 16], ReadError> {
        self.fixed::<16>(TType::Uuid)
    }

    /// The byte range in the input of a string's or binary's content (without its
    /// length prefix).
    pub fn content_range(&self) -> Result<Range<usize>, ReadError> {
        self.expect(TType::Binary)?;
        let (prefix, len) = binary_content(self.format, self.raw())
            .map_err(|k| self.error(ReadErrorKind::Wire(k)))?;
        let start = self.range.start + prefix;
        Ok(start..start + len)
    }

    /// A `binary`'s (or a string's) bytes, borrowed from the input.
    pub fn binary(&self) -> Result<&'a [u8], ReadError> {
        let range = self.content_range()?;
        Ok(&self.source.slice()[range])
    }

    /// A `binary`'s bytes as `Bytes` (a slice of the input where it was `Bytes`).
    pub fn bytes(&self) -> Result<Bytes, ReadError> {
        let range = self.content_range()?;
        Ok(self.shared(range))
    }

    /// A `string`, borrowed from the input, checked to be UTF-8.
    pub fn str(&self) -> Result<&'a str, ReadError> {
        std::str::from_utf8(self.binary()?).map_err(|_| self.error(ReadErrorKind::InvalidUtf8))
    }

    /// A `string` as [`Utf8Bytes`] (a slice of the input where it was `Bytes`).
    pub fn string(&self) -> Result<Utf8Bytes, ReadError> {
        Utf8Bytes::try_from_bytes(self.bytes()?).map_err(|_| self.error(ReadErrorKind::InvalidUtf8))
    }

    /// A struct's encoding (from its first field header to its stop, included),
    /// borrowed from the input: decodable on its own with thrift-wire, or walked by a
    /// path resolved from the struct's type.
    pub fn struct_bytes(&self) -> Result<&'a [u8], ReadError> {
        self.expect(TType::Struct)?;
        Ok(self.raw())
    }
}
