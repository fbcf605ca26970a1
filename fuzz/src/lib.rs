//! What the fuzz targets share: how an input selects a protocol and a fixture type, the
//! round-trip check every successfully decoded value must pass, and the seed values.
//!
//! An input is one selector byte followed by the bytes to decode:
//!
//! | bits  | meaning                                                          |
//! |-------|------------------------------------------------------------------|
//! | 0     | protocol: 0 Binary, 1 Compact                                    |
//! | 1..=3 | fixture type, an index into [`Target::ALL`] (modulo its length) |
//! | 6     | accept non-strict Binary message headers                         |
//! | 7     | nesting limit of 4 instead of the default 64                     |
//!
//! The targets themselves are one line each (`fuzz_targets/`); the logic lives here so
//! that it compiles, and can be run on a crash input, on the stable toolchain. The `idl`
//! target, for codegen, is in [`idl`]; the `json` target, for the JSON protocol (same
//! selector byte, protocol bit ignored), in [`json`]; the `theader` one, for volo-core's
//! Apache THeader framing, in [`theader`]; `stream_frame`, for its TTHeader stream
//! frames, in [`stream`]; `json_to_thrift` and `thrift_to_json`, for
//! thrift-dynamic's JSON transcoder, in [`transcode`]; the `path` one, for its field
//! paths, in [`path`].
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

pub mod idl;
pub mod json;
pub mod path;
pub mod stream;
pub mod theader;
pub mod transcode;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

use bytes::Bytes;
use thrift_wire::fixtures::echo::{Ano, Ids, MyTest, Request};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::{
    ApplicationException, ApplicationExceptionKind, Binary, Codec, Compact, Decoder, Json,
    LinkBuffer, Message, MessageHeader, MessageType, Protocol, Sizer, TType, Utf8Bytes,
};

/// The fixture type an input is decoded as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `echo.Request` (two required strings).
    Request,
    /// `echo.MyTest` (an i64, a nested struct, a `list<i64>`).
    MyTest,
    /// `echo.Ids` (`list<i32>`, `list<i64>`, `list<double>`, binary).
    Ids,
    /// `mixed.Mixed` (every base type and container).
    Mixed,
    /// `TApplicationException`.
    ApplicationException,
    /// A message header followed by an `echo.Request`.
    CallRequest,
}

impl Target {
    /// Every target, in selector order.
    pub const ALL: [Target; 6] = [
        Target::Request,
        Target::MyTest,
        Target::Ids,
        Target::Mixed,
        Target::ApplicationException,
        Target::CallRequest,
    ];
}

/// The settings an input's first byte selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selector {
    /// Compact rather than Binary.
    pub compact: bool,
    /// The type to decode.
    pub target: Target,
    /// Accept non-strict Binary message headers.
    pub non_strict: bool,
    /// Use a nesting limit of 4.
    pub shallow: bool,
}

impl Selector {
    /// The settings of a selector byte (every byte selects something).
    pub fn from_byte(b: u8) -> Self {
        Selector {
            compact: b & 1 != 0,
            target: Target::ALL[usize::from((b >> 1) & 7) % Target::ALL.len()],
            non_strict: b & 0x40 != 0,
            shallow: b & 0x80 != 0,
        }
    }

    /// The selector byte for these settings.
    pub fn to_byte(self) -> u8 {
        let index = Target::ALL
            .iter()
            .position(|&t| t == self.target)
            .unwrap_or(0) as u8;
        u8::from(self.compact)
            | (index << 1)
            | if self.non_strict { 0x40 } else { 0 }
            | if self.shallow { 0x80 } else { 0 }
    }

    /// Splits an input into its settings and the bytes to decode.
    pub fn split(data: &[u8]) -> Option<(Selector, Bytes)> {
        let (&first, rest) = data.split_first()?;
        Some((Selector::from_byte(first), Bytes::copy_from_slice(rest)))
    }

