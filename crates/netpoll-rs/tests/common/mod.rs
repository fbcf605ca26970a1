//! What the integration tests share: the frame format, a reactor, a runtime, a time
//! bound.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::io;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use netpoll_rs::{Config, Reactor};
use thrift_wire::LinkBuffer;

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

// ---------------------------------------------------------------- failure-test helpers

/// A directory under the system temp dir for Unix sockets, removed when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// A fresh, empty directory named after the process and `name`.
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("netpoll-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    /// A path inside the directory.
    pub fn path(&self, file: &str) -> std::path::PathBuf {
        self.0.join(file)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Sets `SO_RCVBUF` on a plain socket (the kernel doubles it).
pub fn set_recv_buffer(fd: &impl std::os::fd::AsFd, bytes: usize) {
    nix::sys::socket::setsockopt(fd, nix::sys::socket::sockopt::RcvBuf, &bytes).expect("SO_RCVBUF");
}

/// Polls `fut` exactly once, from the current task.
pub async fn poll_once<F: Future + Unpin>(fut: &mut F) -> std::task::Poll<F::Output> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut *fut).poll(cx))).await
}

/// Waits (polling every millisecond) until `cond` holds, failing after `secs`.
pub async fn wait_until(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The index of the first byte where `got` and `want` differ (or where the shorter
/// ends), `None` when they are equal; for asserting on MiB of data without printing it.
pub fn first_difference(got: &[u8], want: &[u8]) -> Option<usize> {
    got.iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .or_else(|| (got.len() != want.len()).then(|| got.len().min(want.len())))
}

/// Awaits `fut`, failing with `what` if it takes longer than `secs`.
pub async fn within<T>(secs: u64, what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: still waiting after {secs} s"))
}

/// What the threads named `netpoll-*` used so far: CPU time (clock ticks, user +
/// system), and voluntary context switches (each time one blocked).
pub fn poller_usage() -> (u64, u64) {
    let (mut ticks, mut switches) = (0, 0);
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("netpoll-") {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // After the command name (which may hold spaces) come the state, the 3rd field
        // of the file, and further on utime and stime, the 14th and 15th.
        let rest = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 12 {
            ticks +=
                fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0);
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        switches += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    (ticks, switches)
}

/// Fails unless the `netpoll-*` threads stay blocked over a second, after a fifth of a
/// second to settle. CPU time tells "blocked" from "spinning" (a blocked poller uses no
/// tick at all, a spinning one nearly all 100), and voluntary context switches tell it
/// from "waking periodically" (every wake blocks again: a 10 ms tick makes 100); both
/// thresholds sit far from either side.
pub async fn assert_pollers_idle(what: &str) {
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (ticks, switches) = poller_usage();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let (ticks, switches) = (poller_usage().0 - ticks, poller_usage().1 - switches);
    eprintln!("{what}: over 1 s idle, the pollers used {ticks} ticks and blocked {switches} times");
    assert!(
        ticks < 20,
        "{what}: the idle poller used {ticks} ticks of CPU in one second"
    );
    assert!(
        switches < 10,
        "{what}: the idle poller woke {switches} times in one second"
    );
}

/// Echoes whole frames from the poller, asking for each frame's whole length.
#[allow(dead_code, reason = "not every test binary serves an echo")]
pub struct Echo;

impl netpoll_rs::Handler for Echo {
    fn on_input(&mut self, io: &mut netpoll_rs::Io<'_>) {
        while let Ok(Some(len)) = frame_len(io.input()) {
            if io.input().len() < len {
                io.need(len);
                return;
            }
            let frame = io.input().next(len);
            io.output().insert(frame);
        }
    }
}
