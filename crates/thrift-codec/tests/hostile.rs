//! Hostile input: the classes of bug behind known Thrift decoder CVEs, run against both
//! protocols, each asserting the typed error (and, inside a fixture field, its path).
//!
//! The hostile bytes are written by hand from the Thrift spec with [`Wire`], never with
//! the crate's encoder (which is only used to produce valid fixture encodings to cut and
//! mutate). A counting global allocator checks that lengths read from the wire are never
//! trusted for an allocation before the bytes behind them have been seen.

use std::collections::{BTreeMap, BTreeSet};

use thrift_wire::bytes::Bytes;
use thrift_wire::fixtures::echo::{Ano, EchoError, Ids, MyTest, Request, Response};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::{
    ApplicationException, ApplicationExceptionKind, Binary, Codec, Compact, DecodeError,
    DecodeErrorKind, Decoder, LinkBuffer, Message, MessageHeader, MessageType, Protocol, TType,
    Utf8Bytes,
};

#[path = "util/hostile.rs"]
#[macro_use]
mod support;
use support::{
    Rng, allocation_budget, assert_fails, assert_length_refused, err, largest_allocation, mutate,
};

// ---------------------------------------------------------------------------------------
// Protocols and decoding
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    Binary,
    Compact,
}

const PROTOS: [Proto; 2] = [Proto::Binary, Proto::Compact];

/// Codec settings a test may change; the defaults are `Codec::new()`'s.
#[derive(Debug, Clone, Copy)]
struct Opts {
    max_depth: usize,
    max_size: usize,
    non_strict: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            max_depth: thrift_wire::DEFAULT_MAX_DEPTH,
            max_size: i32::MAX as usize,
            non_strict: false,
        }
    }
}

impl Opts {
    fn depth(max_depth: usize) -> Self {
        Opts {
            max_depth,
            ..Opts::default()
        }
    }

    fn codec<P: Protocol>(self) -> Codec<P> {
        Codec::new()
            .max_depth(self.max_depth)
            .max_size(self.max_size)
            .accept_non_strict(self.non_strict)
    }
}

fn skip_with<P: Protocol>(codec: Codec<P>, ty: TType, input: Bytes) -> Result<usize, DecodeError> {
    let mut d = codec.decoder(input)?;
    d.skip(ty)?;
    Ok(d.remaining())
}

fn encode_with<P: Protocol, M: Message>(value: &M) -> Vec<u8> {
    let mut buf = LinkBuffer::new();
    let n = Codec::<P>::new().encode(value, &mut buf).unwrap();
    buf.next(n).to_vec()
}

fn encode_message_with<P: Protocol, M: Message>(header: &MessageHeader, body: &M) -> Vec<u8> {
    let mut buf = LinkBuffer::new();
    let n = Codec::<P>::new()
        .encode_message(header, body, &mut buf)
        .unwrap();
    buf.next(n).to_vec()
}

impl Proto {
    fn decode<M: Message>(self, input: &[u8]) -> Result<M, DecodeError> {
        self.decode_opts(Opts::default(), input)
    }

    fn decode_opts<M: Message>(self, opts: Opts, input: &[u8]) -> Result<M, DecodeError> {
        let input = Bytes::copy_from_slice(input);
        match self {
            Proto::Binary => opts.codec::<Binary>().decode(input),
            Proto::Compact => opts.codec::<Compact>().decode(input),
        }
    }

    fn decode_message<M: Message>(
        self,
        opts: Opts,
        input: &[u8],
    ) -> Result<(MessageHeader, M), DecodeError> {
        let input = Bytes::copy_from_slice(input);
        match self {
            Proto::Binary => opts.codec::<Binary>().decode_message(input),
            Proto::Compact => opts.codec::<Compact>().decode_message(input),
        }
    }

    /// Skips one value of `ty` at the start of `input`; returns the bytes left after it.
    fn skip(self, opts: Opts, ty: TType, input: &[u8]) -> Result<usize, DecodeError> {
        let input = Bytes::copy_from_slice(input);
        match self {
            Proto::Binary => skip_with(opts.codec::<Binary>(), ty, input),
            Proto::Compact => skip_with(opts.codec::<Compact>(), ty, input),
        }
    }

    fn encode<M: Message>(self, value: &M) -> Vec<u8> {
        match self {
            Proto::Binary => encode_with::<Binary, M>(value),
            Proto::Compact => encode_with::<Compact, M>(value),
        }
    }

    fn encode_message<M: Message>(self, header: &MessageHeader, body: &M) -> Vec<u8> {
        match self {
            Proto::Binary => encode_message_with::<Binary, M>(header, body),
            Proto::Compact => encode_message_with::<Compact, M>(header, body),
        }
    }

    /// The type id of `ty` on the wire (Compact: its nibble; `bool` as in containers).
    fn type_id(self, ty: TType) -> u8 {
        match self {
            Proto::Binary => ty as u8,
            Proto::Compact => match ty {
                TType::Stop | TType::Void => 0,
                TType::Bool => 1,
                TType::I8 => 3,
                TType::I16 => 4,
                TType::I32 => 5,
                TType::I64 => 6,
                TType::Double => 7,
                TType::Binary => 8,
                TType::List => 9,
                TType::Set => 10,
                TType::Map => 11,
                TType::Struct => 12,
                TType::Uuid => 13,
            },
        }
    }
}

// ---------------------------------------------------------------------------------------
// Writing the wire formats by hand (from the Thrift spec, not the crate's encoder)
// ---------------------------------------------------------------------------------------

/// A byte writer for either protocol. Compact field ids are written as deltas from the
/// previous field of the same struct, so structs are opened with [`Wire::begin`] and
/// closed with [`Wire::end`] (the stop byte).
struct Wire {
    proto: Proto,
    out: Vec<u8>,
    last_id: i16,
    outer_ids: Vec<i16>,
}

impl Wire {
    fn new(proto: Proto) -> Self {
        Wire {
            proto,
            out: Vec::new(),
            last_id: 0,
            outer_ids: Vec::new(),
        }
    }

    fn bytes(&self) -> Vec<u8> {
        self.out.clone()
    }

    fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.out.extend_from_slice(bytes);
        self
    }

    fn begin(&mut self) -> &mut Self {
        self.outer_ids.push(std::mem::replace(&mut self.last_id, 0));
        self
    }

    fn end(&mut self) -> &mut Self {
        self.out.push(0);
        self.last_id = self.outer_ids.pop().unwrap_or(0);
        self
    }

    /// A field header of a non-`bool` type.
    fn field(&mut self, ty: TType, id: i16) -> &mut Self {
        let type_id = self.proto.type_id(ty);
        self.field_raw(type_id, id)
    }

    /// A field header with a raw type id (Binary) or type nibble (Compact).
    fn field_raw(&mut self, type_id: u8, id: i16) -> &mut Self {
        match self.proto {
            Proto::Binary => {
                self.out.push(type_id);
                self.out.extend_from_slice(&id.to_be_bytes());
            }
            Proto::Compact => {
                let delta = i32::from(id) - i32::from(self.last_id);
                if (1..=15).contains(&delta) {
                    self.out.push(((delta as u8) << 4) | type_id);
                } else {
                    self.out.push(type_id);
                    self.varint(u64::from(zigzag32(id.into())));
                }
                self.last_id = id;
            }
        }
        self
    }

    /// A whole `bool` field (Compact folds the value into the header).
    fn bool_field(&mut self, id: i16, v: bool) -> &mut Self {
        match self.proto {
            Proto::Binary => self.field_raw(2, id).raw(&[u8::from(v)]),
            Proto::Compact => self.field_raw(if v { 1 } else { 2 }, id),
        }
    }

    /// A `bool` container element.
    fn bool(&mut self, v: bool) -> &mut Self {
        match self.proto {
            Proto::Binary => self.raw(&[u8::from(v)]),
            Proto::Compact => self.raw(&[if v { 1 } else { 2 }]),
        }
    }

    fn i8(&mut self, v: i8) -> &mut Self {
        self.raw(&v.to_be_bytes())
    }

    fn i16(&mut self, v: i16) -> &mut Self {
        match self.proto {
            Proto::Binary => self.raw(&v.to_be_bytes()),
            Proto::Compact => self.varint(u64::from(zigzag32(v.into()))),
        }
    }

    fn i32(&mut self, v: i32) -> &mut Self {
        match self.proto {
            Proto::Binary => self.raw(&v.to_be_bytes()),
            Proto::Compact => self.varint(u64::from(zigzag32(v))),
        }
    }

    fn i64(&mut self, v: i64) -> &mut Self {
        match self.proto {
            Proto::Binary => self.raw(&v.to_be_bytes()),
            Proto::Compact => self.varint(zigzag64(v)),
        }
    }

    fn double(&mut self, v: f64) -> &mut Self {
        match self.proto {
            Proto::Binary => self.raw(&v.to_bits().to_be_bytes()),
            Proto::Compact => self.raw(&v.to_bits().to_le_bytes()),
        }
    }

    /// An unsigned LEB128 varint (Compact).
    fn varint(&mut self, mut v: u64) -> &mut Self {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
        self
    }

    /// A string/binary/container length: Binary `i32`, Compact varint of its 32 bits
    /// (so negative lengths are five-byte varints).
    fn len(&mut self, n: i32) -> &mut Self {
        match self.proto {
            Proto::Binary => self.raw(&n.to_be_bytes()),
            Proto::Compact => self.varint(u64::from(n as u32)),
        }
    }

    fn string(&mut self, s: &[u8]) -> &mut Self {
        self.len(s.len() as i32).raw(s)
    }

    fn list(&mut self, elem: TType, n: i32) -> &mut Self {
        let elem = self.proto.type_id(elem);
        self.list_raw(elem, n)
    }

    /// A list or set header with a raw element type id.
    fn list_raw(&mut self, elem: u8, n: i32) -> &mut Self {
        match self.proto {
            Proto::Binary => self.raw(&[elem]).len(n),
            Proto::Compact if (0..15).contains(&n) => self.raw(&[((n as u8) << 4) | elem]),
            Proto::Compact => self.raw(&[0xf0 | elem]).len(n),
        }
    }

    fn map(&mut self, key: TType, value: TType, n: i32) -> &mut Self {
        let (k, v) = (self.proto.type_id(key), self.proto.type_id(value));
        self.map_raw(k, v, n)
    }

    /// A map header with raw key and value type ids (Compact: nibbles; an empty map is
    /// the single byte 0).
    fn map_raw(&mut self, key: u8, value: u8, n: i32) -> &mut Self {
        match self.proto {
            Proto::Binary => self.raw(&[key, value]).len(n),
            Proto::Compact if n == 0 => self.raw(&[0]),
            Proto::Compact => self.len(n).raw(&[(key << 4) | value]),
        }
    }

    /// A strict message header (Binary) / the Compact header, with a raw type byte.
    fn message(&mut self, name: &[u8], ty: u8, seq_id: i32) -> &mut Self {
        match self.proto {
            Proto::Binary => self
                .raw(&(0x8001_0000u32 | u32::from(ty)).to_be_bytes())
                .string(name)
                .i32(seq_id),
            Proto::Compact => self
                .raw(&[0x82, (ty << 5) | 1])
                .varint(u64::from(seq_id as u32))
                .string(name),
        }
    }
}

fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

// ---------------------------------------------------------------------------------------
// Fixture values
// ---------------------------------------------------------------------------------------

fn request() -> Request {
    Request {
        action: Utf8Bytes::from_static("echo"),
        msg: Utf8Bytes::from_static("hello, world"),
    }
}

fn my_test() -> MyTest {
    MyTest {
        num: i64::MIN,
        ano: Ano { num: 42 },
        // 20 elements: the Compact list header takes its long form.
        nums: (0..20).map(|i| (i - 10) * 0x0101_0101_0101).collect(),
    }
}

fn ids() -> Ids {
    Ids {
        ids32: vec![0, 1, -1, i32::MAX, i32::MIN, 300],
        ids64: (0..17).map(|i| i64::MAX - i).collect(),
        scores: vec![0.0, -0.0, 1.5, f64::INFINITY, -1e300],
        blob: Bytes::from_static(&[0xff, 0xfe, 0x00, 0xc0, 0x80]),
    }
}

fn mixed() -> Mixed {
    Mixed {
        id: -1,
        name: Utf8Bytes::from_static("mixed ✓"),
        flag: true,
        tiny: -128,
        small: -300,
        count: 70_000,
        ratio: 0.25,
        requests: vec![request(), Request::default(), request()],
        counters: BTreeMap::from([
            (Utf8Bytes::from_static("a"), 1),
            (Utf8Bytes::from_static("bb"), -1),
            (Utf8Bytes::from_static("ccc"), i64::MIN),
        ]),
        tags: BTreeSet::from([-5, 0, 7, 1 << 20, i32::MAX]),
        labels: (0..16)
            .map(|i| Utf8Bytes::from(format!("label{i}")))
            .collect(),
        payload: Some(Bytes::from_static(b"\x00\x01\x02payload")),
        ids: ids(),
    }
}

fn call_header() -> MessageHeader {
    MessageHeader {
        name: Utf8Bytes::from_static("echo"),
        ty: MessageType::Call,
        seq_id: 0x1234_5678,
    }
}

/// Every fixture type, with a sample value to encode and a typed decode.
#[derive(Debug, Clone, Copy)]
enum Fixture {
    Request,
    Response,
    Ano,
    MyTest,
    Ids,
    EchoError,
    Mixed,
    ApplicationException,
    /// A message header followed by a `Request`.
    CallRequest,
}

impl Fixture {
    const ALL: [Fixture; 9] = [
        Fixture::Request,
        Fixture::Response,
        Fixture::Ano,
        Fixture::MyTest,
        Fixture::Ids,
        Fixture::EchoError,
        Fixture::Mixed,
        Fixture::ApplicationException,
        Fixture::CallRequest,
    ];

    fn encode(self, p: Proto) -> Vec<u8> {
        match self {
            Fixture::Request => p.encode(&request()),
            Fixture::Response => p.encode(&Response {
                action: Utf8Bytes::from_static("echo"),
                msg: Utf8Bytes::from_static("ok"),
            }),
            Fixture::Ano => p.encode(&Ano { num: -5 }),
            Fixture::MyTest => p.encode(&my_test()),
            Fixture::Ids => p.encode(&ids()),
            Fixture::EchoError => p.encode(&EchoError {
                code: -7,
                message: Utf8Bytes::from_static("boom"),
            }),
            Fixture::Mixed => p.encode(&mixed()),
            Fixture::ApplicationException => p.encode(&ApplicationException::new(
                ApplicationExceptionKind::ProtocolError,
                "bad frame",
            )),
            Fixture::CallRequest => p.encode_message(&call_header(), &request()),
        }
    }

    /// Decodes `input` as this fixture's type, filling it exactly.
    fn decode(self, p: Proto, input: &[u8]) -> Result<(), DecodeError> {
        let o = Opts::default();
        match self {
            Fixture::Request => p.decode_opts::<Request>(o, input).map(drop),
            Fixture::Response => p.decode_opts::<Response>(o, input).map(drop),
            Fixture::Ano => p.decode_opts::<Ano>(o, input).map(drop),
            Fixture::MyTest => p.decode_opts::<MyTest>(o, input).map(drop),
            Fixture::Ids => p.decode_opts::<Ids>(o, input).map(drop),
            Fixture::EchoError => p.decode_opts::<EchoError>(o, input).map(drop),
            Fixture::Mixed => p.decode_opts::<Mixed>(o, input).map(drop),
            Fixture::ApplicationException => {
                p.decode_opts::<ApplicationException>(o, input).map(drop)
            }
            Fixture::CallRequest => p.decode_message::<Request>(o, input).map(drop),
        }
    }
}

/// A `Request` with `action = "a"` and then whatever `rest` writes, closed by a stop.
fn request_with(p: Proto, rest: impl FnOnce(&mut Wire)) -> Vec<u8> {
    let mut w = Wire::new(p);
    w.begin().field(TType::Binary, 1).string(b"a");
    rest(&mut w);
    w.end();
    w.bytes()
}

/// A struct holding only what `fields` writes, closed by a stop.
fn struct_with(p: Proto, fields: impl FnOnce(&mut Wire)) -> Vec<u8> {
    let mut w = Wire::new(p);
    w.begin();
    fields(&mut w);
    w.end();
    w.bytes()
}

// ---------------------------------------------------------------------------------------
// Hostile shapes and mutations
// ---------------------------------------------------------------------------------------

/// A hostile input: what it claims, its bytes, how to decode it, the path of the error.
type Case = (&'static str, Vec<u8>, DecodeFn, &'static str);
type DecodeFn = fn(Proto, &[u8]) -> Result<(), DecodeError>;

fn case(what: &'static str, input: Vec<u8>, decode: DecodeFn, path: &'static str) -> Case {
    (what, input, decode, path)
}

