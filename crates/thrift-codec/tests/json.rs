//! The JSON protocol: its bytes spelled out from Apache Thrift's `TJSONProtocol` (the
//! format described in Apache's `lib/cpp/src/thrift/protocol/TJSONProtocol.h`), every wire
//! type round-tripping with an exact size, what Apache's other writers send, zero copy,
//! skipping, and cutting messages out of a stream.
//!
//! Golden files of the fixture types are in `golden.rs`; interop with Apache's Python
//! library in `interop.rs`; hostile input in `hostile.rs`.

mod util;

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use proptest::collection::{btree_map, btree_set, vec};
use proptest::prelude::*;
use thrift_wire::fixtures::echo::{Ano, EchoError, Ids, MyTest, Request, Response};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::protocol::json::{MessageScanner, message_len};
use thrift_wire::wire::{Wire, read_field};
use thrift_wire::{
    ApplicationException, ApplicationExceptionKind, Codec, DecodeError, DecodeErrorKind,
    DecodeLimits, Decoder, Encoder, Json, LinkBuffer, Message, MessageHeader, MessageType, Sizer,
    TType, Utf8Bytes,
};
use util::{decode, encode, text};

/// Encodes `value` (checking the size, see `util::encode`) as text.
fn json<M: Message>(value: &M) -> String {
    String::from_utf8(encode::<Json, M>(value).to_vec()).expect("JSON output is UTF-8")
}

/// Asserts the exact JSON of `value` and that the text decodes back to it.
#[track_caller]
fn assert_json<M: Message + PartialEq + std::fmt::Debug>(value: &M, expected: &str) {
    assert_eq!(json(value), expected);
    let back: M = decode::<Json, M>(Bytes::copy_from_slice(expected.as_bytes()))
        .unwrap_or_else(|e| panic!("{expected} does not decode: {e}"));
    assert_eq!(&back, value);
}

fn encode_message<M: Message>(header: &MessageHeader, body: &M) -> Bytes {
    let codec = Codec::<Json>::new();
    let mut sizer = codec.sizer();
    let size = sizer.message_begin_len(header) + body.size(&mut sizer);
    let mut buf = LinkBuffer::new();
    let n = codec.encode_message(header, body, &mut buf).unwrap();
    assert_eq!(n, size);
    assert_eq!(buf.len(), n, "the size is the bytes written");
    buf.next(n)
}

fn header(name: &str, ty: MessageType, seq_id: i32) -> MessageHeader {
    MessageHeader {
        name: text(name),
        ty,
        seq_id,
    }
}

// ---------------------------------------------------------------------------------------
// A struct with every wire type, written the way generated code is (through `Wire`).

/// `struct Point { 1: i32 x, 2: string label }`, to nest in containers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
struct Point {
    x: i32,
    label: Utf8Bytes,
}

impl Message for Point {
    fn size<S: Sizer>(&self, s: &mut S) -> usize {
        let saved = s.struct_begin();
        Wire::field_size(&self.x, s, 1)
            + Wire::field_size(&self.label, s, 2)
            + s.struct_end_len(saved)
    }
    fn encode<E: Encoder>(&self, e: &mut E) {
        let saved = e.write_struct_begin();
        Wire::field_write(&self.x, e, 1);
        Wire::field_write(&self.label, e, 2);
        e.write_struct_end(saved);
    }
    fn decode<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
        let saved = d.read_struct_begin()?;
        let mut out = Point::default();
        loop {
            let f = d.read_field_begin()?;
            match (f.id, f.ty) {
                (_, TType::Stop) => break,
                (1, TType::I32) => out.x = read_field(d, "Point", "x")?,
                (2, TType::Binary) => out.label = read_field(d, "Point", "label")?,
                (_, ty) => d.skip(ty)?,
            }
        }
        d.read_struct_end(saved);
        Ok(out)
    }
}

thrift_wire::impl_wire_for_message!(Point);

