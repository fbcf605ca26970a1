//! codegen's `Builder` options, compiled for real: the `std_types` module is the
//! repository's IDL generated with `String`, `Vec<u8>`, `HashMap`/`HashSet`, a
//! `serde::Serialize` derive on every type and a rename on one field. Its values must
//! put the same bytes on the wire as the default-typed module's, and serde must see the
//! attributes.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use codegen_check::std_types::{echo as std_echo, mixed as std_mixed};
use codegen_check::{echo, mixed};
use thrift_wire::bytes::Bytes;
use thrift_wire::{Binary, Codec, Compact, LinkBuffer, Message, Protocol};

fn encode<P: Protocol, M: Message>(m: &M) -> Bytes {
    let codec = Codec::<P>::new();
    let mut buf = LinkBuffer::new();
    let n = codec.encode(m, &mut buf).unwrap();
    buf.next(n)
}

fn std_mixed() -> std_mixed::Mixed {
    std_mixed::Mixed {
        id: 7,
        name: String::from("name"),
        flag: true,
        tiny: -1,
        small: 300,
        count: 70_000,
        ratio: 0.25,
        requests: vec![std_echo::Request {
            action: String::from("a"),
            msg: String::from("m"),
        }],
        // One entry each: hash order cannot differ from the BTree order then.
        counters: HashMap::from([(String::from("k"), 9)]),
        tags: HashSet::from([5]),
        labels: vec![String::from("x"), String::from("y")],
        payload: Some(vec![0, 1, 255]),
        ids: std_echo::Ids {
            ids32: vec![1, -2],
            ids64: vec![3],
            scores: vec![1.5],
            blob: vec![9, 8],
        },
    }
}

fn default_mixed() -> mixed::Mixed {
    mixed::Mixed {
        id: 7,
        name: "name".into(),
        flag: true,
        tiny: -1,
        small: 300,
        count: 70_000,
        ratio: 0.25,
        requests: vec![echo::Request {
            action: "a".into(),
            msg: "m".into(),
        }],
        counters: BTreeMap::from([("k".into(), 9)]),
        tags: BTreeSet::from([5]),
        labels: vec!["x".into(), "y".into()],
        payload: Some(Bytes::from_static(&[0, 1, 255])),
        ids: echo::Ids {
            ids32: vec![1, -2],
            ids64: vec![3],
            scores: vec![1.5],
            blob: Bytes::from_static(&[9, 8]),
        },
    }
}

fn same_bytes<P: Protocol>() {
    let (ours, default) = (std_mixed(), default_mixed());
    let bytes = encode::<P, _>(&ours);
    assert_eq!(bytes, encode::<P, _>(&default));
    let back: std_mixed::Mixed = Codec::<P>::new().decode(bytes).unwrap();
    assert_eq!(back, ours);
}

#[test]
fn std_types_put_the_same_bytes_on_the_wire_as_the_default_types() {
    same_bytes::<Binary>();
    same_bytes::<Compact>();
}

#[test]
fn type_and_field_attributes_reach_the_generated_code() {
    let req = std_echo::Request {
        action: String::from("echo"),
        msg: String::from("hi"),
    };
    // The derive comes from `type_attribute(".")`, the rename from `field_attribute`.
    assert_eq!(
        serde_json::to_string(&req).unwrap(),
        r#"{"action":"echo","message":"hi"}"#
    );
    // Only the selected field is renamed.
    let resp = std_echo::Response {
        action: String::from("echo"),
        msg: String::from("hi"),
    };
    assert_eq!(
        serde_json::to_string(&resp).unwrap(),
        r#"{"action":"echo","msg":"hi"}"#
    );
    let json = serde_json::to_value(std_mixed()).unwrap();
    assert_eq!(json["payload"], serde_json::json!([0, 1, 255]));
    assert_eq!(json["counters"]["k"], 9);
}

#[test]
fn the_crate_docs_example_runs_as_written() {
    // codegen's crate docs, step 3, on the default-typed module.
    let req = echo::Request {
        action: "echo".into(),
        msg: "hello".into(),
    };
    let mut buf = LinkBuffer::new();
    let n = Codec::<Binary>::new().encode(&req, &mut buf).unwrap();
    let back: echo::Request = Codec::<Binary>::new().decode(buf.next(n)).unwrap();
    assert_eq!(back, req);
}
