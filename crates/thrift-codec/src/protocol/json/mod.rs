//! Apache Thrift's JSON protocol (`TJSONProtocol`), byte for byte as Apache's C++
//! reference implementation writes it.
//!
//! # The format
//!
//! | Thrift | JSON |
//! |---|---|
//! | message | `[1,"name",type,seq_id,{...}]` (1 is the protocol version) |
//! | struct | `{"1":{"i32":5},"2":{"str":"hi"}}`: field id, then an object of type name and value |
//! | `bool` | `1` or `0` |
//! | integers | numbers |
//! | `double` | a number, or `"NaN"`, `"Infinity"`, `"-Infinity"` |
//! | `string` | a string |
//! | `binary` | base64 in a string |
//! | `uuid` | `"00112233-4455-6677-8899-aabbccddeeff"` |
//! | list, set | `["i32",3,1,2,3]`: element type, count, elements |
//! | map | `["str","i32",2,{"a":1,"b":2}]`: key and value types, count, an object |
//!
//! Type names: `tf`, `i8`, `i16`, `i32`, `i64`, `dbl`, `str`, `rec`, `map`, `lst`, `set`,
//! `uid`. Map keys are JSON strings, so numbers in key position are quoted (`{"1":2}`).
//!
//! # What is written
//!
//! What Apache's C++ `TJSONProtocol` writes: no whitespace; doubles as C's `%.17g`
//! (17 significant digits, as Apache's C++ and Python write them: `0.1` is
//! `0.10000000000000001`), non-finite ones as the three quoted names; strings as UTF-8
//! with `"`, `\` and the control bytes escaped (`\b \f \n \r \t`, else `\u00xx` in lower
//! case, which Apache's C++ and Java readers require); binaries in base64 without padding
//! (as C++ and Java write it; Python and Go pad, and every Apache reader takes both);
//! UUIDs in lower case.
//!
//! # What is read
//!
//! JSON as the format above describes it, checked strictly where Apache's writers all
//! agree and leniently where they differ:
//!
//! - whitespace between tokens (Apache's Go reader skips it; none of its writers emit it);
//! - numbers in JSON's grammar only (no `+`, no `1.`), but for leading zeros on
//!   integers, which Apache's Node.js library writes (`-000000000005`) and all its
//!   other readers take; in range for their type ([`NumberOutOfRange`](crate::DecodeErrorKind::NumberOutOfRange)): an `i8`
//!   of 300, a `bool` other than 0 or 1, a double literal too large to be finite;
//!   quoted in map keys and nowhere else (but for the three non-finite doubles);
//! - strings with every JSON escape (`\/`, upper-case hex, surrogate pairs; a lone
//!   surrogate is an error), and raw control bytes, which Apache's readers accept and its
//!   Python writer writes; strings are then validated as UTF-8;
//! - base64 with or without padding; a byte outside the standard alphabet, or a lone
//!   final digit, is an error; bits past the last whole byte are ignored, as Apache does;
//! - the twelve type names exactly; UUIDs as 8-4-4-4-12 hex digits in either case;
//! - message version 1 only.
//!
//! Apache's Python library writes non-finite doubles as bare `nan` and `inf`, which is not
//! JSON: no Apache reader (Python's own included) takes them back, nor does this one
//! ([`InvalidJson`](crate::DecodeErrorKind::InvalidJson)).
//!
//! # Sizing
//!
//! [`JsonSizer`] is [`JsonEncoder`]'s writer run into a counter, so a size is exact by
//! construction, but only when it sees the values: [`Wire`](crate::wire::Wire) (and so
//! generated code) calls the `*_value_len` methods of [`Sizer`](crate::Sizer), which
//! take the value. The length-only ones cannot know a double's digits or a string's
//! escapes: in JSON, [`i8_len`](crate::Sizer::i8_len) and
//! [`double_len`](crate::Sizer::double_len) count a one-digit number, and
//! [`binary_len`](crate::Sizer::binary_len) and [`bytes_len`](crate::Sizer::bytes_len) a
//! string that needs no escape (not base64). Code written by hand that should size JSON
//! exactly calls the `*_value_len` methods. [`fixed_width`](crate::Sizer::fixed_width) is
//! always `None`: no JSON value has a fixed width.
//!
//! # Zero copy
//!
//! Decoded strings without escapes are slices of the input frame; strings with escapes
//! and base64 binaries are decoded into buffers no larger than their text. An encoded
//! [`Utf8Bytes`](crate::Utf8Bytes) of at least the zero-copy threshold that needs no
//! escape is inserted as a node of its own; binaries are always copied (into base64).
//!
//! # Messages and streams
//!
//! The message's closing `]` is written after its body, by the encoder that wrote the
//! header (so write a header and its body through one encoder, as
//! [`Codec::encode_message`](crate::Codec::encode_message) does); the sizer counts it in
//! [`message_begin_len`](crate::Sizer::message_begin_len). The decoder reads the `,`
//! after the header with the header, so that the bytes left start with the body; read
//! through the same decoder, the body is followed by the `]`, which it checks. A decoder
//! over the body alone leaves that `]` unread.
//!
//! Unframed ("buffered") messages are cut out of a stream with [`MessageScanner`], which
//! finds a message's end by matching brackets. A message starts with [`MESSAGE_START`].