/// Writes one value of `ty` (for `Bool`, the element form) and returns it.
fn sample_value(p: Proto, ty: TType) -> Vec<u8> {
    let mut w = Wire::new(p);
    match ty {
        TType::Bool => w.bool(true),
        TType::I8 => w.i8(-3),
        TType::I16 => w.i16(-300),
        TType::I32 => w.i32(i32::MIN),
        TType::I64 => w.i64(i64::MIN + 1),
        TType::Double => w.double(-2.5),
        TType::Uuid => w.raw(&[0xab; 16]),
        TType::Binary => w.string(b"\x00\xffnot utf-8"),
        TType::Struct => {
            w.begin();
            w.bool_field(1, false).bool_field(300, true);
            w.field(TType::I64, -5).i64(7);
            w.field(TType::Struct, 20)
                .begin()
                .field(TType::Binary, 1)
                .string(b"in")
                .end();
            w.field(TType::List, 21)
                .list(TType::Bool, 3)
                .bool(true)
                .bool(false)
                .bool(true);
            w.end()
        }
        TType::List => {
            w.list(TType::I32, 20);
            for i in 0..20 {
                w.i32(i * 1000 - 7);
            }
            &mut w
        }
        TType::Set => w.list(TType::Binary, 2).string(b"x").string(b""),
        TType::Map => {
            w.map(TType::Binary, TType::List, 2);
            w.string(b"k1").list(TType::I64, 1).i64(-1);
            w.string(b"k2")
                .list(TType::Struct, 1)
                .begin()
                .bool_field(1, true)
                .end()
        }
        TType::Stop | TType::Void => unreachable!("not a value"),
    };
    w.bytes()
}

const VALUE_TYPES: [TType; 12] = [
    TType::Bool,
    TType::I8,
    TType::I16,
    TType::I32,
    TType::I64,
    TType::Double,
    TType::Binary,
    TType::Struct,
    TType::List,
    TType::Set,
    TType::Map,
    TType::Uuid,
];

/// Depth of nesting, as the decoder counts it: every struct, list, set and map entered
/// adds one; the outermost value is level 1.
mod nest {
    use super::{Proto, TType, Wire};

    /// `levels` structs, each the field 1 of the one around it.
    pub(super) fn structs(p: Proto, levels: usize) -> Vec<u8> {
        let mut w = Wire::new(p);
        for _ in 1..levels {
            w.begin().field(TType::Struct, 1);
        }
        w.begin();
        for _ in 0..levels {
            w.end();
        }
        w.bytes()
    }

    /// `levels` lists, each the single element of the one around it; the innermost is
    /// an empty `list<i32>`.
    pub(super) fn lists(p: Proto, levels: usize) -> Vec<u8> {
        let mut w = Wire::new(p);
        for _ in 1..levels {
            w.list(TType::List, 1);
        }
        w.list(TType::I32, 0);
        w.bytes()
    }

    /// `levels` maps `map<i8, map<...>>` of one entry; the innermost is empty.
    pub(super) fn maps(p: Proto, levels: usize) -> Vec<u8> {
        let mut w = Wire::new(p);
        for i in 1..levels {
            w.map(TType::I8, TType::Map, 1).i8(i as i8);
        }
        w.map(TType::I8, TType::I8, 0);
        w.bytes()
    }

    /// `levels` values alternating struct, list, map, set: struct { 1: list<map<i8,
    /// set<struct {...}>>> }.
    pub(super) fn mixed(p: Proto, levels: usize) -> Vec<u8> {
        let mut w = Wire::new(p);
        let mut closes = Vec::new();
        let kinds = [TType::Struct, TType::List, TType::Map, TType::Set];
        for level in 0..levels {
            let this = kinds[level % 4];
            let next = kinds[(level + 1) % 4];
            let last = level + 1 == levels;
            match this {
                TType::Struct => {
                    w.begin();
                    if !last {
                        w.field(next, 1);
                    }
                    closes.push(true);
                }
                TType::List | TType::Set if last => {
                    w.list(TType::I32, 0);
                }
                TType::List | TType::Set => {
                    w.list(next, 1);
                }
                _ if last => {
                    w.map(TType::I8, TType::I8, 0);
                }
                _ => {
                    w.map(TType::I8, next, 1).i8(0);
                }
            }
            if this != TType::Struct {
                closes.push(false);
            }
        }
        for is_struct in closes.into_iter().rev() {
            if is_struct {
                w.end();
            }
        }
        w.bytes()
    }

    /// The outermost type of [`mixed`].
    pub(super) const MIXED_OUTER: TType = TType::Struct;
}

/// The byte values that matter to a Binary or Compact decoder, favoured by mutations.
const INTERESTING: [u8; 12] = [
    0, 1, 2, 0x0f, 0x7f, 0x80, 0xff, 0x0c, 0x0d, 0x0e, 0xf0, 0x82,
];

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

#[test]
fn hand_written_encodings_match_the_encoder() {
    // The hostile inputs below are built with `Wire`; check it against the real encoder
    // once, on valid values, so that a failure below means the decoder and not the helper.
    for p in PROTOS {
        let req = request();
        let by_hand = struct_with(p, |w| {
            w.field(TType::Binary, 1).string(b"echo");
            w.field(TType::Binary, 2).string(b"hello, world");
        });
        assert_eq!(by_hand, p.encode(&req), "{p:?} Request");

        let t = my_test();
        let by_hand = struct_with(p, |w| {
            w.field(TType::I64, 1).i64(t.num);
            w.field(TType::Struct, 2)
                .begin()
                .field(TType::I64, 1)
                .i64(42)
                .end();
            w.field(TType::List, 3)
                .list(TType::I64, t.nums.len() as i32);
            for &n in &t.nums {
                w.i64(n);
            }
        });
        assert_eq!(by_hand, p.encode(&t), "{p:?} MyTest");

        let m = mixed();
        let by_hand = struct_with(p, |w| {
            w.field(TType::I64, 1).i64(m.id);
            w.field(TType::Binary, 2).string(m.name.as_bytes());
            w.bool_field(3, m.flag);
            w.field(TType::I8, 4).i8(m.tiny);
            w.field(TType::I16, 5).i16(m.small);
            w.field(TType::I32, 6).i32(m.count);
            w.field(TType::Double, 7).double(m.ratio);
            w.field(TType::List, 8).list(TType::Struct, 3);
            for r in &m.requests {
                w.begin();
                w.field(TType::Binary, 1).string(r.action.as_bytes());
                w.field(TType::Binary, 2).string(r.msg.as_bytes());
                w.end();
            }
            w.field(TType::Map, 9).map(TType::Binary, TType::I64, 3);
            for (k, v) in &m.counters {
                w.string(k.as_bytes()).i64(*v);
            }
            w.field(TType::Set, 10).list(TType::I32, 5);
            for &t in &m.tags {
                w.i32(t);
            }
            w.field(TType::List, 11).list(TType::Binary, 16);
            for l in &m.labels {
                w.string(l.as_bytes());
            }
            w.field(TType::Binary, 12)
                .string(m.payload.as_ref().unwrap());
            w.field(TType::Struct, 13).begin();
            w.field(TType::List, 1)
                .list(TType::I32, m.ids.ids32.len() as i32);
            for &v in &m.ids.ids32 {
                w.i32(v);
            }
            w.field(TType::List, 2)
                .list(TType::I64, m.ids.ids64.len() as i32);
            for &v in &m.ids.ids64 {
                w.i64(v);
            }
            w.field(TType::List, 3)
                .list(TType::Double, m.ids.scores.len() as i32);
            for &v in &m.ids.scores {
                w.double(v);
            }
            w.field(TType::Binary, 4).string(&m.ids.blob);
            w.end();
        });
        assert_eq!(by_hand, p.encode(&m), "{p:?} Mixed");

        let mut w = Wire::new(p);
        w.message(b"echo", 1, 0x1234_5678).begin();
        w.field(TType::Binary, 1).string(b"echo");
        w.field(TType::Binary, 2).string(b"hello, world");
        w.end();
        assert_eq!(
            w.bytes(),
            p.encode_message(&call_header(), &req),
            "{p:?} message"
        );
    }
}