    /// A codec with these settings, in protocol `P`.
    pub fn codec<P: Protocol>(self) -> Codec<P> {
        let codec = Codec::new().accept_non_strict(self.non_strict);
        if self.shallow {
            codec.max_depth(4)
        } else {
            codec
        }
    }
}

/// Encodes `value`, checking that it takes exactly `codec.size(value)` bytes.
pub fn encode<P: Protocol, M: Message>(codec: Codec<P>, value: &M) -> Bytes {
    let size = codec.size(value);
    let mut buf = LinkBuffer::new();
    let written = codec
        .encode(value, &mut buf)
        .expect("a decoded value fits the size limit");
    assert_eq!(written, size, "encode reports the size the sizer computed");
    assert_eq!(buf.len(), size, "encode writes the size the sizer computed");
    buf.next(size)
}

/// Whether `v == v` (false for values holding a NaN, which equal nothing).
fn reflexive<T: PartialEq>(v: &T) -> bool {
    let same = v;
    v == same
}

/// The round-trip property of a decoded value: it re-encodes to exactly its size, that
/// encoding decodes to an equal value (compared by encoding when a NaN makes `==`
/// useless), and encoding is deterministic.
pub fn roundtrip<P: Protocol, M: Message + PartialEq + Debug>(codec: Codec<P>, value: &M) {
    let first = encode(codec, value);
    let again: M = match codec.decode(first.clone()) {
        Ok(v) => v,
        Err(e) => panic!("re-encoded {value:?} does not decode: {e}\n{first:02x?}"),
    };
    if reflexive(value) {
        assert_eq!(&again, value, "decode(encode(v)) == v");
    }
    let second = encode(codec, &again);
    assert_eq!(first, second, "encoding is deterministic");
}

/// [`roundtrip`] for a message header and its body.
pub fn roundtrip_message<P: Protocol, M: Message + PartialEq + Debug>(
    codec: Codec<P>,
    header: &MessageHeader,
    body: &M,
) {
    let mut sizer = codec.sizer();
    let size = sizer.message_begin_len(header) + body.size(&mut sizer);
    let mut buf = LinkBuffer::new();
    let written = codec
        .encode_message(header, body, &mut buf)
        .expect("a decoded message fits the size limit");
    assert_eq!(written, size);
    assert_eq!(buf.len(), size);
    let bytes = buf.next(size);
    let (header2, body2) = match codec.decode_message::<M>(bytes.clone()) {
        Ok(v) => v,
        Err(e) => panic!("re-encoded {header:?} {body:?} does not decode: {e}\n{bytes:02x?}"),
    };
    assert_eq!(&header2, header);
    assert_eq!(&body2, body);
}

/// Decodes `input` as `M`; if that succeeds, skipping it as a struct must succeed at the
/// same length, and the value must round-trip.
fn decode_value<P: Protocol, M: Message + PartialEq + Debug>(codec: Codec<P>, input: Bytes) {
    let Ok(value) = codec.decode::<M>(input.clone()) else {
        return;
    };
    let mut d = codec.decoder(input).expect("within the size limit");
    if let Err(e) = d.skip(TType::Struct) {
        panic!("{value:?} decodes but does not skip: {e}");
    }
    assert_eq!(d.remaining(), 0, "skip consumes what decode consumed");
    roundtrip(codec, &value);
}

/// As [`decode_value`], for a message header and a `Request`.
fn decode_call<P: Protocol>(codec: Codec<P>, input: Bytes) {
    let Ok((header, body)) = codec.decode_message::<Request>(input.clone()) else {
        return;
    };
    let mut d = codec.decoder(input).expect("within the size limit");
    d.read_message_begin().expect("the header decoded once");
    if let Err(e) = d.skip(TType::Struct) {
        panic!("{body:?} decodes but does not skip: {e}");
    }
    assert_eq!(d.remaining(), 0, "skip consumes what decode consumed");
    roundtrip_message(codec, &header, &body);
}

