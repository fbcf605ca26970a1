//! Golden encodings of the hand-written reference types.
//!
//! Two kinds of check:
//! - small values whose bytes are spelled out here from the Thrift specifications
//!   (independent of the encoder), one per protocol feature;
//! - checked-in files `tests/golden/*.hex` for every fixture type in Binary and Compact,
//!   and `tests/golden/*.json` (the text itself) in JSON, which the code generator's
//!   output must reproduce byte for byte. A change in the encoding fails with a diff;
//!   `UPDATE_GOLDEN=1 cargo test --test golden` rewrites them after a deliberate change.
//!
//! JSON's spelled-out examples are in `json.rs`.

mod util;

use std::path::PathBuf;

use bytes::Bytes;
use thrift_wire::fixtures::echo::{Ano, EchoError, Ids, MyTest, Request, Response};
use thrift_wire::{
    ApplicationException, ApplicationExceptionKind, Binary, Codec, Compact, Json, LinkBuffer,
    Message, MessageHeader, MessageType, Protocol, TType, Utf8Bytes,
};
use util::{decode, encode, hex, mixed, my_test, text, unhex};

fn assert_bytes<P: Protocol, M: Message + PartialEq + std::fmt::Debug>(value: &M, expected: &str) {
    let got = encode::<P, M>(value);
    assert_eq!(hex(&got), hex(&unhex(expected)), "encoding of {value:?}");
    let back: M = decode::<P, M>(Bytes::from(unhex(expected))).expect("decodes");
    assert_eq!(&back, value);
}

#[test]
fn binary_request_matches_the_spec() {
    let req = Request {
        action: text("echo"),
        msg: text("hi"),
    };
    // field: type 11 (string), id 1; i32 length; bytes ... stop
    assert_bytes::<Binary, _>(
        &req,
        "0b 0001 00000004 6563686f
         0b 0002 00000002 6869
         00",
    );
}

#[test]
fn compact_request_matches_the_spec() {
    let req = Request {
        action: text("echo"),
        msg: text("hi"),
    };
    // field header: delta 1 << 4 | type 8 (binary); varint length; bytes ... stop
    assert_bytes::<Compact, _>(&req, "18 04 6563686f 18 02 6869 00");
}

#[test]
fn binary_my_test_matches_the_spec() {
    let v = MyTest {
        num: 1,
        ano: Ano { num: -1 },
        nums: vec![1, 2],
    };
    assert_bytes::<Binary, _>(
        &v,
        "0a 0001 0000000000000001
         0c 0002   0a 0001 ffffffffffffffff 00
         0f 0003 0a 00000002 0000000000000001 0000000000000002
         00",
    );
}

#[test]
fn compact_my_test_matches_the_spec() {
    let v = MyTest {
        num: 1,
        ano: Ano { num: -1 },
        nums: vec![1, 2],
    };
    // i64 zigzag: 1 -> 2, -1 -> 1; nested struct restarts field deltas;
    // list header: size 2 << 4 | type 6 (i64).
    assert_bytes::<Compact, _>(&v, "16 02 1c 16 01 00 19 26 02 04 00");
}

#[test]
fn compact_doubles_are_little_endian_and_long_lists_use_a_varint_count() {
    let v = Ids {
        ids32: (1..=15).collect(),
        ids64: vec![],
        scores: vec![1.0],
        blob: Bytes::from_static(b"\x01"),
    };
    let mut expected = String::from("19 f5 0f"); // list, 0xf0 | i32, varint count 15
    for i in 1..=15 {
        expected.push_str(&format!(" {:02x}", i * 2)); // zigzag, one byte each
    }
    expected.push_str(" 19 06"); // empty list<i64>: size 0 << 4 | type 6
    expected.push_str(" 19 17 000000000000f03f"); // 1.0 little-endian
    expected.push_str(" 18 01 01 00");
    assert_bytes::<Compact, _>(&v, &expected);
}

#[test]
fn compact_bool_fields_fold_into_the_header() {
    // Mixed field 3 is a bool; ids jump from 0 to 1..13 in order, so every header is
    // short; check the bool field's header byte directly.
    let mut v = mixed(1);
    v.flag = true;
    let enc = encode::<Compact, _>(&v);
    // id: header + 6-byte varint (zigzag(2^40) = 2^41); name: header + length + bytes
    let after_name = 1 + 6 + 1 + 1 + v.name.len();
    assert_eq!(enc[after_name], 0x11, "delta 1, type 1 (true)");
    v.flag = false;
    let enc = encode::<Compact, _>(&v);
    assert_eq!(enc[after_name], 0x12, "delta 1, type 2 (false)");
}

