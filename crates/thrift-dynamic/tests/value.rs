//! Values written against the descriptor are the bytes generated code writes for the
//! same values, in every protocol; bytes read back give the values; a value that does
//! not fit its type is refused, naming where.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use bytes::Bytes;
use thrift_dynamic::value::{StructValue, Value, ValueError, decode_struct, encode_struct};
use thrift_dynamic::{Descriptor, StructId};
use thrift_wire::fixtures::echo::{Ids, Request};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::{Binary, Codec, Compact, Json, LinkBuffer, Message, Protocol, Utf8Bytes};

fn descriptor() -> Descriptor {
    let idl = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl");
    Descriptor::from_files(&[idl.join("mixed.thrift")], &[&idl]).unwrap()
}

fn mixed() -> Mixed {
    Mixed {
        id: -7,
        name: "mixed".into(),
        flag: true,
        tiny: -3,
        small: 300,
        count: 70_000,
        ratio: 0.25,
        requests: (0..3)
            .map(|i| Request {
                action: "echo".into(),
                msg: format!("m{i}").into(),
            })
            .collect(),
        counters: BTreeMap::from([("a".into(), 1), ("b".into(), -2)]),
        tags: BTreeSet::from([3, 1, 2]),
        labels: vec!["x".into(), "y".into()],
        payload: None,
        ids: Ids {
            ids32: vec![1, 2],
            ids64: vec![-1],
            scores: vec![0.5],
            blob: Bytes::from_static(b"\x00\x01"),
        },
    }
}

fn s(t: &str) -> Value {
    Value::String(Utf8Bytes::from(t.to_string()))
}

/// `mixed()` as a value.
fn mixed_value() -> StructValue {
    let request = |i: usize| {
        Value::Struct(
            StructValue::new()
                .with(1, s("echo"))
                .with(2, s(&format!("m{i}"))),
        )
    };
    StructValue::new()
        .with(1, Value::I64(-7))
        .with(2, s("mixed"))
        .with(3, Value::Bool(true))
        .with(4, Value::I8(-3))
        .with(5, Value::I16(300))
        .with(6, Value::I32(70_000))
        .with(7, Value::Double(0.25))
        .with(8, Value::List((0..3).map(request).collect()))
        .with(
            9,
            Value::Map(vec![(s("a"), Value::I64(1)), (s("b"), Value::I64(-2))]),
        )
        .with(
            10,
            Value::Set(vec![Value::I32(1), Value::I32(2), Value::I32(3)]),
        )
        .with(11, Value::List(vec![s("x"), s("y")]))
        .with(
            13,
            Value::Struct(
                StructValue::new()
                    .with(1, Value::List(vec![Value::I32(1), Value::I32(2)]))
                    .with(2, Value::List(vec![Value::I64(-1)]))
                    .with(3, Value::List(vec![Value::Double(0.5)]))
                    .with(4, Value::Binary(Bytes::from_static(b"\x00\x01"))),
            ),
        )
}

fn encoded<P: Protocol, M: Message>(m: &M) -> Bytes {
    let mut buf = LinkBuffer::new();
    let n = Codec::<P>::new().encode(m, &mut buf).unwrap();
    buf.next(n)
}

fn mixed_id(d: &Descriptor) -> StructId {
    d.struct_named("Mixed").unwrap()
}

fn round_trip<P: Protocol>() {
    let d = descriptor();
    let mut value = mixed_value();
    // Written in IDL order whatever order the value holds its fields in.
    value.fields.reverse();
    let bytes = encode_struct::<P>(&d, mixed_id(&d), &value).unwrap();
    assert_eq!(
        bytes,
        encoded::<P, _>(&mixed()),
        "the generated type's bytes"
    );
    let back = decode_struct::<P>(&d, mixed_id(&d), bytes).unwrap();
    let mut expected = mixed_value();
    expected.fields.sort_by_key(|(id, _)| *id);
    let mut got = back;
    got.fields.sort_by_key(|(id, _)| *id);
    assert_eq!(got, expected);
}

#[test]
fn a_value_is_written_as_generated_code_writes_it_and_read_back() {
    round_trip::<Binary>();
    round_trip::<Compact>();
    round_trip::<Json>();
}

