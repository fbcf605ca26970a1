//! Writing JSON, and sizing it: one writer, two sinks.
//!
//! [`JsonEncoder`] runs the [`Writer`] into a [`LinkBuffer`]; [`JsonSizer`] runs the same
//! writer into a counter. Separators, quotes and closers come from one piece of code, so
//! the size is the length written by construction; only base64 is counted by formula
//! (tested against the encoder).

use std::cell::Cell;
use std::fmt;

use bytes::Bytes;

use super::frame::Frame;
use super::text;
use crate::link_buffer::LinkBuffer;
use crate::message::MessageHeader;
use crate::protocol::{Encoder, Sizer};
use crate::ttype::TType;
use crate::utf8_bytes::Utf8Bytes;

/// Where the writer's bytes go.
pub(super) trait Sink {
    /// Copies `bytes`.
    fn put(&mut self, bytes: &[u8]);
    /// Inserts `bytes` as a buffer node of their own, without copying them.
    fn node(&mut self, bytes: &Bytes);
    /// Writes `data` in base64.
    fn base64(&mut self, data: &[u8]);
}

/// A sink that counts.
#[derive(Debug, Default, Clone, Copy)]
struct Count {
    written: usize,
    zero_copy: usize,
}

impl Sink for Count {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.written = self.written.saturating_add(bytes.len());
    }
    #[inline]
    fn node(&mut self, bytes: &Bytes) {
        self.written = self.written.saturating_add(bytes.len());
        self.zero_copy = self.zero_copy.saturating_add(bytes.len());
    }
    #[inline]
    fn base64(&mut self, data: &[u8]) {
        self.written = self
            .written
            .saturating_add(text::base64_len(data.len(), false));
    }
}

/// A sink that writes into a buffer's tail (reserved by the caller).
struct Out<'a>(&'a mut LinkBuffer);

impl Sink for Out<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.0.tail_mut().extend_from_slice(bytes);
    }
    #[inline]
    fn node(&mut self, bytes: &Bytes) {
        self.0.insert(bytes.clone());
    }
    #[inline]
    fn base64(&mut self, data: &[u8]) {
        // Without padding, as Apache Thrift's C++ and Java JSON protocols write it.
        let tail = self.0.tail_mut();
        let start = tail.len();
        tail.resize(start + text::base64_len(data.len(), false), 0);
        crate::encoding::base64_encode_slice(data, false, &mut tail[start..]);
    }
}

/// The JSON writer: a stack of the open containers, and a method per thing written.
#[derive(Debug, Default)]
pub(super) struct Writer {
    frames: Vec<Frame>,
}

impl Writer {
    /// Writes what precedes a value where it stands; returns whether it is a map key.
    fn begin_value(&mut self, s: &mut impl Sink) -> bool {
        let Some(frame) = self.frames.last_mut() else {
            return false;
        };
        let slot = frame.next_value();
        if let Some(separator) = slot.separator {
            s.put(&[separator]);
        }
        slot.key
    }

    /// After a value: closes every container it completed.
    fn end_value(&mut self, s: &mut impl Sink) {
        while let Some(closer) = self.frames.last().and_then(Frame::closer) {
            s.put(closer);
            self.frames.pop();
        }
    }

    /// Writes `text` between quotes, escaped.
    fn quoted(s: &mut impl Sink, text: &[u8]) {
        s.put(b"\"");
        text::write_escaped(text, |run| s.put(run));
        s.put(b"\"");
    }

    fn number(&mut self, s: &mut impl Sink, text: &[u8], quote: bool) {
        if quote {
            s.put(b"\"");
            s.put(text);
            s.put(b"\"");
        } else {
            s.put(text);
        }
        self.end_value(s);
    }

    /// Any integer type (and `bool`, as 1 or 0): quoted as a map key.
    pub(super) fn int(&mut self, s: &mut impl Sink, v: i64) {
        let key = self.begin_value(s);
        let mut buf = [0u8; 20];
        self.number(s, text::format_int(v, &mut buf), key);
    }

