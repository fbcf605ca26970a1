//! The protocol traits that generated code is written against, and the three protocols.
//!
//! A [`Message`](crate::Message) implementation is generic over three traits, one per
//! pass, so that one body of generated code serves every wire format:
//!
//! - [`Sizer`] computes the exact encoded length (first pass; O(1) per fixed-width field
//!   and per container of fixed-width elements in the Binary protocol);
//! - [`Encoder`] writes into a [`LinkBuffer`](crate::LinkBuffer) whose tail was reserved
//!   with that length, so writes never grow it;
//! - [`Decoder`] reads from one [`Bytes`] frame, handing out slices of it for strings and
//!   binaries, and checks every length against what is left before allocating.
//!
//! Struct nesting state (the Compact protocol's last field id) is returned by
//! `*_struct_begin` and handed back to `*_struct_end`, so neither Binary nor Compact keeps
//! a stack. [JSON](json) does: its separators and closing brackets depend on where a
//! value stands, which it infers from the calls (a field closes at the next field header
//! or at the end of its struct, a container after its declared number of elements, a
//! message after its body), so the traits need no end-of-value hooks.
//!
//! # Values whose width depends on their content
//!
//! Binary and Compact size a string from its length and a double from nothing at all;
//! JSON needs the value (escapes, base64, digits). Each such sizer method therefore has a
//! `*_value_len` twin taking the value, whose default forwards to the length-only method
//! (so Binary and Compact compile to the same code either way). [`Wire`](crate::wire::Wire),
//! and through it generated code, always calls the twins; code written by hand that should
//! size JSON exactly must too. The length-only methods are exact in JSON only where the
//! value does not matter (see [`json`]).

use bytes::Bytes;

use crate::error::{DecodeError, DecodeErrorKind};
use crate::message::{MessageHeader, MessageType};
use crate::ttype::TType;
use crate::utf8_bytes::Utf8Bytes;

pub mod binary;
pub mod compact;
mod input;
pub mod json;
mod output;

/// A wire format: ties a sizer, an encoder and a decoder together.
///
/// Implemented by the marker types [`Binary`](crate::Binary), [`Compact`](crate::Compact)
/// and [`Json`](crate::Json); [`Codec`](crate::Codec) is generic over it.
pub trait Protocol: Copy + Default + std::fmt::Debug + Send + Sync + 'static {
    /// The sizing pass.
    type Sizer: Sizer;
    /// The writing pass.
    type Encoder<'a>: Encoder;
    /// The reading pass.
    type Decoder: Decoder;

    /// A sizer that counts strings/binaries of at least `zero_copy_threshold` bytes
    /// (passed as `Bytes`) as zero-copy, so that the reservation leaves them out.
    fn sizer(zero_copy_threshold: usize) -> Self::Sizer;
    /// An encoder appending to `buf`.
    fn encoder(buf: &mut crate::LinkBuffer, zero_copy_threshold: usize) -> Self::Encoder<'_>;
    /// A decoder over `input` with the given limits.
    fn decoder(input: Bytes, limits: DecodeLimits) -> Self::Decoder;
}

/// The limits a decoder enforces on untrusted input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Deepest nesting of structs and containers (64 by default).
    pub max_depth: usize,
    /// Accept Binary message headers without a version word (old Apache Thrift
    /// clients). Off by default, as in strict servers.
    pub accept_non_strict: bool,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_depth: DEFAULT_MAX_DEPTH,
            accept_non_strict: false,
        }
    }
}

/// The default nesting limit of decoders.
pub const DEFAULT_MAX_DEPTH: usize = 64;

