//! Replacing one value: thrift-wire decodes the result to the fixture with exactly
//! that field changed.

use bytes::Bytes;
use thrift_dynamic::Descriptor;
use thrift_dynamic::path::{FieldPath, NewValue, PathProtocol, ReplaceError};
use thrift_wire::fixtures::echo::{Ids, Request};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::{Codec, Decoder, Encoder, TType, Utf8Bytes};

use crate::util::{both_protocols, decode, descriptor, encode, mixed, resolve, written};

both_protocols! {
    replacing_a_nested_string_changes_only_it => nested_string;
    replacing_a_scalar_changes_only_it => scalars;
    replacing_a_bool_field_changes_only_it => bool_field;
    replacing_a_list_element_changes_only_it => list_element;
    replacing_a_map_value_changes_only_it => map_value;
    replacing_a_struct_with_encoded_bytes_changes_only_it => whole_struct;
    setting_an_absent_field_appends_it => absent_field;
    appended_fields_get_the_right_compact_delta => appended_ids;
    a_missing_element_or_parent_is_not_replaced => missing;
    a_union_field_is_not_added_beside_another => union_occupied;
    new_values_of_the_wrong_shape_are_refused => bad_values;
}

/// Replaces `path` in `m`'s encoding with `value` and decodes the result.
fn replaced<P: PathProtocol>(m: &Mixed, path: &str, value: NewValue<'_>) -> Mixed {
    let d = descriptor();
    let bytes = encode::<P, _>(m);
    let mut out = Vec::new();
    let n = resolve(&d, path)
        .replace_with::<P>(&bytes, value, &mut out)
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(n, out.len());
    decode::<P, Mixed>(&out)
}

fn nested_string<P: PathProtocol>() {
    let m = mixed(None);
    let got = replaced::<P>(&m, "requests[3].msg", NewValue::Str("short now"));
    let mut want = m.clone();
    want.requests[3].msg = Utf8Bytes::from_static("short now");
    assert_eq!(got, want);
}

fn scalars<P: PathProtocol>() {
    let m = mixed(Some(Bytes::from_static(b"p")));
    let mut want = m.clone();
    want.id = i64::MIN;
    assert_eq!(replaced::<P>(&m, "id", NewValue::I64(i64::MIN)), want);
    let mut want = m.clone();
    want.small = 3;
    assert_eq!(replaced::<P>(&m, "small", NewValue::I16(3)), want);
    let mut want = m.clone();
    want.ratio = -2.5;
    assert_eq!(replaced::<P>(&m, "ratio", NewValue::Double(-2.5)), want);
    let mut want = m.clone();
    want.payload = Some(Bytes::from_static(&[0, 1, 2, 255]));
    assert_eq!(
        replaced::<P>(&m, "payload", NewValue::Binary(&[0, 1, 2, 255])),
        want
    );
}

fn bool_field<P: PathProtocol>() {
    let m = mixed(None);
    let mut want = m.clone();
    want.flag = false;
    let off = replaced::<P>(&m, "flag", NewValue::Bool(false));
    assert_eq!(off, want);
    let on = replaced::<P>(&off, "flag", NewValue::Bool(true));
    assert_eq!(on, m);
}

fn list_element<P: PathProtocol>() {
    let m = mixed(None);
    let mut want = m.clone();
    want.ids.ids64[100] = -1;
    assert_eq!(replaced::<P>(&m, "ids.ids64[100]", NewValue::I64(-1)), want);
    let mut want = m.clone();
    want.labels[0] = Utf8Bytes::from_static("a much longer first label than before");
    assert_eq!(
        replaced::<P>(
            &m,
            "labels[0]",
            NewValue::Str("a much longer first label than before")
        ),
        want
    );
}

fn map_value<P: PathProtocol>() {
    let m = mixed(None);
    let mut want = m.clone();
    want.counters
        .insert(Utf8Bytes::from_static("counter-042"), 42);
    assert_eq!(
        replaced::<P>(&m, "counters[\"counter-042\"]", NewValue::I64(42)),
        want
    );
}

