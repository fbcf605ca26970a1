//! Codec benchmark: thrift-wire against pilota, CloudWeGo's Thrift library (what
//! volo-thrift encodes and decodes with), and against `memcpy` as the physical limit.
//!
//! Run it with `cargo bench -p benches --bench codec` (about six minutes on two cores);
//! pass a filter to run part of it, e.g. `cargo bench -p benches --bench codec -- mixed/`.
//!
//! What is compared, in one run, on the Binary protocol:
//!
//! - `request`, `my_test`, `ids`, `mixed`: each type of `idl/echo.thrift` and
//!   `idl/mixed.thrift`, encoded and decoded by thrift-wire (its hand-written reference
//!   types, feature `fixtures`) and by the code pilota-build 0.13 generates for the same
//!   IDL (`build.rs`). Pilota runs twice: `pilota` is `TBinaryProtocol`, volo-thrift's
//!   default; `pilota-unsafe` is `TBinaryUnsafe*Protocol`, which volo-thrift uses with its
//!   opt-in `unsafe-codec` feature (no bounds checks: undefined behaviour on malformed
//!   input). Both implementations encode into a reused buffer (cleared each iteration,
//!   capacity kept) after sizing the value and reserving once, as `Codec::encode` and
//!   volo-thrift do, and decode a whole frame held in `Bytes` without copying strings or
//!   binaries. Two differences the figures include: thrift-wire validates the UTF-8 of
//!   every decoded string, pilota does not (`FastStr::from_bytes_unchecked`); and `Mixed`'s
//!   map and set are `BTreeMap`/`BTreeSet` in thrift-wire, `AHashMap`/`AHashSet` in pilota.
//! - `memcpy`: copying as many bytes as `MyTest` encodes to, the floor for its encoding.
//! - `simd_*`: the big-endian list copies of `thrift_wire::simd`, dispatching vs scalar vs
//!   AVX2 (the last only where the CPU has it).
//!
//! Before measuring, every case checks that each side decodes the other's encoding to an
//! equal value, and that the encodings are byte-identical where the IDL makes them so (all
//! but `Mixed`, whose map and set iterate in different orders); it panics otherwise.
//! Throughput is the encoded size, so criterion prints bytes per second.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::hint::black_box;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pilota::thrift::binary::TBinaryProtocol;
use pilota::thrift::binary_unsafe::{TBinaryUnsafeInputProtocol, TBinaryUnsafeOutputProtocol};
use pilota::{AHashMap, AHashSet, FastStr};
use thrift_wire::fixtures::echo::{Ano, Ids, MyTest, Request};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::{Binary, Codec, LinkBuffer, Utf8Bytes, simd};

/// pilota-build's output for `idl/echo.thrift` and `idl/mixed.thrift` (see `build.rs`).
/// Foreign generated code: the workspace lints do not apply to it.
#[allow(
    missing_docs,
    missing_debug_implementations,
    unreachable_pub,
    unused,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/pilota_gen.rs"));
}

use generated::pilota_gen::{echo as pl, mixed as pl_mixed};

// ------------------------------------------------------------------------------ test data

/// A deterministic xorshift64* stream, so that every run measures the same values.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn i64s(&mut self, n: usize) -> Vec<i64> {
        (0..n).map(|_| self.next() as i64).collect()
    }

    fn i32s(&mut self, n: usize) -> Vec<i32> {
        (0..n).map(|_| (self.next() >> 32) as i32).collect()
    }

    /// Finite values in `[0, 1000)`, so that equality comparisons are meaningful.
    fn f64s(&mut self, n: usize) -> Vec<f64> {
        (0..n)
            .map(|_| (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 1000.0)
            .collect()
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next() >> 56) as u8).collect()
    }

    /// ASCII letters and digits.
    fn text(&mut self, n: usize) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        (0..n)
            .map(|_| char::from(ALPHABET[(self.next() % ALPHABET.len() as u64) as usize]))
            .collect()
    }
}

/// The values of one `Ids`.
struct IdsSpec {
    ids32: Vec<i32>,
    ids64: Vec<i64>,
    scores: Vec<f64>,
    blob: Vec<u8>,
}

impl IdsSpec {
    fn new(rng: &mut Rng, entries: usize, blob: usize) -> Self {
        IdsSpec {
            ids32: rng.i32s(entries),
            ids64: rng.i64s(entries),
            scores: rng.f64s(entries),
            blob: rng.bytes(blob),
        }
    }

    fn ours(&self) -> Ids {
        Ids {
            ids32: self.ids32.clone(),
            ids64: self.ids64.clone(),
            scores: self.scores.clone(),
            blob: Bytes::from(self.blob.clone()),
        }
    }

