//! JSON to Thrift and back in one pass, driven by a [`Descriptor`], with no tree in
//! between: the transcoding an API gateway does between HTTP/JSON and Thrift calls.
//!
//! - [`json_to_thrift`] reads JSON text with its own streaming tokenizer and writes
//!   Binary or Compact bytes as it goes.
//! - [`thrift_to_json`] reads Binary or Compact bytes through thrift-wire's decoders
//!   (the same length, depth and UTF-8 checks as generated code) and writes JSON text
//!   as it goes.
//!
//! ```
//! use thrift_dynamic::{Descriptor, ThriftProtocol, json_to_thrift, thrift_to_json};
//!
//! let d = Descriptor::from_text(
//!     "echo.thrift",
//!     "struct Request { 1: required string action, 2: required string msg }",
//! )?;
//! let ty = d.struct_named("Request").unwrap();
//! let mut thrift = Vec::new();
//! json_to_thrift(&d, ty, br#"{"action":"echo","msg":"hi"}"#, ThriftProtocol::Compact, &mut thrift)?;
//! let mut json = Vec::new();
//! thrift_to_json(&d, ty, thrift.clone().into(), ThriftProtocol::Compact, &mut json)?;
//! assert_eq!(json, br#"{"action":"echo","msg":"hi"}"#);
//!
//! // Errors name the field path, what was expected, and the JSON byte offset.
//! let err = json_to_thrift(&d, ty, br#"{"action":1}"#, ThriftProtocol::Binary, &mut thrift)
//!     .unwrap_err();
//! assert_eq!(err.path(), "action");
//! assert_eq!(err.offset(), Some(10));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Conventions
//!
//! Kitex's JSON generic call and dynamicgo (the library its fast path uses) set the
//! mapping; where they give a choice, the default of dynamicgo's `conv.Options` is taken.
//!
//! | Thrift | JSON written | JSON read | Note |
//! |---|---|---|---|
//! | struct field | key = the field's Thrift name | same; unknown keys skipped (their syntax still checked) | as Kitex (dynamicgo's `DisallowUnknownField` off) |
//! | `bool` | `true` / `false` | booleans only | |
//! | `byte`, `i16`, `i32` | number | number, or a string holding a decimal integer; range-checked; fractions and exponents refused | |
//! | `i64` | number | number or decimal string (JavaScript clients send strings past 2^53) | number out, as dynamicgo's `Int642String` off; strings in, as its `String2Int64` |
//! | `double` | shortest text that reads back to the same value (`1.0`, `1e300`) | number, or a string holding a JSON number | |
//! | `double` NaN, ±∞ | error [`ErrorKind::NonFinite`] | cannot be written in JSON; `"NaN"` refused; numbers past `f64` range are [`ErrorKind::OutOfRange`] | as dynamicgo (`EncodeNullJSONForInfOrNan` off) |
//! | `string` | JSON string, escaping only `"`, `\` and control characters; other text as UTF-8 | any JSON string (escapes, surrogate pairs); invalid UTF-8 refused | |
//! | `binary` | base64, standard alphabet (`+/`) with `=` padding (RFC 4648 §4) | same alphabet, padded or not | as Go's `encoding/json` and dynamicgo (`NoBase64Binary` off) |
//! | `uuid` | `"00112233-4455-6677-8899-aabbccddeeff"` (lower case) | that form, either case | |
//! | enum | its number | its number, a decimal string, or one of its names; unknown names are [`ErrorKind::UnknownEnumName`]; numbers the IDL does not name pass (Thrift enums are open) | numbers as Kitex |
//! | `list`, `set` | array | array; set elements kept in the order given, duplicates not removed | |
//! | `map` | object | object | |
//! | map key: string | the string | the string | |
//! | map key: integer, enum, double | its JSON number in a string (`"42"`) | a string holding the number (enums: or a name) | JSON keys are strings |
//! | map key: `bool` | `"true"` / `"false"` | same | |
//! | map key: binary, uuid | base64 / uuid text | same | |
//! | map key: struct, list, set, map | error [`ErrorKind::UnsupportedMapKey`] | same | no JSON key form |
//! | absent or `null` field | — | `null` is absent | |
//! | absent `required` field | error [`ErrorKind::MissingRequired`] (Thrift side too, as generated code) | error naming the field | as dynamicgo (`WriteRequireField` off) |
//! | absent default-requiredness field with an IDL default | not written (JSON mirrors the wire) | written with the IDL default, as generated code sends it | |
//! | absent field without IDL default, absent `optional` | not written | not written | as dynamicgo (`WriteDefaultField`, `WriteOptionalField` off) |
//! | union | exactly one field, else [`ErrorKind::Union`] | exactly one non-`null` field, else [`ErrorKind::Union`] | |
//! | field given twice | [`ErrorKind::DuplicateField`] (a repeated wire id) | [`ErrorKind::DuplicateField`] (a repeated key) | stricter than "last wins" |
//! | unknown field id, or a known id with another wire type | skipped | — | as generated code |
//! | container of a wrong element type | [`ErrorKind::ElementType`] | — | as generated code |
//!
//! Where Kitex itself differs (checked against Kitex v0.16.3's JSON generic client,
//! both its map-based path and dynamicgo):
//!
//! - **A call's arguments.** Kitex's JSON generic call takes a method's one argument
//!   alone (`{"action":"a","msg":"b"}` for `echo(1: Request req)`) and supports one
//!   argument only; a generic call here takes the arguments struct keyed by argument
//!   name (`{"req":{...}}`), which covers any number. thrift-generic's
//!   `call_json_arg` takes Kitex's form, built on [`json_to_result`] (a struct of one
//!   field from that field's JSON).
//! - **Absent fields.** Kitex's `JSONThriftGeneric` turns on dynamicgo's
//!   `WriteDefaultField` and `WriteRequireField`: an absent field goes out as its
//!   zero value (`""` for a required string) and replies show absent fields as zero
//!   values. Here, as in dynamicgo's own defaults, an absent required field is an
//!   error and JSON mirrors the wire (a field not sent is not shown).
//! - **Declared exceptions** reach a Kitex caller as an error whose text is the
//!   exception's JSON; here as a typed error carrying the same JSON.
//!
//! # Cost model
//!
//! One pass each way: every input byte is looked at a small constant number of times
//! and no value tree is built.
//!
//! - **JSON to Thrift.** Strings without escapes are validated in place (UTF-8 with
//!   SIMD; short ASCII ones a word at a time) and copied once, from the input straight
//!   into the output behind their length. Strings with escapes are unescaped into one
//!   scratch buffer reused by the whole call, then copied into the output (two copies).
//!   Base64 is decoded straight into the output behind its exact length, computed from
//!   the text. Numbers are parsed from the input slice; integers of up to 19 digits
//!   are parsed as they are read, eight digits a step, and only other numbers are
//!   checked against the grammar first and parsed after. The output is reserved at the
//!   JSON's length up front.
//! - **Containers.** Their counts are only known at the closing bracket. Binary writes
//!   a 4-byte placeholder and patches it. Compact writes the header for the common case
//!   (one byte for a list of fewer than 15 elements, two for a map of fewer than 128
//!   entries) and patches it; a larger count needs a longer varint, and then the
//!   container's bytes are moved up by the 1–5 bytes missing, one `memmove` per such
//!   container (never a second pass over the JSON text, which a count-first scan would
//!   be: nested containers would be scanned once per level).
//! - **Thrift to JSON.** The input is one `Bytes`; thrift-wire's decoders check each
//!   length against what is left, and hand strings out as slices of it (validated as
//!   UTF-8 with SIMD). Strings are copied once into the output, in runs between the
//!   bytes that need escaping, found eight bytes at a time. Binaries are base64-encoded
//!   straight into the output.
//! - **Field names** (JSON keys) are compared first with the field after the previous
//!   key's (keys usually come in IDL order), then looked up in the descriptor's hash
//!   map; Thrift fields by id. An error's path is built only while the error travels
//!   up.
//!
//! # Limits
//!
//! Nesting (structs, lists, sets, maps; unknown JSON values skipped count too) is
//! bounded by [`MAX_DEPTH`]; strings, binaries and containers by Thrift's 32-bit
//! lengths. Thrift input lengths are checked against the bytes present before
//! anything is allocated. Neither direction panics on any input.