#[test]
fn negative_lengths_are_rejected_for_strings_binaries_and_containers() {
    for p in PROTOS {
        for len in [-1, -2, i32::MIN] {
            let neg = DecodeErrorKind::NegativeLength(len.into());
            let ctx = format!("{p:?} len {len}");

            let input = struct_with(p, |w| {
                w.field(TType::Binary, 1).len(len).raw(b"abcdef");
            });
            assert_fails(
                p.decode::<Request>(&input),
                neg.clone(),
                "Request.action",
                &ctx,
            );

            let input = struct_with(p, |w| {
                w.field(TType::Binary, 4).len(len).raw(b"abcdef");
            });
            assert_fails(p.decode::<Ids>(&input), neg.clone(), "Ids.blob", &ctx);

            let input = struct_with(p, |w| {
                w.field(TType::List, 3).list(TType::I64, len).raw(&[0; 16]);
            });
            assert_fails(p.decode::<MyTest>(&input), neg.clone(), "MyTest.nums", &ctx);

            let input = struct_with(p, |w| {
                w.field(TType::List, 11)
                    .list(TType::Binary, len)
                    .raw(&[0; 16]);
            });
            assert_fails(p.decode::<Mixed>(&input), neg.clone(), "Mixed.labels", &ctx);

            let input = struct_with(p, |w| {
                w.field(TType::Set, 10).list(TType::I32, len).raw(&[0; 16]);
            });
            assert_fails(p.decode::<Mixed>(&input), neg.clone(), "Mixed.tags", &ctx);

            let input = struct_with(p, |w| {
                w.field(TType::Map, 9)
                    .map(TType::Binary, TType::I64, len)
                    .raw(&[0; 16]);
            });
            assert_fails(
                p.decode::<Mixed>(&input),
                neg.clone(),
                "Mixed.counters",
                &ctx,
            );

            // The same in a field nobody declared (through `skip`: no path).
            for ty in [TType::Binary, TType::List, TType::Set, TType::Map] {
                let input = request_with(p, |w| {
                    w.field(ty, 7);
                    match ty {
                        TType::Binary => w.len(len),
                        TType::Map => w.map(TType::I32, TType::I32, len),
                        _ => w.list(TType::I32, len),
                    };
                    w.raw(&[0; 16]);
                });
                let ctx = format!("{ctx} unknown {ty:?}");
                assert_fails(p.decode::<Request>(&input), neg.clone(), "", &ctx);
            }

            // And in a message header's method name.
            let mut w = Wire::new(p);
            match p {
                Proto::Binary => w.raw(&0x8001_0001u32.to_be_bytes()).len(len).i32(1),
                Proto::Compact => w.raw(&[0x82, 0x21, 0x01]).len(len),
            };
            w.raw(b"echo");
            assert_fails(
                p.decode_message::<Request>(Opts::default(), &w.bytes()),
                neg,
                "",
                &ctx,
            );
        }
    }
}

#[test]
fn compact_lengths_use_only_the_low_32_bits_of_the_varint() {
    // A 5-byte varint carries 35 bits; as in Apache Thrift the top 3 are dropped, so
    // `ff ff ff ff 7f` is -1, not a huge positive length.
    let input = [0x18, 0xff, 0xff, 0xff, 0xff, 0x7f, b'a', 0x00];
    assert_fails(
        Proto::Compact.decode::<Request>(&input),
        DecodeErrorKind::NegativeLength(-1),
        "Request.action",
        "35-bit varint",
    );
}

#[test]
fn oversized_lengths_fail_before_allocating() {
    for p in PROTOS {
        let mut cases = vec![
            case(
                "string of i32::MAX bytes with 10 present",
                struct_with(p, |w| {
                    w.field(TType::Binary, 1).len(i32::MAX).raw(&[b'x'; 10]);
                }),
                |p, i| p.decode::<Request>(i).map(drop),
                "Request.action",
            ),
            case(
                "binary of i32::MAX bytes",
                struct_with(p, |w| {
                    w.field(TType::Binary, 4).len(i32::MAX).raw(&[0; 10]);
                }),
                |p, i| p.decode::<Ids>(i).map(drop),
                "Ids.blob",
            ),
            case(
                "list<i64> of 1e9 elements",
                struct_with(p, |w| {
                    w.field(TType::List, 3)
                        .list(TType::I64, 1_000_000_000)
                        .raw(&[1; 64]);
                }),
                |p, i| p.decode::<MyTest>(i).map(drop),
                "MyTest.nums",
            ),
            case(
                "list<i32> of i32::MAX elements",
                struct_with(p, |w| {
                    w.field(TType::List, 1)
                        .list(TType::I32, i32::MAX)
                        .raw(&[1; 64]);
                }),
                |p, i| p.decode::<Ids>(i).map(drop),
                "Ids.ids32",
            ),
            case(
                "list<double> of 1e9 elements",
                struct_with(p, |w| {
                    w.field(TType::List, 3)
                        .list(TType::Double, 1_000_000_000)
                        .raw(&[1; 64]);
                }),
                |p, i| p.decode::<Ids>(i).map(drop),
                "Ids.scores",
            ),
            case(
                "list<struct> of i32::MAX elements",
                struct_with(p, |w| {
                    w.field(TType::List, 8)
                        .list(TType::Struct, i32::MAX)
                        .raw(&[0; 64]);
                }),
                |p, i| p.decode::<Mixed>(i).map(drop),
                "Mixed.requests",
            ),
            case(
                "list<string> of i32::MAX elements",
                struct_with(p, |w| {
                    w.field(TType::List, 11)
                        .list(TType::Binary, i32::MAX)
                        .raw(&[0; 64]);
                }),
                |p, i| p.decode::<Mixed>(i).map(drop),
                "Mixed.labels",
            ),
            case(
                "set<i32> of i32::MAX elements",
                struct_with(p, |w| {
                    w.field(TType::Set, 10)
                        .list(TType::I32, i32::MAX)
                        .raw(&[0; 64]);
                }),
                |p, i| p.decode::<Mixed>(i).map(drop),
                "Mixed.tags",
            ),
            case(
                "map<string, i64> of 2^31-1 entries",
                struct_with(p, |w| {
                    w.field(TType::Map, 9)
                        .map(TType::Binary, TType::I64, i32::MAX)
                        .raw(&[0; 64]);
                }),
                |p, i| p.decode::<Mixed>(i).map(drop),
                "Mixed.counters",
            ),
            case(
                "message name of i32::MAX bytes",
                {
                    let mut w = Wire::new(p);
                    match p {
                        Proto::Binary => w.raw(&0x8001_0001u32.to_be_bytes()).len(i32::MAX),
                        Proto::Compact => w.raw(&[0x82, 0x21, 0x01]).len(i32::MAX),
                    };
                    w.raw(&[b'x'; 10]);
                    w.bytes()
                },
                |p, i| p.decode_message::<Request>(Opts::default(), i).map(drop),
                "",
            ),
        ];
        // Unknown fields: the same claims, through `skip`.
        for (ty, what) in [
            (TType::Binary, "skipped string"),
            (TType::List, "skipped list<i64>"),
            (TType::Set, "skipped set<struct>"),
            (TType::Map, "skipped map<double, uuid>"),
        ] {
            let input = request_with(p, |w| {
                w.field(ty, 9);
                match ty {
                    TType::Binary => w.len(i32::MAX),
                    TType::List => w.list(TType::I64, 1_000_000_000),
                    TType::Set => w.list(TType::Struct, i32::MAX),
                    _ => w.map(TType::Double, TType::Uuid, i32::MAX),
                };
                w.raw(&[0; 32]);
            });
            cases.push(case(
                what,
                input,
                |p, i| p.decode::<Request>(i).map(drop),
                "",
            ));
        }

        for (what, input, decode, path) in cases {
            let ctx = format!("{p:?}: {what}");
            assert_length_refused(|| decode(p, &input), input.len(), path, &ctx);
        }
    }
}

#[test]
fn the_allocation_tracker_sees_large_allocations() {
    // Guards the tests above and below against a tracker that silently sees nothing.
    let (v, largest) = largest_allocation(|| vec![0u8; 100_000]);
    assert_eq!(v.len(), 100_000);
    assert!(largest >= 100_000, "{largest}");
    let (_, after) = largest_allocation(|| ());
    assert_eq!(after, 0);
}