    /// A double: quoted as a map key, and always when not finite ("NaN", "Infinity",
    /// "-Infinity", which JSON has no numbers for).
    pub(super) fn double(&mut self, s: &mut impl Sink, v: f64) {
        let key = self.begin_value(s);
        let special: &[u8] = if v.is_nan() {
            b"NaN"
        } else if v == f64::INFINITY {
            b"Infinity"
        } else if v == f64::NEG_INFINITY {
            b"-Infinity"
        } else {
            let mut buf = [0u8; 32];
            return self.number(s, text::format_double(v, &mut buf), key);
        };
        self.number(s, special, true);
    }

    /// A string, copied and escaped.
    pub(super) fn string(&mut self, s: &mut impl Sink, v: &[u8]) {
        self.begin_value(s);
        Self::quoted(s, v);
        self.end_value(s);
    }

    /// A string held in `Bytes`: from `threshold` bytes on, and when nothing in it needs
    /// an escape, its bytes go into the output as a node of their own (no copy).
    pub(super) fn held_string(&mut self, s: &mut impl Sink, v: &Bytes, threshold: usize) {
        if v.len() >= threshold && !v.iter().any(|&b| text::needs_escape(b)) {
            self.begin_value(s);
            s.put(b"\"");
            s.node(v);
            s.put(b"\"");
            self.end_value(s);
        } else {
            self.string(s, v);
        }
    }

    /// A value already encoded as JSON text, as it is.
    pub(super) fn encoded(&mut self, s: &mut impl Sink, v: &Bytes, threshold: usize) {
        self.begin_value(s);
        if v.len() >= threshold {
            s.node(v);
        } else {
            s.put(v);
        }
        self.end_value(s);
    }

    /// A binary, in base64.
    pub(super) fn binary(&mut self, s: &mut impl Sink, v: &[u8]) {
        self.begin_value(s);
        s.put(b"\"");
        s.base64(v);
        s.put(b"\"");
        self.end_value(s);
    }

    /// A UUID, as its text.
    pub(super) fn uuid(&mut self, s: &mut impl Sink, v: &[u8; 16]) {
        self.begin_value(s);
        let mut buf = [0u8; 36];
        text::format_uuid(v, &mut buf);
        s.put(b"\"");
        s.put(&buf);
        s.put(b"\"");
        self.end_value(s);
    }

    /// `{`: a struct's object of fields.
    pub(super) fn struct_begin(&mut self, s: &mut impl Sink) {
        self.begin_value(s);
        s.put(b"{");
        self.frames.push(Frame::Struct { field_open: false });
    }

    /// `}`, after the last field's own `}`.
    pub(super) fn struct_end(&mut self, s: &mut impl Sink) {
        if let Some(&Frame::Struct { field_open }) = self.frames.last() {
            self.frames.pop();
            if field_open {
                s.put(b"}");
            }
        }
        s.put(b"}");
        self.end_value(s);
    }

    /// `"id":{"type":`, closing the previous field first (`},`).
    pub(super) fn field_begin(&mut self, s: &mut impl Sink, ty: TType, id: i16) {
        if let Some(Frame::Struct { field_open }) = self.frames.last_mut() {
            if *field_open {
                s.put(b"},");
            }
            *field_open = true;
        }
        let mut buf = [0u8; 20];
        s.put(b"\"");
        s.put(text::format_int(id.into(), &mut buf));
        s.put(b"\":{\"");
        s.put(text::type_name(ty));
        s.put(b"\":");
    }

    /// `["type",len`; the elements follow, then `]`.
    pub(super) fn list_begin(&mut self, s: &mut impl Sink, elem: TType, len: usize) {
        self.begin_value(s);
        s.put(b"[\"");
        s.put(text::type_name(elem));
        s.put(b"\",");
        let mut buf = [0u8; 20];
        s.put(text::format_int(len as i64, &mut buf));
        self.frames.push(Frame::list(len));
        self.end_value(s);
    }

