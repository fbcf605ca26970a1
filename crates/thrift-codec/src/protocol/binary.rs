//! The Thrift Binary protocol: fixed-width big-endian integers, `i32` lengths.
//!
//! Writers always emit strict message headers (`0x8001` version word). Readers accept
//! strict headers, and old non-strict ones (name first) only when
//! [`DecodeLimits::accept_non_strict`] is set.

use bytes::Bytes;

use crate::error::{DecodeError, DecodeErrorKind};
use crate::link_buffer::LinkBuffer;
use crate::message::MessageHeader;
use crate::protocol::input::Input;
use crate::protocol::output::put_array;
use crate::protocol::{
    DecodeLimits, Decoder, Encoder, FieldHeader, ListHeader, MapHeader, Protocol, Sizer, check_len,
    enter, message_type, read_encoded_value,
};
use crate::simd;
use crate::ttype::TType;
use crate::utf8_bytes::Utf8Bytes;

/// The Binary protocol (marker type for [`Codec`](crate::Codec)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Binary;

const VERSION_1: u32 = 0x8001_0000;
const VERSION_MASK: u32 = 0xffff_0000;

impl Protocol for Binary {
    type Sizer = BinarySizer;
    type Encoder<'a> = BinaryEncoder<'a>;
    type Decoder = BinaryDecoder;

    fn sizer(zero_copy_threshold: usize) -> BinarySizer {
        BinarySizer {
            zero_copy_threshold,
            zero_copy: 0,
        }
    }

    fn encoder(buf: &mut LinkBuffer, zero_copy_threshold: usize) -> BinaryEncoder<'_> {
        BinaryEncoder {
            buf,
            zero_copy_threshold,
        }
    }

    fn decoder(input: Bytes, limits: DecodeLimits) -> BinaryDecoder {
        BinaryDecoder::new(input, limits)
    }
}

/// The wire width of every value of `ty`, where it does not depend on the value.
#[inline]
fn fixed_width(ty: TType) -> Option<usize> {
    match ty {
        TType::Bool | TType::I8 => Some(1),
        TType::I16 => Some(2),
        TType::I32 => Some(4),
        TType::I64 | TType::Double => Some(8),
        TType::Uuid => Some(16),
        _ => None,
    }
}

/// The minimum wire width of a value of `ty` in the Binary protocol.
#[inline]
fn min_width(ty: TType) -> u64 {
    match ty {
        TType::Bool | TType::I8 | TType::Struct => 1,
        TType::I16 => 2,
        TType::I32 | TType::Binary => 4,
        TType::I64 | TType::Double => 8,
        TType::Set | TType::List => 5,
        TType::Map => 6,
        TType::Uuid => 16,
        // Rejected before this is asked; a width of 1 keeps the arithmetic safe anyway.
        TType::Stop | TType::Void => 1,
    }
}

/// Sizing for the Binary protocol: every fixed-width answer is a constant.
#[derive(Debug, Clone)]
pub struct BinarySizer {
    zero_copy_threshold: usize,
    zero_copy: usize,
}