/// Every wire type, in fields, list elements, map keys and map values. Field 17 is a
/// `map<double, i32>` written by hand (a Rust map cannot be keyed by `f64`).
#[derive(Debug, Clone, PartialEq, Default)]
struct Every {
    flag: bool,
    tiny: Vec<i8>,
    small: i16,
    id: [u8; 16],
    owned_text: String,
    owned_bin: Vec<u8>,
    held_bin: Bytes,
    by_i32: BTreeMap<i32, Utf8Bytes>,
    by_bool: BTreeMap<bool, Vec<i64>>,
    by_i64: BTreeMap<i64, BTreeSet<i16>>,
    by_i8: BTreeMap<i8, f64>,
    by_bin: BTreeMap<Bytes, bool>,
    by_uuid: BTreeMap<[u8; 16], i8>,
    nested: Vec<BTreeMap<Utf8Bytes, Vec<Point>>>,
    sets: Vec<BTreeSet<Utf8Bytes>>,
    doubles: Vec<f64>,
    by_double: Vec<(f64, i32)>,
    by_point: BTreeMap<Point, Point>,
}

const EVERY: &str = "Every";

impl Message for Every {
    fn size<S: Sizer>(&self, s: &mut S) -> usize {
        let saved = s.struct_begin();
        let mut n = Wire::field_size(&self.flag, s, 1)
            + Wire::field_size(&self.tiny, s, 2)
            + Wire::field_size(&self.small, s, 3)
            + Wire::field_size(&self.id, s, 4)
            + Wire::field_size(&self.owned_text, s, 5)
            + Wire::field_size(&self.owned_bin, s, 6)
            + Wire::field_size(&self.held_bin, s, 7)
            + Wire::field_size(&self.by_i32, s, 8)
            + Wire::field_size(&self.by_bool, s, 9)
            + Wire::field_size(&self.by_i64, s, 10)
            + Wire::field_size(&self.by_i8, s, 11)
            + Wire::field_size(&self.by_bin, s, 12)
            + Wire::field_size(&self.by_uuid, s, 13)
            + Wire::field_size(&self.nested, s, 14)
            + Wire::field_size(&self.sets, s, 15)
            + Wire::field_size(&self.doubles, s, 16);
        n += s.field_begin_len(TType::Map, 17)
            + s.map_begin_len(TType::Double, TType::I32, self.by_double.len());
        for (k, v) in &self.by_double {
            n += s.double_value_len(*k) + s.i32_len(*v);
        }
        n += Wire::field_size(&self.by_point, s, 18);
        n + s.struct_end_len(saved)
    }

    fn encode<E: Encoder>(&self, e: &mut E) {
        let saved = e.write_struct_begin();
        Wire::field_write(&self.flag, e, 1);
        Wire::field_write(&self.tiny, e, 2);
        Wire::field_write(&self.small, e, 3);
        Wire::field_write(&self.id, e, 4);
        Wire::field_write(&self.owned_text, e, 5);
        Wire::field_write(&self.owned_bin, e, 6);
        Wire::field_write(&self.held_bin, e, 7);
        Wire::field_write(&self.by_i32, e, 8);
        Wire::field_write(&self.by_bool, e, 9);
        Wire::field_write(&self.by_i64, e, 10);
        Wire::field_write(&self.by_i8, e, 11);
        Wire::field_write(&self.by_bin, e, 12);
        Wire::field_write(&self.by_uuid, e, 13);
        Wire::field_write(&self.nested, e, 14);
        Wire::field_write(&self.sets, e, 15);
        Wire::field_write(&self.doubles, e, 16);
        e.write_field_begin(TType::Map, 17);
        e.write_map_begin(TType::Double, TType::I32, self.by_double.len());
        for (k, v) in &self.by_double {
            e.write_double(*k);
            e.write_i32(*v);
        }
        Wire::field_write(&self.by_point, e, 18);
        e.write_struct_end(saved);
    }

