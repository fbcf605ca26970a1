//! Cross-implementation test vectors against Apache Thrift, the reference implementation.
//!
//! `interop/apache.py` builds a fixed set of values of every struct in `idl/echo.thrift`
//! and `idl/mixed.thrift` (plus message envelopes and `TApplicationException`) with the
//! Python classes `thrift --gen py` generates, and encodes them with Apache's Binary
//! (strict), Compact and JSON protocols. This test builds the same values by case name
//! ([`case`]) from the hand-written reference types and checks, in every protocol:
//!
//! 1. Apache → thrift-wire: thrift-wire decodes Apache's bytes to the expected value
//!    (doubles compared by bit pattern) and, where the bytes are canonical (`exact`),
//!    re-encodes them byte for byte. Non-strict Binary message headers decode when
//!    accepted and are rejected by default. Every `Mixed` also decodes as an `Ano`, which
//!    skips fields 2 to 13 (every wire type).
//! 2. thrift-wire → Apache: the test writes its own encodings to a file and runs
//!    `apache.py check`, which decodes them with Apache's pure-Python and C-accelerated
//!    protocols and compares them with its values.
//!
//! In JSON, "exact" is narrower (Python pads base64 and writes control bytes raw, which
//! thrift-wire, like Apache's C++ and Java, does not), NaNs compare equal whatever their
//! bits (JSON has one `"NaN"`), and Python's encodings of values with NaNs or infinities
//! (bare `nan`/`inf`, not JSON) must be refused.
//!
//! Needs the Apache Thrift compiler (`thrift`, or `$THRIFT`) and `python3` (or `$PYTHON`)
//! with the `thrift` module. Without them the test is skipped, unless `CI` is set, in
//! which case it fails.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Debug;

use bytes::Bytes;
use thrift_wire::fixtures::echo::{Ano, EchoError, Ids, MyTest, Request, Response};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::{
    ApplicationException, ApplicationExceptionKind, Binary, Codec, Compact, DecodeError,
    DecodeErrorKind, Json, LinkBuffer, Message, MessageHeader, MessageType, Protocol, Utf8Bytes,
};

#[path = "../../../interop/harness.rs"]
mod harness;
use harness::*;

// ---------------------------------------------------------------------------------------
// The cases, mirrored from interop/apache.py.

/// Every case `apache.py` defines, in its order.
const CASES: &[&str] = &[
    "request_basic",
    "request_empty",
    "request_unicode",
    "request_long",
    "request_escapes",
    "request_missing_msg",
    "response_basic",
    "response_unicode",
    "ano_zero",
    "ano_one",
    "ano_neg_one",
    "ano_min",
    "ano_max",
    "ano_absent",
    "my_test_basic",
    "my_test_empty_list",
    "my_test_varint_edges",
    "my_test_list_14",
    "my_test_list_15",
    "my_test_big",
    "my_test_absent",
    "ids_basic",
    "ids_empty",
    "ids_edges",
    "ids_nan_payloads",
    "ids_big",
    "ids_finite_doubles",
    "ids_absent",
    "echo_error_basic",
    "echo_error_edges",
    "echo_error_empty",
    "mixed_full",
    "mixed_empty_containers",
    "mixed_extremes",
    "mixed_nan",
    "mixed_big",
    "mixed_set_hash_order",
    "mixed_map_insertion_order",
    "mixed_flag_only",
    "app_exception_unknown",
    "app_exception_unknown_method",
    "app_exception_other_kind",
    "app_exception_no_message",
    "message_call",
    "message_reply",
    "message_oneway",
    "message_exception",
    "message_seq_neg_one",
    "message_seq_min",
    "message_seq_max",
    "message_seq_varint",
    "message_unicode_name",
    "message_empty_name",
];

const UNICODE: &str = "ünïcødé — 日本語 — Ελληνικά — עברית — 🎉🦀 — \0 — e\u{301}";

#[derive(Debug, Clone, PartialEq)]
enum Body {
    Request(Request),
    Response(Response),
    Ano(Ano),
    MyTest(MyTest),
    Ids(Ids),
    EchoError(EchoError),
    Mixed(Mixed),
    AppEx(ApplicationException),
}

