//! A poller with nothing to do sleeps in `epoll_wait`, also after one of its
//! connections has read end of stream and stays open (the peer half-closed and waits
//! for the answer). Its own file, so its process holds no other reactor and the
//! `netpoll-*` threads are this test's.
//!
//! This looks at CPU time only to tell "blocked" from "spinning" (see
//! `assert_pollers_idle`).

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::*;
use netpoll_rs::Config;

#[test]
fn the_poller_sleeps_while_a_half_closed_connection_stays_open() {
    let reactor = reactor(Config {
        pollers: 1,
        ..Config::default()
    });
    run(60, async {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        set_recv_buffer(&std_listener, 16 * 1024);
        let addr = std_listener.local_addr().unwrap();
        let conn = reactor.connect_tcp(addr, Duration::from_secs(5)).unwrap();
        let (mut peer, _) = std_listener.accept().unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        peer.set_write_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        // The peer sends a request, then half-closes (the FIN comes alone, once the
        // request is taken), then reads the whole answer, slowly enough that the flush
        // needs the poller, and keeps the connection open.
        let request = frame(b"request");
        peer.write_all(&request).unwrap();
        let got = within(10, "the request", conn.read_frame(frame_len)).await;
        assert_eq!(got.unwrap(), Some(request));
        peer.shutdown(std::net::Shutdown::Write).unwrap();
        let end = within(10, "the end of stream", conn.read_frame(frame_len)).await;
        assert_eq!(end.unwrap(), None);
        let answer = frame(&pattern(4 << 20, 3));
        let answer_len = answer.len();
        let reader = tokio::task::spawn_blocking(move || {
            let mut got = 0;
            let mut buf = vec![0u8; 4096];
            while got < answer_len {
                let n = peer.read(&mut buf).unwrap();
                assert!(n > 0, "early end of stream");
                got += n;
                if got % (256 * 1024) < 4096 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            peer
        });
        conn.write(answer);
        within(20, "the answer's flush", conn.flush())
            .await
            .unwrap();
        let peer = reader.await.unwrap();
        // Both ends are open and idle now: the poller should be blocked in epoll_wait.
        assert_pollers_idle("a half-closed connection").await;
        drop(peer);
        drop(conn);
    });
    reactor.shutdown();
}
