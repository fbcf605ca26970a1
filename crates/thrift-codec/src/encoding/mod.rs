//! The wire's building blocks, for code that reads or writes Thrift bytes without
//! [`Codec`](crate::Codec): varints and zigzag, the Compact protocol's type ids and
//! field headers, skipping a value, and the text forms of values (JSON string escapes,
//! base64, UUIDs).
//!
//! The protocols of this crate are built from them, and so are `thrift-dynamic`'s
//! transcoder and field paths and `volo-core`'s TTHeader: one definition of each rule
//! of the wire, tested here.
//!
//! ```
//! use thrift_wire::encoding::{self, CT_TRUE};
//! use thrift_wire::TType;
//!
//! // An i32 field with id 3, the first of its struct, holding -2 in Compact.
//! let mut out = Vec::new();
//! encoding::put_field_header(&mut out, encoding::compact_type(TType::I32), 0, 3);
//! encoding::put_varint(&mut out, u64::from(encoding::zigzag32(-2)));
//! assert_eq!(out, [0x35, 0x03]);
//!
//! let (v, len) = encoding::decode_varint(&out[1..], encoding::MAX_VARINT32_LEN).unwrap();
//! assert_eq!((encoding::unzigzag32(v as u32), len), (-2, 1));
//! assert_eq!(encoding::ttype_of_compact(CT_TRUE), Some(TType::Bool));
//!
//! // A JSON string's content, escaped and back.
//! let mut text = Vec::new();
//! encoding::write_escaped(b"a\"b\n", |run| text.extend_from_slice(run));
//! assert_eq!(text, br#"a\"b\n"#);
//! let mut back = Vec::new();
//! encoding::unescape(&text, &mut back).unwrap();
//! assert_eq!(back, b"a\"b\n");
//! ```

mod compact;
mod text;
mod varint;

pub use compact::{
    CT_FALSE, CT_STOP, CT_TRUE, MAX_FIELD_HEADER_LEN, bool_type, compact_type, encode_field_header,
    field_delta, field_header_len, put_field_header, ttype_of_compact,
};
pub use text::{
    EscapeError, UUID_TEXT_LEN, base64_decode, base64_decoded_len, base64_encode,
    base64_encode_slice, base64_len, decode_escape, escape_len, find_escape, format_uuid,
    needs_escape, parse_uuid, unescape, write_escaped,
};
pub use varint::{
    MAX_VARINT_LEN, MAX_VARINT32_LEN, VarintError, decode_varint, encode_varint, put_varint,
    unzigzag32, unzigzag64, varint_len, zigzag32, zigzag64,
};

/// Skips one value of a type over any protocol's decoder, nesting bounded by its limits.
pub use crate::protocol::skip_value;
