//! The Thrift Compact protocol: zigzag varints, field-id deltas, folded booleans.
//!
//! As specified by Apache Thrift: `double` is 8 bytes little-endian; a `bool` field's
//! value is folded into its header's type nibble (1 true, 2 false); `bool` elements of
//! containers are one byte, written 1 (true) or 2 (false) and read as true only for 1;
//! lists with fewer than 15 elements carry the count in the header's high nibble; an
//! empty map is the single byte 0.

use bytes::Bytes;

use crate::encoding::{
    CT_FALSE, CT_STOP, CT_TRUE, MAX_VARINT_LEN, VarintError, compact_type, decode_varint,
    encode_varint, field_delta, field_header_len, ttype_of_compact, unzigzag32, unzigzag64,
    varint_len, zigzag32, zigzag64,
};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::link_buffer::LinkBuffer;
use crate::message::MessageHeader;
use crate::protocol::input::Input;
use crate::protocol::output::{put_array, put_prefix};
use crate::protocol::{
    DecodeLimits, Decoder, Encoder, FieldHeader, ListHeader, MapHeader, Protocol, Sizer, check_len,
    enter, initial_capacity, message_type, read_encoded_value,
};
use crate::ttype::TType;

/// The Compact protocol (marker type for [`Codec`](crate::Codec)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Compact;

const PROTOCOL_ID: u8 = 0x82;
const VERSION: u8 = 1;
const VERSION_MASK: u8 = 0x1f;
const TYPE_SHIFT: u8 = 5;

impl Protocol for Compact {
    type Sizer = CompactSizer;
    type Encoder<'a> = CompactEncoder<'a>;
    type Decoder = CompactDecoder;

    fn sizer(zero_copy_threshold: usize) -> CompactSizer {
        CompactSizer {
            zero_copy_threshold,
            zero_copy: 0,
            last_id: 0,
        }
    }

    fn encoder(buf: &mut LinkBuffer, zero_copy_threshold: usize) -> CompactEncoder<'_> {
        CompactEncoder {
            buf,
            zero_copy_threshold,
            last_id: 0,
        }
    }

    fn decoder(input: Bytes, limits: DecodeLimits) -> CompactDecoder {
        CompactDecoder::new(input, limits)
    }
}

#[inline]
fn from_compact_type(nibble: u8) -> Result<TType, DecodeError> {
    ttype_of_compact(nibble).ok_or_else(|| DecodeError::new(DecodeErrorKind::InvalidType(nibble)))
}

/// The wire width of every value of `ty`, where it does not depend on the value.
#[inline]
fn fixed_width(ty: TType) -> Option<usize> {
    match ty {
        TType::Bool | TType::I8 => Some(1),
        TType::Double => Some(8),
        TType::Uuid => Some(16),
        _ => None,
    }
}

/// The minimum wire width of a value of `ty` in the Compact protocol.
#[inline]
fn min_width(ty: TType) -> u64 {
    match ty {
        TType::Double => 8,
        TType::Uuid => 16,
        _ => 1,
    }
}

/// Sizing for the Compact protocol: varints make integers value-dependent.
#[derive(Debug, Clone)]
pub struct CompactSizer {
    zero_copy_threshold: usize,
    zero_copy: usize,
    last_id: i16,
}

