//! Hostile input for the JSON protocol: the guarantees `hostile.rs` checks for Binary
//! and Compact (typed errors with their field path, no panic, nothing allocated beyond
//! what the input justifies, bounded nesting), on text written by hand.
//!
//! A counting global allocator checks that counts read from the text are never trusted
//! for an allocation before the bytes behind them have been seen.

#[path = "util/hostile.rs"]
#[macro_use]
mod support;
mod util;

use bytes::Bytes;
use support::{
    Rng, allocation_budget, assert_fails, assert_length_refused, err, largest_allocation, mutate,
};
use thrift_wire::fixtures::echo::{Ano, EchoError, Ids, MyTest, Request, Response};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::protocol::json::message_len;
use thrift_wire::{
    ApplicationException, ApplicationExceptionKind, Codec, DecodeError, DecodeErrorKind,
    DecodeLimits, Decoder, Json, LinkBuffer, Message, MessageHeader, MessageType, TType, Utf8Bytes,
};

fn codec() -> Codec<Json> {
    Codec::new()
}

fn decode<M: Message>(input: &str) -> Result<M, DecodeError> {
    codec().decode(Bytes::copy_from_slice(input.as_bytes()))
}

fn decode_message<M: Message>(input: &str) -> Result<(MessageHeader, M), DecodeError> {
    codec().decode_message(Bytes::copy_from_slice(input.as_bytes()))
}

/// Skips one value of `ty` at the start of `input`; returns the bytes left after it.
fn skip_with(codec: Codec<Json>, ty: TType, input: &[u8]) -> Result<usize, DecodeError> {
    let mut d = codec.decoder(Bytes::copy_from_slice(input))?;
    d.skip(ty)?;
    Ok(d.remaining())
}

fn skip(ty: TType, input: &str) -> Result<usize, DecodeError> {
    skip_with(codec(), ty, input.as_bytes())
}

fn depth(max_depth: usize) -> Codec<Json> {
    Codec::new().max_depth(max_depth)
}

fn invalid(offset: usize) -> DecodeErrorKind {
    // Only the offset is compared where this is used (see `assert_invalid`).
    DecodeErrorKind::InvalidJson {
        expected: "",
        offset,
    }
}

/// Asserts an `InvalidJson` error at `offset` (whatever it says was expected) and path.
#[track_caller]
fn assert_invalid<T>(result: Result<T, DecodeError>, offset: usize, path: &str, ctx: &str) {
    let e = err(result);
    match (e.kind(), invalid(offset)) {
        (
            DecodeErrorKind::InvalidJson { offset: got, .. },
            DecodeErrorKind::InvalidJson { offset: want, .. },
        ) => assert_eq!(*got, want, "{ctx}: {e}"),
        _ => panic!("{ctx}: expected invalid JSON at {offset}, got {e}"),
    }
    assert_eq!(e.path(), path, "{ctx}: {e}");
}

fn out_of_range(ty: TType, offset: usize) -> DecodeErrorKind {
    DecodeErrorKind::NumberOutOfRange { ty, offset }
}

// ---------------------------------------------------------------------------------------
// Fixtures, encoded with the crate's encoder (only to cut and mutate).

fn encode<M: Message>(value: &M) -> Vec<u8> {
    let mut buf = LinkBuffer::new();
    let n = codec().encode(value, &mut buf).unwrap();
    buf.next(n).to_vec()
}

fn call_header() -> MessageHeader {
    MessageHeader {
        name: Utf8Bytes::from_static("echo"),
        ty: MessageType::Call,
        seq_id: 0x1234_5678,
    }
}

/// A valid encoding to cut and mutate, and how to decode it (filling the input).
struct Fixture {
    name: &'static str,
    bytes: Vec<u8>,
    decode: fn(&[u8]) -> Result<(), DecodeError>,
    message: bool,
}

/// `bytes` decoded as `M`.
fn typed<M: Message>(bytes: &[u8]) -> Result<(), DecodeError> {
    codec().decode::<M>(Bytes::copy_from_slice(bytes)).map(drop)
}

fn fixture<M: Message>(name: &'static str, value: M) -> Fixture {
    Fixture {
        name,
        bytes: encode(&value),
        decode: typed::<M>,
        message: false,
    }
}