/// The sizing pass: every method returns the exact number of bytes the matching
/// [`Encoder`] method will write.
///
/// Contract for implementations: called in the order the encoder will be, the methods'
/// answers add up to exactly the bytes the encoder writes. How the total is split between
/// calls is the protocol's business: JSON counts a container's closing bracket with its
/// last element, and a struct's opening brace in the state `struct_begin` returns.
pub trait Sizer {
    /// Bytes of a message header.
    fn message_begin_len(&mut self, header: &MessageHeader) -> usize;
    /// Enters a struct; returns state to hand back to [`struct_end_len`](Sizer::struct_end_len).
    fn struct_begin(&mut self) -> i16;
    /// Leaves a struct; returns the bytes of its stop marker.
    fn struct_end_len(&mut self, saved: i16) -> usize;
    /// Bytes of a field header.
    fn field_begin_len(&mut self, ty: TType, id: i16) -> usize;
    /// Bytes of a whole `bool` field (header and value).
    fn bool_field_len(&mut self, id: i16) -> usize;
    /// Bytes of a `bool` value outside a field header (in a container).
    fn bool_len(&self) -> usize;
    /// Bytes of an `i8` whatever its value (exact where the width does not depend on
    /// it; see [`i8_value_len`](Sizer::i8_value_len)).
    fn i8_len(&self) -> usize;
    /// Bytes of an `i16`.
    fn i16_len(&self, v: i16) -> usize;
    /// Bytes of an `i32`.
    fn i32_len(&self, v: i32) -> usize;
    /// Bytes of an `i64`.
    fn i64_len(&self, v: i64) -> usize;
    /// Bytes of a `double` whatever its value (exact where the width does not depend on
    /// it; see [`double_value_len`](Sizer::double_value_len)).
    fn double_len(&self) -> usize;
    /// Bytes of a `uuid`.
    fn uuid_len(&self) -> usize;
    /// Bytes of a string/binary of `len` bytes that will be copied (exact where the
    /// content does not matter; see [`str_value_len`](Sizer::str_value_len) and
    /// [`binary_value_len`](Sizer::binary_value_len)).
    fn binary_len(&self, len: usize) -> usize;
    /// Bytes of a string/binary of `len` bytes held in `Bytes`, which the encoder inserts
    /// as a node of its own when it reaches the zero-copy threshold; the sizer counts
    /// those so that the reservation can leave them out. Exact where the content does not
    /// matter; see [`string_value_len`](Sizer::string_value_len) and
    /// [`bytes_value_len`](Sizer::bytes_value_len).
    fn bytes_len(&mut self, len: usize) -> usize;
    /// Bytes of a list or set header.
    fn list_begin_len(&self, elem: TType, len: usize) -> usize;
    /// Bytes of a map header.
    fn map_begin_len(&self, key: TType, value: TType, len: usize) -> usize;
    /// Bytes of the elements of a `list<i32>` (O(1) in Binary).
    fn i32_slice_len(&self, v: &[i32]) -> usize;
    /// Bytes of the elements of a `list<i64>` (O(1) in Binary).
    fn i64_slice_len(&self, v: &[i64]) -> usize;
    /// Bytes of the elements of a `list<double>` (O(1) in both protocols).
    fn f64_slice_len(&self, v: &[f64]) -> usize {
        v.len() * 8
    }
    /// Bytes of an `i8` with value `v` ([`i8_len`](Sizer::i8_len) where the width does not
    /// depend on the value).
    #[inline]
    fn i8_value_len(&mut self, v: i8) -> usize {
        let _ = v;
        self.i8_len()
    }
    /// Bytes of the `double` `v` ([`double_len`](Sizer::double_len) where the width does
    /// not depend on the value).
    #[inline]
    fn double_value_len(&mut self, v: f64) -> usize {
        let _ = v;
        self.double_len()
    }
    /// Bytes of the string `v`, copied ([`Encoder::write_str`]).
    #[inline]
    fn str_value_len(&mut self, v: &str) -> usize {
        self.binary_len(v.len())
    }
    /// Bytes of the binary `v`, copied ([`Encoder::write_binary`]).
    #[inline]
    fn binary_value_len(&mut self, v: &[u8]) -> usize {
        self.binary_len(v.len())
    }
    /// Bytes of the string `v` held in [`Utf8Bytes`] ([`Encoder::write_string`]; counted
    /// as zero-copy like [`bytes_len`](Sizer::bytes_len) where the protocol inserts it).
    #[inline]
    fn string_value_len(&mut self, v: &Utf8Bytes) -> usize {
        self.bytes_len(v.len())
    }
    /// Bytes of the binary `v` held in [`Bytes`] ([`Encoder::write_bytes`]).
    #[inline]
    fn bytes_value_len(&mut self, v: &Bytes) -> usize {
        self.bytes_len(v.len())
    }
    /// Bytes of a value already encoded in this protocol
    /// ([`Encoder::write_encoded`]).
    fn encoded_len(&mut self, v: &Bytes) -> usize;
    /// Bytes counted so far that the encoder will insert without copying.
    fn zero_copy_len(&self) -> usize;
    /// The wire width of every value of `ty`, when it does not depend on the value: lets
    /// containers of such elements be sized in O(1) (`len * width`) instead of by
    /// walking them.
    fn fixed_width(&self, ty: TType) -> Option<usize>;
}