mod frame;
mod read;
mod scan;
mod text;
mod write;

use bytes::Bytes;

use crate::link_buffer::LinkBuffer;
use crate::protocol::{DecodeLimits, Protocol};

pub use read::JsonDecoder;
pub use scan::{MESSAGE_START, MessageScanner, message_len};
pub use write::{JsonEncoder, JsonSizer};

/// Apache Thrift's JSON protocol (marker type for [`Codec`](crate::Codec)); see the
/// [module docs](self).
///
/// ```
/// use thrift_wire::{Codec, Json, LinkBuffer, Message, MessageHeader, MessageType};
/// # use thrift_wire::{DecodeError, Decoder, Encoder, Sizer, TType};
/// # #[derive(Debug, PartialEq)]
/// # struct Ping { seq: i64 }
/// # impl Message for Ping {
/// #     fn size<S: Sizer>(&self, s: &mut S) -> usize {
/// #         let saved = s.struct_begin();
/// #         s.field_begin_len(TType::I64, 1) + s.i64_len(self.seq) + s.struct_end_len(saved)
/// #     }
/// #     fn encode<E: Encoder>(&self, e: &mut E) {
/// #         let saved = e.write_struct_begin();
/// #         e.write_field_begin(TType::I64, 1);
/// #         e.write_i64(self.seq);
/// #         e.write_struct_end(saved);
/// #     }
/// #     fn decode<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
/// #         let saved = d.read_struct_begin()?;
/// #         let mut seq = 0;
/// #         loop {
/// #             let f = d.read_field_begin()?;
/// #             match (f.id, f.ty) {
/// #                 (_, TType::Stop) => break,
/// #                 (1, TType::I64) => seq = d.read_i64()?,
/// #                 (_, ty) => d.skip(ty)?,
/// #             }
/// #         }
/// #         d.read_struct_end(saved);
/// #         Ok(Ping { seq })
/// #     }
/// # }
///
/// let codec = Codec::<Json>::new();
/// let header = MessageHeader { name: "ping".into(), ty: MessageType::Call, seq_id: 7 };
/// let mut buf = LinkBuffer::new();
/// let n = codec.encode_message(&header, &Ping { seq: 42 }, &mut buf)?;
/// let frame = buf.next(n);
/// assert_eq!(&frame[..], br#"[1,"ping",1,7,{"1":{"i64":42}}]"#);
/// assert_eq!(codec.decode_message::<Ping>(frame)?, (header, Ping { seq: 42 }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Json;

impl Protocol for Json {
    type Sizer = JsonSizer;
    type Encoder<'a> = JsonEncoder<'a>;
    type Decoder = JsonDecoder;

    fn sizer(zero_copy_threshold: usize) -> JsonSizer {
        JsonSizer::new(zero_copy_threshold)
    }

    fn encoder(buf: &mut LinkBuffer, zero_copy_threshold: usize) -> JsonEncoder<'_> {
        JsonEncoder::new(buf, zero_copy_threshold)
    }

    fn decoder(input: Bytes, limits: DecodeLimits) -> JsonDecoder {
        JsonDecoder::new(input, limits)
    }
}