impl Sizer for CompactSizer {
    fn message_begin_len(&mut self, header: &MessageHeader) -> usize {
        2 + varint_len(u64::from(header.seq_id as u32)) + self.binary_len(header.name.len())
    }
    #[inline]
    fn struct_begin(&mut self) -> i16 {
        std::mem::replace(&mut self.last_id, 0)
    }
    #[inline]
    fn struct_end_len(&mut self, saved: i16) -> usize {
        self.last_id = saved;
        1
    }
    #[inline]
    fn field_begin_len(&mut self, _ty: TType, id: i16) -> usize {
        let n = field_header_len(self.last_id, id);
        self.last_id = id;
        n
    }
    #[inline]
    fn bool_field_len(&mut self, id: i16) -> usize {
        self.field_begin_len(TType::Bool, id)
    }
    #[inline]
    fn bool_len(&self) -> usize {
        1
    }
    #[inline]
    fn i8_len(&self) -> usize {
        1
    }
    #[inline]
    fn i16_len(&self, v: i16) -> usize {
        varint_len(u64::from(zigzag32(i32::from(v))))
    }
    #[inline]
    fn i32_len(&self, v: i32) -> usize {
        varint_len(u64::from(zigzag32(v)))
    }
    #[inline]
    fn i64_len(&self, v: i64) -> usize {
        varint_len(zigzag64(v))
    }
    #[inline]
    fn double_len(&self) -> usize {
        8
    }
    #[inline]
    fn uuid_len(&self) -> usize {
        16
    }
    #[inline]
    fn binary_len(&self, len: usize) -> usize {
        varint_len(len as u64) + len
    }
    #[inline]
    fn bytes_len(&mut self, len: usize) -> usize {
        if len >= self.zero_copy_threshold {
            self.zero_copy += len;
        }
        self.binary_len(len)
    }
    #[inline]
    fn list_begin_len(&self, _elem: TType, len: usize) -> usize {
        if len < 15 {
            1
        } else {
            1 + varint_len(len as u64)
        }
    }
    #[inline]
    fn map_begin_len(&self, _key: TType, _value: TType, len: usize) -> usize {
        if len == 0 {
            1
        } else {
            varint_len(len as u64) + 1
        }
    }
    fn i32_slice_len(&self, v: &[i32]) -> usize {
        v.iter().map(|&x| self.i32_len(x)).sum()
    }
    fn i64_slice_len(&self, v: &[i64]) -> usize {
        v.iter().map(|&x| self.i64_len(x)).sum()
    }
    #[inline]
    fn encoded_len(&mut self, v: &Bytes) -> usize {
        if v.len() >= self.zero_copy_threshold {
            self.zero_copy += v.len();
        }
        v.len()
    }
    #[inline]
    fn zero_copy_len(&self) -> usize {
        self.zero_copy
    }
    #[inline]
    fn fixed_width(&self, ty: TType) -> Option<usize> {
        fixed_width(ty)
    }
}

/// Writes the Compact protocol into a [`LinkBuffer`].
#[derive(Debug)]
pub struct CompactEncoder<'a> {
    buf: &'a mut LinkBuffer,
    zero_copy_threshold: usize,
    last_id: i16,
}

impl CompactEncoder<'_> {
    #[inline(always)]
    fn put_u8(&mut self, b: u8) {
        self.put([b]);
    }

    #[inline(always)]
    fn put<const N: usize>(&mut self, bytes: [u8; N]) {
        put_array(self.buf.tail_mut(), bytes);
    }

    #[inline]
    fn varint(&mut self, v: u64) {
        let mut tmp = [0u8; MAX_VARINT_LEN];
        let n = encode_varint(v, &mut tmp);
        put_prefix(self.buf.tail_mut(), tmp, n);
    }

    #[inline]
    fn field_header(&mut self, ctype: u8, id: i16) {
        if let Some(delta) = field_delta(self.last_id, id) {
            self.put_u8((delta << 4) | ctype);
        } else {
            self.put_u8(ctype);
            self.varint(u64::from(zigzag32(i32::from(id))));
        }
        self.last_id = id;
    }
}