/// The writing pass. Methods cannot fail: the caller reserved the exact size first.
///
/// Implementations must write exactly what the matching [`Sizer`] methods counted.
pub trait Encoder {
    /// Writes a message header.
    fn write_message_begin(&mut self, header: &MessageHeader);
    /// Enters a struct; returns state to hand back to [`write_struct_end`](Encoder::write_struct_end).
    fn write_struct_begin(&mut self) -> i16;
    /// Writes the stop marker and leaves the struct.
    fn write_struct_end(&mut self, saved: i16);
    /// Writes a field header. `bool` fields use [`write_bool_field`](Encoder::write_bool_field).
    fn write_field_begin(&mut self, ty: TType, id: i16);
    /// Writes a whole `bool` field (the Compact protocol folds the value into the header).
    fn write_bool_field(&mut self, id: i16, v: bool);
    /// Writes a `bool` element.
    fn write_bool(&mut self, v: bool);
    /// Writes an `i8`.
    fn write_i8(&mut self, v: i8);
    /// Writes an `i16`.
    fn write_i16(&mut self, v: i16);
    /// Writes an `i32`.
    fn write_i32(&mut self, v: i32);
    /// Writes an `i64`.
    fn write_i64(&mut self, v: i64);
    /// Writes a `double`.
    fn write_double(&mut self, v: f64);
    /// Writes a `uuid`.
    fn write_uuid(&mut self, v: &[u8; 16]);
    /// Writes a binary (or, in the protocols where they look the same on the wire, a
    /// string) by copying it.
    fn write_binary(&mut self, v: &[u8]);
    /// Writes a string/binary held in `Bytes`: inserted as its own buffer node, without a
    /// copy, when it reaches the zero-copy threshold; copied otherwise.
    fn write_bytes(&mut self, v: &Bytes);
    /// Writes a string held in [`Utf8Bytes`] (zero-copy like [`write_bytes`](Encoder::write_bytes)).
    fn write_string(&mut self, v: &Utf8Bytes) {
        self.write_bytes(v.as_bytes())
    }
    /// Writes a string by copying it (as [`write_binary`](Encoder::write_binary) in the
    /// protocols where strings and binaries look the same on the wire).
    #[inline]
    fn write_str(&mut self, v: &str) {
        self.write_binary(v.as_bytes())
    }
    /// Writes a whole value already encoded in this protocol (a struct a proxy passes
    /// on, say), as it is: a buffer node of its own, without a copy, when it reaches
    /// the zero-copy threshold; copied otherwise. Not for a map key in JSON.
    fn write_encoded(&mut self, v: &Bytes);
    /// Writes a list or set header.
    fn write_list_begin(&mut self, elem: TType, len: usize);
    /// Writes a map header.
    fn write_map_begin(&mut self, key: TType, value: TType, len: usize);
    /// Writes the elements of a `list<i32>` (AVX2 in Binary where available).
    fn write_i32_slice(&mut self, v: &[i32]);
    /// Writes the elements of a `list<i64>` (AVX2 in Binary where available).
    fn write_i64_slice(&mut self, v: &[i64]);
    /// Writes the elements of a `list<double>` (AVX2 in Binary where available).
    fn write_f64_slice(&mut self, v: &[f64]);
}

/// A field header as read from the wire. A `ty` of [`TType::Stop`] ends the struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldHeader {
    /// The field's type (for `Stop`, the id is meaningless).
    pub ty: TType,
    /// The field's id.
    pub id: i16,
}

/// A list or set header as read from the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListHeader {
    /// The element type (never `Stop` or `Void`).
    pub elem: TType,
    /// The element count, already checked against the bytes that remain.
    pub len: usize,
}