    fn decode<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
        let saved = d.read_struct_begin()?;
        let mut o = Every::default();
        loop {
            let f = d.read_field_begin()?;
            match (f.id, f.ty) {
                (_, TType::Stop) => break,
                (1, TType::Bool) => o.flag = read_field(d, EVERY, "flag")?,
                (2, TType::List) => o.tiny = read_field(d, EVERY, "tiny")?,
                (3, TType::I16) => o.small = read_field(d, EVERY, "small")?,
                (4, TType::Uuid) => o.id = read_field(d, EVERY, "id")?,
                (5, TType::Binary) => o.owned_text = read_field(d, EVERY, "owned_text")?,
                (6, TType::Binary) => o.owned_bin = read_field(d, EVERY, "owned_bin")?,
                (7, TType::Binary) => o.held_bin = read_field(d, EVERY, "held_bin")?,
                (8, TType::Map) => o.by_i32 = read_field(d, EVERY, "by_i32")?,
                (9, TType::Map) => o.by_bool = read_field(d, EVERY, "by_bool")?,
                (10, TType::Map) => o.by_i64 = read_field(d, EVERY, "by_i64")?,
                (11, TType::Map) => o.by_i8 = read_field(d, EVERY, "by_i8")?,
                (12, TType::Map) => o.by_bin = read_field(d, EVERY, "by_bin")?,
                (13, TType::Map) => o.by_uuid = read_field(d, EVERY, "by_uuid")?,
                (14, TType::List) => o.nested = read_field(d, EVERY, "nested")?,
                (15, TType::List) => o.sets = read_field(d, EVERY, "sets")?,
                (16, TType::List) => o.doubles = read_field(d, EVERY, "doubles")?,
                (17, TType::Map) => {
                    o.by_double = thrift_wire::protocol::read_map(
                        d,
                        TType::Double,
                        TType::I32,
                        |d| d.read_double(),
                        |d| d.read_i32(),
                    )
                    .map_err(|e| e.push(EVERY, "by_double"))?
                }
                (18, TType::Map) => o.by_point = read_field(d, EVERY, "by_point")?,
                (_, ty) => d.skip(ty)?,
            }
        }
        d.read_struct_end(saved);
        Ok(o)
    }
}

fn point(x: i32, label: &str) -> Point {
    Point {
        x,
        label: text(label),
    }
}

const UUID: [u8; 16] = *b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff";

fn every_sample() -> Every {
    Every {
        flag: true,
        tiny: vec![-128, 0, 127],
        small: -300,
        id: UUID,
        owned_text: "a\"b\\c\u{1}\n/é".into(),
        owned_bin: b"\x00\xff".to_vec(),
        held_bin: Bytes::from_static(b"abcd"),
        by_i32: BTreeMap::from([(-1, text("a")), (2, text(""))]),
        by_bool: BTreeMap::from([(false, vec![]), (true, vec![i64::MIN])]),
        by_i64: BTreeMap::from([(7, BTreeSet::from([1, -1]))]),
        by_i8: BTreeMap::from([(0, 0.5), (1, -0.0)]),
        by_bin: BTreeMap::from([(Bytes::from_static(b"k"), true)]),
        by_uuid: BTreeMap::from([([0; 16], 9)]),
        nested: vec![
            BTreeMap::new(),
            BTreeMap::from([(text("p"), vec![point(1, "one"), Point::default()])]),
        ],
        sets: vec![BTreeSet::from([text("x"), text("y")]), BTreeSet::new()],
        doubles: vec![1.5, 1e300, 0.1],
        by_double: vec![(1.5, 1), (f64::INFINITY, 2), (-2e-10, 3)],
        by_point: BTreeMap::from([(point(2, "k"), point(3, "v"))]),
    }
}

// ---------------------------------------------------------------------------------------
// The format, spelled out.

#[test]
fn structs_are_objects_of_field_ids_and_typed_values() {
    assert_json(
        &Request {
            action: text("echo"),
            msg: text("hi"),
        },
        r#"{"1":{"str":"echo"},"2":{"str":"hi"}}"#,
    );
    assert_json(
        &MyTest {
            num: 1,
            ano: Ano { num: -1 },
            nums: vec![1, 2],
        },
        r#"{"1":{"i64":1},"2":{"rec":{"1":{"i64":-1}}},"3":{"lst":["i64",2,1,2]}}"#,
    );
    assert_json(
        &MyTest::default(),
        r#"{"1":{"i64":0},"2":{"rec":{"1":{"i64":0}}},"3":{"lst":["i64",0]}}"#,
    );
    assert_json(
        &ApplicationException::new(ApplicationExceptionKind::UnknownMethod, "no"),
        r#"{"1":{"str":"no"},"2":{"i32":1}}"#,
    );
    assert_json(
        &EchoError {
            code: -7,
            message: text(""),
        },
        r#"{"1":{"i32":-7},"2":{"str":""}}"#,
    );
}