#[test]
fn list_reservations_never_exceed_what_the_input_could_decode_to() {
    // A count is checked against the input at the minimum wire width of one element.
    // In Binary that width is the element's full size, so reserving for the whole count
    // is at most the input's own size; in Compact an `i64` can be a one-byte varint, so
    // at most 64 KiB is reserved up front and the rest grows as elements really decode.
    for p in PROTOS {
        for n in [1_000, 100_000] {
            let body = |width: usize| vec![0x80u8; n * if p == Proto::Binary { width } else { 1 }];
            let ctx = format!("{p:?} {n}");

            let input = struct_with(p, |w| {
                w.field(TType::List, 3)
                    .list(TType::I64, n as i32)
                    .raw(&body(8));
            });
            let (result, largest) = largest_allocation(|| p.decode::<MyTest>(&input).map(drop));
            let fits = match p {
                Proto::Binary => input.len(),
                Proto::Compact => allocation_budget(input.len()),
            };
            assert!(largest <= fits, "{ctx} list<i64>: {largest} > {fits}");
            if p == Proto::Compact {
                let kind = DecodeErrorKind::VarintTooLong(10);
                assert_fails(result, kind, "MyTest.nums", &ctx);
            }

            let input = struct_with(p, |w| {
                w.field(TType::List, 1)
                    .list(TType::I32, n as i32)
                    .raw(&body(4));
            });
            let (_, largest) = largest_allocation(|| p.decode::<Ids>(&input).map(drop));
            let fits = match p {
                Proto::Binary => input.len(),
                Proto::Compact => allocation_budget(input.len()),
            };
            assert!(largest <= fits, "{ctx} list<i32>: {largest} > {fits}");

            // Containers of variable-width values grow as elements decode.
            let input = struct_with(p, |w| {
                w.field(TType::List, 11)
                    .list(TType::Binary, n as i32)
                    .raw(&body(4));
            });
            let (_, largest) = largest_allocation(|| p.decode::<Mixed>(&input).map(drop));
            assert!(
                largest <= allocation_budget(input.len()),
                "{ctx} list<string>: {largest}"
            );
        }
    }
}

#[test]
fn length_errors_report_the_claim_and_what_remains() {
    for p in PROTOS {
        let input = struct_with(p, |w| {
            w.field(TType::Binary, 1).len(i32::MAX).raw(&[b'x'; 10]);
        });
        // The stop byte after the 10 bytes is input too.
        assert_fails(
            p.decode::<Request>(&input),
            DecodeErrorKind::LengthExceedsInput {
                len: i32::MAX as u64,
                needed: i32::MAX as u64,
                remaining: 11,
            },
            "Request.action",
            &format!("{p:?}"),
        );

        // A list<i64> is checked at its minimum element width: 8 bytes in Binary, one
        // (a varint) in Compact.
        let input = struct_with(p, |w| {
            w.field(TType::List, 3)
                .list(TType::I64, 1_000_000_000)
                .raw(&[1; 63]);
        });
        let width = if p == Proto::Binary { 8 } else { 1 };
        assert_fails(
            p.decode::<MyTest>(&input),
            DecodeErrorKind::LengthExceedsInput {
                len: 1_000_000_000,
                needed: 1_000_000_000 * width,
                remaining: 64,
            },
            "MyTest.nums",
            &format!("{p:?}"),
        );
    }
}

#[test]
fn containers_of_stop_or_void_are_rejected_whatever_their_count() {
    // (protocol, raw element type id, the type it names)
    let zero_width = [
        (Proto::Binary, 0, TType::Stop),
        (Proto::Binary, 1, TType::Void),
        (Proto::Compact, 0, TType::Stop),
    ];
    for (p, id, ty) in zero_width {
        let kind = DecodeErrorKind::InvalidElementType(ty);
        for count in [1, 14, 1_000_000, i32::MAX] {
            let ctx = format!("{p:?} elem {id} count {count}");

            let input = struct_with(p, |w| {
                w.field(TType::List, 3).list_raw(id, count);
            });
            assert_fails(
                p.decode::<MyTest>(&input),
                kind.clone(),
                "MyTest.nums",
                &ctx,
            );

            let input = struct_with(p, |w| {
                w.field(TType::Set, 10).list_raw(id, count);
            });
            assert_fails(p.decode::<Mixed>(&input), kind.clone(), "Mixed.tags", &ctx);

            let key = p.type_id(TType::Binary);
            let input = struct_with(p, |w| {
                w.field(TType::Map, 9).map_raw(key, id, count);
            });
            assert_fails(
                p.decode::<Mixed>(&input),
                kind.clone(),
                "Mixed.counters",
                &ctx,
            );
            let input = struct_with(p, |w| {
                w.field(TType::Map, 9).map_raw(id, key, count);
            });
            assert_fails(
                p.decode::<Mixed>(&input),
                kind.clone(),
                "Mixed.counters",
                &ctx,
            );

            // Skipped, in an unknown field and at the top level.
            for container in [TType::List, TType::Set, TType::Map] {
                let mut w = Wire::new(p);
                match container {
                    TType::Map => w.map_raw(id, id, count),
                    _ => w.list_raw(id, count),
                };
                let bare = w.bytes();
                let skipped = p.skip(Opts::default(), container, &bare);
                assert_fails(
                    skipped,
                    kind.clone(),
                    "",
                    &format!("{ctx} skip {container:?}"),
                );

                let input = request_with(p, |w| {
                    w.field(container, 5).raw(&bare);
                });
                let ctx = format!("{ctx} unknown {container:?}");
                assert_fails(p.decode::<Request>(&input), kind.clone(), "", &ctx);
            }
        }
    }
}

#[test]
fn invalid_type_ids_are_rejected_in_field_and_container_headers() {
    let invalid = [
        (Proto::Binary, vec![5, 7, 9, 17, 18, 0x80, 255]),
        (Proto::Compact, vec![14, 15]),
    ];
    for (p, ids) in invalid {
        for id in ids {
            let kind = DecodeErrorKind::InvalidType(id);
            let ctx = format!("{p:?} type {id}");

            // Field header, as the first field and after a valid one.
            let input = struct_with(p, |w| {
                w.field_raw(id, 1).raw(&[0; 8]);
            });
            assert_fails(p.decode::<Request>(&input), kind.clone(), "", &ctx);
            let input = request_with(p, |w| {
                w.field_raw(id, 2).raw(&[0; 8]);
            });
            assert_fails(p.decode::<Request>(&input), kind.clone(), "", &ctx);

            // Container headers of known fields.
            let input = struct_with(p, |w| {
                w.field(TType::List, 3).list_raw(id, 1).raw(&[0; 8]);
            });
            assert_fails(
                p.decode::<MyTest>(&input),
                kind.clone(),
                "MyTest.nums",
                &ctx,
            );
            let string = p.type_id(TType::Binary);
            let input = struct_with(p, |w| {
                w.field(TType::Map, 9).map_raw(id, string, 1).raw(&[0; 8]);
            });
            assert_fails(
                p.decode::<Mixed>(&input),
                kind.clone(),
                "Mixed.counters",
                &ctx,
            );
            let input = struct_with(p, |w| {
                w.field(TType::Map, 9).map_raw(string, id, 1).raw(&[0; 8]);
            });
            assert_fails(
                p.decode::<Mixed>(&input),
                kind.clone(),
                "Mixed.counters",
                &ctx,
            );

            // Container headers being skipped.
            let input = request_with(p, |w| {
                w.field(TType::List, 9).list_raw(id, 1).raw(&[0; 8]);
            });
            assert_fails(p.decode::<Request>(&input), kind.clone(), "", &ctx);
            let input = request_with(p, |w| {
                w.field(TType::Map, 9).map_raw(string, id, 1).raw(&[0; 8]);
            });
            assert_fails(p.decode::<Request>(&input), kind.clone(), "", &ctx);
        }
    }

    // Binary `void` (1) names a type but never a field's.
    let input = struct_with(Proto::Binary, |w| {
        w.field_raw(1, 1).raw(&[0; 8]);
    });
    assert_fails(
        Proto::Binary.decode::<Request>(&input),
        DecodeErrorKind::InvalidType(1),
        "",
        "Binary void field",
    );

    // Neither `stop` nor `void` is a value to skip.
    for p in PROTOS {
        for ty in [TType::Stop, TType::Void] {
            assert_fails(
                p.skip(Opts::default(), ty, &[0; 16]),
                DecodeErrorKind::InvalidType(ty as u8),
                "",
                &format!("{p:?} skip {ty:?}"),
            );
        }
    }
}

#[test]
fn deep_nesting_in_unknown_fields_hits_the_depth_limit() {
    let limit = DecodeErrorKind::DepthLimitExceeded(64);
    for p in PROTOS {
        let shapes: [(&str, TType, Vec<u8>); 4] = [
            ("structs", TType::Struct, nest::structs(p, 10_000)),
            ("lists", TType::List, nest::lists(p, 10_000)),
            ("maps", TType::Map, nest::maps(p, 10_000)),
            ("mixed", nest::MIXED_OUTER, nest::mixed(p, 10_000)),
        ];
        for (what, outer, value) in shapes {
            let ctx = format!("{p:?} 10,000 nested {what}");

            // Skipped at the top level.
            assert_fails(
                p.skip(Opts::default(), outer, &value),
                limit.clone(),
                "",
                &ctx,
            );

            // An unknown field of a Request.
            let input = request_with(p, |w| {
                w.field(outer, 99).raw(&value);
            });
            assert_fails(p.decode::<Request>(&input), limit.clone(), "", &ctx);

            // An unknown field inside a known field: the path says where.
            let input = struct_with(p, |w| {
                w.field(TType::Struct, 2)
                    .begin()
                    .field(outer, 7)
                    .raw(&value)
                    .end();
            });
            assert_fails(
                p.decode::<MyTest>(&input),
                limit.clone(),
                "MyTest.ano",
                &ctx,
            );

            // Inside a list of structs.
            let input = struct_with(p, |w| {
                w.field(TType::List, 8).list(TType::Struct, 1);
                w.begin().field(outer, 3).raw(&value).end();
            });
            assert_fails(
                p.decode::<Mixed>(&input),
                limit.clone(),
                "Mixed.requests",
                &ctx,
            );
        }
    }
}

