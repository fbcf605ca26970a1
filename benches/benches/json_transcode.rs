//! JSON <-> Thrift: thrift-dynamic's one-pass transcoder against the generated path.
//!
//! Run it with `cargo bench -p benches --bench json_transcode` (about two minutes on two
//! cores).
//!
//! What is compared, in one run, on the Binary protocol (the transcoder also on
//! Compact):
//!
//! - `json_to_thrift`: [`thrift_dynamic::json_to_thrift`] from the JSON text into a
//!   reused `Vec<u8>`, against `serde_json::from_slice` into the struct codegen generates
//!   for the same IDL (with `String`, `Vec<u8>` and serde derives; `build.rs`), then
//!   `Codec::<Binary>::encode` into a reused `LinkBuffer`.
//! - `thrift_to_json`: [`thrift_dynamic::thrift_to_json`] from one `Bytes` frame into a
//!   reused `Vec<u8>`, against `Codec::<Binary>::decode` into the generated struct, then
//!   `serde_json::to_writer` into a reused `Vec<u8>`.
//!
//! On two values: echo's `Request` with a 1 KiB `msg`, and the ~20 KB `Mixed` of
//! `idl/mixed.thrift` (the codec bench's shape). Binary fields are base64 on both sides
//! (the peer's through `#[serde(with)]`, standard alphabet, padded), so both read and
//! write the same JSON. Before measuring, each case checks that the transcoder's Thrift
//! equals the peer's byte for byte and that its JSON equals serde_json's; it panics
//! otherwise. Throughput is the JSON size.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use thrift_dynamic::{Descriptor, StructId, ThriftProtocol, json_to_thrift, thrift_to_json};
use thrift_wire::{Binary, Codec, LinkBuffer};

/// codegen's output for `idl/echo.thrift` and `idl/mixed.thrift` with serde derives
/// (see `build.rs`). Generated code: the workspace lints do not apply to it.
#[allow(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    unused,
    clippy::all
)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/serde_gen.rs"));
}

use generated::{echo, mixed};

/// `binary` as a base64 string (standard alphabet, padded), for the serde peer.
mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = <&str>::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// `optional binary` as a base64 string or absent.
mod base64_option {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => super::base64_bytes::serialize(v, s),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "super::base64_bytes")] Vec<u8>);
        Ok(Option::<Wrap>::deserialize(d)?.map(|w| w.0))
    }
}

/// A deterministic byte stream (xorshift), so runs compare.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn text(&mut self, n: usize) -> String {
        const ALPHABET: &[u8] =
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,-";
        (0..n)
            .map(|_| ALPHABET[(self.next() % ALPHABET.len() as u64) as usize] as char)
            .collect()
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn request(rng: &mut Rng, msg_len: usize) -> echo::Request {
    echo::Request {
        action: "echo".to_string(),
        msg: rng.text(msg_len),
    }
}

/// The codec bench's `Mixed`: 16 requests of 512-byte messages, 64 counters, 256 tags,
/// 64 labels, a 3000-byte payload, 128 entries per `Ids` list and a 512-byte blob.
fn mixed(rng: &mut Rng) -> mixed::Mixed {
    mixed::Mixed {
        id: 1 << 40,
        name: "mixed".to_string(),
        flag: true,
        tiny: -7,
        small: 1234,
        count: 987_654,
        ratio: 0.618_033_988_749_895,
        requests: (0..16).map(|_| request(rng, 512)).collect(),
        counters: (0..64)
            .map(|i| (format!("counter-{i}"), rng.next() as i64 >> 20))
            .collect(),
        tags: (0..256).map(|i| i * 37).collect(),
        labels: (0..64)
            .map(|i| format!("label-{i}-{}", rng.text(8)))
            .collect(),
        payload: Some(rng.bytes(3000)),
        ids: echo::Ids {
            ids32: (0..128).map(|_| rng.next() as i32).collect(),
            ids64: (0..128).map(|_| rng.next() as i64).collect(),
            scores: (0..128).map(|i| i as f64 * 0.25 - 7.5).collect(),
            blob: rng.bytes(512),
        },
    }
}