pub(crate) fn decode_in<P: Protocol>(sel: Selector, input: Bytes) {
    let codec = sel.codec::<P>();
    match sel.target {
        Target::Request => decode_value::<P, Request>(codec, input),
        Target::MyTest => decode_value::<P, MyTest>(codec, input),
        Target::Ids => decode_value::<P, Ids>(codec, input),
        Target::Mixed => decode_value::<P, Mixed>(codec, input),
        Target::ApplicationException => decode_value::<P, ApplicationException>(codec, input),
        Target::CallRequest => decode_call::<P>(codec, input),
    }
}

/// The `decode` target: typed decoding, and the round trip of whatever decodes.
pub fn fuzz_decode(data: &[u8]) {
    let Some((sel, input)) = Selector::split(data) else {
        return;
    };
    if sel.compact {
        decode_in::<Compact>(sel, input);
    } else {
        decode_in::<Binary>(sel, input);
    }
}

/// Every type id a `skip` can be asked for.
pub const ALL_TYPES: [TType; 14] = [
    TType::Stop,
    TType::Void,
    TType::Bool,
    TType::I8,
    TType::Double,
    TType::I16,
    TType::I32,
    TType::I64,
    TType::Binary,
    TType::Struct,
    TType::Map,
    TType::Set,
    TType::List,
    TType::Uuid,
];

fn skip_in<P: Protocol>(sel: Selector, input: Bytes) {
    let codec = sel.codec::<P>();
    let len = input.len();
    for ty in ALL_TYPES {
        let mut d = codec.decoder(input.clone()).expect("within the size limit");
        let result = d.skip(ty);
        let remaining = d.remaining();
        assert!(remaining <= len, "skip consumed no more than the input");
        if matches!(ty, TType::Stop | TType::Void) {
            assert!(result.is_err(), "{ty:?} is no value to skip");
        }
        // A fixed-width value consumes exactly its width.
        let width = match ty {
            TType::Bool | TType::I8 => Some(1),
            TType::Double => Some(8),
            TType::Uuid => Some(16),
            TType::I16 if !sel.compact => Some(2),
            TType::I32 if !sel.compact => Some(4),
            TType::I64 if !sel.compact => Some(8),
            _ => None,
        };
        if let (Ok(()), Some(width)) = (&result, width) {
            assert_eq!(len - remaining, width, "{ty:?} is {width} bytes");
        }
    }
    // The selected struct (after its header, for a message): where typed decoding
    // succeeds, skipping agrees, and the value round-trips.
    decode_in::<P>(sel, input.clone());
    let mut d = codec.decoder(input).expect("within the size limit");
    if sel.target == Target::CallRequest && d.read_message_begin().is_err() {
        return;
    }
    if d.skip(TType::Struct).is_ok() {
        assert!(d.remaining() <= len);
    }
}

/// The `skip` target: skipping as every type, and agreement with typed decoding.
pub fn fuzz_skip(data: &[u8]) {
    let Some((sel, input)) = Selector::split(data) else {
        return;
    };
    if sel.compact {
        skip_in::<Compact>(sel, input);
    } else {
        skip_in::<Binary>(sel, input);
    }
}

/// Sample values for the seed corpus: defaults and fully populated values.
fn request() -> Request {
    Request {
        action: Utf8Bytes::from_static("echo"),
        msg: Utf8Bytes::from_static("hello, world"),
    }
}

fn ids() -> Ids {
    Ids {
        ids32: vec![0, 1, -1, i32::MAX, i32::MIN],
        ids64: (0..17).map(|i| i64::MAX - i).collect(),
        scores: vec![0.0, -0.0, 1.5, f64::INFINITY],
        blob: Bytes::from_static(&[0xff, 0x00, 0x80]),
    }
}

