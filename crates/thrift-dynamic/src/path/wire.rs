//! Walking encoded bytes: field and container headers, stepping over values, and the
//! little writing a replacement needs, for the Binary and Compact protocols.
//!
//! It reads with thrift-wire's primitives ([`thrift_wire::encoding`]: varints, zigzag,
//! Compact type ids and field headers) over a borrowed slice with a position, so that
//! a walk needs no `Bytes`, allocates nothing and can report where each value starts
//! and ends. Stepping over a value is a faster special case of
//! [`thrift_wire::encoding::skip_value`] (strides over runs of fixed-width or varint
//! elements), tested against it: both end at the same byte, or both fail.
//!
//! Its items are `pub` in a private module: [`PathProtocol`] (re-exported) names [`Walk`]
//! as its supertrait, which keeps the walking methods out of the public API (sealed)
//! without a private type in a public interface.
#![allow(unreachable_pub)]

use thrift_wire::encoding::{
    self, CT_FALSE, CT_TRUE, VarintError, bool_type, compact_type, decode_varint, put_field_header,
    unzigzag32, unzigzag64,
};
use thrift_wire::{Binary, Compact, DEFAULT_MAX_DEPTH, DecodeErrorKind, TType};

use super::varints::{self, HIGH, Scan};

/// Where a walk stands in the input.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
    depth: usize,
}

pub type WireResult<T> = Result<T, DecodeErrorKind>;