fn descriptor() -> Descriptor {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../idl");
    Descriptor::from_files(&[dir.join("mixed.thrift")], &[dir]).expect("the IDL loads")
}

fn encode<M: thrift_wire::Message>(m: &M) -> Bytes {
    let mut buf = LinkBuffer::new();
    let n = Codec::<Binary>::new().encode(m, &mut buf).expect("encodes");
    buf.next(n)
}

/// Both directions on one value, both implementations, after checking they agree.
fn case<M>(c: &mut Criterion, name: &str, d: &Descriptor, ty: StructId, value: &M)
where
    M: thrift_wire::Message + serde::Serialize + serde::de::DeserializeOwned + PartialEq,
{
    let json = serde_json::to_vec(value).expect("serializes");
    let thrift = encode(value);

    let mut ours = Vec::new();
    json_to_thrift(d, ty, &json, ThriftProtocol::Binary, &mut ours).expect("transcodes");
    assert_eq!(
        ours,
        thrift.to_vec(),
        "{name}: JSON -> Thrift differs from the peer's"
    );
    let mut ours_json = Vec::new();
    thrift_to_json(
        d,
        ty,
        thrift.clone(),
        ThriftProtocol::Binary,
        &mut ours_json,
    )
    .expect("transcodes");
    assert_eq!(
        ours_json, json,
        "{name}: Thrift -> JSON differs from serde_json's"
    );
    let back: M = Codec::<Binary>::new()
        .decode(thrift.clone())
        .expect("decodes");
    assert!(back == *value, "{name}: the peer does not round-trip");

    let mut g = c.benchmark_group(format!("json_to_thrift/{name}"));
    g.throughput(Throughput::Bytes(json.len() as u64));
    let mut out = Vec::with_capacity(json.len());
    g.bench_function("transcoder-binary", |b| {
        b.iter(|| {
            out.clear();
            json_to_thrift(d, ty, black_box(&json), ThriftProtocol::Binary, &mut out).unwrap();
            black_box(out.len())
        })
    });
    g.bench_function("transcoder-compact", |b| {
        b.iter(|| {
            out.clear();
            json_to_thrift(d, ty, black_box(&json), ThriftProtocol::Compact, &mut out).unwrap();
            black_box(out.len())
        })
    });
    let codec = Codec::<Binary>::new();
    let mut buf = LinkBuffer::new();
    g.bench_function("serde_json+codec", |b| {
        b.iter(|| {
            let m: M = serde_json::from_slice(black_box(&json)).unwrap();
            let n = codec.encode(&m, &mut buf).unwrap();
            black_box(buf.next(n))
        })
    });
    g.finish();

    let mut g = c.benchmark_group(format!("thrift_to_json/{name}"));
    g.throughput(Throughput::Bytes(json.len() as u64));
    let mut out = Vec::with_capacity(json.len());
    g.bench_function("transcoder-binary", |b| {
        b.iter(|| {
            out.clear();
            thrift_to_json(
                d,
                ty,
                black_box(thrift.clone()),
                ThriftProtocol::Binary,
                &mut out,
            )
            .unwrap();
            black_box(out.len())
        })
    });
    g.bench_function("codec+serde_json", |b| {
        b.iter(|| {
            out.clear();
            let m: M = codec.decode(black_box(thrift.clone())).unwrap();
            serde_json::to_writer(&mut out, &m).unwrap();
            black_box(out.len())
        })
    });
    g.finish();
}

fn json_cases(c: &mut Criterion) {
    let d = descriptor();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let req = request(&mut rng, 1024);
    case(
        c,
        "request_1k",
        &d,
        d.struct_named("echo.Request").unwrap(),
        &req,
    );
    let m = mixed(&mut rng);
    case(
        c,
        "mixed_20k",
        &d,
        d.struct_named("mixed.Mixed").unwrap(),
        &m,
    );
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(5))
        .sample_size(50)
}

criterion_group! {
    name = benches;
    config = config();
    targets = json_cases
}
criterion_main!(benches);
