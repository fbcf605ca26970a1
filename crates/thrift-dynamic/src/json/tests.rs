//! Round trips against thrift-wire's reference types, one test per convention of the
//! module docs' table, and hostile input.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use bytes::Bytes;
use proptest::prelude::*;
use thrift_wire::fixtures::echo::{Ano, Ids, MyTest, Request};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::{Binary, Codec, Compact, LinkBuffer, Message, Utf8Bytes};

use super::*;

const BOTH: [ThriftProtocol; 2] = [ThriftProtocol::Binary, ThriftProtocol::Compact];

fn idl_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl")
}

/// The descriptor of `idl/mixed.thrift` and what it includes (`idl/echo.thrift`).
fn fixtures() -> Descriptor {
    let dir = idl_dir();
    Descriptor::from_files(&[dir.join("mixed.thrift")], &[dir]).unwrap()
}

fn ty(d: &Descriptor, name: &str) -> StructId {
    d.struct_named(name).unwrap()
}

fn encode<M: Message>(m: &M, p: ThriftProtocol) -> Bytes {
    let mut buf = LinkBuffer::new();
    let n = match p {
        ThriftProtocol::Binary => Codec::<Binary>::new().encode(m, &mut buf),
        ThriftProtocol::Compact => Codec::<Compact>::new().encode(m, &mut buf),
    }
    .unwrap();
    buf.next(n)
}

fn decode<M: Message>(b: Vec<u8>, p: ThriftProtocol) -> M {
    match p {
        ThriftProtocol::Binary => Codec::<Binary>::new().decode(Bytes::from(b)),
        ThriftProtocol::Compact => Codec::<Compact>::new().decode(Bytes::from(b)),
    }
    .unwrap()
}

fn j2t(
    d: &Descriptor,
    name: &str,
    json: &str,
    p: ThriftProtocol,
) -> Result<Vec<u8>, TranscodeError> {
    let mut out = Vec::new();
    json_to_thrift(d, ty(d, name), json.as_bytes(), p, &mut out).map(|()| out)
}

fn t2j(d: &Descriptor, name: &str, b: Bytes, p: ThriftProtocol) -> Result<String, TranscodeError> {
    let mut out = Vec::new();
    thrift_to_json(d, ty(d, name), b, p, &mut out)?;
    Ok(String::from_utf8(out).unwrap())
}

fn request(action: &str, msg: &str) -> Request {
    Request {
        action: Utf8Bytes::from(action.to_string()),
        msg: Utf8Bytes::from(msg.to_string()),
    }
}

fn ids(n: usize) -> Ids {
    Ids {
        ids32: (0..n as i32).map(|i| i * 7919 - 100_000).collect(),
        ids64: (0..n as i64)
            .map(|i| i * 1_000_000_007 - (1 << 40))
            .collect(),
        scores: (0..n).map(|i| i as f64 / 3.0 - 10.0).collect(),
        blob: Bytes::from((0..=255u8).cycle().take(n * 4 + 1).collect::<Vec<_>>()),
    }
}

/// A `Mixed` of the benchmark's shape (large enough that Compact needs multi-byte
/// container headers), with strings that need escaping.
fn mixed() -> Mixed {
    Mixed {
        id: -(1 << 60),
        name: Utf8Bytes::from_static("quote \" backslash \\ newline \n tab \t bell \u{7} é 😀"),
        flag: true,
        tiny: -5,
        small: 300,
        count: -70_000,
        ratio: 0.1,
        requests: (0..16)
            .map(|i| request(&format!("act{i}"), &"m".repeat(512)))
            .collect(),
        counters: (0..200)
            .map(|i| (Utf8Bytes::from(format!("counter-{i}")), i64::MAX - i))
            .collect::<BTreeMap<_, _>>(),
        tags: (-128..128).collect::<BTreeSet<_>>(),
        labels: (0..64)
            .map(|i| Utf8Bytes::from(format!("label/{i}")))
            .collect(),
        payload: Some(Bytes::from(
            (0..3000).map(|i| (i % 251) as u8).collect::<Vec<_>>(),
        )),
        ids: ids(128),
    }
}

fn my_test() -> MyTest {
    MyTest {
        num: i64::MIN,
        ano: Ano { num: 42 },
        nums: (0..40).map(|i| i * i - 500).collect(),
    }
}

