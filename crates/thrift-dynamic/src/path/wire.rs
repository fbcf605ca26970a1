//! Walking encoded bytes: field and container headers, stepping over values, and the
//! little writing a replacement needs, for the Binary and Compact protocols.
//!
//! This mirrors thrift-codec's decoders and `skip_value` over a borrowed slice with a
//! position, so that a walk needs no `Bytes`, allocates nothing and can report where
//! each value starts and ends.
//!
//! Its items are `pub` in a private module: [`PathProtocol`] (re-exported) names [`Walk`]
//! as its supertrait, which keeps the walking methods out of the public API (sealed)
//! without a private type in a public interface.
#![allow(unreachable_pub)]

use thrift_codec::protocol::compact::{self, encode_varint, unzigzag32, unzigzag64, zigzag32};
use thrift_codec::{Binary, Compact, DEFAULT_MAX_DEPTH, DecodeErrorKind, TType};

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

    /// Steps over one varint of at most `max` (at most 10) bytes: where eight bytes
    /// remain, its end is found with one mask, without decoding it.
    #[inline]
    fn skip_varint(&mut self, max: usize) -> WireResult<()> {
        if let Some(chunk) = self.buf.get(self.pos..self.pos + 8) {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
            let ends = !word & 0x8080_8080_8080_8080;
            if ends != 0 {
                let len = (ends.trailing_zeros() / 8) as usize + 1;
                if len > max {
                    return Err(DecodeErrorKind::VarintTooLong(max));
                }
                self.pos += len;
                return Ok(());
            }
        }
        varint(self, max).map(drop)
    }

    /// Steps over `count` varints of at most `max` bytes each, in one pass over the
    /// bytes: a varint ends at each byte below 0x80. Eight bytes at a time while more
    /// than eight varints remain (their ends counted with one mask and a multiply),
    /// then byte by byte; a run of `max` continuation bytes is an error, as in
    /// thrift-codec.
    #[inline]
    fn skip_varints(&mut self, count: usize, max: usize) -> WireResult<()> {
        const HIGH: u64 = 0x8080_8080_8080_8080;
        const ONES: u64 = 0x0101_0101_0101_0101;
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let too_long = DecodeErrorKind::VarintTooLong(max);
        let mut left = count;
        // Continuation bytes since the last end of a varint.
        let mut run = 0;
        let mut end = 0;
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

/// A protocol whose encoded structs a path can walk: thrift-codec's [`Binary`] and
/// [`Compact`] marker types. (JSON's values are text, not length-prefixed; a path over
/// it would have to scan every byte, and is not offered.)
///
/// Sealed: implemented for those two only.
pub trait PathProtocol: thrift_codec::Protocol + Walk {}

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

const CT_TRUE: u8 = 1;
const CT_FALSE: u8 = 2;

/// The type of a Compact type nibble, read from the input.
#[inline]
fn compact_type(nibble: u8) -> WireResult<TType> {
    compact::ttype_of_compact(nibble).ok_or(DecodeErrorKind::InvalidType(nibble))
}

/// An unsigned LEB128 varint of at most `max` bytes.
#[inline]
fn varint(c: &mut Cursor<'_>, max: usize) -> WireResult<u64> {
    let mut value = 0u64;
    for i in 0..max {
        let b = c.byte()?;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(DecodeErrorKind::VarintTooLong(max))
}

/// A Compact length or count: a varint that must fit a non-negative `i32`.
#[inline]
fn compact_count(c: &mut Cursor<'_>) -> WireResult<u64> {
    let len = varint(c, 5)? as u32 as i32;
    u64::try_from(len).map_err(|_| DecodeErrorKind::NegativeLength(len.into()))
}

impl Walk for Compact {
    const FORMAT: Format = Format::Compact;

    #[inline]
    fn field_header(c: &mut Cursor<'_>, last_id: &mut i16) -> WireResult<FieldHeader> {
        let b = c.byte()?;
        let nibble = b & 0x0f;
        let ty = compact_type(nibble)?;
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
        let elem = compact_type(b & 0x0f)?;
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
            compact_type(kv >> 4)?,
            compact_type(kv & 0x0f)?,
            len,
            true,
        )
    }

    #[inline]
    fn binary_len(c: &mut Cursor<'_>) -> WireResult<usize> {
        let len = compact_count(c)?;
        c.check_len(len, 1)
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
            Some(true) => CT_TRUE,
            Some(false) => CT_FALSE,
            None => compact::compact_type(ty),
        };
        let delta = i32::from(id) - i32::from(last_id);
        if (1..=15).contains(&delta) {
            out.push(((delta as u8) << 4) | nibble);
        } else {
            out.push(nibble);
            let mut varint = [0u8; 10];
            let n = encode_varint(u64::from(zigzag32(i32::from(id))), &mut varint);
            out.extend_from_slice(&varint[..n]);
        }
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

    #[inline(always)]
    fn skip<P: PathProtocol>(self, c: &mut Cursor<'_>) -> WireResult<()> {
        match self {
            Stride::Fixed(width) => c.advance(1, width),
            Stride::Varint(max) => c.skip_varint(max),
            Stride::Binary => {
                let len = P::binary_len(c)?;
                c.advance(len, 1)
            }
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
        Stride::Binary => (0..count).try_for_each(|_| Stride::Binary.skip::<P>(c)),
        Stride::Nested(ty) => (0..count).try_for_each(|_| skip_nested::<P>(c, ty)),
    }
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
        (Stride::Binary, v) => (0..count).try_for_each(|_| {
            Stride::Binary.skip::<P>(c)?;
            v.skip::<P>(c)
        }),
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
    use thrift_codec::fixtures::echo::{Ids, Request};
    use thrift_codec::fixtures::mixed::Mixed;
    use thrift_codec::{Codec, LinkBuffer, Utf8Bytes};

    use super::*;

    /// Stepping over a value the plain way: one element at a time, every integer
    /// decoded, no strides and no arithmetic over runs. The fast walk must end where
    /// this one ends, or fail where it fails.
    fn reference_skip<P: PathProtocol>(c: &mut Cursor<'_>, ty: TType) -> WireResult<()> {
        match ty {
            TType::Bool | TType::I8 => c.take(1).map(drop),
            TType::Double => c.take(8).map(drop),
            TType::Uuid => c.take(16).map(drop),
            TType::I16 | TType::I32 | TType::I64 => P::integer(c, ty).map(drop),
            TType::Binary => {
                let len = P::binary_len(c)?;
                c.take(len).map(drop)
            }
            TType::Struct => {
                c.enter()?;
                let mut last_id = 0;
                loop {
                    let h = P::field_header(c, &mut last_id)?;
                    if h.ty == TType::Stop {
                        break;
                    }
                    if h.folded.is_none() {
                        reference_skip::<P>(c, h.ty)?;
                    }
                }
                c.leave();
                Ok(())
            }
            TType::List | TType::Set => {
                let h = P::list_header(c)?;
                c.enter()?;
                for _ in 0..h.len {
                    reference_skip::<P>(c, h.elem)?;
                }
                c.leave();
                Ok(())
            }
            TType::Map => {
                let h = P::map_header(c)?;
                c.enter()?;
                for _ in 0..h.len {
                    reference_skip::<P>(c, h.key)?;
                    reference_skip::<P>(c, h.elem)?;
                }
                c.leave();
                Ok(())
            }
            _ => Err(DecodeErrorKind::InvalidType(ty as u8)),
        }
    }

    /// Both walks over `bytes` as a value of `ty`: the same end, or errors of the same
    /// kind.
    fn same_walk<P: PathProtocol>(bytes: &[u8], ty: TType) -> Result<(), TestCaseError> {
        let mut fast = Cursor::new(bytes);
        let mut slow = Cursor::new(bytes);
        match (skip::<P>(&mut fast, ty), reference_skip::<P>(&mut slow, ty)) {
            (Ok(()), Ok(())) => prop_assert_eq!(fast.pos, slow.pos),
            (Err(a), Err(b)) => prop_assert_eq!(
                std::mem::discriminant(&a),
                std::mem::discriminant(&b),
                "fast {:?}, reference {:?}",
                a,
                b
            ),
            (a, b) => prop_assert!(false, "fast {a:?}, reference {b:?}"),
        }
        Ok(())
    }

    /// A `Mixed` with a few of everything, encoded in `P`.
    fn small_mixed<P: thrift_codec::Protocol>() -> Vec<u8> {
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
            bytes in prop::collection::vec(any::<u8>(), 0..96),
            count in 0usize..48,
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
        fn one_varint_skips_as_it_reads(bytes in prop::collection::vec(any::<u8>(), 0..24), wide in any::<bool>()) {
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