/// Every fixture type, and a message header with a `Request`.
fn fixtures() -> Vec<Fixture> {
    let mut ids = util::ids(5, 7);
    ids.scores
        .extend([f64::NAN, f64::NEG_INFINITY, 1e300, -0.0]);
    let mut message = LinkBuffer::new();
    let n = codec()
        .encode_message(&call_header(), &util::request_1k(), &mut message)
        .unwrap();
    vec![
        fixture(
            "Request",
            Request {
                action: util::text("echo \"q\" \u{1F980}\n"),
                msg: util::text("hello"),
            },
        ),
        fixture("Response", Response::default()),
        fixture("Ano", Ano { num: -5 }),
        fixture("MyTest", util::my_test(20)),
        fixture("Ids", ids),
        fixture(
            "EchoError",
            EchoError {
                code: i32::MIN,
                message: util::text("boom"),
            },
        ),
        fixture("Mixed", util::mixed(1)),
        fixture(
            "ApplicationException",
            ApplicationException::new(ApplicationExceptionKind::ProtocolError, "bad frame"),
        ),
        Fixture {
            name: "call(Request)",
            bytes: message.next(n).to_vec(),
            decode: |b| {
                codec()
                    .decode_message::<Request>(Bytes::copy_from_slice(b))
                    .map(drop)
            },
            message: true,
        },
    ]
}

/// The bytes that matter to a JSON decoder, favoured by mutations.
const INTERESTING: [u8; 20] = [
    b'"', b'\\', b'[', b']', b'{', b'}', b',', b':', b'-', b'0', b'9', b'e', b'.', b'u', b' ',
    b'=', b'/', 0x00, 0x80, 0xff,
];

// ---------------------------------------------------------------------------------------
// Tests

#[test]
fn every_proper_prefix_of_a_valid_encoding_fails_at_its_end() {
    for f in fixtures() {
        let full = &f.bytes;
        assert_eq!((f.decode)(full), Ok(()), "{} whole", f.name);
        for cut in 0..full.len() {
            let ctx = format!("{} first {cut} of {} bytes", f.name, full.len());
            let e = err((f.decode)(&full[..cut]));
            assert!(
                matches!(
                    e.kind(),
                    DecodeErrorKind::UnexpectedEof { .. }
                        | DecodeErrorKind::LengthExceedsInput { .. }
                ),
                "{ctx}: {e}"
            );
            if !f.message {
                assert!(
                    skip_with(codec(), TType::Struct, &full[..cut]).is_err(),
                    "{ctx}"
                );
            } else {
                // The scanner, too, sees a message that is not over yet.
                assert_eq!(
                    message_len(&full[..cut], DecodeLimits::default(), usize::MAX),
                    Ok(None),
                    "{ctx}"
                );
            }
        }
    }
}