impl Encoder for CompactEncoder<'_> {
    fn write_message_begin(&mut self, header: &MessageHeader) {
        self.put([PROTOCOL_ID, ((header.ty as u8) << TYPE_SHIFT) | VERSION]);
        self.varint(u64::from(header.seq_id as u32));
        self.write_binary(header.name.as_bytes());
    }
    #[inline]
    fn write_struct_begin(&mut self) -> i16 {
        std::mem::replace(&mut self.last_id, 0)
    }
    #[inline]
    fn write_struct_end(&mut self, saved: i16) {
        self.put_u8(CT_STOP);
        self.last_id = saved;
    }
    #[inline]
    fn write_field_begin(&mut self, ty: TType, id: i16) {
        self.field_header(compact_type(ty), id);
    }
    #[inline]
    fn write_bool_field(&mut self, id: i16, v: bool) {
        self.field_header(if v { CT_TRUE } else { CT_FALSE }, id);
    }
    #[inline]
    fn write_bool(&mut self, v: bool) {
        self.put_u8(if v { CT_TRUE } else { CT_FALSE });
    }
    #[inline]
    fn write_i8(&mut self, v: i8) {
        self.put(v.to_be_bytes());
    }
    #[inline]
    fn write_i16(&mut self, v: i16) {
        self.varint(u64::from(zigzag32(i32::from(v))));
    }
    #[inline]
    fn write_i32(&mut self, v: i32) {
        self.varint(u64::from(zigzag32(v)));
    }
    #[inline]
    fn write_i64(&mut self, v: i64) {
        self.varint(zigzag64(v));
    }
    #[inline]
    fn write_double(&mut self, v: f64) {
        self.put(v.to_bits().to_le_bytes());
    }
    #[inline]
    fn write_uuid(&mut self, v: &[u8; 16]) {
        self.put(*v);
    }
    #[inline]
    fn write_binary(&mut self, v: &[u8]) {
        self.varint(v.len() as u64);
        self.buf.tail_mut().extend_from_slice(v);
    }
    #[inline]
    fn write_bytes(&mut self, v: &Bytes) {
        self.varint(v.len() as u64);
        if v.len() >= self.zero_copy_threshold {
            self.buf.insert(v.clone());
        } else {
            self.buf.tail_mut().extend_from_slice(v);
        }
    }
    #[inline]
    fn write_encoded(&mut self, v: &Bytes) {
        if v.len() >= self.zero_copy_threshold {
            self.buf.insert(v.clone());
        } else {
            self.buf.tail_mut().extend_from_slice(v);
        }
    }
    #[inline]
    fn write_list_begin(&mut self, elem: TType, len: usize) {
        let ctype = compact_type(elem);
        if len < 15 {
            self.put_u8(((len as u8) << 4) | ctype);
        } else {
            self.put_u8(0xf0 | ctype);
            self.varint(len as u64);
        }
    }
    #[inline]
    fn write_map_begin(&mut self, key: TType, value: TType, len: usize) {
        if len == 0 {
            self.put_u8(0);
        } else {
            self.varint(len as u64);
            self.put_u8((compact_type(key) << 4) | compact_type(value));
        }
    }
    fn write_i32_slice(&mut self, v: &[i32]) {
        for &x in v {
            self.write_i32(x);
        }
    }
    fn write_i64_slice(&mut self, v: &[i64]) {
        for &x in v {
            self.write_i64(x);
        }
    }
    fn write_f64_slice(&mut self, v: &[f64]) {
        let tail = self.buf.tail_mut();
        tail.reserve(v.len() * 8);
        for &x in v {
            put_array(tail, x.to_bits().to_le_bytes());
        }
    }
}

/// Reads the Compact protocol from one `Bytes` frame.
#[derive(Debug, Clone)]
pub struct CompactDecoder {
    input: Input,
    depth: usize,
    limits: DecodeLimits,
    last_id: i16,
    pending_bool: Option<bool>,
}

impl CompactDecoder {
    /// A decoder over `input`.
    pub fn new(input: Bytes, limits: DecodeLimits) -> Self {
        CompactDecoder {
            input: Input::new(input),
            depth: 0,
            limits,
            last_id: 0,
            pending_bool: None,
        }
    }

    /// An unsigned varint of at most `max_bytes` bytes.
    #[inline]
    fn varint(&mut self, max_bytes: usize) -> Result<u64, DecodeError> {
        match decode_varint(self.input.rest(), max_bytes) {
            Ok((value, len)) => {
                self.input.advance(len);
                Ok(value)
            }
            Err(VarintError::Truncated) => {
                // Every byte left was part of it.
                self.input.advance(self.input.remaining());
                Err(self.input.eof(1))
            }
            Err(VarintError::TooLong) => {
                self.input.advance(max_bytes);
                Err(DecodeError::new(DecodeErrorKind::VarintTooLong(max_bytes)))
            }
        }
    }