    /// `["key","value",len,{`; the entries follow, then `}]`.
    pub(super) fn map_begin(&mut self, s: &mut impl Sink, key: TType, value: TType, len: usize) {
        self.begin_value(s);
        s.put(b"[\"");
        s.put(text::type_name(key));
        s.put(b"\",\"");
        s.put(text::type_name(value));
        s.put(b"\",");
        let mut buf = [0u8; 20];
        s.put(text::format_int(len as i64, &mut buf));
        s.put(b",{");
        self.frames.push(Frame::map(len));
        self.end_value(s);
    }

    /// `[1,"name",type,seq_id,`: the body follows, then `]` (written once the body is,
    /// when `close_after_body`).
    pub(super) fn message_begin(
        &mut self,
        s: &mut impl Sink,
        header: &MessageHeader,
        close_after_body: bool,
    ) {
        // A message starts a document of its own.
        self.frames.clear();
        s.put(b"[1,");
        Self::quoted(s, header.name.as_bytes());
        let mut buf = [0u8; 20];
        s.put(b",");
        s.put(text::format_int((header.ty as u8).into(), &mut buf));
        s.put(b",");
        s.put(text::format_int(header.seq_id.into(), &mut buf));
        s.put(b",");
        if close_after_body {
            self.frames.push(Frame::Message { body_begun: false });
        }
    }
}

// ---------------------------------------------------------------------------------------
// The sizer

/// Sizing for the JSON protocol: the [`JsonEncoder`]'s writer run into a counter.
///
/// The [`Sizer`] trait takes `&self` for most values, so the writer's state sits in a
/// `Cell`, taken out and put back around each call.
pub struct JsonSizer {
    zero_copy_threshold: usize,
    state: Cell<SizerState>,
}

#[derive(Debug, Default)]
struct SizerState {
    writer: Writer,
    count: Count,
}

impl JsonSizer {
    pub(super) fn new(zero_copy_threshold: usize) -> Self {
        JsonSizer {
            zero_copy_threshold,
            state: Cell::default(),
        }
    }

    /// Runs `write` against the counter; returns the bytes it wrote.
    fn measure(&self, write: impl FnOnce(&mut Writer, &mut Count)) -> usize {
        let mut state = self.state.take();
        let before = state.count.written;
        write(&mut state.writer, &mut state.count);
        let written = state.count.written.saturating_sub(before);
        self.state.set(state);
        written
    }

    /// A string or binary of `len` bytes that the caller did not show: sized as a string
    /// that needs no escapes (see the [module docs](super)).
    fn unseen_string(&self, len: usize) -> usize {
        self.measure(|w, c| {
            w.begin_value(c);
            c.written = c.written.saturating_add(len.saturating_add(2));
            w.end_value(c);
        })
    }
}

impl fmt::Debug for JsonSizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.take();
        let out = f
            .debug_struct("JsonSizer")
            .field("zero_copy_threshold", &self.zero_copy_threshold)
            .field("written", &state.count.written)
            .field("zero_copy", &state.count.zero_copy)
            .field("open", &state.writer.frames.len())
            .finish();
        self.state.set(state);
        out
    }
}