/// Fixture -> encode -> JSON -> Thrift gives the same bytes, and decodes to the fixture.
fn round_trip<M: Message + PartialEq + std::fmt::Debug>(name: &str, m: &M) {
    let d = fixtures();
    for p in BOTH {
        let bytes = encode(m, p);
        let json = t2j(&d, name, bytes.clone(), p).unwrap();
        let back = j2t(&d, name, &json, p).unwrap();
        assert_eq!(back, bytes.to_vec(), "{name} in {p:?}: {json}");
        assert_eq!(&decode::<M>(back, p), m);
    }
}

#[test]
fn mixed_round_trips_to_the_same_bytes_in_both_protocols() {
    round_trip("Mixed", &mixed());
}

#[test]
fn mixed_without_payload_round_trips() {
    let m = Mixed {
        payload: None,
        ..mixed()
    };
    round_trip("Mixed", &m);
}

#[test]
fn echo_request_ids_and_my_test_round_trip() {
    round_trip("Request", &request("echo", &"x".repeat(1024)));
    round_trip("Ids", &ids(3));
    round_trip("Ids", &ids(300));
    round_trip("MyTest", &my_test());
}

#[test]
fn empty_containers_round_trip() {
    let m = Mixed {
        requests: vec![],
        counters: BTreeMap::new(),
        tags: BTreeSet::new(),
        labels: vec![],
        ids: ids(0),
        ..mixed()
    };
    round_trip("Mixed", &m);
}

#[test]
fn hand_written_json_decodes_to_the_fixture_of_the_same_values() {
    let d = fixtures();
    let json = r#" {
        "msg" : "hello\u0020world\ud83d\ude00", "action": "echo"
    } "#;
    for p in BOTH {
        let r: Request = decode(j2t(&d, "Request", json, p).unwrap(), p);
        assert_eq!(r, request("echo", "hello world😀"));
    }
    let json = r#"{"num":"-9223372036854775808","ano":{"num":42},"nums":[-500,-499,-496]}"#;
    let want = MyTest {
        nums: vec![-500, -499, -496],
        ..my_test()
    };
    for p in BOTH {
        assert_eq!(
            decode::<MyTest>(j2t(&d, "MyTest", json, p).unwrap(), p),
            want
        );
    }
    let json = r#"{"ids32":[1,-2],"ids64":[3],"scores":[0.5,-1e3,2],"blob":"AAEC/w=="}"#;
    let want = Ids {
        ids32: vec![1, -2],
        ids64: vec![3],
        scores: vec![0.5, -1000.0, 2.0],
        blob: Bytes::from_static(&[0, 1, 2, 255]),
    };
    for p in BOTH {
        assert_eq!(decode::<Ids>(j2t(&d, "Ids", json, p).unwrap(), p), want);
    }
    let json = r#"{"id":1,"name":"n","flag":false,"tiny":-1,"small":2,"count":3,"ratio":4.5,
        "requests":[{"action":"a","msg":"b"}],"counters":{"k":7},"tags":[9,8],
        "labels":["l"],"payload":"cGF5","ids":{"ids32":[],"ids64":[],"scores":[],"blob":""}}"#;
    let want = Mixed {
        id: 1,
        name: Utf8Bytes::from_static("n"),
        flag: false,
        tiny: -1,
        small: 2,
        count: 3,
        ratio: 4.5,
        requests: vec![request("a", "b")],
        counters: [(Utf8Bytes::from_static("k"), 7)].into_iter().collect(),
        tags: [8, 9].into_iter().collect(),
        labels: vec![Utf8Bytes::from_static("l")],
        payload: Some(Bytes::from_static(b"pay")),
        ids: Ids::default(),
    };
    for p in BOTH {
        assert_eq!(decode::<Mixed>(j2t(&d, "Mixed", json, p).unwrap(), p), want);
    }
}

// ---- Conventions, one test each ----

/// An IDL with every shape the conventions table speaks of.
fn conventions() -> Descriptor {
    Descriptor::from_text(
        "conv.thrift",
        r#"
        enum Color { RED = 1, GREEN = 2 }
        struct Inner { 1: i32 a }
        union Choice { 1: string s, 2: i64 n }
        struct Conv {
            1: optional Color color,
            2: optional map<i32, string> by_id,
            3: optional map<bool, byte> by_flag,
            4: optional double d,
            5: optional uuid u,
            6: i32 with_default = 7,
            7: optional Choice choice,
            8: optional i64 big,
            9: optional map<Color, double> by_color,
            10: string plain,
            11: optional binary blob,
            12: optional list<Inner> inners,
            13: optional map<binary, i16> by_blob,
            14: optional map<i64, bool> by_big,
            15: optional string text,
            16: optional set<i8> small,
        }
        struct Keys { 1: optional map<Inner, i32> by_struct, 2: optional map<list<i32>, i32> by_list }
        struct Strict { 1: required i16 must, 2: optional i32 other }
        struct Node { 1: optional Node next, 2: optional list<Node> kids }
        "#,
    )
    .unwrap()
}