/// A map header as read from the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapHeader {
    /// The key type.
    pub key: TType,
    /// The value type.
    pub value: TType,
    /// The entry count, already checked against the bytes that remain.
    pub len: usize,
}

/// The reading pass, over one frame of untrusted bytes.
///
/// Contract for implementations: no method panics or reads out of bounds on any input;
/// every length is checked against [`remaining`](Decoder::remaining) (times the minimum
/// wire size of the element type) before it is returned, so callers may allocate for it;
/// `*_begin` of structs and containers count nesting depth and fail past the limit.
pub trait Decoder {
    /// Reads a message header.
    fn read_message_begin(&mut self) -> Result<MessageHeader, DecodeError>;
    /// Enters a struct (counts depth); returns state for [`read_struct_end`](Decoder::read_struct_end).
    fn read_struct_begin(&mut self) -> Result<i16, DecodeError>;
    /// Leaves a struct.
    fn read_struct_end(&mut self, saved: i16);
    /// Reads a field header; `Stop` ends the struct.
    fn read_field_begin(&mut self) -> Result<FieldHeader, DecodeError>;
    /// Reads a `bool` (for a Compact `bool` field, the value folded into its header).
    fn read_bool(&mut self) -> Result<bool, DecodeError>;
    /// Reads an `i8`.
    fn read_i8(&mut self) -> Result<i8, DecodeError>;
    /// Reads an `i16`.
    fn read_i16(&mut self) -> Result<i16, DecodeError>;
    /// Reads an `i32`.
    fn read_i32(&mut self) -> Result<i32, DecodeError>;
    /// Reads an `i64`.
    fn read_i64(&mut self) -> Result<i64, DecodeError>;
    /// Reads a `double`.
    fn read_double(&mut self) -> Result<f64, DecodeError>;
    /// Reads a `uuid`.
    fn read_uuid(&mut self) -> Result<[u8; 16], DecodeError>;
    /// Reads a binary: a slice of the input (no copy) where the protocol carries it raw.
    fn read_bytes(&mut self) -> Result<Bytes, DecodeError>;
    /// Reads a string, validated as UTF-8: a slice of the input (no copy) where the
    /// protocol carries it raw.
    fn read_string(&mut self) -> Result<Utf8Bytes, DecodeError> {
        Utf8Bytes::try_from_bytes(self.read_bytes()?)
            .map_err(|_| DecodeError::new(DecodeErrorKind::InvalidUtf8))
    }
    /// Reads a list header (counts depth).
    fn read_list_begin(&mut self) -> Result<ListHeader, DecodeError>;
    /// Reads a set header (counts depth).
    fn read_set_begin(&mut self) -> Result<ListHeader, DecodeError> {
        self.read_list_begin()
    }
    /// Reads a map header (counts depth).
    fn read_map_begin(&mut self) -> Result<MapHeader, DecodeError>;
    /// Leaves a list, set or map.
    fn read_container_end(&mut self);
    /// Reads `len` `i32` elements into `out` (AVX2 in Binary where available).
    fn read_i32_slice(&mut self, len: usize, out: &mut Vec<i32>) -> Result<(), DecodeError>;
    /// Reads `len` `i64` elements into `out` (AVX2 in Binary where available).
    fn read_i64_slice(&mut self, len: usize, out: &mut Vec<i64>) -> Result<(), DecodeError>;
    /// Reads `len` `double` elements into `out` (AVX2 in Binary where available).
    fn read_f64_slice(&mut self, len: usize, out: &mut Vec<f64>) -> Result<(), DecodeError>;
    /// Skips `len` raw bytes.
    fn skip_bytes(&mut self, len: usize) -> Result<(), DecodeError>;
    /// Skips a string or binary ([`skip`](Decoder::skip) calls it): reads it as a binary
    /// unless the protocol can step over it without reading it as either (JSON, whose
    /// binaries are base64 and strings are not).
    #[inline]
    fn skip_binary(&mut self) -> Result<(), DecodeError> {
        self.read_bytes().map(drop)
    }
    /// The fixed wire width of a value of `ty`, if every value of it has the same width
    /// (lets `skip` jump over containers of them in one step).
    fn fixed_width(&self, ty: TType) -> Option<usize>;
    /// Skips one value of type `ty`, however deeply nested (within the depth limit).
    fn skip(&mut self, ty: TType) -> Result<(), DecodeError>
    where
        Self: Sized,
    {
        skip_value(self, ty)
    }
    /// Reads one whole value of type `ty` (a struct, say) as it is encoded: the value
    /// is checked as [`skip`](Decoder::skip) checks it, and its bytes come out as a
    /// slice of the input, no copy, ready for [`Encoder::write_encoded`] in the same
    /// protocol (what a proxy passes on unread). In JSON, the separator before the
    /// value and the closers after it are read but not part of it, and a map key is
    /// refused; in Compact, a `bool` field's value is folded into its field header,
    /// so its bytes there are empty.
    fn read_encoded(&mut self, ty: TType) -> Result<Bytes, DecodeError>;
    /// Bytes not yet read.
    fn remaining(&self) -> usize;
}

