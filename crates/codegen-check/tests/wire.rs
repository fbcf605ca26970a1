//! Generated types against the hand-written reference types: the same values must give
//! the same bytes in both protocols, and each must decode the other's bytes.

use std::collections::{BTreeMap, BTreeSet};

use codegen_check::{echo as generated, mixed as generated_mixed};
use thrift_wire::bytes::Bytes;
use thrift_wire::fixtures::{echo as reference, mixed as reference_mixed};
use thrift_wire::{Binary, Codec, Compact, LinkBuffer, Message, Protocol, Utf8Bytes};

fn encode<P: Protocol, M: Message>(m: &M) -> Bytes {
    let codec = Codec::<P>::new();
    let mut buf = LinkBuffer::new();
    let n = codec.encode(m, &mut buf).unwrap();
    assert_eq!(n, codec.size(m));
    buf.next(n)
}

/// Same bytes both ways, in both protocols; each decodes the other's bytes back to the
/// value it started from.
fn same_wire<G, R>(g: &G, r: &R)
where
    G: Message + PartialEq + std::fmt::Debug,
    R: Message + PartialEq + std::fmt::Debug,
{
    fn one<P: Protocol, G, R>(g: &G, r: &R)
    where
        G: Message + PartialEq + std::fmt::Debug,
        R: Message + PartialEq + std::fmt::Debug,
    {
        let (gb, rb) = (encode::<P, _>(g), encode::<P, _>(r));
        assert_eq!(gb, rb, "generated and reference bytes differ for {r:?}");
        let codec = Codec::<P>::new();
        assert_eq!(&codec.decode::<G>(rb).unwrap(), g);
        assert_eq!(&codec.decode::<R>(gb).unwrap(), r);
    }
    one::<Binary, G, R>(g, r);
    one::<Compact, G, R>(g, r);
}

fn text(s: &str) -> Utf8Bytes {
    Utf8Bytes::from(s.to_string())
}

#[test]
fn request_response_and_exception() {
    for (action, msg) in [("", ""), ("echo", "hello"), ("fail", "ünïcode ✓")] {
        same_wire(
            &generated::Request {
                action: text(action),
                msg: text(msg),
            },
            &reference::Request {
                action: text(action),
                msg: text(msg),
            },
        );
        same_wire(
            &generated::Response {
                action: text(action),
                msg: text(msg),
            },
            &reference::Response {
                action: text(action),
                msg: text(msg),
            },
        );
    }
    for code in [0, -1, i32::MAX] {
        same_wire(
            &generated::EchoError {
                code,
                message: text("boom"),
            },
            &reference::EchoError {
                code,
                message: text("boom"),
            },
        );
    }
    let e = generated::EchoError {
        code: 3,
        message: text("m"),
    };
    let as_error: &dyn std::error::Error = &e;
    assert!(as_error.to_string().contains("code: 3"));
}

#[test]
fn my_test_and_ids() {
    for n in [0usize, 1, 15, 16, 1000] {
        let nums: Vec<i64> = (0..n as i64).map(|i| i * -7_777_777).collect();
        same_wire(
            &generated::MyTest {
                num: n as i64,
                ano: generated::Ano { num: -(n as i64) },
                nums: nums.clone(),
            },
            &reference::MyTest {
                num: n as i64,
                ano: reference::Ano { num: -(n as i64) },
                nums,
            },
        );
        let ids32: Vec<i32> = (0..n as i32).collect();
        let ids64: Vec<i64> = (0..n as i64).map(|i| i << 33).collect();
        let scores: Vec<f64> = (0..n).map(|i| i as f64 * 0.25 - 3.0).collect();
        let blob = Bytes::from(vec![7u8; n]);
        same_wire(
            &generated::Ids {
                ids32: ids32.clone(),
                ids64: ids64.clone(),
                scores: scores.clone(),
                blob: blob.clone(),
            },
            &reference::Ids {
                ids32,
                ids64,
                scores,
                blob,
            },
        );
    }
}

#[test]
fn mixed_with_every_field_kind() {
    for n in [0usize, 3, 40] {
        for payload in [None, Some(Bytes::from_static(b"payload"))] {
            let action = |i: usize| text(&format!("a{i}"));
            let counters: BTreeMap<Utf8Bytes, i64> = (0..n as i64)
                .map(|i| (text(&format!("k{i}")), i - 5))
                .collect();
            let tags: BTreeSet<i32> = (0..n as i32).map(|i| i * 31 - 100).collect();
            let labels: Vec<Utf8Bytes> = (0..n).map(|i| text(&format!("l{i}"))).collect();
            let g = generated_mixed::Mixed {
                id: n as i64,
                name: text("mixed"),
                flag: n % 2 == 1,
                tiny: -1,
                small: 300,
                count: -70_000,
                ratio: 1.5,
                requests: (0..n)
                    .map(|i| generated::Request {
                        action: action(i),
                        msg: text("m"),
                    })
                    .collect(),
                counters: counters.clone(),
                tags: tags.clone(),
                labels: labels.clone(),
                payload: payload.clone(),
                ids: generated::Ids::default(),
            };
            let r = reference_mixed::Mixed {
                id: n as i64,
                name: text("mixed"),
                flag: n % 2 == 1,
                tiny: -1,
                small: 300,
                count: -70_000,
                ratio: 1.5,
                requests: (0..n)
                    .map(|i| reference::Request {
                        action: action(i),
                        msg: text("m"),
                    })
                    .collect(),
                counters,
                tags,
                labels,
                payload,
                ids: reference::Ids::default(),
            };
            same_wire(&g, &r);
        }
    }
}

#[test]
fn a_missing_required_field_names_its_path() {
    let bytes = encode::<Binary, _>(&reference::Ano { num: 1 });
    // An `Ano` is a struct whose field 1 is an i64; as a `Request` it lacks both fields.
    let err = Codec::<Binary>::new()
        .decode::<generated::Request>(bytes)
        .unwrap_err();
    assert_eq!(err.path(), "Request.action");
}