/// JSON -> Thrift -> JSON, in both protocols (which must agree).
fn through(d: &Descriptor, name: &str, json: &str) -> Result<String, TranscodeError> {
    let mut outs = Vec::new();
    for p in BOTH {
        let b = j2t(d, name, json, p)?;
        outs.push(t2j(d, name, Bytes::from(b), p).unwrap());
    }
    assert_eq!(outs[0], outs[1]);
    Ok(outs.remove(0))
}

#[test]
fn field_names_are_the_json_keys_in_wire_order() {
    let d = fixtures();
    let b = encode(&request("echo", "hi"), ThriftProtocol::Binary);
    assert_eq!(
        t2j(&d, "Request", b, ThriftProtocol::Binary).unwrap(),
        r#"{"action":"echo","msg":"hi"}"#
    );
}

#[test]
fn i64_is_written_as_a_number_and_read_from_a_number_or_a_string() {
    let d = conventions();
    assert_eq!(
        through(&d, "Conv", r#"{"big":"-42"}"#).unwrap(),
        r#"{"big":-42,"with_default":7}"#
    );
    assert_eq!(
        through(&d, "Conv", r#"{"big":9223372036854775807}"#).unwrap(),
        r#"{"big":9223372036854775807,"with_default":7}"#
    );
    let e = through(&d, "Conv", r#"{"big":9223372036854775808}"#).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::OutOfRange { ty: "i64" }),
        "{e}"
    );
    let e = through(&d, "Conv", r#"{"big":1.5}"#).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::WrongType { .. }), "{e}");
    let e = through(&d, "Conv", r#"{"big":"12x"}"#).unwrap_err();
    assert_eq!(e.path(), "big");
}

#[test]
fn smaller_integers_are_range_checked() {
    let d = fixtures();
    let e = j2t(&d, "Mixed", r#"{"tiny":128}"#, ThriftProtocol::Binary).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::OutOfRange { ty: "byte" });
    assert_eq!(e.path(), "tiny");
    assert_eq!(e.offset(), Some(8));
    let e = j2t(&d, "Mixed", r#"{"small":"-32769"}"#, ThriftProtocol::Binary).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::OutOfRange { ty: "i16" });
}

#[test]
fn binary_is_padded_standard_base64_out_and_padded_or_not_in() {
    let d = conventions();
    // 0xfb 0xff needs both `+` and `/` of the standard alphabet.
    assert_eq!(
        through(&d, "Conv", r#"{"blob":"+/8"}"#).unwrap(),
        r#"{"blob":"+/8=","with_default":7}"#
    );
    assert_eq!(
        through(&d, "Conv", r#"{"blob":"+/8="}"#).unwrap(),
        r#"{"blob":"+/8=","with_default":7}"#
    );
    for bad in [r#""-_8=""#, r#""+/8==""#, r#""A""#, r#"1"#] {
        let e = through(&d, "Conv", &format!(r#"{{"blob":{bad}}}"#)).unwrap_err();
        assert_eq!(e.path(), "blob", "{bad}: {e}");
    }
}

#[test]
fn enums_are_numbers_out_and_numbers_or_names_in() {
    let d = conventions();
    assert_eq!(
        through(&d, "Conv", r#"{"color":"GREEN"}"#).unwrap(),
        r#"{"color":2,"with_default":7}"#
    );
    assert_eq!(
        through(&d, "Conv", r#"{"color":1}"#).unwrap(),
        r#"{"color":1,"with_default":7}"#
    );
    // Thrift enums are open: a number the IDL does not name passes.
    assert_eq!(
        through(&d, "Conv", r#"{"color":9}"#).unwrap(),
        r#"{"color":9,"with_default":7}"#
    );
}

#[test]
fn unknown_enum_names_are_an_error_naming_the_field_and_the_name() {
    let d = conventions();
    let e = through(&d, "Conv", r#"{"by_color":{"BLUE":1.0}}"#).unwrap_err();
    assert_eq!(
        e.kind(),
        &ErrorKind::UnknownEnumName {
            name: "BLUE".into(),
            enum_name: "Color".into()
        }
    );
    assert_eq!(e.path(), "by_color");
    let e = through(&d, "Conv", r#"{"color":"blue"}"#).unwrap_err();
    assert_eq!(e.path(), "color");
    assert_eq!(e.offset(), Some(9));
}

#[test]
fn integer_enum_bool_binary_and_double_map_keys_are_strings() {
    let d = conventions();
    assert_eq!(
        through(&d, "Conv", r#"{"by_id":{"-1":"a","20":"b"}}"#).unwrap(),
        r#"{"by_id":{"-1":"a","20":"b"},"with_default":7}"#
    );
    assert_eq!(
        through(&d, "Conv", r#"{"by_flag":{"true":1,"false":-1}}"#).unwrap(),
        r#"{"by_flag":{"true":1,"false":-1},"with_default":7}"#
    );
    assert_eq!(
        through(&d, "Conv", r#"{"by_color":{"RED":0.5,"2":1e300}}"#).unwrap(),
        r#"{"by_color":{"1":0.5,"2":1e300},"with_default":7}"#
    );
    assert_eq!(
        through(&d, "Conv", r#"{"by_blob":{"AAE=":1}}"#).unwrap(),
        r#"{"by_blob":{"AAE=":1},"with_default":7}"#
    );
    assert_eq!(
        through(&d, "Conv", r#"{"by_big":{"-9223372036854775808":true}}"#).unwrap(),
        r#"{"by_big":{"-9223372036854775808":true},"with_default":7}"#
    );
    let e = through(&d, "Conv", r#"{"by_id":{"x":"a"}}"#).unwrap_err();
    assert_eq!(e.path(), "by_id");
    let e = through(&d, "Conv", r#"{"by_flag":{"yes":1}}"#).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::WrongType { .. }));
}

#[test]
fn struct_and_list_map_keys_are_refused_both_ways() {
    let d = conventions();
    let e = through(&d, "Keys", r#"{"by_struct":{}}"#).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::UnsupportedMapKey { ty: "struct" });
    assert_eq!(e.path(), "by_struct");
    let e = through(&d, "Keys", r#"{"by_list":{}}"#).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::UnsupportedMapKey { ty: "list" });
    // Thrift side: field 2, an empty map<list<i32>, i32> (Binary).
    let bytes = Bytes::from_static(&[13, 0, 2, 15, 8, 0, 0, 0, 0, 0]);
    let e = t2j(&d, "Keys", bytes, ThriftProtocol::Binary).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::UnsupportedMapKey { ty: "list" });
    assert_eq!(e.path(), "by_list");
}

#[test]
fn missing_required_fields_are_an_error_naming_the_field() {
    let d = fixtures();
    for json in [r#"{"action":"a"}"#, r#"{"action":"a","msg":null}"#] {
        let e = j2t(&d, "Request", json, ThriftProtocol::Compact).unwrap_err();
        assert_eq!(
            e.kind(),
            &ErrorKind::MissingRequired {
                field: "msg".into()
            }
        );
    }
    let e = j2t(
        &d,
        "Mixed",
        r#"{"requests":[{"action":"a","msg":"b"},{"msg":"c"}]}"#,
        ThriftProtocol::Binary,
    )
    .unwrap_err();
    assert_eq!(
        e.kind(),
        &ErrorKind::MissingRequired {
            field: "action".into()
        }
    );
    assert_eq!(e.path(), "requests[1]");
    // Thrift side: a Request with only field 2 (Binary).
    let bytes = Bytes::from_static(&[11, 0, 2, 0, 0, 0, 1, b'm', 0]);
    let e = t2j(&d, "Request", bytes, ThriftProtocol::Binary).unwrap_err();
    assert_eq!(
        e.kind(),
        &ErrorKind::MissingRequired {
            field: "action".into()
        }
    );
}

#[test]
fn absent_fields_with_idl_defaults_are_written_with_the_default() {
    let d = conventions();
    let b = j2t(&d, "Conv", "{}", ThriftProtocol::Binary).unwrap();
    // Field 6, i32, value 7; then stop. No other field (no IDL default, or optional).
    assert_eq!(b, [8, 0, 6, 0, 0, 0, 7, 0]);
    assert_eq!(
        through(&d, "Conv", r#"{"with_default":1}"#).unwrap(),
        r#"{"with_default":1}"#
    );
    // Thrift to JSON mirrors the wire: nothing is added.
    assert_eq!(
        t2j(&d, "Conv", Bytes::from_static(&[0]), ThriftProtocol::Binary).unwrap(),
        "{}"
    );
}

#[test]
fn unknown_json_keys_are_skipped_whatever_they_hold() {
    let d = fixtures();
    let json =
        r#"{"extra":{"a":[1,2,{"b":null}],"c":"\u00e9"},"action":"a","x":-1.5e3,"msg":"m","y":[]}"#;
    for p in BOTH {
        assert_eq!(
            decode::<Request>(j2t(&d, "Request", json, p).unwrap(), p),
            request("a", "m")
        );
    }
    // Skipped values are still JSON.
    let e = j2t(&d, "Request", r#"{"extra":[1,,2]}"#, ThriftProtocol::Binary).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Syntax { .. }));
    assert_eq!(e.offset(), Some(12));
}

#[test]
fn null_is_an_absent_field() {
    let d = conventions();
    assert_eq!(
        through(
            &d,
            "Conv",
            r#"{"color":null,"text":null,"with_default":null}"#
        )
        .unwrap(),
        r#"{"with_default":7}"#
    );
    // But not a list element.
    let e = through(&d, "Conv", r#"{"inners":[null]}"#).unwrap_err();
    assert_eq!(e.path(), "inners[0]");
}

#[test]
fn unions_need_exactly_one_field() {
    let d = conventions();
    assert_eq!(
        through(&d, "Conv", r#"{"choice":{"n":"5","s":null}}"#).unwrap(),
        r#"{"choice":{"n":5},"with_default":7}"#
    );
    for (json, count) in [
        (r#"{"choice":{}}"#, 0),
        (r#"{"choice":{"s":"a","n":1}}"#, 2),
    ] {
        let e = through(&d, "Conv", json).unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::Union { count });
        assert_eq!(e.path(), "choice");
    }
    // Thrift side: a Choice with no field.
    let e = t2j(
        &d,
        "Choice",
        Bytes::from_static(&[0]),
        ThriftProtocol::Binary,
    )
    .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Union { count: 0 });
}

#[test]
fn doubles_are_finite_numbers_both_ways() {
    let d = conventions();
    assert_eq!(
        through(&d, "Conv", r#"{"d":"-0.25"}"#).unwrap(),
        r#"{"d":-0.25,"with_default":7}"#
    );
    assert_eq!(
        through(&d, "Conv", r#"{"d":1}"#).unwrap(),
        r#"{"d":1.0,"with_default":7}"#
    );
    for bad in [
        r#""NaN""#,
        r#""inf""#,
        r#""Infinity""#,
        "NaN",
        "1e999",
        r#""-1e999""#,
    ] {
        let e = through(&d, "Conv", &format!(r#"{{"d":{bad}}}"#)).unwrap_err();
        assert_eq!(e.path(), "d", "{bad}");
    }
    // Thrift side: NaN and infinities have no JSON form (Binary: field 4, double).
    for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut b = vec![4, 0, 4];
        b.extend_from_slice(&v.to_bits().to_be_bytes());
        b.push(0);
        let e = t2j(&d, "Conv", Bytes::from(b), ThriftProtocol::Binary).unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::NonFinite);
        assert_eq!(e.path(), "d");
    }
}

#[test]
fn uuids_are_lower_case_8_4_4_4_12_text() {
    let d = conventions();
    assert_eq!(
        through(
            &d,
            "Conv",
            r#"{"u":"00112233-4455-6677-8899-AABBCCDDEEFF"}"#
        )
        .unwrap(),
        r#"{"u":"00112233-4455-6677-8899-aabbccddeeff","with_default":7}"#
    );
    let e = through(&d, "Conv", r#"{"u":"00112233445566778899aabbccddeeff"}"#).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidUuid);
}

#[test]
fn strings_escape_only_what_json_requires() {
    let d = conventions();
    let json = r#"{"text":"q\" b\\ s\/ n\n r\r t\t \b\f \u0001 é 😀 \u00e9 \ud83d\ude00 <>&"}"#;
    assert_eq!(
        through(&d, "Conv", json).unwrap(),
        r#"{"text":"q\" b\\ s/ n\n r\r t\t \b\f \u0001 é 😀 é 😀 <>&","with_default":7}"#
    );
}

#[test]
fn bad_strings_are_typed_errors_at_their_offset() {
    let d = conventions();
    for (json, at) in [
        ("{\"text\":\"a\u{1}\"}", 10),
        (r#"{"text":"\ud800"}"#, 15),
        (r#"{"text":"\udc00"}"#, 15),
        (r#"{"text":"\x"}"#, 11),
        (r#"{"text":"\u12g4"}"#, 11),
    ] {
        let e = through(&d, "Conv", json).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::InvalidString { .. }),
            "{json}: {e}"
        );
        assert_eq!(e.offset(), Some(at), "{json}: {e}");
        assert_eq!(e.path(), "text");
    }
    let mut invalid = br#"{"text":"#.to_vec();
    invalid.extend_from_slice(&[b'"', 0xff, b'"', b'}']);
    let mut out = Vec::new();
    let e = json_to_thrift(
        &d,
        ty(&d, "Conv"),
        &invalid,
        ThriftProtocol::Binary,
        &mut out,
    )
    .unwrap_err();
    assert!(matches!(
        e.kind(),
        ErrorKind::InvalidString {
            reason: "invalid UTF-8"
        }
    ));
    assert!(out.is_empty());
}

#[test]
fn repeated_fields_are_refused_both_ways() {
    let d = fixtures();
    let e = j2t(
        &d,
        "Request",
        r#"{"action":"a","action":"b","msg":""}"#,
        ThriftProtocol::Binary,
    )
    .unwrap_err();
    assert_eq!(
        e.kind(),
        &ErrorKind::DuplicateField {
            field: "action".into()
        }
    );
    let one = [11, 0, 1, 0, 0, 0, 1, b'a'];
    let mut b = one.to_vec();
    b.extend_from_slice(&one);
    b.push(0);
    let e = t2j(&d, "Request", Bytes::from(b), ThriftProtocol::Binary).unwrap_err();
    assert_eq!(
        e.kind(),
        &ErrorKind::DuplicateField {
            field: "action".into()
        }
    );
}

#[test]
fn unknown_and_mistyped_field_ids_in_thrift_are_skipped() {
    let d = fixtures();
    let mut b = vec![
        12, 0, 99, 8, 0, 1, 0, 0, 0, 5, 0, // field 99: a struct the IDL does not name
        8, 0, 1, 0, 0, 0, 5, // field 1 as an i32: not its declared string
    ];
    b.extend_from_slice(&encode(&request("a", "m"), ThriftProtocol::Binary));
    assert_eq!(
        t2j(&d, "Request", Bytes::from(b), ThriftProtocol::Binary).unwrap(),
        r#"{"action":"a","msg":"m"}"#
    );
}

#[test]
fn containers_of_another_element_type_are_refused() {
    let d = fixtures();
    // MyTest field 3 `list<i64>` carrying one i32.
    let b = Bytes::from_static(&[15, 0, 3, 8, 0, 0, 0, 1, 0, 0, 0, 1, 0]);
    let e = t2j(&d, "MyTest", b, ThriftProtocol::Binary).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::ElementType { .. }));
    assert_eq!(e.path(), "nums");
}

// ---- Hostile input ----

#[test]
fn json_truncated_at_every_byte_is_a_typed_error_and_leaves_out_alone() {
    let d = fixtures();
    let small = Mixed {
        requests: vec![request("a", "b\"c")],
        counters: [(Utf8Bytes::from_static("k"), -1)].into_iter().collect(),
        tags: [1, 2].into_iter().collect(),
        labels: vec![Utf8Bytes::from_static("l\u{e9}")],
        ids: ids(2),
        ..mixed()
    };
    let json = t2j(
        &d,
        "Mixed",
        encode(&small, ThriftProtocol::Binary),
        ThriftProtocol::Binary,
    )
    .unwrap();
    for p in BOTH {
        for cut in 0..json.len() {
            let mut out = vec![1, 2, 3];
            let e = json_to_thrift(&d, ty(&d, "Mixed"), &json.as_bytes()[..cut], p, &mut out)
                .unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::Eof { .. }),
                "cut at {cut}: {e} ({})",
                &json[..cut]
            );
            assert!(e.offset().is_some_and(|o| o <= cut), "cut at {cut}: {e}");
            assert_eq!(out, [1, 2, 3]);
        }
    }
}

#[test]
fn thrift_truncated_at_every_byte_is_a_typed_error() {
    let d = fixtures();
    let small = Mixed {
        requests: vec![request("a", "b")],
        ids: ids(2),
        ..mixed()
    };
    for p in BOTH {
        let bytes = encode(&small, p);
        for cut in 0..bytes.len() {
            let mut out = Vec::new();
            let e =
                thrift_to_json(&d, ty(&d, "Mixed"), bytes.slice(..cut), p, &mut out).unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::Thrift(_)),
                "cut at {cut}: {e}"
            );
            assert!(out.is_empty());
        }
    }
}

#[test]
fn wrong_json_types_name_the_path_and_what_was_expected() {
    let d = fixtures();
    let cases = [
        (r#"{"id":"x"}"#, "id", "an integer"),
        (r#"{"flag":1}"#, "flag", "a boolean"),
        (r#"{"name":1}"#, "name", "a string"),
        (r#"{"requests":{}}"#, "requests", "an array"),
        (
            r#"{"requests":[{"action":"a","msg":"b"},{"action":"a","msg":3}]}"#,
            "requests[1].msg",
            "a string",
        ),
        (
            r#"{"counters":{"k":"zz"}}"#,
            r#"counters["k"]"#,
            "an integer",
        ),
        (r#"{"counters":[]}"#, "counters", "an object"),
        (
            r#"{"ids":{"scores":[1,true]}}"#,
            "ids.scores[1]",
            "a number",
        ),
        (r#"{"payload":[1]}"#, "payload", "a base64 string"),
        (r#"{"ids":3}"#, "ids", "an object"),
    ];
    for (json, path, expected) in cases {
        let e = j2t(&d, "Mixed", json, ThriftProtocol::Compact).unwrap_err();
        assert_eq!(e.path(), path, "{json}: {e}");
        match e.kind() {
            ErrorKind::WrongType { expected: x, .. } => assert_eq!(*x, expected, "{json}"),
            other => panic!("{json}: {other:?}"),
        }
    }
    let e = j2t(&d, "Mixed", "[]", ThriftProtocol::Binary).unwrap_err();
    assert_eq!(e.path(), "");
    assert_eq!(
        e.to_string(),
        "expected an object, found an array (JSON byte 0)"
    );
}

#[test]
fn errors_display_the_path_and_offset() {
    let d = fixtures();
    let e = j2t(
        &d,
        "Mixed",
        r#"{"requests":[{},{},{},{"action":"a","msg":7}]}"#,
        ThriftProtocol::Binary,
    )
    .unwrap_err();
    // The first three fail first: missing `action`.
    assert_eq!(e.path(), "requests[0]");
    let json = r#"{"requests":[{"action":"a","msg":"b"},{"action":"a","msg":"b"},{"action":"a","msg":"b"},{"action":"a","msg":7}]}"#;
    let e = j2t(&d, "Mixed", json, ThriftProtocol::Binary).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "expected a string, found a number at `requests[3].msg` (JSON byte {})",
            json.find("7}").unwrap()
        )
    );
}

#[test]
fn trailing_data_is_refused() {
    let d = fixtures();
    let e = j2t(
        &d,
        "Request",
        r#"{"action":"a","msg":"b"} x"#,
        ThriftProtocol::Binary,
    )
    .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::TrailingData);
    assert_eq!(e.offset(), Some(25));
    let mut b = encode(&request("a", "b"), ThriftProtocol::Binary).to_vec();
    b.push(0);
    let e = t2j(&d, "Request", Bytes::from(b), ThriftProtocol::Binary).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::TrailingData);
}

fn nested(levels: usize) -> String {
    let mut s = String::new();
    for _ in 0..levels - 1 {
        s.push_str(r#"{"next":"#);
    }
    s.push_str("{}");
    for _ in 0..levels - 1 {
        s.push('}');
    }
    s
}

#[test]
fn nesting_is_bounded_at_64_levels_both_ways() {
    let d = conventions();
    let ok = through(&d, "Node", &nested(MAX_DEPTH)).unwrap();
    assert_eq!(ok, nested(MAX_DEPTH));
    let e = through(&d, "Node", &nested(MAX_DEPTH + 1)).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::DepthLimit(MAX_DEPTH));
    assert_eq!(e.path().matches("next").count(), MAX_DEPTH);
    // Lists count as levels too.
    let e = through(
        &d,
        "Node",
        &format!(r#"{{"kids":[{}]}}"#, nested(MAX_DEPTH - 1)),
    )
    .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::DepthLimit(MAX_DEPTH));
    // Skipped values are bounded as well, far past where recursion would hurt.
    let deep = format!(
        r#"{{"zzz":{}0{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let e = through(&d, "Node", &deep).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::DepthLimit(MAX_DEPTH));
    // Thrift side: 65 nested structs (Binary: field 1 struct, ..., stop bytes).
    let mut b = Vec::new();
    for _ in 0..MAX_DEPTH {
        b.extend_from_slice(&[12, 0, 1]);
    }
    b.extend(std::iter::repeat_n(0, MAX_DEPTH + 1));
    let e = t2j(&d, "Node", Bytes::from(b), ThriftProtocol::Binary).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Thrift(_)), "{e}");
}

#[test]
fn a_huge_declared_length_in_thrift_is_refused_before_allocating() {
    let d = fixtures();
    // Ids field 1, list<i32> claiming 2^31-1 elements, with none present.
    let b = Bytes::from_static(&[15, 0, 1, 8, 0x7f, 0xff, 0xff, 0xff]);
    let e = t2j(&d, "Ids", b, ThriftProtocol::Binary).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Thrift(_)));
    assert_eq!(e.path(), "ids32");
}

// ---- Properties ----

fn arb_request() -> impl Strategy<Value = Request> {
    (any::<String>(), any::<String>()).prop_map(|(a, m)| Request {
        action: Utf8Bytes::from(a),
        msg: Utf8Bytes::from(m),
    })
}

fn arb_ids() -> impl Strategy<Value = Ids> {
    (
        prop::collection::vec(any::<i32>(), 0..40),
        prop::collection::vec(any::<i64>(), 0..40),
        prop::collection::vec(any::<f64>().prop_filter("finite", |v| v.is_finite()), 0..40),
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(ids32, ids64, scores, blob)| Ids {
            ids32,
            ids64,
            scores,
            blob: Bytes::from(blob),
        })
}

fn arb_mixed() -> impl Strategy<Value = Mixed> {
    (
        (
            any::<i64>(),
            any::<String>(),
            any::<bool>(),
            any::<i8>(),
            any::<i16>(),
            any::<i32>(),
        ),
        any::<f64>().prop_filter("finite", |v| v.is_finite()),
        prop::collection::vec(arb_request(), 0..20),
        prop::collection::btree_map(any::<String>(), any::<i64>(), 0..20),
        prop::collection::btree_set(any::<i32>(), 0..20),
        prop::collection::vec(any::<String>(), 0..20),
        prop::option::of(prop::collection::vec(any::<u8>(), 0..64)),
        arb_ids(),
    )
        .prop_map(
            |(
                (id, name, flag, tiny, small, count),
                ratio,
                requests,
                counters,
                tags,
                labels,
                payload,
                ids,
            )| Mixed {
                id,
                name: Utf8Bytes::from(name),
                flag,
                tiny,
                small,
                count,
                ratio,
                requests,
                counters: counters
                    .into_iter()
                    .map(|(k, v)| (Utf8Bytes::from(k), v))
                    .collect(),
                tags,
                labels: labels.into_iter().map(Utf8Bytes::from).collect(),
                payload: payload.map(Bytes::from),
                ids,
            },
        )
}

proptest! {
    #[test]
    fn any_mixed_round_trips_through_json_to_the_same_bytes(m in arb_mixed()) {
        let d = fixtures();
        for p in BOTH {
            let bytes = encode(&m, p);
            let json = t2j(&d, "Mixed", bytes.clone(), p).unwrap();
            let back = j2t(&d, "Mixed", &json, p).unwrap();
            prop_assert_eq!(&back, &bytes.to_vec());
            prop_assert_eq!(decode::<Mixed>(back, p), m.clone());
        }
    }

    #[test]
    fn arbitrary_json_text_gives_ok_or_a_typed_error(s in "[\\[\\]{}\":,0-9a-z\\\\ .eE+-]{0,64}") {
        let d = fixtures();
        for p in BOTH {
            let mut out = Vec::new();
            if json_to_thrift(&d, ty(&d, "Mixed"), s.as_bytes(), p, &mut out).is_ok() {
                let json = t2j(&d, "Mixed", Bytes::from(out), p).unwrap();
                prop_assert!(j2t(&d, "Mixed", &json, p).is_ok());
            }
        }
    }
}
