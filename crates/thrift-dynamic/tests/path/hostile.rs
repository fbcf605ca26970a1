//! Hostile inputs: cut, mistyped, oversized and deeply nested bytes give typed errors
//! that name the path, never a panic.

use proptest::prelude::*;
use thrift_dynamic::Descriptor;
use thrift_dynamic::path::{FieldPath, NewValue, PathProtocol, ReadErrorKind, ResolvedPath};
use thrift_wire::{DEFAULT_MAX_DEPTH, DecodeErrorKind, TType};

use thrift_wire::Encoder;

use crate::util::{both_protocols, descriptor, encode, is_binary, mixed, resolve, written};

const PATHS: [&str; 12] = [
    "id",
    "name",
    "flag",
    "ratio",
    "requests[3].msg",
    "requests[15]",
    "counters[\"counter-063\"]",
    "tags[255]",
    "labels[10]",
    "payload",
    "ids.ids64[100]",
    "ids.blob",
];

both_protocols! {
    every_truncation_fails_or_stays_inside => truncations;
    a_wrong_field_type_names_the_step => wrong_field_type;
    a_wrong_element_type_names_the_step => wrong_element_type;
    deep_nesting_stops_at_the_limit => deep_nesting;
}

fn truncations<P: PathProtocol>() {
    let d = descriptor();
    let bytes = encode::<P, _>(&mixed(None));
    let paths: Vec<ResolvedPath> = PATHS.iter().map(|p| resolve(&d, p)).collect();
    let blob = resolve(&d, "ids.blob");
    let blob_end = blob.read::<P>(&bytes).unwrap().unwrap().range().end;
    let mut out = Vec::new();
    for len in 0..bytes.len() {
        let cut = &bytes[..len];
        for p in &paths {
            match p.read::<P>(cut) {
                Ok(Some(v)) => assert!(v.range().end <= len),
                // Absent only where the cut left a stop byte where a field header was.
                Ok(None) => {}
                Err(e) => assert!(matches!(e.kind, ReadErrorKind::Wire(_)), "{e}"),
            }
            out.clear();
            let _ = p.replace_with::<P>(cut, NewValue::I32(1), &mut out);
        }
        // Cut before the last field's value ends: the read fails, naming where.
        if len < blob_end {
            match blob.read::<P>(cut) {
                Err(e) => {
                    assert!(e.path == "ids" || e.path == "ids.blob", "{e}");
                    assert!(matches!(e.kind, ReadErrorKind::Wire(_)), "{e}");
                }
                Ok(v) => panic!("{len}: read {:?}", v.map(|v| v.range())),
            }
        }
    }
}

fn wrong_field_type<P: PathProtocol>() {
    let d = descriptor();
    let mut bytes = encode::<P, _>(&mixed(None)).to_vec();
    // The first header is field 1, an i64: make it claim i32 instead.
    match bytes[0] {
        10 => bytes[0] = 8,                              // Binary: I64 -> I32
        b if b & 0x0f == 6 => bytes[0] = (b & 0xf0) | 5, // Compact: I64 -> I32
        other => panic!("unexpected first header {other:#x}"),
    }
    let e = resolve(&d, "id").read::<P>(&bytes).unwrap_err();
    assert_eq!(e.path, "id");
    assert_eq!(
        e.kind,
        ReadErrorKind::WrongType {
            expected: TType::I64,
            found: TType::I32
        }
    );
    assert_eq!(
        e.to_string(),
        "at `id`: the field has wire type I32 where the IDL says I64"
    );
}

fn wrong_element_type<P: PathProtocol>() {
    // `struct L { 1: list<i32> xs }` read where the IDL says `list<string>`.
    let d = Descriptor::from_text(
        "l.thrift",
        "struct L { 1: list<string> xs, 2: map<string, i32> m }",
    )
    .unwrap();
    let l = d.struct_named("L").unwrap();
    let wire = Descriptor::from_text(
        "w.thrift",
        "struct W { 1: list<i32> xs, 2: map<i32, i32> m }",
    )
    .unwrap();
    let w = wire.struct_named("W").unwrap();
    let at = |d: &Descriptor, s, p: &str| FieldPath::parse(p).unwrap().resolve(d, s).unwrap();
    let mut bytes = Vec::new();
    at(&wire, w, "xs")
        .replace::<P>(&[0], &list_of_one_i32::<P>(), &mut bytes)
        .unwrap();
    let e = at(&d, l, "xs[0]").read::<P>(&bytes).unwrap_err();
    assert_eq!(e.path, "xs[0]");
    assert_eq!(
        e.kind,
        ReadErrorKind::WrongElementType {
            expected: TType::Binary,
            found: TType::I32
        }
    );
}

/// `[7]` as a `list<i32>` in protocol `P`.
fn list_of_one_i32<P: PathProtocol>() -> Vec<u8> {
    written::<P>(|e| {
        e.write_list_begin(TType::I32, 1);
        e.write_i32(7);
    })
}