impl Sizer for JsonSizer {
    fn message_begin_len(&mut self, header: &MessageHeader) -> usize {
        // The closing `]` is counted here, so that a header and a body sized apart add
        // up; the encoder writes it after the body.
        self.measure(|w, c| w.message_begin(c, header, false)) + 1
    }
    fn struct_begin(&mut self) -> i16 {
        // The opening (a separator and `{`, at most 2 bytes) is handed back to
        // `struct_end_len`, which counts it.
        self.measure(|w, c| w.struct_begin(c)) as i16
    }
    fn struct_end_len(&mut self, saved: i16) -> usize {
        saved.max(0) as usize + self.measure(|w, c| w.struct_end(c))
    }
    fn field_begin_len(&mut self, ty: TType, id: i16) -> usize {
        self.measure(|w, c| w.field_begin(c, ty, id))
    }
    fn bool_field_len(&mut self, id: i16) -> usize {
        self.measure(|w, c| {
            w.field_begin(c, TType::Bool, id);
            w.int(c, 0);
        })
    }
    fn bool_len(&self) -> usize {
        // `0` and `1` have the same width.
        self.measure(|w, c| w.int(c, 0))
    }
    fn i8_len(&self) -> usize {
        // Exact only for one-digit values: see `i8_value_len`.
        self.measure(|w, c| w.int(c, 0))
    }
    fn i16_len(&self, v: i16) -> usize {
        self.measure(|w, c| w.int(c, v.into()))
    }
    fn i32_len(&self, v: i32) -> usize {
        self.measure(|w, c| w.int(c, v.into()))
    }
    fn i64_len(&self, v: i64) -> usize {
        self.measure(|w, c| w.int(c, v))
    }
    fn double_len(&self) -> usize {
        // Exact only for one-digit values: see `double_value_len`.
        self.measure(|w, c| w.double(c, 0.0))
    }
    fn uuid_len(&self) -> usize {
        self.measure(|w, c| w.uuid(c, &[0; 16]))
    }
    fn binary_len(&self, len: usize) -> usize {
        self.unseen_string(len)
    }
    fn bytes_len(&mut self, len: usize) -> usize {
        self.unseen_string(len)
    }
    fn list_begin_len(&self, elem: TType, len: usize) -> usize {
        self.measure(|w, c| w.list_begin(c, elem, len))
    }
    fn map_begin_len(&self, key: TType, value: TType, len: usize) -> usize {
        self.measure(|w, c| w.map_begin(c, key, value, len))
    }
    fn i32_slice_len(&self, v: &[i32]) -> usize {
        self.measure(|w, c| v.iter().for_each(|&x| w.int(c, x.into())))
    }
    fn i64_slice_len(&self, v: &[i64]) -> usize {
        self.measure(|w, c| v.iter().for_each(|&x| w.int(c, x)))
    }
    fn f64_slice_len(&self, v: &[f64]) -> usize {
        self.measure(|w, c| v.iter().for_each(|&x| w.double(c, x)))
    }
    fn i8_value_len(&mut self, v: i8) -> usize {
        self.measure(|w, c| w.int(c, v.into()))
    }
    fn double_value_len(&mut self, v: f64) -> usize {
        self.measure(|w, c| w.double(c, v))
    }
    fn str_value_len(&mut self, v: &str) -> usize {
        self.measure(|w, c| w.string(c, v.as_bytes()))
    }
    fn binary_value_len(&mut self, v: &[u8]) -> usize {
        self.measure(|w, c| w.binary(c, v))
    }
    fn string_value_len(&mut self, v: &Utf8Bytes) -> usize {
        let threshold = self.zero_copy_threshold;
        self.measure(|w, c| w.held_string(c, v.as_bytes(), threshold))
    }
    fn bytes_value_len(&mut self, v: &Bytes) -> usize {
        self.measure(|w, c| w.binary(c, v))
    }
    fn encoded_len(&mut self, v: &Bytes) -> usize {
        let threshold = self.zero_copy_threshold;
        self.measure(|w, c| w.encoded(c, v, threshold))
    }
    fn zero_copy_len(&self) -> usize {
        let state = self.state.take();
        let zero_copy = state.count.zero_copy;
        self.state.set(state);
        zero_copy
    }
    fn fixed_width(&self, _ty: TType) -> Option<usize> {
        // Numbers are as wide as their digits, and containers carry separators: no
        // element width is known without the element.
        None
    }
}