impl Sizer for BinarySizer {
    #[inline]
    fn message_begin_len(&mut self, header: &MessageHeader) -> usize {
        4 + 4 + header.name.len() + 4
    }
    #[inline]
    fn struct_begin(&mut self) -> i16 {
        0
    }
    #[inline]
    fn struct_end_len(&mut self, _saved: i16) -> usize {
        1
    }
    #[inline]
    fn field_begin_len(&mut self, _ty: TType, _id: i16) -> usize {
        3
    }
    #[inline]
    fn bool_field_len(&mut self, _id: i16) -> usize {
        4
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
    fn i16_len(&self, _v: i16) -> usize {
        2
    }
    #[inline]
    fn i32_len(&self, _v: i32) -> usize {
        4
    }
    #[inline]
    fn i64_len(&self, _v: i64) -> usize {
        8
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
        4 + len
    }
    #[inline]
    fn bytes_len(&mut self, len: usize) -> usize {
        if len >= self.zero_copy_threshold {
            self.zero_copy += len;
        }
        4 + len
    }
    #[inline]
    fn list_begin_len(&self, _elem: TType, _len: usize) -> usize {
        5
    }
    #[inline]
    fn map_begin_len(&self, _key: TType, _value: TType, _len: usize) -> usize {
        6
    }
    #[inline]
    fn i32_slice_len(&self, v: &[i32]) -> usize {
        v.len() * 4
    }
    #[inline]
    fn i64_slice_len(&self, v: &[i64]) -> usize {
        v.len() * 8
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

/// Writes the Binary protocol into a [`LinkBuffer`].
#[derive(Debug)]
pub struct BinaryEncoder<'a> {
    buf: &'a mut LinkBuffer,
    zero_copy_threshold: usize,
}

impl BinaryEncoder<'_> {
    #[inline(always)]
    fn put<const N: usize>(&mut self, bytes: [u8; N]) {
        put_array(self.buf.tail_mut(), bytes);
    }

    /// A length as the wire's `i32`. Lengths fit: `Codec` refuses values larger than
    /// `i32::MAX` bytes in total.
    #[inline(always)]
    fn len_bytes(len: usize) -> [u8; 4] {
        (len as i32).to_be_bytes()
    }
}

impl Encoder for BinaryEncoder<'_> {
    fn write_message_begin(&mut self, header: &MessageHeader) {
        self.put((VERSION_1 | u32::from(header.ty as u8)).to_be_bytes());
        self.write_binary(header.name.as_bytes());
        self.put(header.seq_id.to_be_bytes());
    }
    #[inline]
    fn write_struct_begin(&mut self) -> i16 {
        0
    }
    #[inline]
    fn write_struct_end(&mut self, _saved: i16) {
        self.put([TType::Stop as u8]);
    }
    #[inline]
    fn write_field_begin(&mut self, ty: TType, id: i16) {
        let [a, b] = id.to_be_bytes();
        self.put([ty as u8, a, b]);
    }
    #[inline]
    fn write_bool_field(&mut self, id: i16, v: bool) {
        let [a, b] = id.to_be_bytes();
        self.put([TType::Bool as u8, a, b, u8::from(v)]);
    }
    #[inline]
    fn write_bool(&mut self, v: bool) {
        self.put([u8::from(v)]);
    }
    #[inline]
    fn write_i8(&mut self, v: i8) {
        self.put(v.to_be_bytes());
    }
    #[inline]
    fn write_i16(&mut self, v: i16) {
        self.put(v.to_be_bytes());
    }
    #[inline]
    fn write_i32(&mut self, v: i32) {
        self.put(v.to_be_bytes());
    }
    #[inline]
    fn write_i64(&mut self, v: i64) {
        self.put(v.to_be_bytes());
    }
    #[inline]
    fn write_double(&mut self, v: f64) {
        self.put(v.to_bits().to_be_bytes());
    }
    #[inline]
    fn write_uuid(&mut self, v: &[u8; 16]) {
        self.put(*v);
    }
    #[inline]
    fn write_binary(&mut self, v: &[u8]) {
        self.put(Self::len_bytes(v.len()));
        self.buf.tail_mut().extend_from_slice(v);
    }
    #[inline]
    fn write_bytes(&mut self, v: &Bytes) {
        self.put(Self::len_bytes(v.len()));
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
        let [a, b, c, d] = Self::len_bytes(len);
        self.put([elem as u8, a, b, c, d]);
    }
    #[inline]
    fn write_map_begin(&mut self, key: TType, value: TType, len: usize) {
        let [a, b, c, d] = Self::len_bytes(len);
        self.put([key as u8, value as u8, a, b, c, d]);
    }
    #[inline]
    fn write_i32_slice(&mut self, v: &[i32]) {
        simd::put_i32s_be(self.buf.tail_mut(), v);
    }
    #[inline]
    fn write_i64_slice(&mut self, v: &[i64]) {
        simd::put_i64s_be(self.buf.tail_mut(), v);
    }
    #[inline]
    fn write_f64_slice(&mut self, v: &[f64]) {
        simd::put_f64s_be(self.buf.tail_mut(), v);
    }
}

/// Reads the Binary protocol from one `Bytes` frame.
#[derive(Debug, Clone)]
pub struct BinaryDecoder {
    input: Input,
    depth: usize,
    limits: DecodeLimits,
}

impl BinaryDecoder {
    /// A decoder over `input`.
    pub fn new(input: Bytes, limits: DecodeLimits) -> Self {
        BinaryDecoder {
            input: Input::new(input),
            depth: 0,
            limits,
        }
    }

    #[inline]
    fn read_len(&mut self) -> Result<u64, DecodeError> {
        let len = i32::from_be_bytes(self.input.array()?);
        if len < 0 {
            return Err(DecodeError::new(DecodeErrorKind::NegativeLength(
                len.into(),
            )));
        }
        Ok(len as u64)
    }

    #[inline]
    fn read_type(&mut self) -> Result<TType, DecodeError> {
        let [id] = self.input.array()?;
        TType::from_binary_id(id)
    }

