//! Thrift writers into a `Vec<u8>`, for JSON input: container headers are written
//! before their elements are counted and patched once the closing bracket is read.

use thrift_wire::TType;
use thrift_wire::encoding::{
    bool_type, compact_type, put_field_header, put_varint as varint, zigzag32, zigzag64,
};

/// One Thrift protocol's writer. Container `*_begin` methods return where the header
/// starts; `*_end` patches it with the count.
pub(crate) trait Wire {
    /// The output so far.
    fn out(&mut self) -> &mut Vec<u8>;
    /// Enters a struct; returns state for `struct_end`.
    fn struct_begin(&mut self) -> i16;
    /// Writes the stop byte and leaves the struct.
    fn struct_end(&mut self, saved: i16);
    /// A field header (not for `bool` fields).
    fn field_begin(&mut self, ty: TType, id: i16);
    /// A whole `bool` field.
    fn bool_field(&mut self, id: i16, v: bool);
    /// A `bool` element.
    fn bool(&mut self, v: bool);
    /// An `i8`.
    fn i8(&mut self, v: i8) {
        self.out().push(v as u8);
    }
    /// An `i16`.
    fn i16(&mut self, v: i16);
    /// An `i32`.
    fn i32(&mut self, v: i32);
    /// An `i64`.
    fn i64(&mut self, v: i64);
    /// A `double`.
    fn double(&mut self, v: f64);
    /// The length prefix of a string or binary.
    fn binary_len(&mut self, len: u32);
    /// A string or binary, copied.
    fn binary(&mut self, v: &[u8]) {
        // Callers check lengths against `i32::MAX` first.
        self.binary_len(v.len() as u32);
        self.out().extend_from_slice(v);
    }
    /// A `uuid`.
    fn uuid(&mut self, v: &[u8; 16]) {
        self.out().extend_from_slice(v);
    }
    /// A list or set header with its count to come.
    fn list_begin(&mut self, elem: TType) -> usize;
    /// Patches the header written at `start` with `count`.
    fn list_end(&mut self, start: usize, elem: TType, count: u32);
    /// A map header with its count to come.
    fn map_begin(&mut self, key: TType, value: TType) -> usize;
    /// Patches the header written at `start` with `count`.
    fn map_end(&mut self, start: usize, key: TType, value: TType, count: u32);
}

/// The Binary protocol: fixed-width counts, patched in place.
#[derive(Debug)]
pub(crate) struct BinaryWire<'o> {
    pub(crate) out: &'o mut Vec<u8>,
}

impl Wire for BinaryWire<'_> {
    #[inline]
    fn out(&mut self) -> &mut Vec<u8> {
        self.out
    }
    #[inline]
    fn struct_begin(&mut self) -> i16 {
        0
    }
    #[inline]
    fn struct_end(&mut self, _saved: i16) {
        self.out.push(TType::Stop as u8);
    }
    #[inline]
    fn field_begin(&mut self, ty: TType, id: i16) {
        let [a, b] = id.to_be_bytes();
        self.out.extend_from_slice(&[ty as u8, a, b]);
    }
    #[inline]
    fn bool_field(&mut self, id: i16, v: bool) {
        self.field_begin(TType::Bool, id);
        self.bool(v);
    }
    #[inline]
    fn bool(&mut self, v: bool) {
        self.out.push(u8::from(v));
    }
    #[inline]
    fn i16(&mut self, v: i16) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    #[inline]
    fn i32(&mut self, v: i32) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    #[inline]
    fn i64(&mut self, v: i64) {
        self.out.extend_from_slice(&v.to_be_bytes());
    }
    #[inline]
    fn double(&mut self, v: f64) {
        self.out.extend_from_slice(&v.to_bits().to_be_bytes());
    }
    #[inline]
    fn binary_len(&mut self, len: u32) {
        self.out.extend_from_slice(&len.to_be_bytes());
    }
    #[inline]
    fn list_begin(&mut self, elem: TType) -> usize {
        let start = self.out.len();
        self.out.extend_from_slice(&[elem as u8, 0, 0, 0, 0]);
        start
    }
    #[inline]
    fn list_end(&mut self, start: usize, _elem: TType, count: u32) {
        self.out[start + 1..start + 5].copy_from_slice(&count.to_be_bytes());
    }
    #[inline]
    fn map_begin(&mut self, key: TType, value: TType) -> usize {
        let start = self.out.len();
        self.out
            .extend_from_slice(&[key as u8, value as u8, 0, 0, 0, 0]);
        start
    }
    #[inline]
    fn map_end(&mut self, start: usize, _key: TType, _value: TType, count: u32) {
        self.out[start + 2..start + 6].copy_from_slice(&count.to_be_bytes());
    }
}