#[test]
fn depth_limit_admits_exactly_64_levels_counting_the_outermost() {
    let limit = DecodeErrorKind::DepthLimitExceeded(64);
    for p in PROTOS {
        type Shape = fn(Proto, usize) -> Vec<u8>;
        let shapes: [(&str, TType, Shape); 4] = [
            ("structs", TType::Struct, nest::structs),
            ("lists", TType::List, nest::lists),
            ("maps", TType::Map, nest::maps),
            ("mixed", nest::MIXED_OUTER, nest::mixed),
        ];
        for (what, outer, shape) in shapes {
            let ctx = format!("{p:?} {what}");
            let at_limit = shape(p, 64);
            assert_eq!(
                p.skip(Opts::default(), outer, &at_limit),
                Ok(0),
                "{ctx}: 64 levels"
            );
            let past = shape(p, 65);
            assert_fails(
                p.skip(Opts::default(), outer, &past),
                limit.clone(),
                "",
                &ctx,
            );

            // In a Request (level 1), an unknown field holds levels 2 and up.
            let input = request_with(p, |w| {
                w.field(outer, 99).raw(&shape(p, 63));
                w.field(TType::Binary, 2).string(b"m");
            });
            assert!(p.decode::<Request>(&input).is_ok(), "{ctx}: 1 + 63 levels");
            let input = request_with(p, |w| {
                w.field(outer, 99).raw(&shape(p, 64));
                w.field(TType::Binary, 2).string(b"m");
            });
            assert_fails(p.decode::<Request>(&input), limit.clone(), "", &ctx);

            // A smaller limit moves the boundary with it.
            let three = Opts::depth(3);
            assert_eq!(p.skip(three, outer, &shape(p, 3)), Ok(0), "{ctx}: 3 of 3");
            assert_fails(
                p.skip(three, outer, &shape(p, 4)),
                DecodeErrorKind::DepthLimitExceeded(3),
                "",
                &ctx,
            );
        }

        // Known fields count as well: MyTest is level 1, its `ano` and `nums` level 2.
        let t = p.encode(&my_test());
        assert!(p.decode_opts::<MyTest>(Opts::depth(2), &t).is_ok(), "{p:?}");
        assert_fails(
            p.decode_opts::<MyTest>(Opts::depth(1), &t),
            DecodeErrorKind::DepthLimitExceeded(1),
            "MyTest.ano",
            &format!("{p:?}"),
        );
        let only_nums = struct_with(p, |w| {
            w.field(TType::List, 3).list(TType::I64, 1).i64(5);
        });
        assert_fails(
            p.decode_opts::<MyTest>(Opts::depth(1), &only_nums),
            DecodeErrorKind::DepthLimitExceeded(1),
            "MyTest.nums",
            &format!("{p:?}"),
        );
        assert_fails(
            p.decode_opts::<MyTest>(Opts::depth(0), &only_nums),
            DecodeErrorKind::DepthLimitExceeded(0),
            "",
            &format!("{p:?}"),
        );
    }
}

#[test]
fn every_proper_prefix_of_a_valid_encoding_fails() {
    for p in PROTOS {
        for fixture in Fixture::ALL {
            let full = fixture.encode(p);
            assert_eq!(fixture.decode(p, &full), Ok(()), "{p:?} {fixture:?} whole");
            let mut eof = 0usize;
            for cut in 0..full.len() {
                let ctx = format!("{p:?} {fixture:?} first {cut} of {} bytes", full.len());
                let e = err(fixture.decode(p, &full[..cut]));
                match e.kind() {
                    DecodeErrorKind::UnexpectedEof { .. } => eof += 1,
                    // A length header whose bytes were cut off.
                    DecodeErrorKind::LengthExceedsInput { .. } => {}
                    other => panic!("{ctx}: unexpected {other:?} ({e})"),
                }
                // Skipping the body sees the same cut.
                if !matches!(fixture, Fixture::CallRequest) {
                    assert!(
                        p.skip(Opts::default(), TType::Struct, &full[..cut])
                            .is_err(),
                        "{ctx}"
                    );
                }
            }
            // Cuts inside a string or list body are `LengthExceedsInput`; all others EOF.
            assert!(eof > 0, "{p:?} {fixture:?}");
        }
    }
    for p in PROTOS {
        assert_fails(
            p.decode::<Ano>(&[]),
            DecodeErrorKind::UnexpectedEof {
                needed: 1,
                remaining: 0,
            },
            "",
            &format!("{p:?} empty"),
        );
    }
}

#[test]
fn invalid_utf8_in_a_string_field_is_an_error_with_its_path() {
    let bad: [&[u8]; 6] = [
        b"\xff",
        b"ok\xfe",
        b"\xc0\x80",         // over-long NUL
        b"\xed\xa0\x80",     // UTF-16 surrogate
        b"abc\xe2\x82",      // cut-off sequence at the end
        b"\xf4\x90\x80\x80", // past U+10FFFF
    ];
    for p in PROTOS {
        for bytes in bad {
            let ctx = format!("{p:?} {bytes:x?}");
            let input = request_with(p, |w| {
                w.field(TType::Binary, 2).string(bytes);
            });
            assert_fails(
                p.decode::<Request>(&input),
                DecodeErrorKind::InvalidUtf8,
                "Request.msg",
                &ctx,
            );

            let input = struct_with(p, |w| {
                w.field(TType::List, 11)
                    .list(TType::Binary, 2)
                    .string(b"fine")
                    .string(bytes);
            });
            assert_fails(
                p.decode::<Mixed>(&input),
                DecodeErrorKind::InvalidUtf8,
                "Mixed.labels",
                &ctx,
            );

            let input = struct_with(p, |w| {
                w.field(TType::Map, 9)
                    .map(TType::Binary, TType::I64, 1)
                    .string(bytes)
                    .i64(1);
            });
            assert_fails(
                p.decode::<Mixed>(&input),
                DecodeErrorKind::InvalidUtf8,
                "Mixed.counters",
                &ctx,
            );

            let mut w = Wire::new(p);
            w.message(bytes, 1, 1).begin();
            w.field(TType::Binary, 1)
                .string(b"a")
                .field(TType::Binary, 2)
                .string(b"b");
            w.end();
            let decoded = p.decode_message::<Request>(Opts::default(), &w.bytes());
            assert_fails(decoded, DecodeErrorKind::InvalidUtf8, "", &ctx);

            // The same bytes in a `binary` field, or in an unknown string field, are fine.
            let input = struct_with(p, |w| {
                w.field(TType::Binary, 4).string(bytes);
            });
            let decoded = p.decode::<Ids>(&input).unwrap();
            assert_eq!(&decoded.blob[..], bytes, "{ctx}");
            let input = request_with(p, |w| {
                w.field(TType::Binary, 3).string(bytes);
                w.field(TType::Binary, 2).string(b"m");
            });
            assert_eq!(p.decode::<Request>(&input).unwrap().msg, "m", "{ctx}");
        }
    }
}