#[test]
fn every_wire_type_has_its_apache_form() {
    let expected = concat!(
        r#"{"1":{"tf":1},"#,
        r#""2":{"lst":["i8",3,-128,0,127]},"#,
        r#""3":{"i16":-300},"#,
        r#""4":{"uid":"00112233-4455-6677-8899-aabbccddeeff"},"#,
        r#""5":{"str":"a\"b\\c\u0001\n/é"},"#,
        r#""6":{"str":"AP8"},"#,
        r#""7":{"str":"YWJjZA"},"#,
        // Map keys are strings: numbers in key position are quoted.
        r#""8":{"map":["i32","str",2,{"-1":"a","2":""}]},"#,
        r#""9":{"map":["tf","lst",2,{"0":["i64",0],"1":["i64",1,-9223372036854775808]}]},"#,
        r#""10":{"map":["i64","set",1,{"7":["i16",2,-1,1]}]},"#,
        r#""11":{"map":["i8","dbl",2,{"0":0.5,"1":-0}]},"#,
        r#""12":{"map":["str","tf",1,{"aw":1}]},"#,
        r#""13":{"map":["uid","i8",1,{"00000000-0000-0000-0000-000000000000":9}]},"#,
        r#""14":{"lst":["map",2,["str","lst",0,{}],["str","lst",1,{"p":["rec",2,"#,
        r#"{"1":{"i32":1},"2":{"str":"one"}},{"1":{"i32":0},"2":{"str":""}}]}]]},"#,
        r#""15":{"lst":["set",2,["str",2,"x","y"],["str",0]]},"#,
        r#""16":{"lst":["dbl",3,1.5,1.0000000000000001e+300,0.10000000000000001]},"#,
        // A non-finite double key is quoted once, as it is anywhere.
        r#""17":{"map":["dbl","i32",3,{"1.5":1,"Infinity":2,"-2.0000000000000001e-10":3}]},"#,
        // A struct as a key is written as Apache writes it (as an object).
        r#""18":{"map":["rec","rec",1,{{"1":{"i32":2},"2":{"str":"k"}}:{"1":{"i32":3},"2":{"str":"v"}}}]}}"#,
    );
    assert_json(&every_sample(), expected);
}