#[test]
fn values_that_do_not_fit_are_refused_naming_where() {
    let d = descriptor();
    let id = mixed_id(&d);
    let err = |v: StructValue| encode_struct::<Binary>(&d, id, &v).unwrap_err();

    let e = err(mixed_value().with(99, Value::Bool(true)));
    assert!(matches!(e, ValueError::UnknownField { id: 99, .. }), "{e}");

    let mut bad = mixed_value();
    let Some((_, Value::List(requests))) = bad.fields.iter_mut().find(|(i, _)| *i == 8) else {
        unreachable!()
    };
    requests[2] = Value::Struct(StructValue::new().with(1, Value::I32(5)).with(2, s("m")));
    let e = err(bad);
    assert_eq!(
        e.to_string(),
        "Mixed.requests[2].action: expected string, found an i32"
    );

    // A request without its required `msg`.
    let mut bad = mixed_value();
    bad.set(
        8,
        Value::List(vec![Value::Struct(StructValue::new().with(1, s("echo")))]),
    );
    let e = err(bad);
    assert!(
        matches!(e, ValueError::MissingRequired { ref field, .. } if field == "msg"),
        "{e}"
    );
    assert!(e.to_string().starts_with("Mixed.requests[0]:"), "{e}");

    let e = err(mixed_value().with(9, Value::Map(vec![(Value::I64(1), Value::I64(1))])));
    assert!(
        e.to_string()
            .starts_with("Mixed.counters{key 0}: expected string"),
        "{e}"
    );
}

#[test]
fn bytes_that_are_not_the_struct_are_typed_errors() {
    let d = descriptor();
    let request = d.struct_named("Request").unwrap();
    // A request whose required `msg` is absent on the wire.
    let partial = StructValue::new().with(1, s("echo"));
    let mut buf = LinkBuffer::new();
    {
        use thrift_wire::{Encoder, TType};
        buf.reserve(64);
        let mut e = Codec::<Binary>::new().encoder(&mut buf);
        let saved = e.write_struct_begin();
        e.write_field_begin(TType::Binary, 1);
        e.write_str("echo");
        e.write_struct_end(saved);
    }
    let n = buf.len();
    let e = decode_struct::<Binary>(&d, request, buf.next(n)).unwrap_err();
    assert!(
        matches!(e, ValueError::MissingRequired { ref field, .. } if field == "msg"),
        "{e}"
    );
    assert!(encode_struct::<Binary>(&d, request, &partial).is_err());

    // Every truncation of a whole Mixed is an error, never a panic.
    let whole = encoded::<Compact, _>(&mixed());
    for cut in 0..whole.len() {
        assert!(decode_struct::<Compact>(&d, mixed_id(&d), whole.slice(..cut)).is_err());
    }
}

/// Fields the description does not have, and fields whose wire type is not the
/// described one, are skipped as generated code skips them.
#[test]
fn unknown_and_mistyped_fields_are_skipped() {
    let text = r#"
        struct Wide { 1: string a, 2: i32 b, 3: list<i64> c }
        struct Narrow { 1: string a, 2: string b }
    "#;
    let d = Descriptor::from_text("t.thrift", text).unwrap();
    let wide = d.struct_named("Wide").unwrap();
    let narrow = d.struct_named("Narrow").unwrap();
    let value = StructValue::new()
        .with(1, s("kept"))
        .with(2, Value::I32(9))
        .with(3, Value::List(vec![Value::I64(1)]));
    let bytes = encode_struct::<Compact>(&d, wide, &value).unwrap();
    let read = decode_struct::<Compact>(&d, narrow, bytes).unwrap();
    assert_eq!(read, StructValue::new().with(1, s("kept")));
}

/// A checked value written by a protocol's own encoder (as a client stack writes a
/// call's arguments) gives the bytes `encode_struct` gives.
#[test]
fn a_checked_value_writes_in_the_protocol_it_is_given() {
    use thrift_dynamic::value::Checked;
    use thrift_wire::Sizer;

    fn write<P: Protocol>(c: &Checked) -> Bytes {
        let codec = Codec::<P>::new();
        let mut s = codec.sizer();
        let len = c.size(&mut s);
        let mut buf = LinkBuffer::new();
        buf.reserve(len - s.zero_copy_len());
        c.encode(&mut codec.encoder(&mut buf));
        assert_eq!(buf.len(), len);
        buf.next(len)
    }
    let d = descriptor();
    let checked = Checked::new(&d, mixed_id(&d), mixed_value()).unwrap();
    assert_eq!(write::<Binary>(&checked), encoded::<Binary, _>(&mixed()));
    assert_eq!(write::<Compact>(&checked), encoded::<Compact, _>(&mixed()));
    assert!(Checked::new(&d, mixed_id(&d), mixed_value().with(99, Value::I8(0))).is_err());
}