/// Three `i32` fields with ids 1, 20 and -3: only the first is a short delta.
#[derive(Debug, PartialEq)]
struct Sparse(i32, i32, i32);

impl Message for Sparse {
    fn size<S: thrift_wire::Sizer>(&self, s: &mut S) -> usize {
        let saved = s.struct_begin();
        s.field_begin_len(TType::I32, 1)
            + s.i32_len(self.0)
            + s.field_begin_len(TType::I32, 20)
            + s.i32_len(self.1)
            + s.field_begin_len(TType::I32, -3)
            + s.i32_len(self.2)
            + s.struct_end_len(saved)
    }
    fn encode<E: thrift_wire::Encoder>(&self, e: &mut E) {
        let saved = e.write_struct_begin();
        for (id, v) in [(1, self.0), (20, self.1), (-3, self.2)] {
            e.write_field_begin(TType::I32, id);
            e.write_i32(v);
        }
        e.write_struct_end(saved);
    }
    fn decode<D: thrift_wire::Decoder>(d: &mut D) -> Result<Self, thrift_wire::DecodeError> {
        let saved = d.read_struct_begin()?;
        let mut out = Sparse(0, 0, 0);
        loop {
            let f = d.read_field_begin()?;
            match (f.id, f.ty) {
                (_, TType::Stop) => break,
                (1, TType::I32) => out.0 = d.read_i32()?,
                (20, TType::I32) => out.1 = d.read_i32()?,
                (-3, TType::I32) => out.2 = d.read_i32()?,
                (_, ty) => d.skip(ty)?,
            }
        }
        d.read_struct_end(saved);
        Ok(out)
    }
}

#[test]
fn compact_field_ids_past_a_delta_of_15_or_going_down_use_zigzag_varints() {
    // id 1: short (0x15); id 20: delta 19, long form 0x05 + zigzag(20) = 40;
    // id -3: going down, long form 0x05 + zigzag(-3) = 5. Values zigzag 1 -> 2, 300 -> 600.
    assert_bytes::<Compact, _>(&Sparse(1, 300, -1), "15 02  05 28 d8 04  05 05 01  00");
    assert_bytes::<Binary, _>(
        &Sparse(1, 300, -1),
        "08 0001 00000001  08 0014 0000012c  08 fffd ffffffff  00",
    );
}

/// `struct Tagged { 1: uuid id, 2: bool ok }`, for the types no fixture has.
#[derive(Debug, PartialEq)]
struct Tagged {
    id: [u8; 16],
    ok: bool,
}

impl Message for Tagged {
    fn size<S: thrift_wire::Sizer>(&self, s: &mut S) -> usize {
        let saved = s.struct_begin();
        s.field_begin_len(TType::Uuid, 1)
            + s.uuid_len()
            + s.bool_field_len(2)
            + s.struct_end_len(saved)
    }
    fn encode<E: thrift_wire::Encoder>(&self, e: &mut E) {
        let saved = e.write_struct_begin();
        e.write_field_begin(TType::Uuid, 1);
        e.write_uuid(&self.id);
        e.write_bool_field(2, self.ok);
        e.write_struct_end(saved);
    }
    fn decode<D: thrift_wire::Decoder>(d: &mut D) -> Result<Self, thrift_wire::DecodeError> {
        let saved = d.read_struct_begin()?;
        let mut out = Tagged {
            id: [0; 16],
            ok: false,
        };
        loop {
            let f = d.read_field_begin()?;
            match (f.id, f.ty) {
                (_, TType::Stop) => break,
                (1, TType::Uuid) => out.id = d.read_uuid()?,
                (2, TType::Bool) => out.ok = d.read_bool()?,
                (_, ty) => d.skip(ty)?,
            }
        }
        d.read_struct_end(saved);
        Ok(out)
    }
}

#[test]
fn uuids_are_sixteen_raw_bytes_in_both_protocols() {
    let v = Tagged {
        id: *b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff",
        ok: true,
    };
    // Binary: type 16, id 1, the bytes in order; bool field type 2, value 1.
    assert_bytes::<Binary, _>(
        &v,
        "10 0001 00112233445566778899aabbccddeeff  02 0002 01  00",
    );
    // Compact: type 13 with delta 1; the bool folds into its header (delta 1, true = 1).
    assert_bytes::<Compact, _>(&v, "1d 00112233445566778899aabbccddeeff  11  00");
}