    fn pilota(&self) -> pl::Ids {
        pl::Ids {
            ids32: Some(self.ids32.clone()),
            ids64: Some(self.ids64.clone()),
            scores: Some(self.scores.clone()),
            blob: Some(Bytes::from(self.blob.clone())),
        }
    }
}

/// The values of one `Mixed`, as the comment at the top of `idl/mixed.thrift` describes
/// them: 16 requests of 512-byte messages, 64 counters, 256 tags, 64 labels, a 3000-byte
/// payload, 128 entries per `Ids` list and a 512-byte blob (about 20 KiB encoded).
struct MixedSpec {
    requests: Vec<(String, String)>,
    counters: Vec<(String, i64)>,
    tags: Vec<i32>,
    labels: Vec<String>,
    payload: Vec<u8>,
    ids: IdsSpec,
}

impl MixedSpec {
    const ID: i64 = 0x0123_4567_89ab_cdef;
    const NAME: &'static str = "mixed-benchmark-struct";
    const FLAG: bool = true;
    const TINY: i8 = -7;
    const SMALL: i16 = 12_345;
    const COUNT: i32 = 1_234_567;
    const RATIO: f64 = 0.618_033_988_75;

    fn new(rng: &mut Rng) -> Self {
        let mut tags = BTreeSet::new();
        while tags.len() < 256 {
            tags.insert((rng.next() >> 32) as i32);
        }
        MixedSpec {
            requests: (0..16)
                .map(|_| ("echo".to_owned(), rng.text(512)))
                .collect(),
            counters: (0..64)
                .map(|i| (format!("counter-{i:02}"), rng.next() as i64))
                .collect(),
            tags: tags.into_iter().collect(),
            labels: (0..64)
                .map(|i| format!("label-{i:02}-{}", rng.text(16)))
                .collect(),
            payload: rng.bytes(3000),
            ids: IdsSpec::new(rng, 128, 512),
        }
    }

    fn ours(&self) -> Mixed {
        Mixed {
            id: Self::ID,
            name: Utf8Bytes::from_static(Self::NAME),
            flag: Self::FLAG,
            tiny: Self::TINY,
            small: Self::SMALL,
            count: Self::COUNT,
            ratio: Self::RATIO,
            requests: self
                .requests
                .iter()
                .map(|(a, m)| ours_request(a, m))
                .collect(),
            counters: self
                .counters
                .iter()
                .map(|(k, v)| (Utf8Bytes::from(k.clone()), *v))
                .collect::<BTreeMap<_, _>>(),
            tags: self.tags.iter().copied().collect(),
            labels: self
                .labels
                .iter()
                .map(|l| Utf8Bytes::from(l.clone()))
                .collect(),
            payload: Some(Bytes::from(self.payload.clone())),
            ids: self.ids.ours(),
        }
    }

    fn pilota(&self) -> pl_mixed::Mixed {
        pl_mixed::Mixed {
            id: Some(Self::ID),
            name: Some(FastStr::from_static_str(Self::NAME)),
            flag: Some(Self::FLAG),
            tiny: Some(Self::TINY),
            small: Some(Self::SMALL),
            count: Some(Self::COUNT),
            ratio: Some(Self::RATIO),
            requests: Some(
                self.requests
                    .iter()
                    .map(|(a, m)| pilota_request(a, m))
                    .collect(),
            ),
            counters: Some(
                self.counters
                    .iter()
                    .map(|(k, v)| (FastStr::from_string(k.clone()), *v))
                    .collect::<AHashMap<_, _>>(),
            ),
            tags: Some(self.tags.iter().copied().collect::<AHashSet<_>>()),
            labels: Some(
                self.labels
                    .iter()
                    .map(|l| FastStr::from_string(l.clone()))
                    .collect(),
            ),
            payload: Some(Bytes::from(self.payload.clone())),
            ids: Some(self.ids.pilota()),
        }
    }
}

fn ours_request(action: &str, msg: &str) -> Request {
    Request {
        action: Utf8Bytes::from(action.to_owned()),
        msg: Utf8Bytes::from(msg.to_owned()),
    }
}

fn pilota_request(action: &str, msg: &str) -> pl::Request {
    pl::Request {
        action: FastStr::from_string(action.to_owned()),
        msg: FastStr::from_string(msg.to_owned()),
    }
}

fn ours_my_test(num: i64, ano: i64, nums: &[i64]) -> MyTest {
    MyTest {
        num,
        ano: Ano { num: ano },
        nums: nums.to_vec(),
    }
}

