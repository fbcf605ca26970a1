//! What the integration tests share: the frame format, a reactor, a runtime, a time
//! bound.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::io;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use netpoll_rs::{Config, Reactor};
use thrift_codec::LinkBuffer;

/// Frames are a 4-byte big-endian length and that many bytes.
pub fn frame_len(buf: &mut LinkBuffer) -> io::Result<Option<usize>> {
    Ok(buf
        .peek(4)
        .map(|h| 4 + u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize))
}

/// A frame holding `body`.
pub fn frame(body: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(4 + body.len());
    b.put_u32(body.len() as u32);
    b.put_slice(body);
    b.freeze()
}

/// Deterministic bytes.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

pub fn reactor(config: Config) -> Reactor {
    Reactor::new(config).expect("reactor")
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Runs `f` on a fresh runtime, failing the test if it takes longer than `secs`.
pub fn run<F: Future<Output = ()>>(secs: u64, f: F) {
    runtime().block_on(async {
        tokio::time::timeout(Duration::from_secs(secs), f)
            .await
            .expect("the test ran out of time");
    });
}