#[test]
fn counts_are_checked_against_the_input_before_anything_is_allocated() {
    let counts = [
        ("2^31 - 1", "2147483647"),
        ("2^32", "4294967296"),
        ("i64::MAX", "9223372036854775807"),
    ];
    // Containers in the fields of a `Mixed` (and an unknown one), `N` their count.
    let shapes = [
        (r#"{"8":{"lst":["rec",N,{}]}}"#, "Mixed.requests"),
        (r#"{"9":{"map":["str","i64",N,{"a":1}]}}"#, "Mixed.counters"),
        (r#"{"10":{"set":["i32",N,1,2,3]}}"#, "Mixed.tags"),
        (r#"{"11":{"lst":["str",N,"x"]}}"#, "Mixed.labels"),
        (
            r#"{"13":{"rec":{"2":{"lst":["i64",N,1]}}}}"#,
            "Mixed.ids/Ids.ids64",
        ),
        (r#"{"99":{"set":["lst",N,["i8",0]]}}"#, ""),
    ];
    for (what, n) in counts {
        for (shape, path) in shapes {
            let input = shape.replace('N', n);
            let ctx = format!("count {what}: {input}");
            assert_length_refused(|| decode::<Mixed>(&input), input.len(), path, &ctx);
        }
    }

    // A count beyond i64, or below zero.
    assert_fails(
        decode::<MyTest>(r#"{"3":{"lst":["i64",99999999999999999999,1]}}"#),
        out_of_range(TType::I64, 19),
        "MyTest.nums",
        "count > i64::MAX",
    );
    assert_fails(
        decode::<MyTest>(r#"{"3":{"lst":["i64",-1]}}"#),
        DecodeErrorKind::NegativeLength(-1),
        "MyTest.nums",
        "count -1",
    );
    assert_fails(
        skip(TType::Map, r#"["str","i8",-5,{}]"#),
        DecodeErrorKind::NegativeLength(-5),
        "",
        "map count -5",
    );
}

#[test]
fn list_reservations_never_exceed_what_the_input_could_decode_to() {
    // `n` claimed elements of which only the first is a number: the count passes the
    // check at two bytes an element, but at most 64 KiB is reserved up front.
    for n in [1_000usize, 100_000] {
        let junk = "x,".repeat(n);
        for (ty, input, path) in [
            (
                "i64",
                format!(r#"{{"3":{{"lst":["i64",{n},1,{junk}]}}}}"#),
                "MyTest.nums",
            ),
            (
                "i32",
                format!(r#"{{"1":{{"lst":["i32",{n},1,{junk}]}}}}"#),
                "Ids.ids32",
            ),
            (
                "dbl",
                format!(r#"{{"3":{{"lst":["dbl",{n},1,{junk}]}}}}"#),
                "Ids.scores",
            ),
        ] {
            let ctx = format!("list<{ty}> of {n}");
            let (result, largest) = largest_allocation(|| {
                if ty == "i64" {
                    decode::<MyTest>(&input).map(drop)
                } else {
                    decode::<Ids>(&input).map(drop)
                }
            });
            assert!(
                largest <= allocation_budget(input.len()),
                "{ctx}: {largest} bytes allocated at once"
            );
            assert_fails_with!(result, DecodeErrorKind::InvalidJson { .. }, path, ctx);
        }
    }
}

/// `levels` nested values of one kind (each the single element or field of the one
/// around it), as JSON.
fn nested(kind: TType, levels: usize) -> String {
    let mut s = String::new();
    for _ in 1..levels {
        s.push_str(match kind {
            TType::Struct => r#"{"1":{"rec":"#,
            TType::List => r#"["lst",1,"#,
            _ => r#"["i8","map",1,{"0":"#,
        });
    }
    s.push_str(match kind {
        TType::Struct => "{}",
        TType::List => r#"["i32",0]"#,
        _ => r#"["i8","i8",0,{}]"#,
    });
    for _ in 1..levels {
        s.push_str(match kind {
            TType::Struct => "}}",
            TType::List => "]",
            _ => "}]",
        });
    }
    s
}

#[test]
fn nesting_stops_at_the_depth_limit() {
    let limit = DecodeErrorKind::DepthLimitExceeded(64);
    for kind in [TType::Struct, TType::List, TType::Map] {
        let ctx = format!("{kind:?}");
        assert_eq!(skip(kind, &nested(kind, 64)), Ok(0), "{ctx}: 64 levels");
        assert_fails(skip(kind, &nested(kind, 65)), limit.clone(), "", &ctx);
        let deep = nested(kind, 10_000);
        assert_fails(skip(kind, &deep), limit.clone(), "", &ctx);

        // An unknown field of a Request: level 1 is the Request.
        let name = match kind {
            TType::Struct => "rec",
            TType::List => "lst",
            _ => "map",
        };
        let request = |levels| {
            format!(
                r#"{{"1":{{"str":"a"}},"99":{{"{name}":{}}},"2":{{"str":"m"}}}}"#,
                nested(kind, levels)
            )
        };
        assert!(decode::<Request>(&request(63)).is_ok(), "{ctx}: 1 + 63");
        assert_fails(decode::<Request>(&request(64)), limit.clone(), "", &ctx);
        assert_fails(decode::<Request>(&request(10_000)), limit.clone(), "", &ctx);

        // Inside a known field, the path says where.
        let input = format!(r#"{{"2":{{"rec":{{"7":{{"{name}":{deep}}}}}}}}}"#);
        assert_fails(decode::<MyTest>(&input), limit.clone(), "MyTest.ano", &ctx);

        // A smaller limit moves the boundary with it.
        let three = depth(3);
        assert_eq!(
            skip_with(three, kind, nested(kind, 3).as_bytes()),
            Ok(0),
            "{ctx}"
        );
        assert_fails(
            skip_with(three, kind, nested(kind, 4).as_bytes()),
            DecodeErrorKind::DepthLimitExceeded(3),
            "",
            &ctx,
        );

        // The scanner bounds its bracket stack too.
        let message = format!(r#"[1,"m",1,0,{{"1":{{"{name}":{deep}}}}}]"#);
        assert_eq!(
            message_len(message.as_bytes(), DecodeLimits::default(), usize::MAX)
                .unwrap_err()
                .kind(),
            &DecodeErrorKind::DepthLimitExceeded(129),
            "{ctx}"
        );
    }
}

#[test]
fn numbers_out_of_their_type_s_range_are_rejected() {
    // Fields of `Mixed`: the text, the type, where the number starts, the field.
    let fields = [
        (r#"{"4":{"i8":128}}"#, TType::I8, 11, "tiny"),
        (r#"{"4":{"i8":-129}}"#, TType::I8, 11, "tiny"),
        (r#"{"5":{"i16":32768}}"#, TType::I16, 12, "small"),
        (r#"{"6":{"i32":2147483648}}"#, TType::I32, 12, "count"),
        (r#"{"1":{"i64":9223372036854775808}}"#, TType::I64, 12, "id"),
        (
            r#"{"1":{"i64":-1000000000000000000000000}}"#,
            TType::I64,
            12,
            "id",
        ),
        (r#"{"3":{"tf":2}}"#, TType::Bool, 11, "flag"),
        (r#"{"3":{"tf":-1}}"#, TType::Bool, 11, "flag"),
        (r#"{"7":{"dbl":1e999}}"#, TType::Double, 12, "ratio"),
        (r#"{"7":{"dbl":-1e309}}"#, TType::Double, 12, "ratio"),
    ];
    for (input, ty, at, field) in fields {
        let path = format!("Mixed.{field}");
        assert_fails(decode::<Mixed>(input), out_of_range(ty, at), &path, input);
    }
    // Map keys (quoted) and field ids.
    let keys = [
        (r#"["dbl","i8",1,{"1e999":1}]"#, TType::Double, 16),
        (r#"["i16","i8",1,{"-32769":1}]"#, TType::I16, 16),
        (r#"["i8","i8",1,{"200":1}]"#, TType::I8, 15),
    ];
    for (input, ty, at) in keys {
        assert_fails(skip(TType::Map, input), out_of_range(ty, at), "", input);
    }
    assert_fails(
        decode::<Ano>(r#"{"32768":{"i64":1}}"#),
        out_of_range(TType::I16, 2),
        "",
        "field id 32768",
    );
    // Values just inside the range decode.
    let v: Mixed = decode(r#"{"4":{"i8":-128},"5":{"i16":32767},"3":{"tf":0}}"#).unwrap();
    assert_eq!((v.tiny, v.small, v.flag), (-128, 32767, false));
}

/// Integers with leading zeros decode as the number, as in every Apache reader:
/// Apache's Node.js library writes the negative `i64`s it echoes so
/// (`-034359738368`), and its padding is no digit of the range check.
#[test]
fn integers_with_leading_zeros_read_as_apache_s_readers_read_them() {
    for (input, num) in [
        (r#"{"1":{"i64":-034359738368}}"#, -34_359_738_368),
        (r#"{"1":{"i64":-000000000005}}"#, -5),
        (r#"{"1":{"i64":007}}"#, 7),
        (r#"{"1":{"i64":-00009223372036854775808}}"#, i64::MIN),
    ] {
        assert_eq!(decode::<Ano>(input).unwrap(), Ano { num }, "{input}");
    }
    assert_fails(
        decode::<Ano>(r#"{"1":{"i64":00009223372036854775808}}"#),
        out_of_range(TType::I64, 12),
        "Ano.num",
        "past i64::MAX, zeros or not",
    );
}

#[test]
fn numbers_outside_json_s_grammar_or_quoted_where_they_must_not_be_are_rejected() {
    let cases: [(&str, &str, usize); 12] = [
        ("leading +", r#"{"1":{"i64":+1}}"#, 12),
        ("a minus inside", r#"{"1":{"i64":0-1}}"#, 12),
        ("a fraction for an integer", r#"{"1":{"i64":1.0}}"#, 12),
        ("an exponent for an integer", r#"{"1":{"i64":1e3}}"#, 12),
        ("a quoted integer", r#"{"1":{"i64":"1"}}"#, 12),
        ("true for a number", r#"{"1":{"i64":true}}"#, 12),
        ("a quoted field id with a +", r#"{"+1":{"i64":1}}"#, 2),
        ("an unquoted field id", r#"{1:{"i64":1}}"#, 1),
        ("a lone minus", r#"{"1":{"i64":-}}"#, 12),
        ("two minus signs", r#"{"1":{"i64":--1}}"#, 12),
        ("null", r#"{"1":{"i64":null}}"#, 12),
        ("a space inside a quoted field id", r#"{" 1":{"i64":1}}"#, 2),
    ];
    for (what, input, offset) in cases {
        // Errors in the value of field 1 are inside `Ano.num`; those of field ids not.
        let path = if input.starts_with(r#"{"1":"#) {
            "Ano.num"
        } else {
            ""
        };
        assert_invalid(decode::<Ano>(input), offset, path, what);
    }
    // `0x10` reads as the number 0, and then `x` is where the field's `}` should be.
    assert_invalid(
        decode::<Ano>(r#"{"1":{"i64":0x10}}"#),
        13,
        "",
        "a hex number",
    );
    assert_invalid(
        decode::<Ano>(r#"{"1":{"i64":12ab}}"#),
        14,
        "",
        "a number and a word",
    );
    let doubles: [(&str, &str, usize); 8] = [
        ("Python's bare nan", r#"{"7":{"dbl":nan}}"#, 12),
        ("Python's bare inf", r#"{"7":{"dbl":inf}}"#, 12),
        ("a lower-case quoted nan", r#"{"7":{"dbl":"nan"}}"#, 12),
        ("a quoted finite double", r#"{"7":{"dbl":"1.5"}}"#, 12),
        ("an unquoted NaN", r#"{"7":{"dbl":NaN}}"#, 12),
        ("a fraction without digits", r#"{"7":{"dbl":1.}}"#, 12),
        ("a fraction without an integer", r#"{"7":{"dbl":.5}}"#, 12),
        (
            "an escaped Infinity",
            r#"{"7":{"dbl":"\u0049nfinity"}}"#,
            12,
        ),
    ];
    for (what, input, offset) in doubles {
        assert_invalid(decode::<Mixed>(input), offset, "Mixed.ratio", what);
    }
    // Map keys must be quoted, numbers or not.
    assert_invalid(
        skip(TType::Map, r#"["i32","i8",1,{1:1}]"#),
        15,
        "",
        "an unquoted i32 key",
    );
    assert_invalid(
        skip(TType::Map, r#"["dbl","i8",1,{1.5:1}]"#),
        15,
        "",
        "an unquoted double key",
    );
    assert_invalid(
        skip(TType::Map, r#"["tf","i8",1,{"true":1}]"#),
        15,
        "",
        "a bool key of true",
    );
}

#[test]
fn bad_strings_are_rejected_with_their_path() {
    let cases: [(&str, &str, DecodeErrorKind); 9] = [
        ("an unknown escape", r#"\q"#, invalid(13)),
        ("a short u escape", r#"\u12G4"#, invalid(13)),
        ("a lone high surrogate", r#"\ud83e"#, invalid(13)),
        ("a high surrogate and a letter", r#"\ud83eA"#, invalid(13)),
        (
            "a high surrogate and a BMP escape",
            r#"\ud83e\u0041"#,
            invalid(13),
        ),
        ("a lone low surrogate", r#"x\udd80"#, invalid(14)),
        ("invalid UTF-8", "\u{0}\u{80}", DecodeErrorKind::InvalidUtf8),
        (
            "an escape of a surrogate pair reversed",
            r#"\udd80\ud83e"#,
            invalid(13),
        ),
        (
            "a backslash at the end",
            "\\",
            DecodeErrorKind::UnexpectedEof {
                needed: 0,
                remaining: 0,
            },
        ),
    ];
    for (what, content, kind) in cases {
        let mut input = format!(r#"{{"2":{{"str":"{content}"}}}}"#).into_bytes();
        if what == "invalid UTF-8" {
            input = b"{\"2\":{\"str\":\"\xc0\x80\"}}".to_vec();
        }
        let result = codec().decode::<Mixed>(Bytes::from(input));
        match kind {
            DecodeErrorKind::InvalidJson { offset, .. } => {
                assert_invalid(result, offset, "Mixed.name", what)
            }
            DecodeErrorKind::UnexpectedEof { .. } => {
                assert_fails_with!(
                    result,
                    DecodeErrorKind::UnexpectedEof { .. },
                    "Mixed.name",
                    what
                )
            }
            kind => assert_fails(result, kind, "Mixed.name", what),
        }
    }
    // Raw control bytes and escaped NULs are text like any other.
    let v: Mixed = decode("{\"2\":{\"str\":\"\u{1}\t\\u0000\"}}").unwrap();
    assert_eq!(v.name, "\u{1}\t\0");
    // An unterminated string.
    assert_fails_with!(
        decode::<Mixed>(r#"{"2":{"str":"abc"#),
        DecodeErrorKind::UnexpectedEof { .. },
        "Mixed.name",
        "unterminated"
    );
}

#[test]
fn bad_base64_is_rejected_with_its_path() {
    for (what, blob, offset) in [
        ("a character outside the alphabet", "YW!i", 15),
        ("URL-safe base64", "YW-i", 15),
        ("a lone final digit", "YWJjZ", 17),
        ("padding in the middle", "YQ==YQ==", 15),
        ("three padding characters", "YQ===", 15),
        ("whitespace inside", "YW J", 15),
    ] {
        let input = format!(r#"{{"4":{{"str":"{blob}"}}}}"#);
        assert_invalid(decode::<Ids>(&input), offset, "Ids.blob", what);
    }
    let input = r#"{"12":{"str":"AA\u0021A"}}"#;
    assert_invalid(
        decode::<Mixed>(input),
        14,
        "Mixed.payload",
        "an escaped bad character",
    );
    // Escapes that decode to base64 are base64.
    let v: Mixed = decode(r#"{"12":{"str":"YW\u0049="}}"#).unwrap();
    assert_eq!(v.payload.as_deref(), Some(&b"ab"[..]));
}

#[test]
fn malformed_structure_is_rejected_where_it_goes_wrong() {
    let cases: [(&str, &str, usize); 16] = [
        ("no colon after a field id", r#"{"1"{"i64":1}}"#, 4),
        (
            "no comma between fields",
            r#"{"1":{"i64":1}"1":{"i64":2}}"#,
            14,
        ),
        (
            "a field value object with two entries",
            r#"{"1":{"i64":1,"x":2}}"#,
            13,
        ),
        ("a struct closed by ]", r#"{"1":{"i64":1}]"#, 14),
        ("a struct opened by [", r#"["1":{"i64":1}}"#, 0),
        ("an unknown type name", r#"{"1":{"int":1}}"#, 7),
        ("a type name in capitals", r#"{"1":{"I64":1}}"#, 7),
        ("an escaped type name", r#"{"1":{"i6\u0034":1}}"#, 7),
        ("a type name that is not a string", r#"{"1":{i64:1}}"#, 6),
        ("a field without a typed value", r#"{"1":5}"#, 5),
        ("a trailing comma", r#"{"1":{"i64":1},}"#, 15),
        ("a leading comma", r#"{,"1":{"i64":1}}"#, 1),
        ("an empty field object", r#"{"1":{}}"#, 6),
        ("a field of void", r#"{"1":{"void":1}}"#, 7),
        ("garbage for a struct", "x", 0),
        ("a struct that is a string", r#""1""#, 0),
    ];
    for (what, input, offset) in cases {
        assert_invalid(decode::<Ano>(input), offset, "", what);
    }
    // Containers whose count and contents disagree.
    let lists: [(&str, &str, usize); 6] = [
        (
            "fewer elements than the count",
            r#"{"3":{"lst":["i64",3,1,2]}}"#,
            24,
        ),
        (
            "more elements than the count",
            r#"{"3":{"lst":["i64",1,1,2]}}"#,
            22,
        ),
        ("no count", r#"{"3":{"lst":["i64"]}}"#, 18),
        ("a quoted count", r#"{"3":{"lst":["i64","1",1]}}"#, 19),
        (
            "a list element type that is no type",
            r#"{"3":{"lst":["int",0]}}"#,
            14,
        ),
        ("a list closed by }", r#"{"3":{"lst":["i64",1,1}}}"#, 22),
    ];
    for (what, input, offset) in lists {
        assert_invalid(decode::<MyTest>(input), offset, "MyTest.nums", what);
    }
    let maps: [(&str, &str, usize); 5] = [
        (
            "fewer entries than the count",
            r#"{"9":{"map":["str","i64",2,{"a":1}]}}"#,
            33,
        ),
        (
            "more entries than the count",
            r#"{"9":{"map":["str","i64",1,{"a":1,"b":2}]}}"#,
            33,
        ),
        (
            "a comma for a colon",
            r#"{"9":{"map":["str","i64",1,{"a",1}]}}"#,
            31,
        ),
        (
            "entries in an array",
            r#"{"9":{"map":["str","i64",1,["a",1]]}}"#,
            27,
        ),
        ("no closing ]", r#"{"9":{"map":["str","i64",0,{}}}"#, 29),
    ];
    for (what, input, offset) in maps {
        assert_invalid(decode::<Mixed>(input), offset, "Mixed.counters", what);
    }
}

#[test]
fn bad_message_headers_are_rejected() {
    let body = r#"{"1":{"str":"a"},"2":{"str":"b"}}"#;
    let ok = format!(r#"[1,"echo",1,7,{body}]"#);
    let (h, _) = decode_message::<Request>(&ok).unwrap();
    assert_eq!(
        (h.name.as_str(), h.ty, h.seq_id),
        ("echo", MessageType::Call, 7)
    );
    let spaced = format!(" [ 1 , \"echo\" , 4 , -7 ,\n{body} ] \n");
    let (h, _) = decode_message::<Request>(&spaced).unwrap();
    assert_eq!((h.ty, h.seq_id), (MessageType::Oneway, -7));

    let kinds: [(&str, String, DecodeErrorKind); 6] = [
        (
            "version 2",
            format!(r#"[2,"echo",1,7,{body}]"#),
            DecodeErrorKind::BadVersion(2),
        ),
        (
            "version -1",
            format!(r#"[-1,"echo",1,7,{body}]"#),
            DecodeErrorKind::BadVersion(u32::MAX),
        ),
        (
            "message type 0",
            format!(r#"[1,"echo",0,7,{body}]"#),
            DecodeErrorKind::InvalidMessageType(0),
        ),
        (
            "message type 5",
            format!(r#"[1,"echo",5,7,{body}]"#),
            DecodeErrorKind::InvalidMessageType(5),
        ),
        (
            "message type 300",
            format!(r#"[1,"echo",300,7,{body}]"#),
            out_of_range(TType::I8, 10),
        ),
        (
            "sequence id 2^31",
            format!(r#"[1,"echo",1,2147483648,{body}]"#),
            out_of_range(TType::I32, 12),
        ),
    ];
    for (what, input, kind) in kinds {
        assert_fails(decode_message::<Request>(&input), kind, "", what);
    }
    let syntax: [(&str, String, usize); 7] = [
        (
            "an object for the header",
            format!(r#"{{"1":1,{body}}}"#),
            0,
        ),
        ("a quoted version", format!(r#"["1","echo",1,7,{body}]"#), 1),
        (
            "a name that is no string",
            format!(r#"[1,echo,1,7,{body}]"#),
            3,
        ),
        ("no body", r#"[1,"echo",1,7]"#.to_string(), 13),
        (
            "a body that is no struct",
            r#"[1,"echo",1,7,5]"#.to_string(),
            14,
        ),
        ("two bodies", format!(r#"[1,"echo",1,7,{body},{body}]"#), 47),
        (
            "invalid UTF-8 escaped name",
            format!(r#"[1,"\udc00",1,7,{body}]"#),
            4,
        ),
    ];
    for (what, input, offset) in syntax {
        assert_invalid(decode_message::<Request>(&input), offset, "", what);
    }
    assert_fails_with!(
        decode_message::<Request>(&format!(r#"[1,"echo",1,7,{body}"#)),
        DecodeErrorKind::UnexpectedEof { .. },
        "",
        "no closing ]"
    );
}

#[test]
fn trailing_bytes_and_size_limits_are_enforced() {
    let whole = String::from_utf8(encode(&util::request_1k())).unwrap();
    assert!(decode::<Request>(&format!("{whole} \n\t")).is_ok());
    for extra in ["x", "{}", " ,", &whole] {
        let input = format!("{whole}{extra}");
        let left = extra.trim_start().len();
        assert_fails(
            decode::<Request>(&input),
            DecodeErrorKind::TrailingBytes(left),
            "",
            extra,
        );
    }
    let message = fixtures().pop().map(|f| f.bytes).unwrap_or_default();
    let message = String::from_utf8(message).unwrap();
    assert_fails(
        decode_message::<Request>(&format!("{message}]")),
        DecodeErrorKind::TrailingBytes(1),
        "",
        "message",
    );
    let n = whole.len();
    let limited = Codec::<Json>::new().max_size(n - 1);
    assert_fails(
        limited.decode::<Request>(Bytes::from(whole.clone())),
        DecodeErrorKind::SizeLimitExceeded {
            size: n as u64,
            limit: n as u64 - 1,
        },
        "",
        "size limit",
    );
}

#[test]
fn fields_of_the_wrong_type_are_skipped_not_misread() {
    // Request's fields are strings; given as other types they are skipped, so the
    // required fields are missing.
    let input = r#"{"1":{"i32":5},"2":{"lst":["str",1,"x"]}}"#;
    assert_fails(
        decode::<Request>(input),
        DecodeErrorKind::MissingRequiredField,
        "Request.action",
        "wrong types",
    );
    // A string where a binary is expected is decoded as base64, as Apache does.
    assert_invalid(
        decode::<Ids>(r#"{"4":{"str":"not base64!"}}"#),
        16,
        "Ids.blob",
        "text for a binary",
    );
    // An element type other than the declared one fails; an empty list may carry any.
    assert_fails(
        decode::<MyTest>(r#"{"3":{"lst":["i32",1,5]}}"#),
        DecodeErrorKind::UnexpectedElementType {
            expected: TType::I64,
            found: TType::I32,
        },
        "MyTest.nums",
        "list<i32> for list<i64>",
    );
    assert!(decode::<MyTest>(r#"{"3":{"lst":["rec",0]}}"#).is_ok());
}

#[test]
fn long_tokens_are_read_in_one_pass_and_bounded_by_the_input() {
    // A million-digit number: out of range for an integer and for a double.
    let digits = "9".repeat(1 << 20);
    for (id, name, ty, field) in [
        (1, "i64", TType::I64, "id"),
        (7, "dbl", TType::Double, "ratio"),
    ] {
        let input = format!(r#"{{"{id}":{{"{name}":{digits}}}}}"#);
        let path = format!("Mixed.{field}");
        assert_fails(decode::<Mixed>(&input), out_of_range(ty, 12), &path, name);
    }
    // A tiny double with a million digits reads as its nearest value.
    let input = format!(r#"{{"7":{{"dbl":0.{}1}}}}"#, "0".repeat(1 << 20));
    assert_eq!(decode::<Mixed>(&input).unwrap().ratio, 0.0);
    // A string of escapes: decoded into a buffer no longer than its text.
    let input = format!(r#"{{"2":{{"str":"{}"}}}}"#, r"\u00e9".repeat(100_000));
    let (result, largest) = largest_allocation(|| decode::<Mixed>(&input));
    assert_eq!(result.unwrap().name.len(), 200_000);
    assert!(largest <= allocation_budget(input.len()), "{largest}");
    // A sea of whitespace.
    let input = format!("{{{}\"1\":{{\"i64\":1}}}}", " ".repeat(1 << 20));
    assert_eq!(decode::<Ano>(&input).unwrap().num, 1);
}

#[test]
fn random_mutations_never_panic_nor_over_allocate_and_the_scanner_agrees() {
    const MUTANTS_PER_ENCODING: usize = 10_000;
    let mut rng = Rng(0x51_7cc1_b727_220a);
    let mut decoded_ok = 0usize;
    for f in fixtures() {
        for _ in 0..MUTANTS_PER_ENCODING {
            let mut input = f.bytes.clone();
            mutate(&mut rng, &mut input, &INTERESTING);
            let ((ok, scanned), largest) = largest_allocation(|| {
                let ok = (f.decode)(&input).is_ok();
                let _ = skip_with(codec(), TType::Struct, &input);
                let scanned = message_len(&input, DecodeLimits::default(), usize::MAX);
                (ok, scanned)
            });
            decoded_ok += usize::from(ok);
            assert!(
                largest <= allocation_budget(input.len()),
                "{}: {largest} bytes allocated at once for {:?}",
                f.name,
                String::from_utf8_lossy(&input)
            );
            // A message the decoder accepts, the scanner cuts whole (up to whitespace).
            if ok && f.message {
                let end = scanned
                    .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&input)))
                    .expect("a whole message");
                assert!(
                    input[end..].iter().all(u8::is_ascii_whitespace),
                    "{:?}",
                    String::from_utf8_lossy(&input)
                );
            }
        }
    }
    assert!(decoded_ok > 0);
}