fn deep_nesting<P: PathProtocol>() {
    let d = Descriptor::from_text(
        "n.thrift",
        "struct Node { 1: optional Node next, 2: i32 v }",
    )
    .unwrap();
    let node = d.struct_named("Node").unwrap();
    // 100 nested `next` fields, then 100 stops.
    let header: &[u8] = if is_binary::<P>() {
        &[12, 0, 1]
    } else {
        &[0x1c]
    };
    let mut bytes = header.repeat(100);
    bytes.extend(std::iter::repeat_n(0u8, 101));
    // Stepping over field 1 to look for field 2 nests past the limit.
    let v = FieldPath::parse("v").unwrap().resolve(&d, node).unwrap();
    let e = v.read::<P>(&bytes).unwrap_err();
    assert_eq!(e.path, "v");
    assert_eq!(
        e.kind,
        ReadErrorKind::Wire(DecodeErrorKind::DepthLimitExceeded(DEFAULT_MAX_DEPTH))
    );
    // A path as long as the limit walks; the limit counts the path's own levels too.
    let deep = FieldPath::parse(&["next"; 63].join("."))
        .unwrap()
        .resolve(&d, node)
        .unwrap();
    assert!(
        deep.read::<P>(&bytes).is_err(),
        "the value at depth 63 nests past 64"
    );
    let ok = FieldPath::parse(&["next"; 30].join("."))
        .unwrap()
        .resolve(&d, node)
        .unwrap();
    let e = ok.read::<P>(&bytes).unwrap_err();
    assert_eq!(
        e.kind,
        ReadErrorKind::Wire(DecodeErrorKind::DepthLimitExceeded(DEFAULT_MAX_DEPTH))
    );
    // Shallow enough input reads.
    let mut shallow = header.repeat(10);
    shallow.extend(std::iter::repeat_n(0u8, 11));
    let nine = FieldPath::parse(&["next"; 9].join("."))
        .unwrap()
        .resolve(&d, node)
        .unwrap();
    assert_eq!(
        nine.read::<P>(&shallow)
            .unwrap()
            .unwrap()
            .struct_bytes()
            .unwrap()
            .len(),
        shallow.len() - 9 * header.len() - 9
    );
}

#[test]
fn huge_claimed_lengths_are_refused_before_use() {
    let d = descriptor();
    let at = |p: &str| resolve(&d, p);
    // Binary: field 2 (name) claims 2^31-1 bytes.
    let name = [11, 0, 2, 0x7f, 0xff, 0xff, 0xff, b'x', 0];
    let e = at("name").read::<thrift_wire::Binary>(&name).unwrap_err();
    assert!(
        matches!(
            e.kind,
            ReadErrorKind::Wire(DecodeErrorKind::LengthExceedsInput {
                len: 0x7fff_ffff,
                ..
            })
        ),
        "{e}"
    );
    // Binary: field 8 (requests) claims 2^31-1 structs.
    let list = [15, 0, 8, 12, 0x7f, 0xff, 0xff, 0xff, 0];
    let e = at("requests[5].msg")
        .read::<thrift_wire::Binary>(&list)
        .unwrap_err();
    assert_eq!(e.path, "requests[5]");
    assert!(
        matches!(
            e.kind,
            ReadErrorKind::Wire(DecodeErrorKind::LengthExceedsInput { .. })
        ),
        "{e}"
    );
    // Binary: a negative length.
    let neg = [11, 0, 2, 0xff, 0xff, 0xff, 0xff, 0];
    let e = at("name").read::<thrift_wire::Binary>(&neg).unwrap_err();
    assert_eq!(
        e.kind,
        ReadErrorKind::Wire(DecodeErrorKind::NegativeLength(-1))
    );
    // Compact: field 13 (ids) holds field 2 (ids64) claiming 2^31-1 i64s; stepping over
    // field 1 first (ids32, likewise huge).
    let ids = [0xdc, 0x19, 0xf5, 0xff, 0xff, 0xff, 0xff, 0x07, 0];
    let e = at("ids.ids64[0]")
        .read::<thrift_wire::Compact>(&ids)
        .unwrap_err();
    assert_eq!(e.path, "ids.ids64");
    assert!(
        matches!(
            e.kind,
            ReadErrorKind::Wire(DecodeErrorKind::LengthExceedsInput { .. })
        ),
        "{e}"
    );
    // Compact: a varint that never ends.
    let varint = [
        0x16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0,
    ];
    let e = at("id").read::<thrift_wire::Compact>(&varint).unwrap_err();
    assert_eq!(
        e.kind,
        ReadErrorKind::Wire(DecodeErrorKind::VarintTooLong(10))
    );
    // Invalid type ids.
    let e = at("id").read::<thrift_wire::Binary>(&[0x55]).unwrap_err();
    assert_eq!(
        e.kind,
        ReadErrorKind::Wire(DecodeErrorKind::InvalidType(0x55))
    );
}

proptest! {
    #[test]
    fn random_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..256),
        which in 0..PATHS.len(),
        compact in any::<bool>(),
    ) {
        let d = descriptor();
        let p = resolve(&d, PATHS[which]);
        if compact {
            random_in::<thrift_wire::Compact>(&p, &bytes)?;
        } else {
            random_in::<thrift_wire::Binary>(&p, &bytes)?;
        }
    }
}

fn random_in<P: PathProtocol>(p: &ResolvedPath, bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(Some(v)) = p.read::<P>(bytes) {
        prop_assert!(v.range().end <= bytes.len());
        // Whatever the accessors say, they say it without panicking.
        let _ = (
            v.i64(),
            v.str(),
            v.bool(),
            v.double(),
            v.binary(),
            v.struct_bytes(),
        );
    }
    let mut out = Vec::new();
    if let Ok(n) = p.replace::<P>(bytes, &[0], &mut out) {
        prop_assert_eq!(n, out.len());
    }
    Ok(())
}