fn mixed() -> Mixed {
    Mixed {
        id: -1,
        name: Utf8Bytes::from_static("mixed"),
        flag: true,
        tiny: -128,
        small: -300,
        count: 70_000,
        ratio: 0.25,
        requests: vec![request(), Request::default()],
        counters: BTreeMap::from([
            (Utf8Bytes::from_static("a"), 1),
            (Utf8Bytes::from_static("bb"), -1),
        ]),
        tags: BTreeSet::from([-5, 0, 7]),
        labels: (0..16).map(|i| Utf8Bytes::from(format!("l{i}"))).collect(),
        payload: Some(Bytes::from_static(b"payload")),
        ids: ids(),
    }
}

fn seed_encodings<P: Protocol>() -> Vec<(Target, Bytes)> {
    let codec = Codec::<P>::new();
    let header = MessageHeader {
        name: Utf8Bytes::from_static("echo"),
        ty: MessageType::Call,
        seq_id: 7,
    };
    let mut message = LinkBuffer::new();
    let n = codec
        .encode_message(&header, &request(), &mut message)
        .expect("small");
    vec![
        (Target::Request, encode(codec, &request())),
        (Target::Request, encode(codec, &Request::default())),
        (
            Target::MyTest,
            encode(
                codec,
                &MyTest {
                    num: i64::MIN,
                    ano: Ano { num: 42 },
                    nums: (0..20).collect(),
                },
            ),
        ),
        (Target::MyTest, encode(codec, &MyTest::default())),
        (Target::Ids, encode(codec, &ids())),
        (Target::Ids, encode(codec, &Ids::default())),
        (Target::Mixed, encode(codec, &mixed())),
        (Target::Mixed, encode(codec, &Mixed::default())),
        (
            Target::ApplicationException,
            encode(
                codec,
                &ApplicationException::new(
                    ApplicationExceptionKind::UnknownMethod,
                    "no such method",
                ),
            ),
        ),
        (Target::CallRequest, message.next(n)),
    ]
}

/// The seed inputs (selector byte and encoding) for the `decode` and `skip` targets:
/// every sample value in both binary protocols.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = with_selectors(false, seed_encodings::<Binary>());
    out.extend(with_selectors(true, seed_encodings::<Compact>()));
    out
}

/// The seed inputs of the `json` target: every sample value in JSON.
pub fn json_seeds() -> Vec<Vec<u8>> {
    with_selectors(false, seed_encodings::<Json>())
}

fn with_selectors(compact: bool, encodings: Vec<(Target, Bytes)>) -> Vec<Vec<u8>> {
    encodings
        .into_iter()
        .map(|(target, bytes)| {
            let sel = Selector {
                compact,
                target,
                non_strict: false,
                shallow: false,
            };
            let mut input = vec![sel.to_byte()];
            input.extend_from_slice(&bytes);
            input
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_bytes_round_trip() {
        for b in 0..=u8::MAX {
            let sel = Selector::from_byte(b);
            assert_eq!(Selector::from_byte(sel.to_byte()), sel, "{b:#x}");
        }
    }

    #[test]
    fn seeds_decode_and_pass_both_targets() {
        for seed in seeds() {
            let (sel, input) = Selector::split(&seed).unwrap();
            let decodes = if sel.compact {
                decodes_in::<Compact>(sel, input)
            } else {
                decodes_in::<Binary>(sel, input)
            };
            assert!(decodes, "{sel:?}");
            fuzz_decode(&seed);
            fuzz_skip(&seed);
        }
    }

    fn decodes_in<P: Protocol>(sel: Selector, input: Bytes) -> bool {
        let codec = sel.codec::<P>();
        match sel.target {
            Target::Request => codec.decode::<Request>(input).is_ok(),
            Target::MyTest => codec.decode::<MyTest>(input).is_ok(),
            Target::Ids => codec.decode::<Ids>(input).is_ok(),
            Target::Mixed => codec.decode::<Mixed>(input).is_ok(),
            Target::ApplicationException => codec.decode::<ApplicationException>(input).is_ok(),
            Target::CallRequest => codec.decode_message::<Request>(input).is_ok(),
        }
    }
}