/// The Compact protocol: a container header's width depends on its count, so the
/// header takes the width of the common case (one byte for lists of fewer than 15,
/// two for maps of fewer than 128 entries) and, when the count needs more, the
/// elements move up by the few bytes missing (one `memmove` per such container).
#[derive(Debug)]
pub(crate) struct CompactWire<'o> {
    pub(crate) out: &'o mut Vec<u8>,
    pub(crate) last_id: i16,
}

impl CompactWire<'_> {
    #[inline]
    fn header(&mut self, ctype: u8, id: i16) {
        put_field_header(self.out, ctype, self.last_id, id);
        self.last_id = id;
    }

    /// Replaces the `reserved` bytes at `start` with `header`.
    fn patch(&mut self, start: usize, reserved: usize, header: &[u8]) {
        if header.len() == reserved {
            self.out[start..start + reserved].copy_from_slice(header);
        } else {
            self.out
                .splice(start..start + reserved, header.iter().copied());
        }
    }
}

impl Wire for CompactWire<'_> {
    #[inline]
    fn out(&mut self) -> &mut Vec<u8> {
        self.out
    }
    #[inline]
    fn struct_begin(&mut self) -> i16 {
        std::mem::replace(&mut self.last_id, 0)
    }
    #[inline]
    fn struct_end(&mut self, saved: i16) {
        self.out.push(0);
        self.last_id = saved;
    }
    #[inline]
    fn field_begin(&mut self, ty: TType, id: i16) {
        self.header(compact_type(ty), id);
    }
    #[inline]
    fn bool_field(&mut self, id: i16, v: bool) {
        self.header(bool_type(v), id);
    }
    #[inline]
    fn bool(&mut self, v: bool) {
        self.out.push(bool_type(v));
    }
    #[inline]
    fn i16(&mut self, v: i16) {
        varint(self.out, u64::from(zigzag32(i32::from(v))));
    }
    #[inline]
    fn i32(&mut self, v: i32) {
        varint(self.out, u64::from(zigzag32(v)));
    }
    #[inline]
    fn i64(&mut self, v: i64) {
        varint(self.out, zigzag64(v));
    }
    #[inline]
    fn double(&mut self, v: f64) {
        self.out.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    #[inline]
    fn binary_len(&mut self, len: u32) {
        varint(self.out, u64::from(len));
    }
    #[inline]
    fn list_begin(&mut self, _elem: TType) -> usize {
        let start = self.out.len();
        self.out.push(0);
        start
    }
    fn list_end(&mut self, start: usize, elem: TType, count: u32) {
        let ctype = compact_type(elem);
        if count < 15 {
            self.out[start] = ((count as u8) << 4) | ctype;
        } else {
            let mut header = Vec::with_capacity(6);
            header.push(0xf0 | ctype);
            varint(&mut header, u64::from(count));
            self.patch(start, 1, &header);
        }
    }
    #[inline]
    fn map_begin(&mut self, _key: TType, _value: TType) -> usize {
        let start = self.out.len();
        self.out.extend_from_slice(&[0, 0]);
        start
    }
    fn map_end(&mut self, start: usize, key: TType, value: TType, count: u32) {
        if count == 0 {
            self.patch(start, 2, &[0]);
            return;
        }
        let types = (compact_type(key) << 4) | compact_type(value);
        if count < 0x80 {
            self.out[start] = count as u8;
            self.out[start + 1] = types;
        } else {
            let mut header = Vec::with_capacity(6);
            varint(&mut header, u64::from(count));
            header.push(types);
            self.patch(start, 2, &header);
        }
    }
}