impl Body {
    /// The Python class name, as `apache.py` reports it.
    fn type_name(&self) -> &'static str {
        match self {
            Body::Request(_) => "Request",
            Body::Response(_) => "Response",
            Body::Ano(_) => "Ano",
            Body::MyTest(_) => "MyTest",
            Body::Ids(_) => "Ids",
            Body::EchoError(_) => "EchoError",
            Body::Mixed(_) => "Mixed",
            Body::AppEx(_) => "TApplicationException",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Decodes to `body`.
    Ok,
    /// A required field is absent: decoding fails.
    MissingRequired,
}

#[derive(Debug, Clone)]
struct Case {
    header: Option<MessageHeader>,
    body: Body,
    expect: Expect,
}

impl Case {
    fn type_label(&self) -> String {
        let prefix = if self.header.is_some() {
            "message:"
        } else {
            ""
        };
        format!("{prefix}{}", self.body.type_name())
    }
}

fn text(s: &str) -> Utf8Bytes {
    Utf8Bytes::from(s.to_string())
}

fn request(action: &str, msg: &str) -> Request {
    Request {
        action: text(action),
        msg: text(msg),
    }
}

fn response(action: &str, msg: &str) -> Response {
    Response {
        action: text(action),
        msg: text(msg),
    }
}

fn lcg(i: u64) -> u64 {
    i.wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
}

fn big_i32(n: u64) -> Vec<i32> {
    (0..n).map(|i| (lcg(i) >> 32) as u32 as i32).collect()
}

fn big_i64(n: u64) -> Vec<i64> {
    (0..n).map(|i| lcg(i) as i64).collect()
}

fn big_f64(n: u64) -> Vec<f64> {
    (0..n).map(|i| f64::from_bits(lcg(3 * i + 1))).collect()
}

fn blob(n: usize) -> Bytes {
    Bytes::from((0..n).map(|i| (i * 13) as u8).collect::<Vec<u8>>())
}

fn ids(ids32: Vec<i32>, ids64: Vec<i64>, scores: Vec<f64>, blob: &[u8]) -> Ids {
    Ids {
        ids32,
        ids64,
        scores,
        blob: Bytes::copy_from_slice(blob),
    }
}

fn counters<const N: usize>(pairs: [(&str, i64); N]) -> BTreeMap<Utf8Bytes, i64> {
    pairs.into_iter().map(|(k, v)| (text(k), v)).collect()
}

fn app_ex(id: i32, message: &str) -> ApplicationException {
    ApplicationException::new(ApplicationExceptionKind::from_id(id), text(message))
}

/// The value of case `name`, as thrift-wire holds it.
fn case(name: &str) -> Option<Case> {
    use Body as B;
    let plain = |body| {
        Some(Case {
            header: None,
            body,
            expect: Expect::Ok,
        })
    };
    let message = |name: &str, ty, seq_id, body| {
        Some(Case {
            header: Some(MessageHeader {
                name: text(name),
                ty,
                seq_id,
            }),
            body,
            expect: Expect::Ok,
        })
    };
    let my_test = |num, ano, nums| {
        B::MyTest(MyTest {
            num,
            ano: Ano { num: ano },
            nums,
        })
    };
    match name {
        "request_basic" => plain(B::Request(request("echo", "hello"))),
        "request_empty" => plain(B::Request(request("", ""))),
        "request_unicode" => plain(B::Request(request("ünïcødé", UNICODE))),
        "request_long" => plain(B::Request(request(
            "echo",
            &"abcdefghijklmnop".repeat(4375),
        ))),
        "request_escapes" => plain(B::Request(request("q\"\\/", "\u{8}\u{c}\n\r\t"))),
        "request_missing_msg" => Some(Case {
            header: None,
            body: B::Request(Request::default()),
            expect: Expect::MissingRequired,
        }),
        "response_basic" => plain(B::Response(response("echo", "world"))),
        "response_unicode" => plain(B::Response(response("🦀", UNICODE))),

        "ano_zero" | "ano_absent" => plain(B::Ano(Ano { num: 0 })),
        "ano_one" => plain(B::Ano(Ano { num: 1 })),
        "ano_neg_one" => plain(B::Ano(Ano { num: -1 })),
        "ano_min" => plain(B::Ano(Ano { num: i64::MIN })),
        "ano_max" => plain(B::Ano(Ano { num: i64::MAX })),

        "my_test_basic" => plain(my_test(1, -1, vec![1, 2])),
        "my_test_empty_list" => plain(my_test(-42, 7, vec![])),
        "my_test_varint_edges" => plain(my_test(
            i64::MIN,
            i64::MAX,
            vec![
                0,
                1,
                -1,
                63,
                64,
                -64,
                -65,
                8191,
                8192,
                -8193,
                i32::MAX as i64,
                i32::MAX as i64 + 1,
                i32::MIN as i64,
                i32::MIN as i64 - 1,
                1 << 53,
                1 << 62,
                -(1 << 62),
                i64::MAX,
                i64::MIN,
            ],
        )),
        "my_test_list_14" => plain(my_test(14, 0, (0..14).collect())),
        "my_test_list_15" => plain(my_test(15, 0, (0..15).collect())),
        "my_test_big" => plain(my_test(1 << 40, i64::MIN, big_i64(20_000))),
        "my_test_absent" => plain(my_test(5, 0, vec![])),

        "ids_basic" => plain(B::Ids(ids(
            vec![1, -2, 3],
            vec![-(1 << 40), 0, 1 << 40],
            vec![0.5, -1.25, 3.0],
            &[0x00, 0x01, 0xfe, 0xff],
        ))),
        "ids_empty" | "ids_absent" => plain(B::Ids(Ids::default())),
        "ids_edges" => plain(B::Ids(ids(
            vec![i32::MIN, i32::MAX, 0, -1, 1],
            vec![i64::MIN, i64::MAX, 0, -1, 1],
            vec![
                0.0,
                -0.0,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
                f64::MIN_POSITIVE,
                5e-324,
                -5e-324,
                f64::MAX,
                f64::MIN,
                std::f64::consts::PI,
                1e300,
                0.1,
            ],
            &(0..=255).collect::<Vec<u8>>(),
        ))),
        "ids_nan_payloads" => plain(B::Ids(ids(
            vec![],
            vec![],
            [
                0x7ff0_0000_0000_0001,
                0xfff8_0000_0000_0000,
                0x7ff8_dead_0000_0000,
                0xffff_ffff_ffff_ffff,
                0x7ff4_0000_0000_0000,
            ]
            .into_iter()
            .map(f64::from_bits)
            .collect(),
            &[],
        ))),
        "ids_big" => plain(B::Ids(Ids {
            ids32: big_i32(20_000),
            ids64: big_i64(20_000),
            scores: big_f64(20_000),
            blob: blob(10_000),
        })),

        "ids_finite_doubles" => plain(B::Ids(Ids {
            scores: big_f64(20_000)
                .into_iter()
                .filter(|v| v.is_finite())
                .collect(),
            blob: blob(3000),
            ..Ids::default()
        })),

        "echo_error_basic" => plain(B::EchoError(EchoError {
            code: 42,
            message: text("boom"),
        })),
        "echo_error_edges" => plain(B::EchoError(EchoError {
            code: i32::MIN,
            message: text(UNICODE),
        })),
        "echo_error_empty" => plain(B::EchoError(EchoError::default())),

        "mixed_full" => plain(B::Mixed(Mixed {
            id: 1 << 40,
            name: text("mixed-value-é"),
            flag: true,
            tiny: -3,
            small: 30_000,
            count: -70_000,
            ratio: 0.125,
            requests: vec![request("echo", "one"), request("echo", "two")],
            counters: counters([("a", 1), ("b", -2), ("c", 1 << 40)]),
            tags: BTreeSet::from([1, 2, 3, 100]),
            labels: vec![text("x"), text("y"), text("z")],
            payload: Some(Bytes::from_static(b"\x00payload\xff")),
            ids: ids(vec![7, -7], vec![1 << 33], vec![-0.0, 2.5], b"blob"),
        })),
        "mixed_empty_containers" => plain(B::Mixed(Mixed::default())),
        "mixed_extremes" => plain(B::Mixed(Mixed {
            id: i64::MAX,
            name: text(UNICODE),
            flag: true,
            tiny: i8::MIN,
            small: i16::MIN,
            count: i32::MAX,
            ratio: -0.0,
            requests: vec![request("", ""), request(UNICODE, "x")],
            counters: counters([
                ("", i64::MIN),
                ("a", -1),
                ("é", i64::MAX),
                ("🦀", 0),
                ("z", 1),
            ]),
            tags: BTreeSet::from([i32::MIN, -5, -1, 0, 1, i32::MAX]),
            labels: vec![text(""), text(UNICODE), text("z")],
            payload: Some(Bytes::new()),
            ids: ids(vec![i32::MIN], vec![i64::MIN], vec![f64::INFINITY], &[]),
        })),
        "mixed_nan" => plain(B::Mixed(Mixed {
            id: i64::MIN,
            name: text("nan"),
            flag: true,
            tiny: i8::MAX,
            small: i16::MAX,
            count: i32::MIN,
            ratio: f64::NAN,
            tags: BTreeSet::from([-1]),
            labels: vec![text("only")],
            ..Mixed::default()
        })),
        "mixed_big" => plain(B::Mixed(Mixed {
            id: 123_456_789,
            name: text("mixed-big"),
            flag: true,
            tiny: 42,
            small: -1234,
            count: 987_654,
            ratio: 1.0 / 3.0,
            requests: (0..16u8)
                .map(|i| request("echo", &char::from(b'a' + i % 26).to_string().repeat(512)))
                .collect(),
            counters: (0..64)
                .map(|i| (text(&format!("counter-{i:03}")), lcg(i) as i64))
                .collect(),
            tags: big_i32(256).into_iter().collect(),
            labels: (0..64).map(|i| text(&format!("label-{i}-ü"))).collect(),
            payload: Some(blob(3000)),
            ids: Ids {
                ids32: big_i32(128),
                ids64: big_i64(128),
                scores: big_f64(128),
                blob: blob(512),
            },
        })),
        "mixed_set_hash_order" => plain(B::Mixed(Mixed {
            id: 1,
            tags: BTreeSet::from([i32::MAX, -1, 100_000, -100_000, 3, 1 << 20, -7, 0]),
            ..Mixed::default()
        })),
        "mixed_map_insertion_order" => plain(B::Mixed(Mixed {
            id: 2,
            counters: counters([("z", 1), ("y", 2), ("é", 3), ("a", 4), ("", 5)]),
            ..Mixed::default()
        })),
        "mixed_flag_only" => plain(B::Mixed(Mixed {
            flag: true,
            ..Mixed::default()
        })),

        "app_exception_unknown" => plain(B::AppEx(app_ex(0, ""))),
        "app_exception_unknown_method" => plain(B::AppEx(app_ex(1, "Unknown method 'frobnicate'"))),
        "app_exception_other_kind" => plain(B::AppEx(app_ex(99, UNICODE))),
        "app_exception_no_message" => plain(B::AppEx(app_ex(6, ""))),

        "message_call" => message(
            "echo",
            MessageType::Call,
            1,
            B::Request(request("echo", "hi")),
        ),
        "message_reply" => message(
            "echo",
            MessageType::Reply,
            1,
            B::Response(response("echo", "hi")),
        ),
        "message_oneway" => message(
            "notify",
            MessageType::Oneway,
            0,
            B::Request(request("notify", "event")),
        ),
        "message_exception" => message(
            "echo2",
            MessageType::Exception,
            2,
            B::AppEx(app_ex(1, "Unknown method echo2")),
        ),
        "message_seq_neg_one" => message(
            "echo",
            MessageType::Call,
            -1,
            B::Request(request("echo", "hi")),
        ),
        "message_seq_min" => message(
            "echo",
            MessageType::Reply,
            i32::MIN,
            B::Response(response("echo", "hi")),
        ),
        "message_seq_max" => message(
            "echo",
            MessageType::Call,
            i32::MAX,
            B::Request(request("echo", "hi")),
        ),
        "message_seq_varint" => message(
            "notify",
            MessageType::Oneway,
            0x1234_5678,
            B::Request(request("e", "")),
        ),
        "message_unicode_name" => message(
            "échо_🦀",
            MessageType::Exception,
            1000,
            B::AppEx(app_ex(6, UNICODE)),
        ),
        "message_empty_name" => message("", MessageType::Call, 42, B::Request(request("", ""))),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------
// Encoding, decoding, comparison.

fn encode<P: Protocol>(case: &Case) -> Vec<u8> {
    fn enc<P: Protocol, M: Message>(header: Option<&MessageHeader>, m: &M) -> Vec<u8> {
        let codec = Codec::<P>::new();
        let mut buf = LinkBuffer::new();
        let n = match header {
            Some(h) => codec.encode_message(h, m, &mut buf),
            None => codec.encode(m, &mut buf),
        }
        .expect("encodes");
        assert_eq!(n, buf.len(), "the size returned is the bytes written");
        buf.next(n).to_vec()
    }
    let h = case.header.as_ref();
    match &case.body {
        Body::Request(m) => enc::<P, _>(h, m),
        Body::Response(m) => enc::<P, _>(h, m),
        Body::Ano(m) => enc::<P, _>(h, m),
        Body::MyTest(m) => enc::<P, _>(h, m),
        Body::Ids(m) => enc::<P, _>(h, m),
        Body::EchoError(m) => enc::<P, _>(h, m),
        Body::Mixed(m) => enc::<P, _>(h, m),
        Body::AppEx(m) => enc::<P, _>(h, m),
    }
}

type Decoded = (Option<MessageHeader>, Body);

/// Decodes `bytes` as a value of `like`'s type (after a message header if it has one).
fn decode<P: Protocol>(
    codec: &Codec<P>,
    like: &Case,
    bytes: Bytes,
) -> Result<Decoded, DecodeError> {
    fn dec<P: Protocol, M: Message>(
        codec: &Codec<P>,
        with_header: bool,
        bytes: Bytes,
        wrap: fn(M) -> Body,
    ) -> Result<Decoded, DecodeError> {
        if with_header {
            let (h, m) = codec.decode_message::<M>(bytes)?;
            Ok((Some(h), wrap(m)))
        } else {
            Ok((None, wrap(codec.decode::<M>(bytes)?)))
        }
    }
    let h = like.header.is_some();
    match &like.body {
        Body::Request(_) => dec(codec, h, bytes, Body::Request),
        Body::Response(_) => dec(codec, h, bytes, Body::Response),
        Body::Ano(_) => dec(codec, h, bytes, Body::Ano),
        Body::MyTest(_) => dec(codec, h, bytes, Body::MyTest),
        Body::Ids(_) => dec(codec, h, bytes, Body::Ids),
        Body::EchoError(_) => dec(codec, h, bytes, Body::EchoError),
        Body::Mixed(_) => dec(codec, h, bytes, Body::Mixed),
        Body::AppEx(_) => dec(codec, h, bytes, Body::AppEx),
    }
}

fn short<T: Debug>(v: &T) -> String {
    let s = format!("{v:?}");
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s,
    }
}

fn eq<T: PartialEq + Debug>(path: &str, want: &T, got: &T) -> Result<(), String> {
    if want == got {
        Ok(())
    } else {
        Err(format!(
            "{path}: expected {}, got {}",
            short(want),
            short(got)
        ))
    }
}

fn eq_slice<T: PartialEq + Debug>(path: &str, want: &[T], got: &[T]) -> Result<(), String> {
    if want.len() != got.len() {
        return Err(format!(
            "{path}: expected {} elements, got {}",
            want.len(),
            got.len()
        ));
    }
    match want.iter().zip(got).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(i) => eq(&format!("{path}[{i}]"), &want[i], &got[i]),
    }
}

fn eq_f64(path: &str, want: f64, got: f64) -> Result<(), String> {
    if want.to_bits() == got.to_bits() {
        Ok(())
    } else {
        Err(format!(
            "{path}: expected {want:?} (bits {:016x}), got {got:?} (bits {:016x})",
            want.to_bits(),
            got.to_bits()
        ))
    }
}

fn eq_f64s(path: &str, want: &[f64], got: &[f64]) -> Result<(), String> {
    if want.len() != got.len() {
        return Err(format!(
            "{path}: expected {} elements, got {}",
            want.len(),
            got.len()
        ));
    }
    want.iter()
        .zip(got)
        .enumerate()
        .try_for_each(|(i, (a, b))| eq_f64(&format!("{path}[{i}]"), *a, *b))
}

fn same_ids(path: &str, want: &Ids, got: &Ids) -> Result<(), String> {
    let Ids {
        ids32,
        ids64,
        scores,
        blob,
    } = want;
    eq_slice(&format!("{path}.ids32"), ids32, &got.ids32)?;
    eq_slice(&format!("{path}.ids64"), ids64, &got.ids64)?;
    eq_f64s(&format!("{path}.scores"), scores, &got.scores)?;
    eq(&format!("{path}.blob"), blob, &got.blob)
}

fn same_mixed(want: &Mixed, got: &Mixed) -> Result<(), String> {
    let Mixed {
        id,
        name,
        flag,
        tiny,
        small,
        count,
        ratio,
        requests,
        counters,
        tags,
        labels,
        payload,
        ids,
    } = want;
    eq("Mixed.id", id, &got.id)?;
    eq("Mixed.name", name, &got.name)?;
    eq("Mixed.flag", flag, &got.flag)?;
    eq("Mixed.tiny", tiny, &got.tiny)?;
    eq("Mixed.small", small, &got.small)?;
    eq("Mixed.count", count, &got.count)?;
    eq_f64("Mixed.ratio", *ratio, got.ratio)?;
    eq_slice("Mixed.requests", requests, &got.requests)?;
    eq("Mixed.counters", counters, &got.counters)?;
    eq("Mixed.tags", tags, &got.tags)?;
    eq_slice("Mixed.labels", labels, &got.labels)?;
    eq("Mixed.payload", payload, &got.payload)?;
    same_ids("Mixed.ids", ids, &got.ids)
}

/// Equality, with doubles compared by bit pattern (so NaN equals itself and -0.0 differs
/// from 0.0).
fn same(want: &Body, got: &Body) -> Result<(), String> {
    match (want, got) {
        (Body::Ids(a), Body::Ids(b)) => same_ids("Ids", a, b),
        (Body::Mixed(a), Body::Mixed(b)) => same_mixed(a, b),
        (Body::MyTest(a), Body::MyTest(b)) => {
            let MyTest { num, ano, nums } = a;
            eq("MyTest.num", num, &b.num)?;
            eq("MyTest.ano", ano, &b.ano)?;
            eq_slice("MyTest.nums", nums, &b.nums)
        }
        _ => eq("value", want, got),
    }
}

// ---------------------------------------------------------------------------------------
// JSON's doubles.

/// Every double of a body, mutably.
fn doubles(body: &mut Body) -> Vec<&mut f64> {
    fn of_ids(ids: &mut Ids) -> impl Iterator<Item = &mut f64> {
        ids.scores.iter_mut()
    }
    match body {
        Body::Ids(ids) => of_ids(ids).collect(),
        Body::Mixed(m) => std::iter::once(&mut m.ratio)
            .chain(of_ids(&mut m.ids))
            .collect(),
        _ => Vec::new(),
    }
}

/// `body` as JSON carries it: one NaN, whatever the sign and payload it had.
fn json_nans(body: &Body) -> Body {
    let mut body = body.clone();
    for v in doubles(&mut body) {
        if v.is_nan() {
            *v = f64::NAN;
        }
    }
    body
}

/// Whether `body` holds a NaN or an infinity, which Python writes as bare `nan`/`inf`.
fn has_nonfinite(body: &Body) -> bool {
    doubles(&mut body.clone()).iter().any(|v| !v.is_finite())
}

// ---------------------------------------------------------------------------------------
// The test.

/// Checks one of Apache's encodings: decode, compare, re-encode.
fn check_apache_bytes<P: Protocol>(
    codec: &Codec<P>,
    case: &Case,
    bytes: &[u8],
    exact: bool,
) -> Result<(), String> {
    let decoded = decode(codec, case, Bytes::copy_from_slice(bytes));
    if case.expect == Expect::MissingRequired {
        return match decoded {
            Err(e) if *e.kind() == DecodeErrorKind::MissingRequiredField => Ok(()),
            Err(e) => Err(format!("expected a missing-required-field error, got {e}")),
            Ok(v) => Err(format!(
                "expected a missing-required-field error, got {v:?}"
            )),
        };
    }
    let (header, body) = decoded.map_err(|e| format!("thrift-wire failed to decode it: {e}"))?;
    eq("header", &case.header, &header)?;
    same(&case.body, &body)?;
    if let Body::Mixed(m) = &case.body {
        // Skipping: field 1 of Mixed is Ano's i64 `num`; fields 2 to 13 are unknown to Ano.
        let ano: Ano = codec
            .decode(Bytes::copy_from_slice(bytes))
            .map_err(|e| format!("decoding it as Ano (skipping fields 2-13) failed: {e}"))?;
        eq("as Ano: num", &m.id, &ano.num)?;
    }
    if exact {
        let ours = encode::<P>(case);
        if ours != bytes {
            return Err(format!("re-encoding differs: {}", hex_diff(bytes, &ours)));
        }
    }
    Ok(())
}

fn check_apache_line(line: &str, seen: &mut HashSet<(String, String)>) -> Result<(), String> {
    let obj = parse_json_line(line)?;
    let name = get_str(&obj, "case")?;
    let protocol = get_str(&obj, "protocol")?;
    let exact = get_bool(&obj, "exact")?;
    let bytes = unhex(get_str(&obj, "hex")?)?;
    let case = case(name).ok_or("a case tests/interop.rs does not know: add it to `case`")?;
    eq("type", &case.type_label().as_str(), &get_str(&obj, "type")?)?;
    let expect = match case.expect {
        Expect::Ok => "ok",
        Expect::MissingRequired => "missing-required",
    };
    let line_expect = get_str(&obj, "expect")?;
    if !seen.insert((name.to_string(), protocol.to_string())) {
        return Err("duplicate".into());
    }
    if protocol == "json" && line_expect == "unreadable" {
        // Python wrote a NaN or an infinity as bare `nan`/`inf`: not JSON, refused.
        if !has_nonfinite(&case.body) {
            return Err("\"unreadable\" but the value has no NaN or infinity".into());
        }
        return match decode(&Codec::<Json>::new(), &case, Bytes::from(bytes)) {
            Err(e) if matches!(e.kind(), DecodeErrorKind::InvalidJson { .. }) => Ok(()),
            other => Err(format!(
                "expected InvalidJson for bare nan/inf, got {other:?}"
            )),
        };
    }
    eq("expect", &expect, &line_expect)?;
    match protocol {
        "binary" => check_apache_bytes(&Codec::<Binary>::new(), &case, &bytes, exact),
        "compact" => check_apache_bytes(&Codec::<Compact>::new(), &case, &bytes, exact),
        "json" => {
            let case = Case {
                body: json_nans(&case.body),
                ..case
            };
            check_apache_bytes(&Codec::<Json>::new(), &case, &bytes, exact)
        }
        "binary-nonstrict" => {
            // An old-style header (no version word): rejected by default, read when
            // accepted; thrift-wire always writes strict headers, so no re-encoding.
            match decode(
                &Codec::<Binary>::new(),
                &case,
                Bytes::copy_from_slice(&bytes),
            ) {
                Err(e) if matches!(e.kind(), DecodeErrorKind::BadVersion(_)) => {}
                other => return Err(format!("expected BadVersion by default, got {other:?}")),
            }
            let codec = Codec::<Binary>::new().accept_non_strict(true);
            check_apache_bytes(&codec, &case, &bytes, false)
        }
        other => Err(format!("unknown protocol {other:?}")),
    }
}

#[test]
fn apache_thrift_interop() {
    for name in CASES {
        assert!(
            case(name).is_some(),
            "CASES lists {name} but `case` lacks it"
        );
    }
    run_interop_in(
        "apache.py",
        "thrift-wire",
        &["binary", "compact", "json"],
        CASES,
        check_apache_line,
        |name, protocol| {
            let case = case(name)?;
            // Cases Apache must refuse to decode have no encoding of ours to check.
            if case.expect != Expect::Ok {
                return None;
            }
            Some(match protocol {
                "binary" => encode::<Binary>(&case),
                "compact" => encode::<Compact>(&case),
                _ => encode::<Json>(&case),
            })
        },
    );
}