mod error;
mod reader;
mod result;
mod to_json;
mod to_thrift;
mod wire;

#[cfg(test)]
mod tests;

use bytes::Bytes;
use thrift_wire::{Binary, Compact, DecodeLimits, Protocol};

pub use error::{ErrorKind, TranscodeError};
pub use result::{json_to_result, result_to_json};

use crate::{Descriptor, StructId, Ty};

/// The deepest nesting of structs and containers either direction accepts.
pub const MAX_DEPTH: usize = 64;

/// Which Thrift protocol the bytes are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThriftProtocol {
    /// `TBinaryProtocol` (strict).
    Binary,
    /// `TCompactProtocol`.
    Compact,
}

/// Transcodes the JSON object `json`, a value of struct `ty`, into Thrift bytes in
/// `protocol`, appended to `out`.
///
/// On error `out` is left as it was, and the error names the field path, what was
/// expected and the JSON byte offset. The conventions are in the [module
/// docs](self#conventions).
pub fn json_to_thrift(
    desc: &Descriptor,
    ty: StructId,
    json: &[u8],
    protocol: ThriftProtocol,
    out: &mut Vec<u8>,
) -> Result<(), TranscodeError> {
    let before = out.len();
    out.reserve(json.len());
    let result = match protocol {
        ThriftProtocol::Binary => {
            from_json(json, desc, wire::BinaryWire { out: &mut *out }).run(ty)
        }
        ThriftProtocol::Compact => from_json(
            json,
            desc,
            wire::CompactWire {
                out: &mut *out,
                last_id: 0,
            },
        )
        .run(ty),
    };
    if result.is_err() {
        out.truncate(before);
    }
    result
}

