//! Field paths against whole decoding: reading one deep field of the ~20 KiB `Mixed`
//! in place (`thrift_dynamic::path`) against decoding all of it with thrift-wire, in
//! the Binary and Compact protocols.
//!
//! Run it with `cargo bench -p benches --bench field_path` (about a minute on two
//! cores). Cases, per protocol:
//!
//! - `decode_mixed`: `Codec::decode::<Mixed>` of the whole frame (zero-copy strings,
//!   UTF-8 checked, the map and set built), the work a program without paths does to
//!   look at one field;
//! - `read/ids.blob`: the last field's last member, found by stepping over every field
//!   before it (the 16 requests, the map, the set, the labels, the payload, three id
//!   lists), and handed back as a `Bytes` slice of the frame;
//! - `read/requests[15].msg`: the last request's message (15 structs stepped over), as a
//!   UTF-8-checked `Utf8Bytes` slice;
//! - `read/counters["counter-63"]`: a map value by key (the whole map is read, as a
//!   repeated key takes its last value);
//! - `replace/requests[15].msg`: a new message written for that field, the rest copied
//!   into a reused `Vec`.
//!
//! The path is resolved once, outside the loop, as a program would. Before measuring,
//! each read is checked against the fixture's field, and the replacement against a
//! decode of its output.
//!
//! Before the criterion groups, each protocol prints one paired line,
//! `field_path/<protocol> paired: decode_ns=.. read_ids.blob_ns=.. ratio=..`: batches
//! of whole decodes and of `ids.blob` reads taken in turn, each side's fastest batch
//! kept. On a shared machine, time stolen by neighbours lands in one criterion
//! group's window and not the other's, which moves their ratio by half either way;
//! the fastest of interleaved batches is what each costs when it runs undisturbed.

use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use thrift_dynamic::Descriptor;
use thrift_dynamic::path::{FieldPath, PathProtocol, ResolvedPath};
use thrift_wire::fixtures::echo::{Ids, Request};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::{Binary, Codec, Compact, LinkBuffer, Utf8Bytes};