impl<'a> Cursor<'a> {
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor {
            buf,
            pos: 0,
            depth: 0,
        }
    }

    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    #[cold]
    fn eof(&self, needed: usize) -> DecodeErrorKind {
        DecodeErrorKind::UnexpectedEof {
            needed,
            remaining: self.remaining(),
        }
    }

    /// The bytes not yet read.
    #[inline]
    fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    #[inline]
    pub fn byte(&mut self) -> WireResult<u8> {
        let b = *self.buf.get(self.pos).ok_or_else(|| self.eof(1))?;
        self.pos += 1;
        Ok(b)
    }

    /// The next `n` bytes, consumed.
    #[inline]
    pub fn take(&mut self, n: usize) -> WireResult<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.eof(n));
        }
        let start = self.pos;
        self.pos += n;
        Ok(&self.buf[start..self.pos])
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> WireResult<[u8; N]> {
        let bytes = self.take(N)?;
        let mut out = [0; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// Steps over `count` values of `width` bytes each.
    #[inline]
    fn advance(&mut self, count: usize, width: usize) -> WireResult<()> {
        let n = count
            .checked_mul(width)
            .ok_or_else(|| self.eof(usize::MAX))?;
        self.take(n).map(drop)
    }

    /// Steps over one varint of at most `max` (at most 10) bytes: where sixteen bytes
    /// remain, its end is found with two masks, without decoding it (see
    /// [`varint_end`]).
    #[inline(always)]
    fn skip_varint(&mut self, max: usize) -> WireResult<()> {
        match varint_end(self.buf, self.pos, max) {
            Some(end) => {
                self.pos = end;
                Ok(())
            }
            None => self.skip_varint_slowly(max),
        }
    }

    /// [`Cursor::skip_varint`] near the end of the input.
    #[cold]
    #[inline(never)]
    fn skip_varint_slowly(&mut self, max: usize) -> WireResult<()> {
        varint(self, max).map(drop)
    }

    /// Steps over `count` varints of at most `max` bytes each, in one pass over the
    /// bytes: a varint ends at each byte below 0x80. Sixty-four bytes at a time where
    /// that many remain ([`varints::scan`]); then eight bytes at a time, their ends
    /// counted with one mask and a multiply; then byte by byte. A run of `max`
    /// continuation bytes is an error, as in thrift-wire.
    #[inline]
    fn skip_varints(&mut self, count: usize, max: usize) -> WireResult<()> {
        const ONES: u64 = 0x0101_0101_0101_0101;
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let too_long = DecodeErrorKind::VarintTooLong(max);
        if count == 0 {
            return Ok(());
        }
        // `run`: continuation bytes since the last end of a varint.
        let (mut end, mut left, mut run) = match varints::scan(rest, count, max) {
            Scan::Ended(len) => {
                self.pos += len;
                return Ok(());
            }
            Scan::TooLong => return Err(too_long),
            Scan::Short { end, left, run } => (end, left, run),
        };
        while let Some(chunk) = rest.get(end..end + 8) {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
            let ends = !word & HIGH;
            // The number of ends: one bit per byte moved to the byte's bottom, summed
            // into the top byte by the multiplication (at most 8, so nothing carries
            // out). A multiply, where `count_ones` without a POPCNT target feature is a
            // dozen instructions.
            let n = ((ends >> 7).wrapping_mul(ONES) >> 56) as usize;
            if n >= left {
                break;
            }
            if ends == 0 {
                run += 8;
            } else {
                // Bytes before the first end, and a run of `max` inside the word (only
                // possible for a `max` below 8).
                if run + (ends.trailing_zeros() / 8) as usize >= max {
                    return Err(too_long);
                }
                if max < 8 {
                    let mut inside = word & HIGH;
                    for _ in 1..max {
                        inside &= inside >> 8;
                    }
                    if inside != 0 {
                        return Err(too_long);
                    }
                }
                run = (ends.leading_zeros() / 8) as usize;
            }
            if run >= max {
                return Err(too_long);
            }
            left -= n;
            end += 8;
        }
        while left > 0 {
            let Some(&b) = rest.get(end) else {
                return Err(self.eof(left));
            };
            end += 1;
            if b < 0x80 {
                left -= 1;
                run = 0;
            } else {
                run += 1;
                if run == max {
                    return Err(too_long);
                }
            }
        }
        self.pos += end;
        Ok(())
    }

    /// Enters a struct or container.
    #[inline]
    pub fn enter(&mut self) -> WireResult<()> {
        if self.depth >= DEFAULT_MAX_DEPTH {
            return Err(DecodeErrorKind::DepthLimitExceeded(DEFAULT_MAX_DEPTH));
        }
        self.depth += 1;
        Ok(())
    }

    #[inline]
    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// A container header of `len` elements of type `elem` (entries of `key` and `elem`
    /// for a map), checked: real value types, and a count that fits in what remains.
    #[inline]
    fn container(
        &self,
        format: Format,
        key: TType,
        elem: TType,
        len: u64,
        map: bool,
    ) -> WireResult<ContainerHeader> {
        let (key, elem) = (elem_type(key)?, elem_type(elem)?);
        let key_width = if map { format.min_width(key) } else { 0 };
        let len = self.check_len(len, key_width + format.min_width(elem))?;
        Ok(ContainerHeader { key, elem, len })
    }

    /// Fails unless `len` values of at least `min_width` bytes fit in what remains.
    #[inline]
    fn check_len(&self, len: u64, min_width: u64) -> WireResult<usize> {
        let needed = len.saturating_mul(min_width);
        if needed > self.remaining() as u64 {
            return Err(DecodeErrorKind::LengthExceedsInput {
                len,
                needed,
                remaining: self.remaining(),
            });
        }
        usize::try_from(len).map_err(|_| self.eof(usize::MAX))
    }
}

/// A field header.
#[derive(Debug, Clone, Copy)]
pub struct FieldHeader {
    pub ty: TType,
    pub id: i16,
    /// Compact folds a `bool` field's value into its header: the value, which then
    /// occupies no bytes of its own.
    pub folded: Option<bool>,
}

/// A list, set or map header: element types and count (checked against the input).
#[derive(Debug, Clone, Copy)]
pub struct ContainerHeader {
    pub key: TType,
    pub elem: TType,
    pub len: usize,
}

/// A protocol whose encoded structs a path can walk: thrift-wire's [`Binary`] and
/// [`Compact`] marker types. (JSON's values are text, not length-prefixed; a path over
/// it would have to scan every byte, and is not offered.)
///
/// Sealed: implemented for those two only.
pub trait PathProtocol: thrift_wire::Protocol + Walk {}

impl PathProtocol for Binary {}
impl PathProtocol for Compact {}

/// The walking methods of a protocol (see [`PathProtocol`]).
pub trait Walk {
    /// Which protocol, for the accessors of a found value.
    const FORMAT: Format;
    /// Reads a field header; Compact's id delta is taken from and stored in `last_id`.
    fn field_header(c: &mut Cursor<'_>, last_id: &mut i16) -> WireResult<FieldHeader>;
    /// Reads a list or set header.
    fn list_header(c: &mut Cursor<'_>) -> WireResult<ContainerHeader>;
    /// Reads a map header.
    fn map_header(c: &mut Cursor<'_>) -> WireResult<ContainerHeader>;
    /// Reads a string or binary length prefix (checked against what remains).
    fn binary_len(c: &mut Cursor<'_>) -> WireResult<usize>;
    /// Where the string or binary at `pos` ends, when its length prefix has its
    /// common form and the content fits in `buf`; `None` sends the caller the long
    /// way (which also reports every error).
    fn binary_end(buf: &[u8], pos: usize) -> Option<usize>;
    /// Where the field at `pos` ends (header and value), when its header has its
    /// short form and its value is a scalar or a string whose end
    /// [`Walk::binary_end`] finds; `None` for every other field and for the stop.
    fn simple_field_end(buf: &[u8], pos: usize) -> Option<usize>;
    /// Steps over a string or binary: its length prefix and its content.
    #[inline(always)]
    fn skip_binary(c: &mut Cursor<'_>) -> WireResult<()> {
        match Self::binary_end(c.buf, c.pos) {
            Some(end) => {
                c.pos = end;
                Ok(())
            }
            None => skip_long_binary::<Self>(c),
        }
    }
    /// Reads an `i8`, `i16`, `i32` or `i64` (`ty`).
    fn integer(c: &mut Cursor<'_>, ty: TType) -> WireResult<i64>;
    /// Writes the header of field `id` following field `last_id`; for a `bool` field,
    /// `folded` is its value, which Binary writes after the header and Compact into it.
    fn write_field_header(
        out: &mut Vec<u8>,
        ty: TType,
        id: i16,
        last_id: i16,
        folded: Option<bool>,
    );
}

/// The protocols a [`Value`](super::Value) may come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Binary.
    Binary,
    /// Compact.
    Compact,
}

impl Format {
    /// Fixed width of every value of `ty` in this protocol.
    #[inline]
    pub fn fixed_width(self, ty: TType) -> Option<usize> {
        match (ty, self) {
            (TType::Bool | TType::I8, _) => Some(1),
            (TType::Double, _) => Some(8),
            (TType::Uuid, _) => Some(16),
            (TType::I16, Format::Binary) => Some(2),
            (TType::I32, Format::Binary) => Some(4),
            (TType::I64, Format::Binary) => Some(8),
            _ => None,
        }
    }

    /// The fewest bytes a value of `ty` occupies.
    #[inline]
    fn min_width(self, ty: TType) -> u64 {
        match (ty, self) {
            (TType::Double, _) => 8,
            (TType::Uuid, _) => 16,
            (_, Format::Compact) => 1,
            (TType::I16, _) => 2,
            (TType::I32 | TType::Binary, _) => 4,
            (TType::I64, _) => 8,
            (TType::List | TType::Set, _) => 5,
            (TType::Map, _) => 6,
            _ => 1,
        }
    }
}

#[inline]
fn elem_type(ty: TType) -> WireResult<TType> {
    if ty.is_value() {
        Ok(ty)
    } else {
        Err(DecodeErrorKind::InvalidElementType(ty))
    }
}

#[inline]
fn binary_type(id: u8) -> WireResult<TType> {
    TType::from_binary_id(id).map_err(|e| e.kind().clone())
}

impl Walk for Binary {
    const FORMAT: Format = Format::Binary;

    #[inline]
    fn field_header(c: &mut Cursor<'_>, _last_id: &mut i16) -> WireResult<FieldHeader> {
        let ty = binary_type(c.byte()?)?;
        if ty == TType::Stop {
            return Ok(FieldHeader {
                ty,
                id: 0,
                folded: None,
            });
        }
        if ty == TType::Void {
            return Err(DecodeErrorKind::InvalidType(TType::Void as u8));
        }
        let id = i16::from_be_bytes(c.array()?);
        Ok(FieldHeader {
            ty,
            id,
            folded: None,
        })
    }

    #[inline]
    fn list_header(c: &mut Cursor<'_>) -> WireResult<ContainerHeader> {
        let elem = binary_type(c.byte()?)?;
        let len = binary_count(c)?;
        c.container(Format::Binary, elem, elem, len, false)
    }

    #[inline]
    fn map_header(c: &mut Cursor<'_>) -> WireResult<ContainerHeader> {
        let key = binary_type(c.byte()?)?;
        let elem = binary_type(c.byte()?)?;
        let len = binary_count(c)?;
        c.container(Format::Binary, key, elem, len, true)
    }

    #[inline]
    fn binary_len(c: &mut Cursor<'_>) -> WireResult<usize> {
        let len = binary_count(c)?;
        c.check_len(len, 1)
    }

    #[inline(always)]
    fn binary_end(buf: &[u8], pos: usize) -> Option<usize> {
        let prefix = buf.get(pos..pos + 4)?;
        let len = u32::from_be_bytes(prefix.try_into().unwrap_or_default());
        // A negative length goes the long way, to its error.
        let len = usize::try_from(i32::try_from(len).ok()?).ok()?;
        let end = pos + 4 + len;
        (end <= buf.len()).then_some(end)
    }

    #[inline(always)]
    fn simple_field_end(buf: &[u8], pos: usize) -> Option<usize> {
        let at = pos + 3;
        let width = match *buf.get(pos)? {
            2 | 3 => 1,
            4 | 10 => 8,
            6 => 2,
            8 => 4,
            11 => return Self::binary_end(buf, at),
            16 => 16,
            _ => return None,
        };
        let end = at + width;
        (end <= buf.len()).then_some(end)
    }

    #[inline]
    fn integer(c: &mut Cursor<'_>, ty: TType) -> WireResult<i64> {
        Ok(match ty {
            TType::I8 => i64::from(c.byte()? as i8),
            TType::I16 => i64::from(i16::from_be_bytes(c.array()?)),
            TType::I32 => i64::from(i32::from_be_bytes(c.array()?)),
            _ => i64::from_be_bytes(c.array()?),
        })
    }

    #[inline]
    fn write_field_header(out: &mut Vec<u8>, ty: TType, id: i16, _: i16, folded: Option<bool>) {
        out.push(ty as u8);
        out.extend_from_slice(&id.to_be_bytes());
        if let Some(v) = folded {
            out.push(u8::from(v));
        }
    }
}

/// A Binary length or count: a big-endian `i32` that must not be negative.
#[inline]
fn binary_count(c: &mut Cursor<'_>) -> WireResult<u64> {
    let len = i32::from_be_bytes(c.array()?);
    u64::try_from(len).map_err(|_| DecodeErrorKind::NegativeLength(len.into()))
}

/// The type of a Compact type nibble, read from the input.
#[inline]
fn type_of_nibble(nibble: u8) -> WireResult<TType> {
    encoding::ttype_of_compact(nibble).ok_or(DecodeErrorKind::InvalidType(nibble))
}

/// An unsigned LEB128 varint of at most `max` bytes.
#[inline]
fn varint(c: &mut Cursor<'_>, max: usize) -> WireResult<u64> {
    // Most lengths, counts and small integers take one byte.
    if let Some(&b) = c.buf.get(c.pos)
        && b < 0x80
    {
        c.pos += 1;
        return Ok(u64::from(b));
    }
    match decode_varint(c.rest(), max) {
        Ok((value, len)) => {
            c.pos += len;
            Ok(value)
        }
        Err(VarintError::Truncated) => {
            // Every byte left was part of it.
            c.pos = c.buf.len();
            Err(c.eof(1))
        }
        Err(VarintError::TooLong) => Err(DecodeErrorKind::VarintTooLong(max)),
    }
}

/// A Compact length or count: a varint that must fit a non-negative `i32`.
#[inline]
fn compact_count(c: &mut Cursor<'_>) -> WireResult<u64> {
    let len = varint(c, 5)? as u32 as i32;
    u64::try_from(len).map_err(|_| DecodeErrorKind::NegativeLength(len.into()))
}

/// [`Walk::skip_binary`] past its fast path.
#[cold]
#[inline(never)]
fn skip_long_binary<P: Walk + ?Sized>(c: &mut Cursor<'_>) -> WireResult<()> {
    let len = P::binary_len(c)?;
    c.advance(len, 1)
}

/// Where the varint of at most `max` bytes at `pos` ends, found from two words
/// without decoding it, when sixteen bytes remain; `None` near the end of the input
/// and for a varint longer than `max`.
#[inline(always)]
fn varint_end(buf: &[u8], pos: usize, max: usize) -> Option<usize> {
    let chunk = buf.get(pos..pos + 16)?;
    let lo = u64::from_le_bytes(chunk[..8].try_into().unwrap_or_default());
    let hi = u64::from_le_bytes(chunk[8..].try_into().unwrap_or_default());
    let ends = !lo & HIGH;
    let len = if ends != 0 {
        (ends.trailing_zeros() / 8 + 1) as usize
    } else if hi & 0x8080 != 0x8080 {
        // Nine bytes or ten (an `i64` of 57 bits or more), told apart by the ninth
        // byte's high bit alone: a shorter chain of dependent operations than
        // counting zeros, and a walk over a map of `i64` values is such a chain.
        9 + (hi >> 7 & 1) as usize
    } else {
        // Over every `max`.
        return None;
    };
    (len <= max).then_some(pos + len)
}

impl Walk for Compact {
    const FORMAT: Format = Format::Compact;

    #[inline]
    fn field_header(c: &mut Cursor<'_>, last_id: &mut i16) -> WireResult<FieldHeader> {
        let b = c.byte()?;
        let nibble = b & 0x0f;
        let ty = type_of_nibble(nibble)?;
        if ty == TType::Stop {
            return Ok(FieldHeader {
                ty,
                id: 0,
                folded: None,
            });
        }
        let delta = b >> 4;
        let id = if delta != 0 {
            last_id.wrapping_add(i16::from(delta))
        } else {
            unzigzag32(varint(c, 5)? as u32) as i16
        };
        *last_id = id;
        Ok(FieldHeader {
            ty,
            id,
            folded: (ty == TType::Bool).then_some(nibble == CT_TRUE),
        })
    }

    #[inline]
    fn list_header(c: &mut Cursor<'_>) -> WireResult<ContainerHeader> {
        let b = c.byte()?;
        let elem = type_of_nibble(b & 0x0f)?;
        let short = u64::from(b >> 4);
        let len = if short == 15 {
            compact_count(c)?
        } else {
            short
        };
        c.container(Format::Compact, elem, elem, len, false)
    }

    #[inline]
    fn map_header(c: &mut Cursor<'_>) -> WireResult<ContainerHeader> {
        let len = compact_count(c)?;
        if len == 0 {
            // An empty map carries no types.
            return Ok(ContainerHeader {
                key: TType::Binary,
                elem: TType::Binary,
                len: 0,
            });
        }
        let kv = c.byte()?;
        c.container(
            Format::Compact,
            type_of_nibble(kv >> 4)?,
            type_of_nibble(kv & 0x0f)?,
            len,
            true,
        )
    }

    #[inline]
    fn binary_len(c: &mut Cursor<'_>) -> WireResult<usize> {
        let len = compact_count(c)?;
        c.check_len(len, 1)
    }

    /// A length below 2^14: one or two bytes, read from one two-byte load.
    #[inline(always)]
    fn binary_end(buf: &[u8], pos: usize) -> Option<usize> {
        let &[b0, b1] = buf.get(pos..pos + 2)? else {
            return None;
        };
        // The second byte is the length's only if the first continues.
        let (prefix, len) = if b0 < 0x80 {
            (1, usize::from(b0))
        } else if b1 < 0x80 {
            (2, usize::from(b0 & 0x7f) | usize::from(b1) << 7)
        } else {
            return None;
        };
        let end = pos + prefix + len;
        (end <= buf.len()).then_some(end)
    }

    #[inline(always)]
    fn simple_field_end(buf: &[u8], pos: usize) -> Option<usize> {
        let b = *buf.get(pos)?;
        if b < 0x10 {
            // The stop, or an id written out in full.
            return None;
        }
        let at = pos + 1;
        let end = match b & 0x0f {
            CT_TRUE | CT_FALSE => at,
            3 => at + 1,
            4 | 5 => return varint_end(buf, at, 5),
            6 => return varint_end(buf, at, 10),
            7 => at + 8,
            8 => return Self::binary_end(buf, at),
            13 => at + 16,
            _ => return None,
        };
        (end <= buf.len()).then_some(end)
    }

    #[inline]
    fn integer(c: &mut Cursor<'_>, ty: TType) -> WireResult<i64> {
        Ok(match ty {
            TType::I8 => i64::from(c.byte()? as i8),
            TType::I16 => i64::from(unzigzag32(varint(c, 5)? as u32) as i16),
            TType::I32 => i64::from(unzigzag32(varint(c, 5)? as u32)),
            _ => unzigzag64(varint(c, 10)?),
        })
    }

    #[inline]
    fn write_field_header(
        out: &mut Vec<u8>,
        ty: TType,
        id: i16,
        last_id: i16,
        folded: Option<bool>,
    ) {
        let nibble = match folded {
            Some(v) => bool_type(v),
            None => compact_type(ty),
        };
        put_field_header(out, nibble, last_id, id);
    }
}

/// How one value of a type is stepped over. Decided once per container, so that the
/// loop over its elements does not dispatch on the element type again (a branch on a
/// loop-invariant value, which predicts perfectly), and no call is made per element
/// unless the elements are structs or containers themselves.
#[derive(Debug, Clone, Copy)]
enum Stride {
    /// Every value has this width in bytes.
    Fixed(usize),
    /// A varint of at most this many bytes (Compact integers).
    Varint(usize),
    /// A length prefix, then that many bytes.
    Binary,
    /// A struct or container (or no value at all: an error when stepped over).
    Nested(TType),
}

impl Stride {
    #[inline(always)]
    fn of<P: PathProtocol>(ty: TType) -> Stride {
        if let Some(width) = P::FORMAT.fixed_width(ty) {
            return Stride::Fixed(width);
        }
        match ty {
            TType::I16 | TType::I32 => Stride::Varint(5),
            TType::I64 => Stride::Varint(10),
            TType::Binary => Stride::Binary,
            _ => Stride::Nested(ty),
        }
    }

    /// Where the value at `pos` ends, on the fast paths only (see
    /// [`Walk::binary_end`]); `None` for structs and containers.
    #[inline(always)]
    fn end<P: PathProtocol>(self, buf: &[u8], pos: usize) -> Option<usize> {
        match self {
            Stride::Fixed(width) => Some(pos + width).filter(|&end| end <= buf.len()),
            Stride::Varint(max) => varint_end(buf, pos, max),
            Stride::Binary => P::binary_end(buf, pos),
            Stride::Nested(_) => None,
        }
    }

    #[inline(always)]
    fn skip<P: PathProtocol>(self, c: &mut Cursor<'_>) -> WireResult<()> {
        match self {
            Stride::Fixed(width) => c.advance(1, width),
            Stride::Varint(max) => c.skip_varint(max),
            Stride::Binary => P::skip_binary(c),
            Stride::Nested(ty) => skip_nested::<P>(c, ty),
        }
    }
}

/// Steps over one value of type `ty` (a container element, or a field's value unless
/// folded into its header), however deeply nested within the depth limit. Scalars and
/// strings are handled here, inline in the loops that call it; structs and containers
/// by [`skip_nested`].
#[inline(always)]
pub fn skip<P: PathProtocol>(c: &mut Cursor<'_>, ty: TType) -> WireResult<()> {
    Stride::of::<P>(ty).skip::<P>(c)
}

/// [`skip`] for structs and containers.
#[inline(never)]
fn skip_nested<P: PathProtocol>(c: &mut Cursor<'_>, ty: TType) -> WireResult<()> {
    match ty {
        TType::Struct => {
            c.enter()?;
            let mut last_id = 0;
            loop {
                // Runs of scalar and string fields, their ends found with the position
                // kept in a register; the ids they carry are not needed to step over
                // them. The stop and every other field go the general way.
                let mut pos = c.pos;
                while let Some(end) = P::simple_field_end(c.buf, pos) {
                    pos = end;
                }
                c.pos = pos;
                let field = P::field_header(c, &mut last_id)?;
                match field.ty {
                    TType::Stop => break,
                    _ if field.folded.is_some() => {}
                    ty => skip::<P>(c, ty)?,
                }
            }
            c.leave();
            Ok(())
        }
        TType::List | TType::Set => {
            let header = P::list_header(c)?;
            c.enter()?;
            skip_elements::<P>(c, header.elem, header.len)?;
            c.leave();
            Ok(())
        }
        TType::Map => {
            let header = P::map_header(c)?;
            c.enter()?;
            skip_entries::<P>(c, header.key, header.elem, header.len)?;
            c.leave();
            Ok(())
        }
        // Scalars are skipped by `skip`; `Stop` and `Void` are no values.
        _ => Err(DecodeErrorKind::InvalidType(ty as u8)),
    }
}

/// Steps over `count` elements of type `elem`: by arithmetic where they have a fixed
/// width, in one pass over the bytes for Compact integers, else one by one.
#[inline]
pub fn skip_elements<P: PathProtocol>(
    c: &mut Cursor<'_>,
    elem: TType,
    count: usize,
) -> WireResult<()> {
    match Stride::of::<P>(elem) {
        Stride::Fixed(width) => c.advance(count, width),
        Stride::Varint(max) => c.skip_varints(count, max),
        Stride::Binary => {
            let done = fast_run(c, count, |buf, pos| P::binary_end(buf, pos));
            (done..count).try_for_each(|_| Stride::Binary.skip::<P>(c))
        }
        // Structs of scalars and strings (the depth limit allowing one more level).
        Stride::Nested(TType::Struct) if c.depth < DEFAULT_MAX_DEPTH => {
            let done = fast_run(c, count, simple_struct_end::<P>);
            (done..count).try_for_each(|_| skip_nested::<P>(c, TType::Struct))
        }
        Stride::Nested(ty) => (0..count).try_for_each(|_| skip_nested::<P>(c, ty)),
    }
}

/// Where the struct at `pos` ends when all its fields are ones
/// [`Walk::simple_field_end`] steps over, and it ends with a plain zero stop byte.
#[inline(always)]
fn simple_struct_end<P: PathProtocol>(buf: &[u8], mut pos: usize) -> Option<usize> {
    while let Some(end) = P::simple_field_end(buf, pos) {
        pos = end;
    }
    (*buf.get(pos)? == 0).then_some(pos + 1)
}

/// Steps over up to `count` values whose ends `end` finds, with the position kept in a
/// register (a walk is a chain of dependent loads, and a position stored through the
/// cursor at every step adds a store and a reload to each link). Stops at the first
/// value `end` declines, and returns how many it stepped over; the caller steps over
/// the rest the general way, which also reports any error.
#[inline(always)]
fn fast_run(
    c: &mut Cursor<'_>,
    count: usize,
    end: impl Fn(&[u8], usize) -> Option<usize>,
) -> usize {
    let mut pos = c.pos;
    let mut done = 0;
    while done < count {
        match end(c.buf, pos) {
            Some(next) => pos = next,
            None => break,
        }
        done += 1;
    }
    c.pos = pos;
    done
}

/// Steps over `count` map entries of `key` and `value`: by arithmetic where both have a
/// fixed width, else entry by entry with the two strides chosen once.
#[inline]
fn skip_entries<P: PathProtocol>(
    c: &mut Cursor<'_>,
    key: TType,
    value: TType,
    count: usize,
) -> WireResult<()> {
    match (Stride::of::<P>(key), Stride::of::<P>(value)) {
        (Stride::Fixed(k), Stride::Fixed(v)) => c.advance(count, k + v),
        // The common shape (string keys), with the key's stride spelled out.
        (Stride::Binary, v) => {
            let done = fast_run(c, count, |buf, pos| {
                v.end::<P>(buf, P::binary_end(buf, pos)?)
            });
            (done..count).try_for_each(|_| {
                Stride::Binary.skip::<P>(c)?;
                v.skip::<P>(c)
            })
        }
        (k, v) => (0..count).try_for_each(|_| {
            k.skip::<P>(c)?;
            v.skip::<P>(c)
        }),
    }
}

/// Reads one Compact or Binary scalar of `ty` from `bytes` (a whole encoded value).
#[inline]
pub fn read_integer(format: Format, bytes: &[u8], ty: TType) -> WireResult<i64> {
    let mut c = Cursor::new(bytes);
    match format {
        Format::Binary => Binary::integer(&mut c, ty),
        Format::Compact => Compact::integer(&mut c, ty),
    }
}

/// The length prefix's size and the content's length of an encoded string or binary.
#[inline]
pub fn binary_content(format: Format, bytes: &[u8]) -> WireResult<(usize, usize)> {
    let mut c = Cursor::new(bytes);
    let len = match format {
        Format::Binary => Binary::binary_len(&mut c)?,
        Format::Compact => Compact::binary_len(&mut c)?,
    };
    Ok((c.pos, len))
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use bytes::Bytes;
    use proptest::prelude::*;
    use thrift_wire::fixtures::echo::{Ids, Request};
    use thrift_wire::fixtures::mixed::Mixed;
    use thrift_wire::{Codec, LinkBuffer, Utf8Bytes};

    use super::*;

    /// Stepping over a value as thrift-wire's decoders do
    /// ([`thrift_wire::encoding::skip_value`]): the bytes it took, or its error. The
    /// fast walk must end where it ends, or fail where it fails.
    fn reference_skip<P: PathProtocol>(bytes: &[u8], ty: TType) -> WireResult<usize> {
        let mut d = P::decoder(
            Bytes::copy_from_slice(bytes),
            thrift_wire::DecodeLimits::default(),
        );
        thrift_wire::encoding::skip_value(&mut d, ty).map_err(|e| e.kind().clone())?;
        Ok(bytes.len() - thrift_wire::Decoder::remaining(&d))
    }

    /// Both walks over `bytes` as a value of `ty`: the same end, or both an error.
    /// (Which error can differ: a header with two faults, such as a `void` key type and
    /// a count cut short, is refused for whichever the walk checks first.)
    fn same_walk<P: PathProtocol>(bytes: &[u8], ty: TType) -> Result<(), TestCaseError> {
        let mut fast = Cursor::new(bytes);
        match (skip::<P>(&mut fast, ty), reference_skip::<P>(bytes, ty)) {
            (Ok(()), Ok(end)) => prop_assert_eq!(fast.pos, end),
            (Err(_), Err(_)) => {}
            (a, b) => prop_assert!(false, "fast {a:?}, reference {b:?}"),
        }
        Ok(())
    }

    /// A `Mixed` with a few of everything, encoded in `P`.
    fn small_mixed<P: thrift_wire::Protocol>() -> Vec<u8> {
        let m = Mixed {
            id: -5,
            name: Utf8Bytes::from_static("n"),
            flag: true,
            tiny: 3,
            small: -300,
            count: 1 << 20,
            ratio: 0.5,
            requests: (0..3)
                .map(|i| Request {
                    action: Utf8Bytes::from_static("echo"),
                    msg: Utf8Bytes::from(format!("m{i}")),
                })
                .collect(),
            counters: (0..4)
                .map(|i| (Utf8Bytes::from(format!("c{i}")), i64::MIN / (i + 1)))
                .collect::<BTreeMap<_, _>>(),
            tags: (0..20).map(|i| i * 1_000_003).collect::<BTreeSet<_>>(),
            labels: vec![Utf8Bytes::from_static("a"), Utf8Bytes::from_static("bc")],
            payload: Some(Bytes::from_static(&[1, 2, 3])),
            ids: Ids {
                ids32: (0..12).map(|i| -(i << 24)).collect(),
                ids64: (0..12).map(|i| i64::MAX >> i).collect(),
                scores: vec![1.5, -2.0],
                blob: Bytes::from_static(b"blob"),
            },
        };
        let mut buf = LinkBuffer::new();
        let n = Codec::<P>::new().encode(&m, &mut buf).expect("encodes");
        buf.next(n).to_vec()
    }

    fn nested_type() -> impl Strategy<Value = TType> {
        prop::sample::select(vec![TType::Struct, TType::List, TType::Set, TType::Map])
    }

    #[test]
    fn a_well_formed_mixed_is_stepped_over_whole() {
        let binary = small_mixed::<Binary>();
        let mut c = Cursor::new(&binary);
        skip::<Binary>(&mut c, TType::Struct).expect("well-formed");
        assert_eq!(c.pos, binary.len());
        let compact = small_mixed::<Compact>();
        let mut c = Cursor::new(&compact);
        skip::<Compact>(&mut c, TType::Struct).expect("well-formed");
        assert_eq!(c.pos, compact.len());
    }

    proptest! {
        #[test]
        fn skipping_a_damaged_mixed_ends_or_fails_as_the_reference_walk(
            compact in any::<bool>(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = if compact { small_mixed::<Compact>() } else { small_mixed::<Binary>() };
            let i = at.index(bytes.len());
            bytes[i] = byte;
            let end = cut.index(bytes.len() + 1).max(i);
            bytes.truncate(end.max(1));
            if compact {
                same_walk::<Compact>(&bytes, TType::Struct)?;
            } else {
                same_walk::<Binary>(&bytes, TType::Struct)?;
            }
        }

        #[test]
        fn skipping_random_bytes_ends_or_fails_as_the_reference_walk(
            // Small numbers are type ids, counts and lengths in both protocols.
            bytes in prop::collection::vec(prop_oneof![0u8..20, any::<u8>()], 0..64),
            ty in nested_type(),
            compact in any::<bool>(),
        ) {
            if compact {
                same_walk::<Compact>(&bytes, ty)?;
            } else {
                same_walk::<Binary>(&bytes, ty)?;
            }
        }

        #[test]
        fn varint_runs_skip_as_varints_read_one_by_one(
            // Even odds, or mostly continuation bytes, so that long runs (and
            // over-long varints) fall inside and across the 64-byte chunks.
            bytes in prop_oneof![
                prop::collection::vec(any::<u8>(), 0..400),
                prop::collection::vec(prop_oneof![1 => 0u8..0x80, 3 => 0x80u8..], 0..400),
            ],
            count in 0usize..160,
            wide in any::<bool>(),
        ) {
            let max = if wide { 10 } else { 5 };
            let mut fast = Cursor::new(&bytes);
            let mut slow = Cursor::new(&bytes);
            let a = fast.skip_varints(count, max);
            let b = (0..count).try_for_each(|_| varint(&mut slow, max).map(drop));
            match (a, b) {
                (Ok(()), Ok(())) => prop_assert_eq!(fast.pos, slow.pos),
                (Err(DecodeErrorKind::VarintTooLong(x)), Err(DecodeErrorKind::VarintTooLong(y))) => {
                    prop_assert_eq!(x, y)
                }
                (Err(DecodeErrorKind::UnexpectedEof { .. }), Err(DecodeErrorKind::UnexpectedEof { .. })) => {}
                (a, b) => prop_assert!(false, "one pass {a:?}, one by one {b:?}"),
            }
        }

        #[test]
        fn one_varint_skips_as_it_reads(
            // Even odds, or mostly continuation bytes (long and over-long varints).
            bytes in prop_oneof![
                prop::collection::vec(any::<u8>(), 0..24),
                prop::collection::vec(prop_oneof![1 => 0u8..0x80, 5 => 0x80u8..], 0..24),
            ],
            wide in any::<bool>(),
        ) {
            let max = if wide { 10 } else { 5 };
            let mut fast = Cursor::new(&bytes);
            let mut slow = Cursor::new(&bytes);
            match (fast.skip_varint(max), varint(&mut slow, max).map(drop)) {
                (Ok(()), Ok(())) => prop_assert_eq!(fast.pos, slow.pos),
                (a, b) => prop_assert_eq!(a.is_err(), b.is_err(), "{:?} {:?}", a, b),
            }
        }
    }
}
