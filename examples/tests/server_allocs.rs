//! Steady traffic allocates nothing per call on the server: a call whose handler does
//! not wait, on the default server (netpoll-rs, calls started on the poller), is
//! decoded from the frame, answered and sent without a heap allocation.
//!
//! The test binary counts every heap allocation (`alloc_count::CountingAlloc` as its
//! global allocator). While a window is counted, the only threads at work are a blocking
//! std client, whose requests and buffers are made before, and the server's runtime
//! (one worker thread, on which the poller runs).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use alloc_count::{CountingAlloc, allocations};
use examples::echo::{EchoServiceEchoArgs, EchoServiceServer, Request};
use examples::echo_service::{Echo, echo_request_ttheader};
use thrift_wire::{Binary, LinkBuffer, MessageHeader, MessageType, Utf8Bytes};
use volo_core::codec::{Framing, write_message};
use volo_core::server::{Server, ServerConfig};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

const WARM_UP: usize = 200;
const COUNTED: usize = 1000;

/// An `echo` call of a 1 KiB message, framed as `framing`.
fn request(framing: Framing) -> Vec<u8> {
    let args = EchoServiceEchoArgs {
        req: Request {
            action: Utf8Bytes::from_static("echo"),
            msg: Utf8Bytes::from("m".repeat(1024)),
        },
    };
    let header = MessageHeader {
        name: Utf8Bytes::from_static("echo"),
        ty: MessageType::Call,
        seq_id: 7,
    };
    // What this framework's client sends (as Kitex's does), the caller's service
    // among it (the server keeps it in the call's context) and the time left (so the
    // call has a deadline).
    let tt = (framing == Framing::TTHeader).then(|| echo_request_ttheader(7, false));
    let mut out = LinkBuffer::new();
    write_message::<Binary, _>(&mut out, framing, tt.as_ref(), &header, &args, usize::MAX)
        .expect("a header")
        .expect("under the limit");
    let n = out.len();
    out.next(n).to_vec()
}

/// Sends `WARM_UP + COUNTED` calls one after another, checking that each reply is as
/// long as the first; returns the allocations made while the last `COUNTED` ran.
fn calls(addr: std::net::SocketAddr, framing: Framing) -> u64 {
    let req = request(framing);
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_nodelay(true).unwrap();
    let mut reply = vec![0u8; 64 * 1024];
    let mut reply_len = None;
    let mut before = 0;
    for i in 0..WARM_UP + COUNTED {
        if i == WARM_UP {
            before = allocations();
        }
        s.write_all(&req).unwrap();
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let n = u32::from_be_bytes(len) as usize;
        s.read_exact(&mut reply[..n]).unwrap();
        assert_eq!(
            *reply_len.get_or_insert(n),
            n,
            "call {i}: a reply of another size"
        );
    }
    let counted = allocations() - before;
    assert!(reply_len.unwrap() > 1024, "an echo of the message");
    counted
}

#[test]
fn an_echo_call_allocates_nothing_on_the_server() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let bound = runtime.block_on(async {
        Server::new(EchoServiceServer::new(Echo::default()))
            .config(ServerConfig::default())
            .bind(&"127.0.0.1:0".parse().unwrap())
            .await
            .expect("bind")
    });
    let addr = match bound.local_addr() {
        volo_core::context::Address::Tcp(a) => *a,
        other => panic!("{other:?}"),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = runtime.spawn(bound.serve_with_shutdown(async {
        let _ = stopped.await;
    }));
    let mut per_call = Vec::new();
    for framing in [Framing::TTHeader, Framing::Framed] {
        let counted = calls(addr, framing);
        println!("{framing:?}: {counted} allocations in {COUNTED} calls");
        per_call.push((framing, counted as f64 / COUNTED as f64));
    }
    let _ = stop.send(());
    runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(20), server).await })
        .expect("the server stopped")
        .unwrap()
        .unwrap();
    for (framing, n) in per_call {
        assert!(n < 0.01, "{framing:?}: {n} allocations per call");
    }
}