// ---------------------------------------------------------------------------------------
// The encoder

/// Writes the JSON protocol into a [`LinkBuffer`].
#[derive(Debug)]
pub struct JsonEncoder<'a> {
    buf: &'a mut LinkBuffer,
    writer: Writer,
    zero_copy_threshold: usize,
}

impl<'a> JsonEncoder<'a> {
    pub(super) fn new(buf: &'a mut LinkBuffer, zero_copy_threshold: usize) -> Self {
        JsonEncoder {
            buf,
            writer: Writer::default(),
            zero_copy_threshold,
        }
    }

    /// Runs `write` against the buffer.
    #[inline]
    fn out(&mut self, write: impl FnOnce(&mut Writer, &mut Out<'_>)) {
        write(&mut self.writer, &mut Out(self.buf));
    }
}

impl Encoder for JsonEncoder<'_> {
    fn write_message_begin(&mut self, header: &MessageHeader) {
        self.out(|w, o| w.message_begin(o, header, true));
    }
    fn write_struct_begin(&mut self) -> i16 {
        self.out(|w, o| w.struct_begin(o));
        0
    }
    fn write_struct_end(&mut self, _saved: i16) {
        self.out(|w, o| w.struct_end(o));
    }
    fn write_field_begin(&mut self, ty: TType, id: i16) {
        self.out(|w, o| w.field_begin(o, ty, id));
    }
    fn write_bool_field(&mut self, id: i16, v: bool) {
        self.out(|w, o| {
            w.field_begin(o, TType::Bool, id);
            w.int(o, v.into());
        });
    }
    fn write_bool(&mut self, v: bool) {
        self.out(|w, o| w.int(o, v.into()));
    }
    fn write_i8(&mut self, v: i8) {
        self.out(|w, o| w.int(o, v.into()));
    }
    fn write_i16(&mut self, v: i16) {
        self.out(|w, o| w.int(o, v.into()));
    }
    fn write_i32(&mut self, v: i32) {
        self.out(|w, o| w.int(o, v.into()));
    }
    fn write_i64(&mut self, v: i64) {
        self.out(|w, o| w.int(o, v));
    }
    fn write_double(&mut self, v: f64) {
        self.out(|w, o| w.double(o, v));
    }
    fn write_uuid(&mut self, v: &[u8; 16]) {
        self.out(|w, o| w.uuid(o, v));
    }
    fn write_binary(&mut self, v: &[u8]) {
        self.out(|w, o| w.binary(o, v));
    }
    fn write_bytes(&mut self, v: &Bytes) {
        self.out(|w, o| w.binary(o, v));
    }
    fn write_string(&mut self, v: &Utf8Bytes) {
        let threshold = self.zero_copy_threshold;
        self.out(|w, o| w.held_string(o, v.as_bytes(), threshold));
    }
    fn write_str(&mut self, v: &str) {
        self.out(|w, o| w.string(o, v.as_bytes()));
    }
    fn write_encoded(&mut self, v: &Bytes) {
        let threshold = self.zero_copy_threshold;
        self.out(|w, o| w.encoded(o, v, threshold));
    }
    fn write_list_begin(&mut self, elem: TType, len: usize) {
        self.out(|w, o| w.list_begin(o, elem, len));
    }
    fn write_map_begin(&mut self, key: TType, value: TType, len: usize) {
        self.out(|w, o| w.map_begin(o, key, value, len));
    }
    fn write_i32_slice(&mut self, v: &[i32]) {
        self.out(|w, o| v.iter().for_each(|&x| w.int(o, x.into())));
    }
    fn write_i64_slice(&mut self, v: &[i64]) {
        self.out(|w, o| v.iter().for_each(|&x| w.int(o, x)));
    }
    fn write_f64_slice(&mut self, v: &[f64]) {
        self.out(|w, o| v.iter().for_each(|&x| w.double(o, x)));
    }
}