fn pilota_my_test(num: i64, ano: i64, nums: &[i64]) -> pl::MyTest {
    pl::MyTest {
        num: Some(num),
        ano: Some(pl::Ano { num: Some(ano) }),
        nums: Some(nums.to_vec()),
    }
}

// ------------------------------------------------------------------- the two codecs

/// thrift-wire's production path: `Codec::encode` sizes the value, reserves once and
/// writes into the `LinkBuffer`.
fn ours_encode<M: thrift_wire::Message>(codec: &Codec<Binary>, value: &M, buf: &mut LinkBuffer) {
    codec.encode(value, buf).expect("thrift-wire encodes");
}

/// Zero-copy decode of a whole frame (strings and binaries are slices of `frame`).
fn ours_decode<M: thrift_wire::Message>(codec: &Codec<Binary>, frame: &Bytes) -> M {
    codec.decode(frame.clone()).expect("thrift-wire decodes")
}

/// Pilota as volo-thrift drives it by default (`codec/default/thrift.rs`): the size is
/// computed first with a `TBinaryProtocol` over `()` (volo does it to reserve the
/// frame), the buffer reserves that much, then `TBinaryProtocol` writes into it. Volo
/// writes into a `LinkedBytes`, whose small writes land in a `BytesMut` exactly like
/// this one; its zero-copy insertion only starts at 4 KiB, more than any string or
/// binary here, so a `BytesMut` is the same work without the indirection.
fn pilota_encode<M: pilota::thrift::Message>(value: &M, buf: &mut BytesMut) {
    let size = value.size(&mut TBinaryProtocol::new((), true));
    buf.reserve(size);
    value
        .encode(&mut TBinaryProtocol::new(&mut *buf, true))
        .expect("pilota encodes");
}

/// Pilota as volo-thrift drives it with its `unsafe-codec` feature: the same sizing and
/// reservation, then `TBinaryUnsafeOutputProtocol` writes into the spare capacity
/// without bounds checks, and the buffer is advanced by what it wrote.
fn pilota_encode_unsafe<M: pilota::thrift::Message>(value: &M, buf: &mut BytesMut) {
    let size = value.size(&mut TBinaryProtocol::new((), true));
    buf.reserve(size);
    let spare = buf.spare_capacity_mut();
    // SAFETY: the protocol's contract (as volo-thrift meets it): the slice is the buffer's
    // spare capacity, at least `size` bytes, which is exactly what `encode` writes; it is
    // only written through (never read before written) and the `BytesMut` is neither
    // moved nor reallocated while the protocol lives, because the protocol holds the only
    // other borrow of it and this type's encoding never touches the `BytesMut` itself.
    let spare: &'static mut [u8] =
        unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<u8>(), spare.len()) };
    // SAFETY: `spare` points into `buf`'s spare capacity and holds `size` bytes (above).
    let mut protocol = unsafe { TBinaryUnsafeOutputProtocol::new(&mut *buf, spare, true) };
    value.encode(&mut protocol).expect("pilota encodes");
    let written = protocol.index();
    assert!(written <= size, "pilota wrote past its own size");
    // SAFETY: the protocol initialized exactly the first `written` (<= size <= spare
    // capacity) bytes after the buffer's length.
    unsafe { buf.advance_mut(written) };
}

/// Zero-copy decode with `TBinaryProtocol` (volo-thrift's default): strings and
/// binaries are `split_to` slices of the frame.
fn pilota_decode<M: pilota::thrift::Message>(frame: &Bytes) -> M {
    let mut input = frame.clone();
    M::decode(&mut TBinaryProtocol::new(&mut input, true)).expect("pilota decodes")
}

/// Decode with `TBinaryUnsafeInputProtocol` (volo-thrift's `unsafe-codec` feature).
fn pilota_decode_unsafe<M: pilota::thrift::Message>(frame: &Bytes) -> M {
    let mut input = frame.clone();
    // SAFETY: the protocol reads without bounds checks; `frame` is a complete encoding of
    // an `M`, checked in `bench_case` before any measurement.
    let mut protocol = unsafe { TBinaryUnsafeInputProtocol::new(&mut input) };
    M::decode(&mut protocol).expect("pilota decodes")
}

// ---------------------------------------------------------------------------- cases

