//! Reading values in place: every read equals the fixture's field that thrift-wire
//! encoded.

use bytes::Bytes;
use thrift_dynamic::path::PathProtocol;
use thrift_wire::TType;
use thrift_wire::fixtures::echo::{Ids, Request};

use crate::util::{both_protocols, decode, descriptor, encode, mixed, resolve};

both_protocols! {
    scalar_fields_equal_the_fixture => scalar_fields;
    list_element_fields_equal_the_fixture => list_element_fields;
    map_values_by_string_key_equal_the_fixture => map_values;
    fixed_width_list_elements_equal_the_fixture => fixed_width_elements;
    set_elements_come_in_wire_order => set_elements;
    absent_values_are_none => absent_values;
    nested_struct_bytes_decode_to_the_fixture => nested_structs;
    field_ids_reach_what_names_reach => ids_and_names;
    shared_input_gives_slices_not_copies => zero_copy;
    values_read_as_another_type_are_errors => wrong_accessor;
}

fn scalar_fields<P: PathProtocol>() {
    let d = descriptor();
    let m = mixed(Some(Bytes::from_static(b"payload bytes")));
    let bytes = encode::<P, _>(&m);
    let get = |p: &str| resolve(&d, p);
    assert_eq!(
        get("id").read::<P>(&bytes).unwrap().unwrap().i64().unwrap(),
        m.id
    );
    assert_eq!(
        get("name")
            .read::<P>(&bytes)
            .unwrap()
            .unwrap()
            .str()
            .unwrap(),
        m.name.as_str()
    );
    assert_eq!(
        get("flag")
            .read::<P>(&bytes)
            .unwrap()
            .unwrap()
            .bool()
            .unwrap(),
        m.flag
    );
    assert_eq!(
        get("tiny")
            .read::<P>(&bytes)
            .unwrap()
            .unwrap()
            .i8()
            .unwrap(),
        m.tiny
    );
    assert_eq!(
        get("small")
            .read::<P>(&bytes)
            .unwrap()
            .unwrap()
            .i16()
            .unwrap(),
        m.small
    );
    assert_eq!(
        get("count")
            .read::<P>(&bytes)
            .unwrap()
            .unwrap()
            .i32()
            .unwrap(),
        m.count
    );
    assert_eq!(
        get("ratio")
            .read::<P>(&bytes)
            .unwrap()
            .unwrap()
            .double()
            .unwrap(),
        m.ratio
    );
    let payload = get("payload");
    let v = payload.read::<P>(&bytes).unwrap().unwrap();
    assert_eq!(v.ttype(), TType::Binary);
    assert_eq!(v.binary().unwrap(), b"payload bytes");
    assert_eq!(&bytes[v.content_range().unwrap()], b"payload bytes");
    let blob = get("ids.blob");
    assert_eq!(
        blob.read::<P>(&bytes).unwrap().unwrap().binary().unwrap(),
        &m.ids.blob[..]
    );
}

fn list_element_fields<P: PathProtocol>() {
    let d = descriptor();
    let m = mixed(None);
    let bytes = encode::<P, _>(&m);
    for (i, r) in m.requests.iter().enumerate() {
        let msg = resolve(&d, &format!("requests[{i}].msg"));
        let action = resolve(&d, &format!("requests[{i}].action"));
        assert_eq!(
            msg.read::<P>(&bytes).unwrap().unwrap().str().unwrap(),
            r.msg.as_str()
        );
        assert_eq!(
            action.read::<P>(&bytes).unwrap().unwrap().str().unwrap(),
            r.action.as_str()
        );
    }
    for (i, l) in m.labels.iter().enumerate() {
        let label = resolve(&d, &format!("labels[{i}]"));
        assert_eq!(
            label.read::<P>(&bytes).unwrap().unwrap().str().unwrap(),
            l.as_str()
        );
    }
}

fn map_values<P: PathProtocol>() {
    let d = descriptor();
    let m = mixed(None);
    let bytes = encode::<P, _>(&m);
    for (k, v) in &m.counters {
        let path = resolve(&d, &format!("counters[\"{}\"]", k.as_str()));
        assert_eq!(
            path.read::<P>(&bytes).unwrap().unwrap().i64().unwrap(),
            *v,
            "{k:?}"
        );
    }
}

fn fixed_width_elements<P: PathProtocol>() {
    let d = descriptor();
    let m = mixed(None);
    let bytes = encode::<P, _>(&m);
    assert_eq!(
        resolve(&d, "ids.ids64[100]")
            .read::<P>(&bytes)
            .unwrap()
            .unwrap()
            .i64()
            .unwrap(),
        m.ids.ids64[100]
    );
    for i in [0, 1, 63, 127] {
        let at = |field: &str| resolve(&d, &format!("ids.{field}[{i}]"));
        assert_eq!(
            at("ids32")
                .read::<P>(&bytes)
                .unwrap()
                .unwrap()
                .i32()
                .unwrap(),
            m.ids.ids32[i]
        );
        assert_eq!(
            at("ids64")
                .read::<P>(&bytes)
                .unwrap()
                .unwrap()
                .i64()
                .unwrap(),
            m.ids.ids64[i]
        );
        assert_eq!(
            at("scores")
                .read::<P>(&bytes)
                .unwrap()
                .unwrap()
                .double()
                .unwrap(),
            m.ids.scores[i]
        );
    }
}

