//! What reading a request's TTHeader costs a server: the header Kitex's client sends
//! (eight integer keys, the IDL service name, one persistent metainfo value) decoded
//! into a reused header, then read as the server reads it (the timeout, the caller,
//! the metainfo).
//!
//! Run it with `cargo bench -p benches --bench ttheader`. `decode` is the decoding
//! alone; `decode_and_read` adds the reads. Decoded strings are spans of the frame
//! (`volo_core::codec::ttheader::StrPairs`), so neither row takes a reference count
//! per string: the frame is held once per list, and only the metainfo value kept
//! becomes a `Utf8Bytes` of its own.

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use examples::echo_service::echo_request_ttheader;
use thrift_wire::Utf8Bytes;
use volo_core::codec::Protocol;
use volo_core::codec::ttheader::{Header, HeaderLimits, int_key};
use volo_core::context::MetaInfo;

/// A request frame as Kitex's client writes it, with one persistent metainfo value
/// and a 64-byte payload.
fn request_frame() -> Bytes {
    let mut h = echo_request_ttheader(1, true);
    h.str_kv.push((
        Utf8Bytes::from_static("RPC_PERSIST_logid"),
        Utf8Bytes::from_static("20261206-abcdef"),
    ));
    let mut out = Vec::new();
    h.write(64, &mut out).expect("a valid header");
    out.extend_from_slice(&[0u8; 64]);
    Bytes::from(out)
}

fn bench(c: &mut Criterion) {
    let frame = request_frame();
    let limits = HeaderLimits::default();
    let mut group = c.benchmark_group("ttheader_request");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let mut header = Header::new(0, Protocol::Binary);
    group.bench_function("decode", |b| {
        b.iter(|| {
            let payload = header
                .decode_into(black_box(&frame), &limits)
                .expect("decodes");
            black_box(payload.len())
        })
    });
    let mut header = Header::new(0, Protocol::Binary);
    group.bench_function("decode_and_read", |b| {
        b.iter(|| {
            let payload = header
                .decode_into(black_box(&frame), &limits)
                .expect("decodes");
            let mut meta = MetaInfo::new();
            meta.read_request(header.str_kv.pairs());
            let timeout = header
                .int_value(int_key::RPC_TIMEOUT)
                .and_then(|v| v.parse::<u64>().ok());
            let caller = header.int_value(int_key::FROM_SERVICE).map(str::len);
            black_box((payload.len(), meta, timeout, caller))
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