/// Cross-checks the two implementations on one value, then measures encode and decode
/// of both side by side in the group `name`. Returns the encoded size.
fn bench_case<O, P>(c: &mut Criterion, name: &str, ours: &O, theirs: &P, identical: bool) -> usize
where
    O: thrift_wire::Message + PartialEq + Debug,
    P: pilota::thrift::Message + PartialEq + Debug,
{
    let codec = Codec::<Binary>::default();

    // Setup and honesty checks, outside of any measurement.
    let mut buf = LinkBuffer::new();
    let len = codec.encode(ours, &mut buf).expect("thrift-wire encodes");
    assert_eq!(
        buf.len(),
        len,
        "{name}: thrift-wire's size is not what it wrote"
    );
    let ours_frame = buf.next(len);
    let mut pl_buf = BytesMut::new();
    pilota_encode(theirs, &mut pl_buf);
    let pl_frame = pl_buf.split().freeze();
    pilota_encode_unsafe(theirs, &mut pl_buf);
    let pl_unsafe_frame = pl_buf.split().freeze();
    assert_eq!(
        pl_frame, pl_unsafe_frame,
        "{name}: pilota's two protocols disagree"
    );
    assert_eq!(
        ours_frame.len(),
        pl_frame.len(),
        "{name}: encoded sizes differ"
    );
    if identical {
        assert!(
            ours_frame == pl_frame,
            "{name}: encodings are not byte-identical"
        );
    }
    assert_eq!(
        &pilota_decode::<P>(&ours_frame),
        theirs,
        "{name}: pilota decodes thrift-wire's encoding to another value"
    );
    assert_eq!(
        &pilota_decode_unsafe::<P>(&ours_frame),
        theirs,
        "{name}: pilota (unsafe) decodes thrift-wire's encoding to another value"
    );
    assert_eq!(
        &ours_decode::<O>(&codec, &pl_frame),
        ours,
        "{name}: thrift-wire decodes pilota's encoding to another value"
    );
    assert_eq!(
        &ours_decode::<O>(&codec, &ours_frame),
        ours,
        "{name}: round trip"
    );

    eprintln!(
        "{name}: {len} bytes encoded; cross-decoding checked{}",
        if identical {
            ", encodings byte-identical"
        } else {
            ""
        }
    );

    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Bytes(len as u64));

    let mut buf = LinkBuffer::with_capacity(len);
    group.bench_function("encode/thrift-wire", |b| {
        b.iter(|| {
            buf.clear();
            ours_encode(&codec, black_box(ours), &mut buf);
            black_box(buf.len())
        })
    });
    let mut pl_buf = BytesMut::with_capacity(len);
    group.bench_function("encode/pilota", |b| {
        b.iter(|| {
            pl_buf.clear();
            pilota_encode(black_box(theirs), &mut pl_buf);
            black_box(pl_buf.len())
        })
    });
    group.bench_function("encode/pilota-unsafe", |b| {
        b.iter(|| {
            pl_buf.clear();
            pilota_encode_unsafe(black_box(theirs), &mut pl_buf);
            black_box(pl_buf.len())
        })
    });

    group.bench_function("decode/thrift-wire", |b| {
        b.iter(|| ours_decode::<O>(&codec, black_box(&ours_frame)))
    });
    group.bench_function("decode/pilota", |b| {
        b.iter(|| pilota_decode::<P>(black_box(&pl_frame)))
    });
    group.bench_function("decode/pilota-unsafe", |b| {
        b.iter(|| pilota_decode_unsafe::<P>(black_box(&pl_frame)))
    });
    group.finish();
    len
}

fn codec_cases(c: &mut Criterion) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);

    // 1. A 1 KiB echo request.
    let msg = rng.text(1024);
    bench_case(
        c,
        "request",
        &ours_request("echo", &msg),
        &pilota_request("echo", &msg),
        true,
    );

    // 2. MyTest: 131,072 i64s, 1 MiB of list payload.
    let nums = rng.i64s(131_072);
    let my_test_len = bench_case(
        c,
        "my_test",
        &ours_my_test(42, 7, &nums),
        &pilota_my_test(42, 7, &nums),
        true,
    );

    // 3. Ids: 10,000 entries per list and a 256-byte blob.
    let ids = IdsSpec::new(&mut rng, 10_000, 256);
    bench_case(c, "ids", &ids.ours(), &ids.pilota(), true);

    // 4. Mixed: about 20 KiB of everything; map and set order differ between the two.
    let mixed = MixedSpec::new(&mut rng);
    bench_case(c, "mixed", &mixed.ours(), &mixed.pilota(), false);

    memcpy(c, &mut rng, my_test_len);
}

/// The physical limit for `MyTest`'s encoding: copying as many bytes into a reused buffer.
fn memcpy(c: &mut Criterion, rng: &mut Rng, len: usize) {
    let src = rng.bytes(len);
    let mut group = c.benchmark_group("memcpy");
    group.throughput(Throughput::Bytes(len as u64));
    let mut dst: Vec<u8> = Vec::with_capacity(len);
    group.bench_function("extend_from_slice/my_test_len", |b| {
        b.iter(|| {
            dst.clear();
            dst.extend_from_slice(black_box(&src));
            black_box(dst.len())
        })
    });
    let mut dst = vec![0u8; len];
    group.bench_function("copy_from_slice/my_test_len", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(dst.as_ptr())
        })
    });
    group.finish();
}

