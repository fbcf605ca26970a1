//! Steady traffic allocates nothing per message: read blocks come from the poller's
//! size-classed pool and go back to it, for small frames and for frames of several MiB.
//!
//! The test binary counts every heap allocation (`alloc_count::CountingAlloc` as its
//! global allocator). While a window is counted, the only threads at work are a blocking std
//! client (whose buffers are allocated before) and the server: a poller thread, plus
//! for the async face a tokio current-thread runtime on a thread of its own.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use alloc_count::{CountingAlloc, allocations};
use common::*;
use netpoll_rs::{Config, Connection, Reactor};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Frame bodies: one read, several reads, and past the two largest class boundaries
/// (1 MiB, 4 MiB blocks with the default 64 KiB read chunk).
const SIZES: [usize; 4] = [1024, 200 * 1024, 1024 * 1024, 3 * 1024 * 1024];
/// Round trips per size before counting (the pool fills) and while counting.
const WARM_UP: usize = 5;
const COUNTED: usize = 40;

/// Sends each size `WARM_UP + COUNTED` times and checks every echo; returns the
/// allocations counted per size.
fn client(addr: SocketAddr) -> Vec<u64> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_nodelay(true).unwrap();
    let mut counts = Vec::new();
    for size in SIZES {
        let frame = frame(&pattern(size, size as u8));
        let mut back = vec![0u8; frame.len()];
        for _ in 0..WARM_UP {
            pipelined_pair(&mut s, &frame, &mut back);
        }
        let mut before = 0;
        for i in 0..WARM_UP + COUNTED {
            if i == WARM_UP {
                before = allocations();
            }
            s.write_all(&frame).unwrap();
            s.read_exact(&mut back).unwrap();
            assert!(back == frame[..], "echo {i} of {size} bytes differs");
        }
        counts.push(allocations() - before);
    }
    counts
}

/// Two copies of `frame` in flight at once (written from another thread while this
/// one reads the echoes), so the pool comes to hold as many blocks of the frame's class
/// as ping-pong can need together: one still owned by a send whose completion is not
/// yet reaped (io_uring reaps after the peer may already have the bytes) and one being
/// read. Without it, the first such overlap could fall inside the counted window.
fn pipelined_pair(s: &mut TcpStream, frame: &[u8], back: &mut [u8]) {
    let mut w = s.try_clone().expect("clone");
    let copy = frame.to_vec();
    let writer = std::thread::spawn(move || {
        w.write_all(&copy).unwrap();
        w.write_all(&copy).unwrap();
    });
    for i in 0..2 {
        s.read_exact(back).unwrap();
        assert!(
            back == frame,
            "pipelined echo {i} of {} bytes differs",
            frame.len()
        );
    }
    writer.join().unwrap();
}

fn assert_no_allocations(face: &str, counts: &[u64]) {
    for (size, n) in SIZES.iter().zip(counts) {
        assert_eq!(
            *n, 0,
            "{face}: {n} allocations in {COUNTED} round trips of {size}-byte frames"
        );
    }
}

/// Accepts one connection on a fresh reactor (the runtime that awaits it stops
/// before anything is counted).
fn accept_one(reactor: &Reactor) -> (SocketAddr, std::thread::JoinHandle<Connection>) {
    let listener = reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let accept = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(listener.accept()).expect("accept")
    });
    (addr, accept)
}

/// Both faces in one test, one after the other: the counter is process-wide, and a
/// second test in this binary would allocate while this one counts (a finished test's
/// thread reports its result after its last line, and under load that can fall into
/// another test's window).
#[test]
fn steady_traffic_allocates_nothing_per_message() {
    inline_handler_traffic();
    async_face_traffic();
}

fn inline_handler_traffic() {
    let reactor = reactor(Config::default());
    let (addr, accept) = accept_one(&reactor);
    let client = std::thread::spawn(move || client(addr));
    accept.join().unwrap().serve_inline(Echo);
    let counts = client.join().unwrap();
    assert_no_allocations("inline", &counts);
}

fn async_face_traffic() {
    let reactor = reactor(Config::default());
    let (addr, accept) = accept_one(&reactor);
    let client = std::thread::spawn(move || client(addr));
    let conn = accept.join().unwrap();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            while let Ok(Some(frame)) = conn.read_frame(frame_len).await {
                conn.write(frame);
                conn.flush().await.expect("flush");
            }
        });
    });
    let counts = client.join().unwrap();
    server.join().unwrap();
    assert_no_allocations("async face", &counts);
}