    #[inline]
    fn varint32(&mut self) -> Result<u32, DecodeError> {
        // Five groups carry 35 bits; the top ones are dropped, as Apache Thrift does.
        Ok(self.varint(5)? as u32)
    }

    /// A length or count: a varint that must fit a non-negative `i32`.
    #[inline]
    fn read_len(&mut self) -> Result<u64, DecodeError> {
        let len = self.varint32()? as i32;
        if len < 0 {
            return Err(DecodeError::new(DecodeErrorKind::NegativeLength(
                len.into(),
            )));
        }
        Ok(len as u64)
    }

    #[inline]
    fn elem_type(&self, nibble: u8) -> Result<TType, DecodeError> {
        let ty = from_compact_type(nibble)?;
        if !ty.is_value() {
            return Err(DecodeError::new(DecodeErrorKind::InvalidElementType(ty)));
        }
        Ok(ty)
    }
}

impl Decoder for CompactDecoder {
    fn read_message_begin(&mut self) -> Result<MessageHeader, DecodeError> {
        let [id, version_and_type] = self.input.array()?;
        if id != PROTOCOL_ID {
            return Err(DecodeError::new(DecodeErrorKind::BadVersion(u32::from(id))));
        }
        if version_and_type & VERSION_MASK != VERSION {
            return Err(DecodeError::new(DecodeErrorKind::BadVersion(u32::from(
                version_and_type,
            ))));
        }
        let ty = message_type(version_and_type >> TYPE_SHIFT)?;
        let seq_id = self.varint32()? as i32;
        let name = self.read_string()?;
        Ok(MessageHeader { name, ty, seq_id })
    }

    #[inline]
    fn read_struct_begin(&mut self) -> Result<i16, DecodeError> {
        enter(&mut self.depth, self.limits.max_depth)?;
        Ok(std::mem::replace(&mut self.last_id, 0))
    }

    #[inline]
    fn read_struct_end(&mut self, saved: i16) {
        self.depth = self.depth.saturating_sub(1);
        self.last_id = saved;
    }

    #[inline]
    fn read_field_begin(&mut self) -> Result<FieldHeader, DecodeError> {
        let b = self.input.byte()?;
        let nibble = b & 0x0f;
        let ty = from_compact_type(nibble)?;
        if ty == TType::Stop {
            return Ok(FieldHeader { ty, id: 0 });
        }
        let delta = b >> 4;
        let id = if delta != 0 {
            self.last_id.wrapping_add(i16::from(delta))
        } else {
            self.read_i16()?
        };
        if ty == TType::Bool {
            self.pending_bool = Some(nibble == CT_TRUE);
        }
        self.last_id = id;
        Ok(FieldHeader { ty, id })
    }

    #[inline]
    fn read_bool(&mut self) -> Result<bool, DecodeError> {
        match self.pending_bool.take() {
            Some(v) => Ok(v),
            None => Ok(self.input.byte()? == CT_TRUE),
        }
    }
    #[inline]
    fn read_i8(&mut self) -> Result<i8, DecodeError> {
        Ok(self.input.byte()? as i8)
    }
    #[inline]
    fn read_i16(&mut self) -> Result<i16, DecodeError> {
        Ok(unzigzag32(self.varint32()?) as i16)
    }
    #[inline]
    fn read_i32(&mut self) -> Result<i32, DecodeError> {
        Ok(unzigzag32(self.varint32()?))
    }
    #[inline]
    fn read_i64(&mut self) -> Result<i64, DecodeError> {
        Ok(unzigzag64(self.varint(10)?))
    }
    #[inline]
    fn read_double(&mut self) -> Result<f64, DecodeError> {
        Ok(f64::from_bits(u64::from_le_bytes(self.input.array()?)))
    }
    #[inline]
    fn read_uuid(&mut self) -> Result<[u8; 16], DecodeError> {
        self.input.array()
    }

    #[inline]
    fn read_bytes(&mut self) -> Result<Bytes, DecodeError> {
        let len = check_len(self.read_len()?, 1, self.remaining())?;
        self.input.slice(len)
    }