#[test]
fn message_headers_match_the_spec() {
    let header = MessageHeader {
        name: Utf8Bytes::from_static("echo"),
        ty: MessageType::Call,
        seq_id: 7,
    };
    let ano = Ano { num: 0 };
    let mut buf = LinkBuffer::new();
    let n = Codec::<Binary>::new()
        .encode_message(&header, &ano, &mut buf)
        .unwrap();
    assert_eq!(
        hex(&buf.next(n)),
        hex(&unhex(
            "80010001 00000004 6563686f 00000007  0a 0001 0000000000000000 00"
        ))
    );
    let n = Codec::<Compact>::new()
        .encode_message(&header, &ano, &mut buf)
        .unwrap();
    // protocol id, (type 1 << 5) | version 1, varint seq id, varint name length, name
    assert_eq!(
        hex(&buf.next(n)),
        hex(&unhex("82 21 07 04 6563686f  16 00 00"))
    );
}

#[test]
fn application_exception_matches_the_spec() {
    let e = ApplicationException::new(ApplicationExceptionKind::UnknownMethod, "no");
    assert_bytes::<Binary, _>(&e, "0b 0001 00000002 6e6f  08 0002 00000001  00");
    assert_bytes::<Compact, _>(&e, "18 02 6e6f 15 02 00");
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// How a golden file holds an encoding: hex for the binary protocols, the text itself
/// for JSON.
#[derive(Debug, Clone, Copy)]
enum Format {
    Hex,
    Text,
}

impl Format {
    fn of(protocol: &str) -> Format {
        if protocol == "json" {
            Format::Text
        } else {
            Format::Hex
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Format::Hex => "hex",
            Format::Text => "json",
        }
    }

    /// The file's contents for `bytes`, in lines that keep diffs readable (64 bytes of
    /// hex a line; JSON as one line).
    fn render(self, bytes: &[u8]) -> String {
        match self {
            Format::Hex => hex(bytes)
                .as_bytes()
                .chunks(128)
                .map(|c| format!("{}\n", std::str::from_utf8(c).unwrap()))
                .collect(),
            Format::Text => format!("{}\n", std::str::from_utf8(bytes).unwrap()),
        }
    }

    fn parse(self, file: &str) -> Vec<u8> {
        match self {
            Format::Hex => unhex(file),
            Format::Text => file.strip_suffix('\n').unwrap_or(file).as_bytes().to_vec(),
        }
    }
}

/// Compares (or, with `UPDATE_GOLDEN=1`, writes) `tests/golden/<name>.<protocol>.hex`
/// (`<name>.json` for JSON).
fn check_golden<P: Protocol, M: Message + PartialEq + std::fmt::Debug>(
    name: &str,
    protocol: &str,
    value: &M,
) -> Option<String> {
    let got = encode::<P, M>(value);
    let format = Format::of(protocol);
    let path = match format {
        Format::Hex => golden_dir().join(format!("{name}.{protocol}.hex")),
        Format::Text => golden_dir().join(format!("{name}.{}", format.extension())),
    };
    let text = format.render(&got);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return None;
    }
    let want = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) => return Some(format!("{}: {e}", path.display())),
    };
    let back: M = decode::<P, M>(Bytes::from(format.parse(&want))).expect("golden file decodes");
    assert_eq!(&back, value, "{} decodes to another value", path.display());
    if want == text {
        return None;
    }
    let mut diff = format!("{} differs:\n", path.display());
    for (i, (w, g)) in want.lines().zip(text.lines()).enumerate() {
        if w != g {
            diff.push_str(&format!("  line {}:\n  - {w}\n  + {g}\n", i + 1));
        }
    }
    let (wl, gl) = (want.lines().count(), text.lines().count());
    if wl != gl {
        diff.push_str(&format!("  {wl} lines expected, {gl} written\n"));
    }
    Some(diff)
}

fn check_all<P: Protocol>(protocol: &str) -> Vec<String> {
    let mut failures = Vec::new();
    let mut check = |r: Option<String>| failures.extend(r);
    check(check_golden::<P, _>(
        "request",
        protocol,
        &util::request_1k(),
    ));
    check(check_golden::<P, _>(
        "response",
        protocol,
        &Response {
            action: text("echo"),
            msg: text("a response"),
        },
    ));
    check(check_golden::<P, _>("my_test", protocol, &my_test(40)));
    check(check_golden::<P, _>("ids", protocol, &util::ids(20, 17)));
    check(check_golden::<P, _>(
        "echo_error",
        protocol,
        &EchoError {
            code: -500,
            message: text("failed"),
        },
    ));
    check(check_golden::<P, _>("mixed", protocol, &mixed(1)));
    failures
}

#[test]
fn fixtures_match_golden_files_in_binary() {
    let failures = check_all::<Binary>("binary");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn fixtures_match_golden_files_in_compact() {
    let failures = check_all::<Compact>("compact");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn fixtures_match_golden_files_in_json() {
    let failures = check_all::<Json>("json");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