    #[inline]
    fn read_elem_type(&mut self) -> Result<TType, DecodeError> {
        let ty = self.read_type()?;
        if !ty.is_value() {
            return Err(DecodeError::new(DecodeErrorKind::InvalidElementType(ty)));
        }
        Ok(ty)
    }
}

impl Decoder for BinaryDecoder {
    fn read_message_begin(&mut self) -> Result<MessageHeader, DecodeError> {
        let word = i32::from_be_bytes(self.input.array()?);
        if word < 0 {
            let word = word as u32;
            if word & VERSION_MASK != VERSION_1 {
                return Err(DecodeError::new(DecodeErrorKind::BadVersion(word)));
            }
            let ty = message_type((word & 0xff) as u8)?;
            let name = self.read_string()?;
            let seq_id = self.read_i32()?;
            Ok(MessageHeader { name, ty, seq_id })
        } else if self.limits.accept_non_strict {
            // Non-strict: the word was the name's length; a type byte follows the name.
            let len = check_len(word as u64, 1, self.remaining())?;
            let name = Utf8Bytes::try_from_bytes(self.input.slice(len)?)
                .map_err(|_| DecodeError::new(DecodeErrorKind::InvalidUtf8))?;
            let [ty] = self.input.array()?;
            let ty = message_type(ty)?;
            let seq_id = self.read_i32()?;
            Ok(MessageHeader { name, ty, seq_id })
        } else {
            Err(DecodeError::new(DecodeErrorKind::BadVersion(word as u32)))
        }
    }

    #[inline]
    fn read_struct_begin(&mut self) -> Result<i16, DecodeError> {
        enter(&mut self.depth, self.limits.max_depth)?;
        Ok(0)
    }

    #[inline]
    fn read_struct_end(&mut self, _saved: i16) {
        self.depth = self.depth.saturating_sub(1);
    }

    #[inline]
    fn read_field_begin(&mut self) -> Result<FieldHeader, DecodeError> {
        let ty = self.read_type()?;
        if ty == TType::Stop {
            return Ok(FieldHeader { ty, id: 0 });
        }
        if ty == TType::Void {
            return Err(DecodeError::new(DecodeErrorKind::InvalidType(ty as u8)));
        }
        let id = i16::from_be_bytes(self.input.array()?);
        Ok(FieldHeader { ty, id })
    }

    #[inline]
    fn read_bool(&mut self) -> Result<bool, DecodeError> {
        let [b] = self.input.array()?;
        Ok(b != 0)
    }
    #[inline]
    fn read_i8(&mut self) -> Result<i8, DecodeError> {
        Ok(i8::from_be_bytes(self.input.array()?))
    }
    #[inline]
    fn read_i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.input.array()?))
    }
    #[inline]
    fn read_i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.input.array()?))
    }
    #[inline]
    fn read_i64(&mut self) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.input.array()?))
    }
    #[inline]
    fn read_double(&mut self) -> Result<f64, DecodeError> {
        Ok(f64::from_bits(u64::from_be_bytes(self.input.array()?)))
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

    #[inline]
    fn read_list_begin(&mut self) -> Result<ListHeader, DecodeError> {
        let elem = self.read_elem_type()?;
        let len = check_len(self.read_len()?, min_width(elem), self.remaining())?;
        enter(&mut self.depth, self.limits.max_depth)?;
        Ok(ListHeader { elem, len })
    }

    #[inline]
    fn read_map_begin(&mut self) -> Result<MapHeader, DecodeError> {
        let key = self.read_elem_type()?;
        let value = self.read_elem_type()?;
        let len = check_len(
            self.read_len()?,
            min_width(key) + min_width(value),
            self.remaining(),
        )?;
        enter(&mut self.depth, self.limits.max_depth)?;
        Ok(MapHeader { key, value, len })
    }

    #[inline]
    fn read_container_end(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    #[inline]
    fn read_i32_slice(&mut self, len: usize, out: &mut Vec<i32>) -> Result<(), DecodeError> {
        let src = self.input.take_elements(len, 4)?;
        simd::get_i32s_be(src, out);
        Ok(())
    }

    #[inline]
    fn read_i64_slice(&mut self, len: usize, out: &mut Vec<i64>) -> Result<(), DecodeError> {
        let src = self.input.take_elements(len, 8)?;
        simd::get_i64s_be(src, out);
        Ok(())
    }

    #[inline]
    fn read_f64_slice(&mut self, len: usize, out: &mut Vec<f64>) -> Result<(), DecodeError> {
        let src = self.input.take_elements(len, 8)?;
        simd::get_f64s_be(src, out);
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