/// [`Decoder::read_encoded`] for a protocol with no context between values (Binary,
/// Compact): the bytes that skipping the value stepped over, `input` being the
/// decoder's input.
pub(crate) fn read_encoded_value<D: Decoder>(
    d: &mut D,
    input: fn(&D) -> &input::Input,
    ty: TType,
) -> Result<Bytes, DecodeError> {
    let start = input(d).position();
    d.skip(ty)?;
    let input = input(d);
    Ok(input.slice_of(start, input.position()))
}

/// Skips one value of type `ty`. Depth is bounded by the decoder's `*_begin` methods, and
/// every element consumes at least one byte (containers of `Stop`/`Void` are rejected by
/// the headers), so skipping ends in time linear in the input.
pub fn skip_value<D: Decoder>(d: &mut D, ty: TType) -> Result<(), DecodeError> {
    match ty {
        TType::Bool => d.read_bool().map(drop),
        TType::I8 => d.read_i8().map(drop),
        TType::I16 => d.read_i16().map(drop),
        TType::I32 => d.read_i32().map(drop),
        TType::I64 => d.read_i64().map(drop),
        TType::Double => d.read_double().map(drop),
        TType::Uuid => d.read_uuid().map(drop),
        TType::Binary => d.skip_binary(),
        TType::Struct => {
            let saved = d.read_struct_begin()?;
            loop {
                let field = d.read_field_begin()?;
                if field.ty == TType::Stop {
                    break;
                }
                skip_value(d, field.ty)?;
            }
            d.read_struct_end(saved);
            Ok(())
        }
        TType::List | TType::Set => {
            let header = if ty == TType::List {
                d.read_list_begin()?
            } else {
                d.read_set_begin()?
            };
            skip_elements(d, header.elem, header.len)?;
            d.read_container_end();
            Ok(())
        }
        TType::Map => {
            let header = d.read_map_begin()?;
            match (d.fixed_width(header.key), d.fixed_width(header.value)) {
                (Some(k), Some(v)) => d.skip_bytes((k + v) * header.len)?,
                _ => {
                    for _ in 0..header.len {
                        skip_value(d, header.key)?;
                        skip_value(d, header.value)?;
                    }
                }
            }
            d.read_container_end();
            Ok(())
        }
        TType::Stop | TType::Void => Err(DecodeError::new(DecodeErrorKind::InvalidType(ty as u8))),
    }
}

fn skip_elements<D: Decoder>(d: &mut D, elem: TType, len: usize) -> Result<(), DecodeError> {
    match d.fixed_width(elem) {
        Some(width) => d.skip_bytes(width * len),
        None => {
            for _ in 0..len {
                skip_value(d, elem)?;
            }
            Ok(())
        }
    }
}

/// Bytes of a whole `list<i32>` (header and elements).
#[inline]
pub fn i32_list_len<S: Sizer>(s: &mut S, v: &[i32]) -> usize {
    s.list_begin_len(TType::I32, v.len()) + s.i32_slice_len(v)
}

/// Bytes of a whole `list<i64>` (header and elements).
#[inline]
pub fn i64_list_len<S: Sizer>(s: &mut S, v: &[i64]) -> usize {
    s.list_begin_len(TType::I64, v.len()) + s.i64_slice_len(v)
}