    fn read_list_begin(&mut self) -> Result<ListHeader, DecodeError> {
        let b = self.input.byte()?;
        let elem = self.elem_type(b & 0x0f)?;
        let short = u64::from(b >> 4);
        let len = if short == 15 { self.read_len()? } else { short };
        let len = check_len(len, min_width(elem), self.remaining())?;
        enter(&mut self.depth, self.limits.max_depth)?;
        Ok(ListHeader { elem, len })
    }

    fn read_map_begin(&mut self) -> Result<MapHeader, DecodeError> {
        let len = self.read_len()?;
        let (key, value) = if len == 0 {
            // An empty map carries no types; any value type will do.
            (TType::Binary, TType::Binary)
        } else {
            let kv = self.input.byte()?;
            (self.elem_type(kv >> 4)?, self.elem_type(kv & 0x0f)?)
        };
        let len = check_len(len, min_width(key) + min_width(value), self.remaining())?;
        enter(&mut self.depth, self.limits.max_depth)?;
        Ok(MapHeader { key, value, len })
    }

    #[inline]
    fn read_container_end(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn read_i32_slice(&mut self, len: usize, out: &mut Vec<i32>) -> Result<(), DecodeError> {
        // `len` was checked at one byte per element; an i32 takes four in memory.
        out.reserve(initial_capacity::<i32>(len));
        for _ in 0..len {
            out.push(self.read_i32()?);
        }
        Ok(())
    }

    fn read_i64_slice(&mut self, len: usize, out: &mut Vec<i64>) -> Result<(), DecodeError> {
        // `len` was checked at one byte per element; an i64 takes eight in memory.
        out.reserve(initial_capacity::<i64>(len));
        for _ in 0..len {
            out.push(self.read_i64()?);
        }
        Ok(())
    }

    fn read_f64_slice(&mut self, len: usize, out: &mut Vec<f64>) -> Result<(), DecodeError> {
        let src = self.input.take_elements(len, 8)?;
        out.extend(src.chunks_exact(8).map(|c| {
            f64::from_bits(u64::from_le_bytes([
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
            ]))
        }));
        Ok(())
    }

    #[inline]
    fn skip_bytes(&mut self, len: usize) -> Result<(), DecodeError> {
        self.input.take(len).map(drop)
    }

    #[inline]
    fn fixed_width(&self, ty: TType) -> Option<usize> {
        fixed_width(ty)
    }

    #[inline]
    fn read_encoded(&mut self, ty: TType) -> Result<Bytes, DecodeError> {
        read_encoded_value(self, |d| &d.input, ty)
    }

    #[inline]
    fn remaining(&self) -> usize {
        self.input.remaining()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_round_trips_extremes() {
        for v in [0, 1, -1, 2, -2, i32::MAX, i32::MIN] {
            assert_eq!(unzigzag32(zigzag32(v)), v);
        }
        for v in [0, 1, -1, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag64(zigzag64(v)), v);
        }
        assert_eq!(zigzag32(-1), 1);
        assert_eq!(zigzag32(1), 2);
    }

    #[test]
    fn varints_are_encoded_in_varint_len_bytes_low_group_first() {
        let mut buf = [0u8; 10];
        assert_eq!(encode_varint(0, &mut buf), 1);
        assert_eq!(buf[0], 0);
        assert_eq!(encode_varint(300, &mut buf), 2);
        assert_eq!(buf[..2], [0xac, 0x02]);
        for v in [127, 128, 16_383, 16_384, u64::from(u32::MAX), u64::MAX] {
            let n = encode_varint(v, &mut buf);
            assert_eq!(n, varint_len(v), "{v}");
            assert!(buf[..n - 1].iter().all(|b| b & 0x80 != 0) && buf[n - 1] < 0x80);
        }
    }

    #[test]
    fn varint_len_matches_groups_of_seven_bits() {
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
        assert_eq!(varint_len(16_383), 2);
        assert_eq!(varint_len(16_384), 3);
        assert_eq!(varint_len(u64::MAX), 10);
    }
}