#[test]
fn compact_varints_longer_than_their_type_are_rejected() {
    let p = Proto::Compact;
    let continuation = |n: usize| {
        let mut v = vec![0x80; n];
        v.push(0x01);
        v
    };

    // i64: at most 10 bytes.
    let input = struct_with(p, |w| {
        w.field(TType::I64, 1).raw(&continuation(11));
    });
    assert_fails(
        p.decode::<MyTest>(&input),
        DecodeErrorKind::VarintTooLong(10),
        "MyTest.num",
        "i64 11 bytes",
    );
    let input = struct_with(p, |w| {
        w.field(TType::List, 3)
            .list(TType::I64, 1)
            .raw(&continuation(10));
    });
    assert_fails(
        p.decode::<MyTest>(&input),
        DecodeErrorKind::VarintTooLong(10),
        "MyTest.nums",
        "list<i64>",
    );
    let input = struct_with(p, |w| {
        w.field(TType::I64, 1).raw(&continuation(9));
    });
    // Nine continuation bytes and a final 1: the zigzag of 2^63, which is 2^62.
    assert_eq!(
        p.decode::<MyTest>(&input).map(|t| t.num),
        Ok(1 << 62),
        "a 10-byte i64 is fine"
    );

    // i32, i16: at most 5 bytes.
    let input = struct_with(p, |w| {
        w.field(TType::I32, 1).raw(&continuation(6));
    });
    assert_fails(
        p.decode::<EchoError>(&input),
        DecodeErrorKind::VarintTooLong(5),
        "EchoError.code",
        "i32",
    );
    let input = struct_with(p, |w| {
        w.field(TType::I32, 1).raw(&continuation(4));
    });
    assert!(
        p.decode::<EchoError>(&input).is_ok(),
        "a 5-byte i32 is fine"
    );
    let input = struct_with(p, |w| {
        w.field(TType::I16, 5).raw(&continuation(5));
    });
    assert_fails(
        p.decode::<Mixed>(&input),
        DecodeErrorKind::VarintTooLong(5),
        "Mixed.small",
        "i16",
    );
    let input = struct_with(p, |w| {
        w.field(TType::Set, 10)
            .list(TType::I32, 1)
            .raw(&continuation(5));
    });
    assert_fails(
        p.decode::<Mixed>(&input),
        DecodeErrorKind::VarintTooLong(5),
        "Mixed.tags",
        "set<i32>",
    );

    // Lengths and counts are i32 varints.
    let input = struct_with(p, |w| {
        w.field(TType::Binary, 1).raw(&continuation(5));
    });
    assert_fails(
        p.decode::<Request>(&input),
        DecodeErrorKind::VarintTooLong(5),
        "Request.action",
        "length",
    );
    let input = struct_with(p, |w| {
        w.field(TType::List, 3).raw(&[0xf6]).raw(&continuation(5));
    });
    assert_fails(
        p.decode::<MyTest>(&input),
        DecodeErrorKind::VarintTooLong(5),
        "MyTest.nums",
        "count",
    );
    let input = struct_with(p, |w| {
        w.field(TType::Map, 9).raw(&continuation(5));
    });
    assert_fails(
        p.decode::<Mixed>(&input),
        DecodeErrorKind::VarintTooLong(5),
        "Mixed.counters",
        "map",
    );

    // Long-form field ids and message sequence ids.
    let mut input = vec![0x08];
    input.extend(continuation(5));
    assert_fails(
        p.decode::<Request>(&input),
        DecodeErrorKind::VarintTooLong(5),
        "",
        "field id",
    );
    let mut input = vec![0x82, 0x21];
    input.extend(continuation(5));
    assert_fails(
        p.decode_message::<Request>(Opts::default(), &input),
        DecodeErrorKind::VarintTooLong(5),
        "",
        "seq id",
    );

    // Skipped values too.
    for (ty, n, max) in [(TType::I64, 10, 10), (TType::I32, 5, 5), (TType::I16, 5, 5)] {
        let input = request_with(p, |w| {
            w.field(ty, 9).raw(&continuation(n));
        });
        assert_fails(
            p.decode::<Request>(&input),
            DecodeErrorKind::VarintTooLong(max),
            "",
            &format!("{ty:?}"),
        );
    }
}

#[test]
fn missing_required_fields_are_reported_by_name() {
    for p in PROTOS {
        let ctx = format!("{p:?}");
        let no_msg = request_with(p, |_| {});
        assert_fails(
            p.decode::<Request>(&no_msg),
            DecodeErrorKind::MissingRequiredField,
            "Request.msg",
            &ctx,
        );
        assert_fails(
            p.decode::<Response>(&no_msg),
            DecodeErrorKind::MissingRequiredField,
            "Response.msg",
            &ctx,
        );

        let no_action = struct_with(p, |w| {
            w.field(TType::Binary, 2).string(b"m");
        });
        assert_fails(
            p.decode::<Request>(&no_action),
            DecodeErrorKind::MissingRequiredField,
            "Request.action",
            &ctx,
        );

        let empty = struct_with(p, |_| {});
        assert_fails(
            p.decode::<Request>(&empty),
            DecodeErrorKind::MissingRequiredField,
            "Request.action",
            &ctx,
        );

        // Inside a list of structs: the outer field is named too.
        let input = struct_with(p, |w| {
            w.field(TType::List, 8).list(TType::Struct, 1).raw(&no_msg);
        });
        assert_fails(
            p.decode::<Mixed>(&input),
            DecodeErrorKind::MissingRequiredField,
            "Mixed.requests/Request.msg",
            &ctx,
        );
    }
}

#[test]
fn bad_message_headers_are_rejected() {
    let opts = Opts::default();
    let body = |w: &mut Wire| {
        w.begin();
        w.field(TType::Binary, 1)
            .string(b"a")
            .field(TType::Binary, 2)
            .string(b"b");
        w.end();
    };

    // Binary.
    let p = Proto::Binary;
    let with_word = |word: u32| {
        let mut w = Wire::new(p);
        w.raw(&word.to_be_bytes()).string(b"echo").i32(1);
        body(&mut w);
        w.bytes()
    };
    for word in [0x8002_0001, 0x8000_0001, 0xffff_0001, 0x8101_0001] {
        assert_fails(
            p.decode_message::<Request>(opts, &with_word(word)),
            DecodeErrorKind::BadVersion(word),
            "",
            &format!("version word {word:#x}"),
        );
    }
    for ty in [0, 5, 6, 0x7f, 0xff] {
        assert_fails(
            p.decode_message::<Request>(opts, &with_word(0x8001_0000 | ty)),
            DecodeErrorKind::InvalidMessageType(ty as u8),
            "",
            &format!("Binary message type {ty}"),
        );
    }

    // Non-strict: the name's length, the name, a type byte, the sequence id.
    let mut w = Wire::new(p);
    w.len(4).raw(b"echo").raw(&[2]).i32(9);
    body(&mut w);
    let non_strict = w.bytes();
    assert_fails(
        p.decode_message::<Request>(opts, &non_strict),
        DecodeErrorKind::BadVersion(4),
        "",
        "non-strict rejected by default",
    );
    let lenient = Opts {
        non_strict: true,
        ..opts
    };
    let (header, req) = p.decode_message::<Request>(lenient, &non_strict).unwrap();
    assert_eq!(header.name, "echo");
    assert_eq!(header.ty, MessageType::Reply);
    assert_eq!(header.seq_id, 9);
    assert_eq!((req.action.as_str(), req.msg.as_str()), ("a", "b"));
    // Strict headers are still accepted by a lenient reader.
    assert!(
        p.decode_message::<Request>(lenient, &with_word(0x8001_0001))
            .is_ok()
    );
    // A non-strict name longer than the input, a bad type byte, bad UTF-8.
    let mut w = Wire::new(p);
    w.len(0x7fff_ffff).raw(b"echo");
    assert_fails_with!(
        p.decode_message::<Request>(lenient, &w.bytes()),
        DecodeErrorKind::LengthExceedsInput { .. },
        "",
        "non-strict long name"
    );
    let mut w = Wire::new(p);
    w.len(4).raw(b"echo").raw(&[7]).i32(9);
    body(&mut w);
    assert_fails(
        p.decode_message::<Request>(lenient, &w.bytes()),
        DecodeErrorKind::InvalidMessageType(7),
        "",
        "non-strict type",
    );
    let mut w = Wire::new(p);
    w.len(2).raw(b"\xff\xff").raw(&[1]).i32(9);
    body(&mut w);
    assert_fails(
        p.decode_message::<Request>(lenient, &w.bytes()),
        DecodeErrorKind::InvalidUtf8,
        "",
        "non-strict name",
    );

    // Compact.
    let p = Proto::Compact;
    let with_prefix = |id: u8, version_and_type: u8| {
        let mut w = Wire::new(p);
        w.raw(&[id, version_and_type]).varint(1).string(b"echo");
        body(&mut w);
        w.bytes()
    };
    for id in [0x80, 0x81, 0x83, 0x00, 0xff] {
        assert_fails(
            p.decode_message::<Request>(opts, &with_prefix(id, 0x21)),
            DecodeErrorKind::BadVersion(id.into()),
            "",
            &format!("protocol id {id:#x}"),
        );
    }
    for version in [0, 2, 0x1f] {
        let byte = 0x20 | version;
        assert_fails(
            p.decode_message::<Request>(opts, &with_prefix(0x82, byte)),
            DecodeErrorKind::BadVersion(byte.into()),
            "",
            &format!("compact version {version}"),
        );
    }
    for ty in [0u8, 5, 6, 7] {
        assert_fails(
            p.decode_message::<Request>(opts, &with_prefix(0x82, (ty << 5) | 1)),
            DecodeErrorKind::InvalidMessageType(ty),
            "",
            &format!("Compact message type {ty}"),
        );
    }
    for ty in 1u8..=4 {
        assert!(
            p.decode_message::<Request>(opts, &with_prefix(0x82, (ty << 5) | 1))
                .is_ok()
        );
    }
}