fn whole_struct<P: PathProtocol>() {
    let d = descriptor();
    let m = mixed(None);
    let bytes = encode::<P, _>(&m);
    let ids = Ids {
        ids32: vec![1],
        ids64: vec![],
        scores: vec![0.5],
        blob: Bytes::from_static(b"new blob"),
    };
    let req = Request {
        action: Utf8Bytes::from_static("a"),
        msg: Utf8Bytes::from_static("b"),
    };
    let mut out = Vec::new();
    resolve(&d, "ids")
        .replace::<P>(&bytes, &encode::<P, _>(&ids), &mut out)
        .unwrap();
    let mut again = Vec::new();
    resolve(&d, "requests[15]")
        .replace::<P>(&out, &encode::<P, _>(&req), &mut again)
        .unwrap();
    let mut want = m.clone();
    want.ids = ids;
    want.requests[15] = req;
    assert_eq!(decode::<P, Mixed>(&again), want);
}

fn absent_field<P: PathProtocol>() {
    let m = mixed(None);
    let got = replaced::<P>(&m, "payload", NewValue::Binary(b"now here"));
    let mut want = m.clone();
    want.payload = Some(Bytes::from_static(b"now here"));
    assert_eq!(got, want);
    // Then it is there, and replaced in place.
    let again = replaced::<P>(&got, "payload", NewValue::Binary(b"x"));
    want.payload = Some(Bytes::from_static(b"x"));
    assert_eq!(again, want);
}

/// The fields of an encoded struct, as thrift-wire's decoder reads their headers.
fn field_ids<P: PathProtocol>(bytes: &[u8]) -> Vec<(i16, TType)> {
    let mut d = Codec::<P>::new()
        .decoder(Bytes::copy_from_slice(bytes))
        .unwrap();
    let saved = d.read_struct_begin().unwrap();
    let mut out = Vec::new();
    loop {
        let f = d.read_field_begin().unwrap();
        if f.ty == TType::Stop {
            break;
        }
        out.push((f.id, f.ty));
        d.skip(f.ty).unwrap();
    }
    d.read_struct_end(saved);
    assert_eq!(d.remaining(), 0);
    out
}

fn appended_ids<P: PathProtocol>() {
    let d = Descriptor::from_text(
        "s.thrift",
        "struct S { 1: i32 a, 5: optional string b, 40: optional i64 c, \
         41: optional bool on, -3: optional i16 neg }",
    )
    .unwrap();
    let s = d.struct_named("S").unwrap();
    let at = |p: &str| FieldPath::parse(p).unwrap().resolve(&d, s).unwrap();
    // `S { a: 7 }`, written by thrift-wire's encoder.
    let mut bytes = written::<P>(|e| {
        let saved = e.write_struct_begin();
        e.write_field_begin(TType::I32, 1);
        e.write_i32(7);
        e.write_struct_end(saved);
    });
    // 1 -> 5 is a short delta in Compact, 5 -> 40 a long one, 40 -> 41 short again,
    // 41 -> a negative id (the resolver's choice of which) a long one.
    let neg = d.struct_desc(s).field_named("neg").unwrap().id;
    assert!(neg < 0);
    for (path, value) in [
        ("b", NewValue::Str("bee")),
        ("c", NewValue::I64(-40)),
        ("on", NewValue::Bool(true)),
        ("neg", NewValue::I16(-3)),
    ] {
        let mut out = Vec::new();
        at(path).replace_with::<P>(&bytes, value, &mut out).unwrap();
        bytes = out;
    }
    assert_eq!(
        field_ids::<P>(&bytes),
        [
            (1, TType::I32),
            (5, TType::Binary),
            (40, TType::I64),
            (41, TType::Bool),
            (neg, TType::I16)
        ]
    );
    assert_eq!(
        at("a").read::<P>(&bytes).unwrap().unwrap().i32().unwrap(),
        7
    );
    assert_eq!(
        at("b").read::<P>(&bytes).unwrap().unwrap().str().unwrap(),
        "bee"
    );
    assert_eq!(
        at("c").read::<P>(&bytes).unwrap().unwrap().i64().unwrap(),
        -40
    );
    assert!(at("on").read::<P>(&bytes).unwrap().unwrap().bool().unwrap());
    assert_eq!(
        at("neg").read::<P>(&bytes).unwrap().unwrap().i16().unwrap(),
        -3
    );
}