/// Transcodes the Thrift struct `ty` in `thrift` (one whole value in `protocol`, not a
/// message) into JSON text appended to `out`.
///
/// On error `out` is left as it was, and the error names the field path and what was
/// wrong. The conventions are in the [module docs](self#conventions).
pub fn thrift_to_json(
    desc: &Descriptor,
    ty: StructId,
    thrift: Bytes,
    protocol: ThriftProtocol,
    out: &mut Vec<u8>,
) -> Result<(), TranscodeError> {
    let before = out.len();
    out.reserve(thrift.len() + thrift.len() / 2);
    let limits = decode_limits();
    let result = match protocol {
        ThriftProtocol::Binary => to_json::ToJson {
            d: Binary::decoder(thrift, limits),
            desc,
            out: &mut *out,
        }
        .run(ty),
        ThriftProtocol::Compact => to_json::ToJson {
            d: Compact::decoder(thrift, limits),
            desc,
            out: &mut *out,
        }
        .run(ty),
    };
    if result.is_err() {
        out.truncate(before);
    }
    result
}

/// A JSON-to-Thrift transcoder of `json` writing with `w`.
fn from_json<'a, 'd, W: wire::Wire>(
    json: &'a [u8],
    desc: &'d Descriptor,
    w: W,
) -> to_thrift::ToThrift<'a, 'd, W> {
    to_thrift::ToThrift {
        r: reader::Reader::new(json),
        desc,
        w,
        scratch: Vec::new(),
        depth: 0,
        max_depth: MAX_DEPTH,
    }
}

/// The limits Thrift input is decoded under: thrift-wire's, nesting [`MAX_DEPTH`].
fn decode_limits() -> DecodeLimits {
    DecodeLimits {
        max_depth: MAX_DEPTH,
        ..DecodeLimits::default()
    }
}

/// The fields of one struct seen so far, by position.
#[derive(Debug)]
enum Seen {
    Small(u64, usize),
    Large(Vec<u64>, usize),
}

impl Seen {
    fn new(fields: usize) -> Self {
        if fields <= 64 {
            Seen::Small(0, 0)
        } else {
            Seen::Large(vec![0; fields.div_ceil(64)], 0)
        }
    }

    /// Marks position `i`; `false` if it was marked already.
    fn insert(&mut self, i: usize) -> bool {
        let (word, count) = match self {
            Seen::Small(w, c) if i < 64 => (w, c),
            Seen::Large(v, c) => match v.get_mut(i / 64) {
                Some(w) => (w, c),
                None => return true,
            },
            Seen::Small(..) => return true,
        };
        let bit = 1u64 << (i % 64);
        if *word & bit != 0 {
            return false;
        }
        *word |= bit;
        *count += 1;
        true
    }

    fn contains(&self, i: usize) -> bool {
        let word = match self {
            Seen::Small(w, _) if i < 64 => *w,
            Seen::Large(v, _) => v.get(i / 64).copied().unwrap_or(0),
            Seen::Small(..) => 0,
        };
        word & (1u64 << (i % 64)) != 0
    }

    fn count(&self) -> usize {
        match self {
            Seen::Small(_, c) | Seen::Large(_, c) => *c,
        }
    }
}

/// How errors name a type.
fn ty_name(ty: &Ty) -> &'static str {
    match ty {
        Ty::Bool => "bool",
        Ty::I8 => "byte",
        Ty::I16 => "i16",
        Ty::I32 => "i32",
        Ty::I64 => "i64",
        Ty::Double => "double",
        Ty::String => "string",
        Ty::Binary => "binary",
        Ty::Uuid => "uuid",
        Ty::List(_) => "list",
        Ty::Set(_) => "set",
        Ty::Map(..) => "map",
        Ty::Struct(_) => "struct",
        Ty::Enum(_) => "enum (i32)",
    }
}