/// Bytes of a whole `list<double>` (header and elements).
#[inline]
pub fn f64_list_len<S: Sizer>(s: &mut S, v: &[f64]) -> usize {
    s.list_begin_len(TType::Double, v.len()) + s.f64_slice_len(v)
}

/// Writes a whole `list<i32>`.
#[inline]
pub fn write_i32_list<E: Encoder>(e: &mut E, v: &[i32]) {
    e.write_list_begin(TType::I32, v.len());
    e.write_i32_slice(v);
}

/// Writes a whole `list<i64>`.
#[inline]
pub fn write_i64_list<E: Encoder>(e: &mut E, v: &[i64]) {
    e.write_list_begin(TType::I64, v.len());
    e.write_i64_slice(v);
}

/// Writes a whole `list<double>`.
#[inline]
pub fn write_f64_list<E: Encoder>(e: &mut E, v: &[f64]) {
    e.write_list_begin(TType::Double, v.len());
    e.write_f64_slice(v);
}

/// Reads a whole `list<i32>`. The protocol's slice reader reserves: all at once where the
/// count was checked at the element's full width (Binary), at most 64 KiB up front where
/// an element may be a one-byte varint (Compact), so that a reservation never exceeds
/// what the input could decode to by more than that.
#[inline]
pub fn read_i32_list<D: Decoder>(d: &mut D) -> Result<Vec<i32>, DecodeError> {
    let header = d.read_list_begin()?;
    expect_element(header.elem, TType::I32, header.len)?;
    let mut out = Vec::new();
    d.read_i32_slice(header.len, &mut out)?;
    d.read_container_end();
    Ok(out)
}

/// Reads a whole `list<i64>` (see [`read_i32_list`]).
#[inline]
pub fn read_i64_list<D: Decoder>(d: &mut D) -> Result<Vec<i64>, DecodeError> {
    let header = d.read_list_begin()?;
    expect_element(header.elem, TType::I64, header.len)?;
    let mut out = Vec::new();
    d.read_i64_slice(header.len, &mut out)?;
    d.read_container_end();
    Ok(out)
}

/// Reads a whole `list<double>` (see [`read_i32_list`]).
#[inline]
pub fn read_f64_list<D: Decoder>(d: &mut D) -> Result<Vec<f64>, DecodeError> {
    let header = d.read_list_begin()?;
    expect_element(header.elem, TType::Double, header.len)?;
    let mut out = Vec::new();
    d.read_f64_slice(header.len, &mut out)?;
    d.read_container_end();
    Ok(out)
}

/// Reads a whole `set<i32>` through the SIMD slice reader, then builds the set (any
/// collection: `BTreeSet` bulk-builds from it).
#[inline]
pub fn read_i32_set<D: Decoder, C: FromIterator<i32>>(d: &mut D) -> Result<C, DecodeError> {
    let header = d.read_set_begin()?;
    expect_element(header.elem, TType::I32, header.len)?;
    let mut values = Vec::new();
    d.read_i32_slice(header.len, &mut values)?;
    d.read_container_end();
    Ok(values.into_iter().collect())
}

/// Reads a whole `set<i64>` through the SIMD slice reader, then builds the set.
#[inline]
pub fn read_i64_set<D: Decoder, C: FromIterator<i64>>(d: &mut D) -> Result<C, DecodeError> {
    let header = d.read_set_begin()?;
    expect_element(header.elem, TType::I64, header.len)?;
    let mut values = Vec::new();
    d.read_i64_slice(header.len, &mut values)?;
    d.read_container_end();
    Ok(values.into_iter().collect())
}

/// Reads a whole list whose elements `read` decodes one at a time (checked against the
/// declared element type `elem`). Used by generated code for lists of anything but the
/// fixed-width numbers, which have the SIMD readers above.
#[inline]
pub fn read_list<D: Decoder, T>(
    d: &mut D,
    elem: TType,
    mut read: impl FnMut(&mut D) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let header = d.read_list_begin()?;
    expect_element(header.elem, elem, header.len)?;
    let mut out = Vec::with_capacity(initial_capacity::<T>(header.len));
    for _ in 0..header.len {
        out.push(read(d)?);
    }
    d.read_container_end();
    Ok(out)
}