#[test]
fn special_doubles_are_quoted_names_in_values_and_keys() {
    let v = Every {
        doubles: vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0],
        by_double: vec![(f64::NAN, 1), (f64::NEG_INFINITY, 2), (0.0, 3)],
        ..Every::default()
    };
    let text = json(&v);
    assert!(
        text.contains(r#""16":{"lst":["dbl",4,"NaN","Infinity","-Infinity",-0]}"#),
        "{text}"
    );
    assert!(text.contains(r#"{"NaN":1,"-Infinity":2,"0":3}"#), "{text}");
    let back: Every = decode::<Json, _>(Bytes::from(text)).unwrap();
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert!(back.doubles[0].is_nan());
    assert_eq!(bits(&back.doubles[1..]), bits(&v.doubles[1..]));
    assert!(back.by_double[0].0.is_nan());
    assert_eq!(back.by_double[1..], v.by_double[1..]);
}

#[test]
fn messages_are_arrays_of_version_name_type_seq_id_and_body() {
    for (ty, n) in [
        (MessageType::Call, 1),
        (MessageType::Reply, 2),
        (MessageType::Exception, 3),
        (MessageType::Oneway, 4),
    ] {
        let h = header("echo", ty, -7);
        let bytes = encode_message(&h, &Ano { num: 5 });
        let want = format!(r#"[1,"echo",{n},-7,{{"1":{{"i64":5}}}}]"#);
        assert_eq!(std::str::from_utf8(&bytes).unwrap(), want);
        let (h2, body): (MessageHeader, Ano) = Codec::<Json>::new().decode_message(bytes).unwrap();
        assert_eq!((h2, body), (h, Ano { num: 5 }));
    }
    let h = header("é\"", MessageType::Call, i32::MAX);
    let bytes = encode_message(&h, &Request::default());
    assert_eq!(
        std::str::from_utf8(&bytes).unwrap(),
        r#"[1,"é\"",1,2147483647,{"1":{"str":""},"2":{"str":""}}]"#
    );
}

#[test]
fn the_header_is_read_with_the_comma_so_what_remains_is_the_body() {
    // A server hands the rest of the frame to the args decoder: it must start at `{`.
    let bytes = encode_message(&header("echo", MessageType::Call, 1), &Ano { num: 3 });
    let mut d = Codec::<Json>::new().decoder(bytes.clone()).unwrap();
    d.read_message_begin().unwrap();
    let at = bytes.len() - d.remaining();
    assert_eq!(&bytes[at..], br#"{"1":{"i64":3}}]"#);
    // A decoder of the body alone reads the struct and leaves the message's `]`.
    let mut body = Codec::<Json>::new().decoder(bytes.slice(at..)).unwrap();
    assert_eq!(Ano::decode(&mut body).unwrap(), Ano { num: 3 });
    assert_eq!(body.remaining(), 1);
    // Through the header's decoder, the `]` is read with the body.
    assert_eq!(Ano::decode(&mut d).unwrap(), Ano { num: 3 });
    assert_eq!(d.remaining(), 0);
}

#[test]
fn a_header_and_body_sized_apart_add_up() {
    let h = header("x", MessageType::Reply, 9);
    let body = every_sample();
    let codec = Codec::<Json>::new();
    let total = codec.sizer().message_begin_len(&h) + codec.size(&body);
    assert_eq!(total, encode_message(&h, &body).len());
}

#[test]
fn field_ids_are_quoted_numbers_including_negative_ones() {
    /// `struct { -3: i32 a, 20: bool b }`.
    #[derive(Debug, PartialEq)]
    struct Sparse(i32, bool);
    impl Message for Sparse {
        fn size<S: Sizer>(&self, s: &mut S) -> usize {
            let saved = s.struct_begin();
            s.field_begin_len(TType::I32, -3)
                + s.i32_len(self.0)
                + s.bool_field_len(20)
                + s.struct_end_len(saved)
        }
        fn encode<E: Encoder>(&self, e: &mut E) {
            let saved = e.write_struct_begin();
            e.write_field_begin(TType::I32, -3);
            e.write_i32(self.0);
            e.write_bool_field(20, self.1);
            e.write_struct_end(saved);
        }
        fn decode<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
            let saved = d.read_struct_begin()?;
            let mut out = Sparse(0, false);
            loop {
                let f = d.read_field_begin()?;
                match (f.id, f.ty) {
                    (_, TType::Stop) => break,
                    (-3, TType::I32) => out.0 = d.read_i32()?,
                    (20, TType::Bool) => out.1 = d.read_bool()?,
                    (_, ty) => d.skip(ty)?,
                }
            }
            d.read_struct_end(saved);
            Ok(out)
        }
    }
    assert_json(&Sparse(-1, false), r#"{"-3":{"i32":-1},"20":{"tf":0}}"#);
}

#[test]
fn length_only_sizer_methods_count_what_their_docs_say() {
    // Without the value, JSON counts a one-digit number and a string without escapes;
    // the `*_value_len` methods count the real value.
    let codec = Codec::<Json>::new();
    let mut s = codec.sizer();
    assert_eq!(s.i8_len(), 1);
    assert_eq!(s.i8_value_len(-128), 4);
    assert_eq!(s.double_len(), 1);
    assert_eq!(s.double_value_len(0.1), 19);
    assert_eq!(s.double_value_len(f64::NAN), 5);
    assert_eq!(s.binary_len(3), 5);
    assert_eq!(s.bytes_len(3), 5);
    assert_eq!(s.str_value_len("a\n"), 5);
    assert_eq!(s.binary_value_len(b"abcd"), 8);
    assert_eq!(s.bytes_value_len(&Bytes::from_static(b"a")), 4);
    assert_eq!(s.string_value_len(&text("\"")), 4);
    assert_eq!(s.uuid_len(), 38);
    assert_eq!(s.bool_len(), 1);
    assert_eq!(s.fixed_width(TType::I32), None);
}

// ---------------------------------------------------------------------------------------
// What other writers send.

#[test]
fn what_apache_s_other_writers_send_is_read() {
    // Python and Go pad base64; Python writes control bytes raw; writers may escape `/`
    // and use upper-case hex; Java writes doubles as "1.0E10" and "-0.0"; Go writes
    // "1e+300"; whitespace between tokens as in pretty-printed JSON.
    let input = concat!(
        " {\n  \"1\" : { \"lst\" : [ \"i32\" , 2 , 1 , -2 ] } ,\n",
        "  \"3\": {\"lst\": [\"dbl\", 4, 1.0E10, -0.0, 1e+300, 0.5]},\n",
        "  \"4\": {\"str\": \"YWI=\"}\n} \n"
    );
    let ids: Ids = decode::<Json, _>(Bytes::from_static(input.as_bytes())).unwrap();
    assert_eq!(ids.ids32, [1, -2]);
    assert_eq!(
        ids.scores.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        [1e10f64, -0.0, 1e300, 0.5].map(f64::to_bits)
    );
    assert_eq!(&ids.blob[..], b"ab");

    let input = "{\"1\":{\"str\":\"\\/\\u00E9\\ud83e\\udd80\x01\t\"},\"2\":{\"str\":\"\\u0000\"}}";
    let req: Request = decode::<Json, _>(Bytes::from_static(input.as_bytes())).unwrap();
    assert_eq!(req.action, "/é🦀\u{1}\t");
    assert_eq!(req.msg, "\0");
}

#[test]
fn base64_padding_is_optional_on_read_and_never_written() {
    for (n, padded) in [(1, "AA=="), (2, "AAA="), (3, "AAAA")] {
        let blob = Bytes::from(vec![0u8; n]);
        let v = Ids {
            blob: blob.clone(),
            ..Ids::default()
        };
        let text = json(&v);
        let unpadded = padded.trim_end_matches('=');
        assert!(
            text.ends_with(&format!(r#""4":{{"str":"{unpadded}"}}}}"#)),
            "{text}"
        );
        let with_padding = text.replace(unpadded, padded);
        let back: Ids = decode::<Json, _>(Bytes::from(with_padding)).unwrap();
        assert_eq!(back.blob, blob);
    }
}

// ---------------------------------------------------------------------------------------
// Zero copy.

#[test]
fn strings_without_escapes_borrow_the_frame_and_others_do_not() {
    let bytes = encode::<Json, _>(&util::request_1k());
    let back: Request = decode::<Json, _>(bytes.clone()).unwrap();
    assert!(bytes.as_ptr_range().contains(&back.msg.as_ptr()), "copied");

    let bytes = encode::<Json, _>(&Request {
        action: text("tab\there"),
        msg: text("plain"),
    });
    let back: Request = decode::<Json, _>(bytes.clone()).unwrap();
    assert_eq!(back.action, "tab\there");
    assert!(!bytes.as_ptr_range().contains(&back.action.as_ptr()));
    assert!(bytes.as_ptr_range().contains(&back.msg.as_ptr()));
}

#[test]
fn large_strings_without_escapes_are_inserted_as_nodes() {
    let big = text(&"x".repeat(8192));
    let v = Request {
        action: text("a"),
        msg: big.clone(),
    };
    let mut copied = LinkBuffer::new();
    let n = Codec::<Json>::new()
        .zero_copy_threshold(usize::MAX)
        .encode(&v, &mut copied)
        .unwrap();
    let mut linked = LinkBuffer::new();
    let codec = Codec::<Json>::new().zero_copy_threshold(4096);
    assert_eq!(codec.sizer().string_value_len(&big), 8194);
    assert_eq!(codec.encode(&v, &mut linked).unwrap(), n);
    // [before, `"`] [the string] [`"}}`]
    assert_eq!(linked.node_count(), 3);
    assert_eq!(copied.node_count(), 1);
    assert_eq!(linked.next(n), copied.next(n));

    // With an escape in it, the string is copied.
    let v = Request {
        action: text("a"),
        msg: text(&format!("\n{}", "x".repeat(8192))),
    };
    let mut buf = LinkBuffer::new();
    codec.encode(&v, &mut buf).unwrap();
    assert_eq!(buf.node_count(), 1);
}

// ---------------------------------------------------------------------------------------
// Skipping.

#[test]
fn skipping_reads_strings_as_text_not_base64() {
    // A Request's strings are not base64; as unknown fields of an Ids they are skipped.
    let bytes = encode::<Json, _>(&Request {
        action: text("not base64!"),
        msg: text("\u{1F980}"),
    });
    let ids: Ids = decode::<Json, _>(bytes.clone()).unwrap();
    assert_eq!(ids, Ids::default());
    let mut d = Codec::<Json>::new().decoder(bytes).unwrap();
    d.skip(TType::Struct).unwrap();
    assert_eq!(d.remaining(), 0);
}

#[test]
fn every_type_is_skipped_exactly() {
    // Every field of `Every` is unknown to `Ano` (field 1 of Every is a bool, which Ano
    // skips as the wrong type), and of `Mixed` to `Ano` but field 1.
    let every = encode::<Json, _>(&every_sample());
    assert_eq!(decode::<Json, Ano>(every.clone()).unwrap(), Ano::default());
    let mixed = encode::<Json, _>(&util::mixed(2));
    assert_eq!(decode::<Json, Ano>(mixed).unwrap(), Ano { num: 1 << 40 });
    let mut d = Codec::<Json>::new().decoder(every.clone()).unwrap();
    d.skip(TType::Struct).unwrap();
    assert_eq!(d.remaining(), 0);
}

// ---------------------------------------------------------------------------------------
// Cutting messages out of a stream.

#[test]
fn the_scanner_finds_each_message_the_encoder_wrote() {
    let messages = [
        encode_message(&header("a", MessageType::Call, 1), &every_sample()),
        encode_message(&header("b]", MessageType::Reply, 2), &util::mixed(1)),
        encode_message(
            &header("c", MessageType::Exception, 3),
            &ApplicationException::new(ApplicationExceptionKind::Unknown, "}]\"\\"),
        ),
    ];
    let stream: Vec<u8> = messages.iter().flat_map(|m| m.to_vec()).collect();
    let mut scanner = MessageScanner::new(DecodeLimits::default(), 1 << 20);
    let mut at = 0;
    let mut buffered = 0;
    let mut found = Vec::new();
    // Bytes arrive 7 at a time; each message is cut off the front when found.
    while at < stream.len() {
        buffered = (buffered + 7).min(stream.len());
        while let Some(n) = scanner.scan(&stream[at..buffered]).unwrap() {
            found.push(stream[at..at + n].to_vec());
            at += n;
        }
    }
    let want: Vec<Vec<u8>> = messages.iter().map(|m| m.to_vec()).collect();
    assert_eq!(found, want);
    for m in &messages {
        assert_eq!(
            message_len(m, DecodeLimits::default(), m.len()).unwrap(),
            Some(m.len())
        );
    }
}

// ---------------------------------------------------------------------------------------
// Round trips with exact sizes, for every value.

fn utf8() -> impl Strategy<Value = Utf8Bytes> {
    any::<String>().prop_map(Utf8Bytes::from)
}

fn binary() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..40).prop_map(Bytes::from)
}

fn finite() -> impl Strategy<Value = f64> {
    any::<f64>().prop_filter("finite", |v| v.is_finite())
}

fn point_strategy() -> impl Strategy<Value = Point> {
    (any::<i32>(), utf8()).prop_map(|(x, label)| Point { x, label })
}

fn every() -> impl Strategy<Value = Every> {
    (
        (
            any::<bool>(),
            vec(any::<i8>(), 0..8),
            any::<i16>(),
            any::<[u8; 16]>(),
            any::<String>(),
            vec(any::<u8>(), 0..40),
            binary(),
        ),
        (
            btree_map(any::<i32>(), utf8(), 0..4),
            btree_map(any::<bool>(), vec(any::<i64>(), 0..4), 0..3),
            btree_map(any::<i64>(), btree_set(any::<i16>(), 0..4), 0..4),
            btree_map(any::<i8>(), finite(), 0..4),
            btree_map(binary(), any::<bool>(), 0..4),
            btree_map(any::<[u8; 16]>(), any::<i8>(), 0..3),
        ),
        (
            vec(btree_map(utf8(), vec(point_strategy(), 0..3), 0..3), 0..3),
            vec(btree_set(utf8(), 0..3), 0..3),
            vec(finite(), 0..8),
            vec((finite(), any::<i32>()), 0..4),
            btree_map(point_strategy(), point_strategy(), 0..3),
        ),
    )
        .prop_map(
            |(
                (flag, tiny, small, id, owned_text, owned_bin, held_bin),
                (by_i32, by_bool, by_i64, by_i8, by_bin, by_uuid),
                (nested, sets, doubles, by_double, by_point),
            )| Every {
                flag,
                tiny,
                small,
                id,
                owned_text,
                owned_bin,
                held_bin,
                by_i32,
                by_bool,
                by_i64,
                by_i8,
                by_bin,
                by_uuid,
                nested,
                sets,
                doubles,
                by_double,
                by_point,
            },
        )
}

/// decode(encode(v)) == v with `size()` exact (checked by `util::encode`), the same
/// bytes again, and the scanner finding the message's end.
fn round_trip<M: Message + PartialEq + std::fmt::Debug>(v: &M) {
    let bytes = encode::<Json, M>(v);
    let back: M = decode::<Json, M>(bytes.clone()).expect("decodes what it encoded");
    assert_eq!(&back, v);
    assert_eq!(encode::<Json, M>(&back), bytes);
    let framed = encode_message(&header("m", MessageType::Call, 0), v);
    assert_eq!(
        message_len(&framed, DecodeLimits::default(), usize::MAX).unwrap(),
        Some(framed.len())
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_wire_type_round_trips_with_an_exact_size(v in every()) {
        round_trip(&v);
    }

    #[test]
    fn any_double_prints_back_to_its_bits(v in finite()) {
        let ids = Ids { scores: vec![v], ..Ids::default() };
        let back: Ids = decode::<Json, _>(encode::<Json, _>(&ids)).unwrap();
        prop_assert_eq!(back.scores[0].to_bits(), v.to_bits());
    }

    #[test]
    fn held_strings_of_any_size_keep_their_bytes_whatever_the_threshold(
        s in "[a-z\"\\\\\n]{0,64}", threshold in 0usize..80,
    ) {
        let v = Response { action: text(&s), msg: text(&s.repeat(2)) };
        let mut copied = LinkBuffer::new();
        let n = Codec::<Json>::new().zero_copy_threshold(usize::MAX).encode(&v, &mut copied).unwrap();
        let mut linked = LinkBuffer::new();
        let m = Codec::<Json>::new().zero_copy_threshold(threshold).encode(&v, &mut linked).unwrap();
        prop_assert_eq!(n, m);
        prop_assert_eq!(linked.len(), n);
        prop_assert_eq!(copied.next(n), linked.next(n));
    }
}

#[test]
fn the_fixtures_round_trip() {
    round_trip(&util::mixed(3));
    round_trip(&Mixed::default());
    round_trip(&util::ids(50, 100));
    round_trip(&util::my_test(100));
    round_trip(&util::request_1k());
    round_trip(&every_sample());
}

#[test]
fn numbers_at_their_limits_round_trip() {
    let v = Every {
        tiny: vec![i8::MIN, i8::MAX],
        small: i16::MIN,
        by_i32: BTreeMap::from([(i32::MIN, text("min")), (i32::MAX, text("max"))]),
        by_i64: BTreeMap::from([(i64::MIN, BTreeSet::from([i16::MAX]))]),
        doubles: vec![f64::MIN_POSITIVE, 5e-324, f64::MAX, f64::MIN, -0.0],
        ..Every::default()
    };
    round_trip(&v);
    let bad = json(&v).replace("-128", "-129");
    let e = decode::<Json, Every>(Bytes::from(bad)).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            DecodeErrorKind::NumberOutOfRange { ty: TType::I8, .. }
        ),
        "{e}"
    );
    assert_eq!(e.path(), "Every.tiny");
}