// ----------------------------------------------------------------------------- SIMD

/// An encoding kernel: appends `values` to the buffer, big-endian.
type Put<T> = fn(&mut BytesMut, &[T]);
/// A decoding kernel: appends the big-endian values of the bytes to the `Vec`.
type Get<T> = fn(&[u8], &mut Vec<T>);

/// One numeric element type's bulk copies in `thrift_wire::simd`, labelled `dispatch`,
/// `scalar` and `avx2`.
struct SimdKernels<T> {
    put: [(&'static str, Put<T>); 3],
    get: [(&'static str, Get<T>); 3],
}

fn simd_group<T: Copy + PartialEq + Debug>(
    c: &mut Criterion,
    name: &str,
    values: &[T],
    kernels: &SimdKernels<T>,
) {
    let avx2 = simd::avx2::is_available();
    let usable = |label: &str| avx2 || label != "avx2";
    let width = std::mem::size_of_val(values);

    // Every kernel must agree with the scalar reference before anything is measured.
    let (_, scalar_put) = kernels
        .put
        .iter()
        .find(|(label, _)| *label == "scalar")
        .expect("a scalar kernel");
    let mut encoded = BytesMut::new();
    scalar_put(&mut encoded, values);
    let encoded = encoded.freeze();
    for (label, put) in kernels.put.iter().filter(|(l, _)| usable(l)) {
        let mut out = BytesMut::new();
        put(&mut out, values);
        assert!(
            out[..] == encoded[..],
            "{name}: put/{label} differs from scalar"
        );
    }
    for (label, get) in kernels.get.iter().filter(|(l, _)| usable(l)) {
        let mut out = Vec::new();
        get(&encoded, &mut out);
        assert_eq!(out, values, "{name}: get/{label} differs from the input");
    }

    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Bytes(width as u64));
    let mut dst = BytesMut::with_capacity(width);
    for (label, put) in kernels.put.iter().filter(|(l, _)| usable(l)) {
        group.bench_function(format!("put/{label}"), |b| {
            b.iter(|| {
                dst.clear();
                put(&mut dst, black_box(values));
                black_box(dst.len())
            })
        });
    }
    let mut out: Vec<T> = Vec::with_capacity(values.len());
    for (label, get) in kernels.get.iter().filter(|(l, _)| usable(l)) {
        group.bench_function(format!("get/{label}"), |b| {
            b.iter(|| {
                out.clear();
                get(black_box(&encoded), &mut out);
                black_box(out.len())
            })
        });
    }
    group.finish();
}

fn simd_cases(c: &mut Criterion) {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let i64s = SimdKernels {
        put: [
            ("dispatch", simd::put_i64s_be as Put<i64>),
            ("scalar", simd::scalar::put_i64s_be),
            ("avx2", simd::avx2::put_i64s_be),
        ],
        get: [
            ("dispatch", simd::get_i64s_be as Get<i64>),
            ("scalar", simd::scalar::get_i64s_be),
            ("avx2", simd::avx2::get_i64s_be),
        ],
    };
    simd_group(c, "simd_i64_131072", &rng.i64s(131_072), &i64s);
    let i32s = SimdKernels {
        put: [
            ("dispatch", simd::put_i32s_be as Put<i32>),
            ("scalar", simd::scalar::put_i32s_be),
            ("avx2", simd::avx2::put_i32s_be),
        ],
        get: [
            ("dispatch", simd::get_i32s_be as Get<i32>),
            ("scalar", simd::scalar::get_i32s_be),
            ("avx2", simd::avx2::get_i32s_be),
        ],
    };
    simd_group(c, "simd_i32_10000", &rng.i32s(10_000), &i32s);
    let f64s = SimdKernels {
        put: [
            ("dispatch", simd::put_f64s_be as Put<f64>),
            ("scalar", simd::scalar::put_f64s_be),
            ("avx2", simd::avx2::put_f64s_be),
        ],
        get: [
            ("dispatch", simd::get_f64s_be as Get<f64>),
            ("scalar", simd::scalar::get_f64s_be),
            ("avx2", simd::avx2::get_f64s_be),
        ],
    };
    simd_group(c, "simd_f64_10000", &rng.f64s(10_000), &f64s);
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
    targets = codec_cases, simd_cases
}
criterion_main!(benches);