#[test]
fn trailing_bytes_and_size_limits_are_enforced() {
    for p in PROTOS {
        let ctx = format!("{p:?}");
        let whole = p.encode(&request());
        for extra in [&[0u8][..], &[0, 0, 0][..], &whole[..]] {
            let mut input = whole.clone();
            input.extend_from_slice(extra);
            assert_fails(
                p.decode::<Request>(&input),
                DecodeErrorKind::TrailingBytes(extra.len()),
                "",
                &ctx,
            );
        }
        let mut message = p.encode_message(&call_header(), &request());
        message.push(0);
        assert_fails(
            p.decode_message::<Request>(Opts::default(), &message),
            DecodeErrorKind::TrailingBytes(1),
            "",
            &ctx,
        );
        message.pop();

        let n = whole.len();
        let at = |max_size| Opts {
            max_size,
            ..Opts::default()
        };
        assert!(p.decode_opts::<Request>(at(n), &whole).is_ok(), "{ctx}");
        assert_fails(
            p.decode_opts::<Request>(at(n - 1), &whole),
            DecodeErrorKind::SizeLimitExceeded {
                size: n as u64,
                limit: n as u64 - 1,
            },
            "",
            &ctx,
        );
        let m = message.len();
        assert_fails(
            p.decode_message::<Request>(at(0), &message),
            DecodeErrorKind::SizeLimitExceeded {
                size: m as u64,
                limit: 0,
            },
            "",
            &ctx,
        );
        assert_fails(
            p.skip(at(10), TType::Struct, &whole),
            DecodeErrorKind::SizeLimitExceeded {
                size: n as u64,
                limit: 10,
            },
            "",
            &ctx,
        );
    }
}

#[test]
fn fields_with_the_wrong_wire_type_are_skipped_not_misread() {
    for p in PROTOS {
        let ctx = format!("{p:?}");
        // Field 2 as an i32 whose value, read as a string length, would swallow the next
        // field: skipped by its wire type, so `msg` is simply missing.
        let input = request_with(p, |w| {
            w.field(TType::I32, 2).i32(5);
            w.field(TType::Binary, 3).string(b"xyz");
        });
        assert_fails(
            p.decode::<Request>(&input),
            DecodeErrorKind::MissingRequiredField,
            "Request.msg",
            &ctx,
        );

        // A correctly typed field 2 after the wrong one is read.
        let input = request_with(p, |w| {
            w.field(TType::I32, 2).i32(5);
            w.field(TType::List, 2).list(TType::Binary, 1).string(b"no");
            w.field(TType::Binary, 2).string(b"yes");
        });
        let req = p.decode::<Request>(&input).unwrap();
        assert_eq!(
            (req.action.as_str(), req.msg.as_str()),
            ("a", "yes"),
            "{ctx}"
        );

        // MyTest: `num` as a string and `ano` as a list leave the defaults.
        let input = struct_with(p, |w| {
            w.field(TType::Binary, 1).string(&[0x7f; 8]);
            w.field(TType::List, 2).list(TType::I64, 2).i64(1).i64(2);
            w.field(TType::Map, 3)
                .map(TType::I64, TType::I64, 1)
                .i64(1)
                .i64(2);
        });
        assert_eq!(p.decode::<MyTest>(&input), Ok(MyTest::default()), "{ctx}");

        // Same container type, other element type: an error, not a reinterpretation.
        let input = struct_with(p, |w| {
            w.field(TType::List, 3).list(TType::I32, 2).i32(1).i32(2);
        });
        assert_fails(
            p.decode::<MyTest>(&input),
            DecodeErrorKind::UnexpectedElementType {
                expected: TType::I64,
                found: TType::I32,
            },
            "MyTest.nums",
            &ctx,
        );
        // ... unless it is empty (some writers leave the type of empty containers unset).
        let input = struct_with(p, |w| {
            w.field(TType::List, 3).list(TType::I32, 0);
        });
        assert_eq!(p.decode::<MyTest>(&input), Ok(MyTest::default()), "{ctx}");
    }
}

#[test]
fn unknown_fields_of_every_type_are_skipped_exactly() {
    for p in PROTOS {
        // Each value alone: skip consumes it exactly, whatever follows.
        for ty in VALUE_TYPES {
            let mut value = sample_value(p, ty);
            assert_eq!(p.skip(Opts::default(), ty, &value), Ok(0), "{p:?} {ty:?}");
            value.extend_from_slice(&[0xee; 3]);
            assert_eq!(
                p.skip(Opts::default(), ty, &value),
                Ok(3),
                "{p:?} {ty:?} + 3"
            );
        }

        // Unknown fields of every type around and between the known ones, with ids
        // below, between and far above them (Compact: short and long field headers).
        let input = struct_with(p, |w| {
            for (i, ty) in VALUE_TYPES.into_iter().enumerate() {
                let id = -(i as i16) - 1;
                if ty == TType::Bool {
                    w.bool_field(id, true);
                } else {
                    w.field(ty, id).raw(&sample_value(p, ty));
                }
            }
            w.field(TType::Binary, 1).string(b"echo");
            for (i, ty) in VALUE_TYPES.into_iter().enumerate() {
                let id = 3 + i as i16 * 40;
                if ty == TType::Bool {
                    w.bool_field(id, false);
                } else {
                    w.field(ty, id).raw(&sample_value(p, ty));
                }
            }
            w.field(TType::Binary, 2).string(b"msg");
            w.bool_field(i16::MAX, true);
            w.field(TType::Uuid, i16::MIN).raw(&[1; 16]);
        });
        let req = p.decode::<Request>(&input).unwrap();
        assert_eq!(
            (req.action.as_str(), req.msg.as_str()),
            ("echo", "msg"),
            "{p:?}"
        );
        assert_eq!(
            p.skip(Opts::default(), TType::Struct, &input),
            Ok(0),
            "{p:?}"
        );

        // Nested in a known struct field, and in a list of structs.
        let input = struct_with(p, |w| {
            w.field(TType::I64, 1).i64(-9);
            w.field(TType::Struct, 2).begin();
            for (i, ty) in VALUE_TYPES.into_iter().enumerate() {
                if ty == TType::Bool {
                    w.bool_field(10 + i as i16, true);
                } else {
                    w.field(ty, 10 + i as i16).raw(&sample_value(p, ty));
                }
            }
            w.field(TType::I64, 1).i64(77).end();
            w.field(TType::List, 3).list(TType::I64, 1).i64(3);
        });
        let expected = MyTest {
            num: -9,
            ano: Ano { num: 77 },
            nums: vec![3],
        };
        assert_eq!(p.decode::<MyTest>(&input), Ok(expected), "{p:?}");

        // Compact only: a bool field's value lives in its header; skipping it must not
        // eat the next byte.
        let input = request_with(p, |w| {
            w.bool_field(5, true).bool_field(6, false);
            w.field(TType::Binary, 2).string(b"m");
        });
        assert_eq!(p.decode::<Request>(&input).unwrap().msg, "m", "{p:?}");
    }
}

#[test]
fn random_mutations_of_valid_encodings_never_panic() {
    const MUTANTS_PER_ENCODING: usize = 20_000;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut decoded_ok = 0usize;
    for p in PROTOS {
        for fixture in Fixture::ALL {
            let seed = fixture.encode(p);
            for _ in 0..MUTANTS_PER_ENCODING {
                let mut input = seed.clone();
                mutate(&mut rng, &mut input, &INTERESTING);
                let (ok, largest) = largest_allocation(|| {
                    let ok = fixture.decode(p, &input).is_ok();
                    let _ = p.skip(Opts::default(), TType::Struct, &input);
                    ok
                });
                decoded_ok += usize::from(ok);
                assert!(
                    largest <= allocation_budget(input.len()),
                    "{p:?} {fixture:?}: {largest} bytes allocated at once for {:02x?}",
                    input
                );
            }
        }
    }
    // Some mutants stay valid (a flipped bit in a string or a number): the loop reaches
    // past the first error.
    assert!(decoded_ok > 0);
}