/// A fixed sequence of pseudo-random words (splitmix64), so runs measure equal data.
fn words(seed: u64) -> impl Iterator<Item = u64> {
    let mut state = seed;
    std::iter::repeat_with(move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

/// `len` printable ASCII characters.
fn ascii(seed: u64, len: usize) -> Utf8Bytes {
    let s: String = words(seed)
        .take(len)
        .map(|w| char::from(b'!' + (w % 94) as u8))
        .collect();
    Utf8Bytes::from(s)
}

/// The benchmark's `Mixed`, shaped as `idl/mixed.thrift` describes (16 requests of
/// 512-byte messages, 64 counters, 256 tags, 64 labels, a 3000-byte payload, 128
/// entries per id list, a 512-byte blob).
fn mixed() -> Mixed {
    Mixed {
        id: 0x7654_3210_fedc_ba98,
        name: Utf8Bytes::from_static("field-path-benchmark"),
        flag: false,
        tiny: 42,
        small: -1234,
        count: 987_654,
        ratio: 0.618_034,
        requests: (0..16)
            .map(|i| Request {
                action: Utf8Bytes::from_static("echo"),
                msg: ascii(100 + i, 512),
            })
            .collect(),
        counters: (0..64)
            .zip(words(7))
            .map(|(i, w)| (Utf8Bytes::from(format!("counter-{i}")), w as i64))
            .collect::<BTreeMap<_, _>>(),
        tags: words(8)
            .take(256)
            .map(|w| w as i32)
            .collect::<BTreeSet<_>>(),
        labels: (0..64)
            .map(|i| Utf8Bytes::from(format!("label-{i}-{}", ascii(200 + i, 16).as_str())))
            .collect(),
        payload: Some(Bytes::from(
            words(9).take(3000).map(|w| w as u8).collect::<Vec<_>>(),
        )),
        ids: Ids {
            ids32: words(10).take(128).map(|w| (w >> 32) as i32).collect(),
            ids64: words(11).take(128).map(|w| w as i64).collect(),
            scores: (0..128).map(|i| f64::from(i) * 0.75).collect(),
            blob: Bytes::from(words(12).take(512).map(|w| w as u8).collect::<Vec<_>>()),
        },
    }
}

fn descriptor() -> Descriptor {
    let mut files = thrift_codegen::IdlFiles::new();
    files.insert("mixed.thrift", include_str!("../../idl/mixed.thrift"));
    files.insert("echo.thrift", include_str!("../../idl/echo.thrift"));
    Descriptor::from_memory(&files, &["mixed.thrift"], &[] as &[&Path]).expect("the IDL loads")
}

fn resolve(d: &Descriptor, text: &str) -> ResolvedPath {
    let root = d.struct_named("mixed.Mixed").expect("Mixed");
    FieldPath::parse(text)
        .expect("parses")
        .resolve(d, root)
        .expect("resolves")
}

fn cases<P: PathProtocol>(c: &mut Criterion, name: &str) {
    let d = descriptor();
    let value = mixed();
    let codec = Codec::<P>::new();
    let mut buf = LinkBuffer::new();
    let n = codec.encode(&value, &mut buf).expect("fits");
    let frame = buf.next(n);

    let blob = resolve(&d, "ids.blob");
    let msg = resolve(&d, "requests[15].msg");
    let counter = resolve(&d, "counters[\"counter-63\"]");
    let read_blob = |frame: &Bytes| -> Bytes {
        let v = blob
            .read_shared::<P>(frame)
            .expect("reads")
            .expect("present");
        v.bytes().expect("a binary")
    };
    let read_msg = |frame: &Bytes| -> Utf8Bytes {
        let v = msg
            .read_shared::<P>(frame)
            .expect("reads")
            .expect("present");
        v.string().expect("a string")
    };
    let read_counter = |frame: &Bytes| -> i64 {
        let v = counter
            .read_shared::<P>(frame)
            .expect("reads")
            .expect("present");
        v.i64().expect("an i64")
    };
    assert_eq!(read_blob(&frame), value.ids.blob);
    assert_eq!(read_msg(&frame), value.requests[15].msg);
    assert_eq!(
        read_counter(&frame),
        value.counters[&Utf8Bytes::from_static("counter-63")]
    );
    let new_msg = ascii(300, 512);
    let mut out = Vec::with_capacity(frame.len() + 64);
    msg.replace_str::<P>(&frame, new_msg.as_str(), &mut out)
        .expect("replaces");
    let back: Mixed = codec.decode(Bytes::from(out.clone())).expect("decodes");
    assert_eq!(back.requests[15].msg, new_msg);
    assert_eq!(
        codec.decode::<Mixed>(frame.clone()).expect("decodes"),
        value
    );

    paired(
        name,
        || {
            black_box(
                codec
                    .decode::<Mixed>(black_box(frame.clone()))
                    .expect("decodes"),
            );
        },
        || {
            black_box(read_blob(black_box(&frame)));
        },
    );

    let mut g = c.benchmark_group(format!("field_path/{name}"));
    g.throughput(Throughput::Bytes(frame.len() as u64));
    g.bench_function("decode_mixed", |b| {
        b.iter(|| {
            codec
                .decode::<Mixed>(black_box(frame.clone()))
                .expect("decodes")
        })
    });
    g.bench_function("read/ids.blob", |b| b.iter(|| read_blob(black_box(&frame))));
    g.bench_function("read/requests[15].msg", |b| {
        b.iter(|| read_msg(black_box(&frame)))
    });
    g.bench_function("read/counters[\"counter-63\"]", |b| {
        b.iter(|| read_counter(black_box(&frame)))
    });
    g.bench_function("replace/requests[15].msg", |b| {
        b.iter(|| {
            out.clear();
            msg.replace_str::<P>(black_box(&frame), new_msg.as_str(), &mut out)
                .expect("replaces")
        })
    });
    g.finish();
}

/// Prints the paired line (see the module docs): 25 rounds of a batch of `decode`
/// then a batch of `read`, each batch 2,000 calls, the fastest of each side kept.
fn paired(name: &str, mut decode: impl FnMut(), mut read: impl FnMut()) {
    const ROUNDS: usize = 25;
    const BATCH: u32 = 2_000;
    let batch = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        for _ in 0..BATCH {
            f();
        }
        start.elapsed().as_secs_f64() * 1e9 / f64::from(BATCH)
    };
    let (mut best_decode, mut best_read) = (f64::MAX, f64::MAX);
    for _ in 0..ROUNDS {
        best_decode = best_decode.min(batch(&mut decode));
        best_read = best_read.min(batch(&mut read));
    }
    println!(
        "field_path/{name} paired: decode_ns={best_decode:.0} read_ids.blob_ns={best_read:.0} ratio={:.1}",
        best_decode / best_read
    );
}

fn field_path(c: &mut Criterion) {
    cases::<Binary>(c, "binary");
    cases::<Compact>(c, "compact");
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
}

criterion_group! {
    name = benches;
    config = config();
    targets = field_path
}
criterion_main!(benches);