fn set_elements<P: PathProtocol>() {
    let d = descriptor();
    let m = mixed(None);
    let bytes = encode::<P, _>(&m);
    for (i, t) in m.tags.iter().enumerate() {
        let path = resolve(&d, &format!("tags[{i}]"));
        assert_eq!(path.read::<P>(&bytes).unwrap().unwrap().i32().unwrap(), *t);
    }
}

fn absent_values<P: PathProtocol>() {
    let d = descriptor();
    let bytes = encode::<P, _>(&mixed(None));
    for p in [
        "payload",
        "requests[16]",
        "requests[16].msg",
        "labels[64]",
        "ids.ids64[128]",
        "counters[\"no such counter\"]",
        "tags[256]",
    ] {
        assert!(resolve(&d, p).read::<P>(&bytes).unwrap().is_none(), "{p}");
    }
    // A struct with no fields at all: every field is absent.
    let empty = [0u8];
    assert!(resolve(&d, "ids.blob").read::<P>(&empty).unwrap().is_none());
}

fn nested_structs<P: PathProtocol>() {
    let d = descriptor();
    let m = mixed(None);
    let bytes = encode::<P, _>(&m);
    let ids = resolve(&d, "ids");
    let v = ids.read::<P>(&bytes).unwrap().unwrap();
    assert_eq!(decode::<P, Ids>(v.struct_bytes().unwrap()), m.ids);
    // The struct ends the message: its range runs to the outer stop.
    assert_eq!(v.range().end, bytes.len() - 1);
    let third = resolve(&d, "requests[2]");
    let v = third.read::<P>(&bytes).unwrap().unwrap();
    assert_eq!(
        decode::<P, Request>(v.struct_bytes().unwrap()),
        m.requests[2]
    );
}

fn ids_and_names<P: PathProtocol>() {
    let d = descriptor();
    let m = mixed(None);
    let bytes = encode::<P, _>(&m);
    for (by_id, by_name) in [
        ("#13.#2[5]", "ids.ids64[5]"),
        ("#8[7].#2", "requests[7].msg"),
        ("#1", "id"),
    ] {
        let a = resolve(&d, by_id);
        let b = resolve(&d, by_name);
        assert_eq!(a.steps(), b.steps());
        let (va, vb) = (
            a.read::<P>(&bytes).unwrap().unwrap(),
            b.read::<P>(&bytes).unwrap().unwrap(),
        );
        assert_eq!(va.range(), vb.range());
        assert!(!va.raw().is_empty());
    }
}

fn zero_copy<P: PathProtocol>() {
    let d = descriptor();
    let m = mixed(None);
    let bytes = encode::<P, _>(&m);
    let path = resolve(&d, "requests[15].msg");
    let v = path.read_shared::<P>(&bytes).unwrap().unwrap();
    let s = v.string().unwrap();
    assert_eq!(s.as_str(), m.requests[15].msg.as_str());
    let input = bytes.as_ptr_range();
    assert!(
        input.contains(&s.as_str().as_ptr()),
        "the string points into the input"
    );
    let blob = resolve(&d, "ids.blob");
    let b = blob
        .read_shared::<P>(&bytes)
        .unwrap()
        .unwrap()
        .bytes()
        .unwrap();
    assert_eq!(b, m.ids.blob);
    assert!(
        input.contains(&b.as_ptr()),
        "the binary points into the input"
    );
    let ids = resolve(&d, "ids");
    let e = ids.read_shared::<P>(&bytes).unwrap().unwrap().encoded();
    assert!(
        input.contains(&e.as_ptr()),
        "the struct points into the input"
    );
    assert_eq!(decode::<P, Ids>(&e), m.ids);
}

fn wrong_accessor<P: PathProtocol>() {
    let d = descriptor();
    let bytes = encode::<P, _>(&mixed(None));
    let name = resolve(&d, "name");
    let v = name.read::<P>(&bytes).unwrap().unwrap();
    let e = v.i64().unwrap_err();
    assert_eq!(e.path, "name");
    assert!(matches!(
        e.kind,
        thrift_dynamic::path::ReadErrorKind::NotA {
            wanted: TType::I64,
            found: TType::Binary
        }
    ));
    let id = resolve(&d, "id");
    assert!(id.read::<P>(&bytes).unwrap().unwrap().str().is_err());
    assert!(
        id.read::<P>(&bytes)
            .unwrap()
            .unwrap()
            .struct_bytes()
            .is_err()
    );
}