/// Reads a whole set into any collection, usually a `BTreeSet` (see [`read_list`]).
/// Elements are collected first and then built in one go: `BTreeSet::from_iter` sorts
/// once and builds the tree bottom-up, where inserting one by one searches the tree for
/// each element.
#[inline]
pub fn read_set<D: Decoder, T, C: FromIterator<T>>(
    d: &mut D,
    elem: TType,
    mut read: impl FnMut(&mut D) -> Result<T, DecodeError>,
) -> Result<C, DecodeError> {
    let header = d.read_set_begin()?;
    expect_element(header.elem, elem, header.len)?;
    let mut out = Vec::with_capacity(initial_capacity::<T>(header.len));
    for _ in 0..header.len {
        out.push(read(d)?);
    }
    d.read_container_end();
    Ok(out.into_iter().collect())
}

/// Reads a whole map into any collection, usually a `BTreeMap`, built like
/// [`read_set`]; a key that occurs twice keeps its last value, as repeated inserts would.
#[inline]
pub fn read_map<D: Decoder, K, V, C: FromIterator<(K, V)>>(
    d: &mut D,
    key: TType,
    value: TType,
    mut read_key: impl FnMut(&mut D) -> Result<K, DecodeError>,
    mut read_value: impl FnMut(&mut D) -> Result<V, DecodeError>,
) -> Result<C, DecodeError> {
    let header = d.read_map_begin()?;
    expect_element(header.key, key, header.len)?;
    expect_element(header.value, value, header.len)?;
    let mut out = Vec::with_capacity(initial_capacity::<(K, V)>(header.len));
    for _ in 0..header.len {
        let k = read_key(d)?;
        let v = read_value(d)?;
        out.push((k, v));
    }
    d.read_container_end();
    Ok(out.into_iter().collect())
}

/// Capacity to reserve for a decoded `Vec<T>` of `len` elements.
///
/// Headers already guarantee `len` elements fit in the remaining input, but a Rust value
/// can be much larger than its minimum wire size (a struct with many defaulted fields
/// decodes from one stop byte). So reservations up front are capped at 64 KiB worth of
/// `T`; past that the `Vec` grows as elements actually decode, and memory stays
/// proportional to what the input really contains.
#[inline]
pub fn initial_capacity<T>(len: usize) -> usize {
    const CAP_BYTES: usize = 64 * 1024;
    let size = std::mem::size_of::<T>().max(1);
    len.min(CAP_BYTES / size)
}

/// Checks that a list/set element type read from the wire matches the declared one
/// (empty containers may carry any type: some writers leave it unset).
#[inline]
pub fn expect_element(found: TType, expected: TType, len: usize) -> Result<(), DecodeError> {
    if len == 0 || found == expected {
        Ok(())
    } else {
        Err(DecodeError::new(DecodeErrorKind::UnexpectedElementType {
            expected,
            found,
        }))
    }
}

/// Checks that a message type byte is one of the four Thrift defines.
pub(crate) fn message_type(byte: u8) -> Result<MessageType, DecodeError> {
    Ok(match byte {
        1 => MessageType::Call,
        2 => MessageType::Reply,
        3 => MessageType::Exception,
        4 => MessageType::Oneway,
        other => return Err(DecodeError::new(DecodeErrorKind::InvalidMessageType(other))),
    })
}

/// Fails when `len` elements of at least `min_width` bytes each cannot fit in
/// `remaining` bytes; so callers may allocate for `len` without trusting the input.
#[inline]
pub(crate) fn check_len(len: u64, min_width: u64, remaining: usize) -> Result<usize, DecodeError> {
    let needed = len.saturating_mul(min_width);
    if needed > remaining as u64 {
        return Err(DecodeError::new(DecodeErrorKind::LengthExceedsInput {
            len,
            needed,
            remaining,
        }));
    }
    // `len * min_width <= remaining <= usize::MAX` and `min_width >= 1`, so it fits.
    Ok(len as usize)
}

/// Fails when nesting one more level would pass `max`.
#[inline]
pub(crate) fn enter(depth: &mut usize, max: usize) -> Result<(), DecodeError> {
    if *depth >= max {
        return Err(DecodeError::new(DecodeErrorKind::DepthLimitExceeded(max)));
    }
    *depth += 1;
    Ok(())
}