fn missing<P: PathProtocol>() {
    let d = descriptor();
    let bytes = encode::<P, _>(&mixed(None));
    let mut out = Vec::new();
    for (path, absent, value) in [
        ("requests[16].msg", "requests[16]", NewValue::Str("x")),
        ("ids.ids64[128]", "ids.ids64[128]", NewValue::I64(1)),
        ("counters[\"nope\"]", "counters[\"nope\"]", NewValue::I64(1)),
    ] {
        let e = resolve(&d, path)
            .replace_with::<P>(&bytes, value, &mut out)
            .unwrap_err();
        assert_eq!(
            e,
            ReplaceError::Missing {
                path: absent.to_string()
            }
        );
    }
    // An absent struct on the way is not created.
    let no_ids = [0u8];
    let e = resolve(&d, "ids.blob")
        .replace_with::<P>(&no_ids, NewValue::Binary(b"b"), &mut out)
        .unwrap_err();
    assert_eq!(e, ReplaceError::Missing { path: "ids".into() });
    assert!(out.is_empty(), "nothing written on errors");
}

fn union_occupied<P: PathProtocol>() {
    let d = Descriptor::from_text("u.thrift", "union U { 1: i32 a, 2: string b }").unwrap();
    let u = d.struct_named("U").unwrap();
    let b = FieldPath::parse("b").unwrap().resolve(&d, u).unwrap();
    let a = FieldPath::parse("a").unwrap().resolve(&d, u).unwrap();
    let mut with_a = Vec::new();
    a.replace_with::<P>(&[0], NewValue::I32(1), &mut with_a)
        .unwrap();
    let mut out = Vec::new();
    assert_eq!(
        b.replace_with::<P>(&with_a, NewValue::Str("x"), &mut out),
        Err(ReplaceError::UnionOccupied { path: "b".into() })
    );
    // Replacing the field it carries is fine.
    a.replace_with::<P>(&with_a, NewValue::I32(2), &mut out)
        .unwrap();
    assert_eq!(a.read::<P>(&out).unwrap().unwrap().i32().unwrap(), 2);
}

fn bad_values<P: PathProtocol>() {
    let d = descriptor();
    let bytes = encode::<P, _>(&mixed(None));
    let mut out = Vec::new();
    let id = resolve(&d, "id");
    assert!(matches!(
        id.replace_with::<P>(&bytes, NewValue::Str("1"), &mut out),
        Err(ReplaceError::WrongType {
            expected: TType::I64,
            found: TType::Binary,
            ..
        })
    ));
    // Two i64s where one belongs.
    let two = [encode_i64::<P>(1), encode_i64::<P>(2)].concat();
    assert!(matches!(
        id.replace::<P>(&bytes, &two, &mut out),
        Err(ReplaceError::BadValue {
            kind: thrift_wire::DecodeErrorKind::TrailingBytes(_),
            ..
        })
    ));
    // Bytes that are no whole struct (in Binary, a string whose length runs past them).
    let ids = resolve(&d, "requests[0]");
    assert!(matches!(
        ids.replace::<P>(&bytes, &[0x0b, 0, 1, 0, 0, 0, 99, b'x'], &mut out),
        Err(ReplaceError::BadValue { .. })
    ));
    assert!(out.is_empty());
}

fn encode_i64<P: PathProtocol>(v: i64) -> Vec<u8> {
    let d = Descriptor::from_text("one.thrift", "struct One { 1: i64 v }").unwrap();
    let one = d.struct_named("One").unwrap();
    let path = FieldPath::parse("v").unwrap().resolve(&d, one).unwrap();
    let mut out = Vec::new();
    path.replace_with::<P>(&[0], NewValue::I64(v), &mut out)
        .unwrap();
    path.read::<P>(&out).unwrap().unwrap().raw().to_vec()
}
