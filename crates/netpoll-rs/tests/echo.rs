//! Echo over TCP and Unix sockets, many connections at once, and frames arriving split
//! at every byte boundary.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use netpoll_rs::{Config, Connection, Listener};

/// Serves echo on every connection `listener` accepts, until it closes.
fn serve_echo(listener: Arc<Listener>) {
    tokio::spawn(async move {
        while let Ok(conn) = listener.accept().await {
            tokio::spawn(echo(conn));
        }
    });
}

async fn echo(conn: Connection) {
    while let Ok(Some(f)) = conn.read_frame(frame_len).await {
        conn.write(f);
        if conn.flush().await.is_err() {
            return;
        }
    }
}

/// Sends one frame of each length through the echo server and checks what comes back.
async fn echo_sizes(client: &Connection, lens: &[usize]) {
    for (i, &len) in lens.iter().enumerate() {
        let body = pattern(len, i as u8);
        client.write(frame(&body));
        client.flush().await.unwrap();
        let back = client.read_frame(frame_len).await.unwrap().unwrap();
        assert_eq!(&back[4..], &body[..], "frame of {len} bytes");
    }
}

/// `n` clients at once, each echoing three frames of its own.
async fn echo_from_many_clients(
    reactor: &netpoll_rs::Reactor,
    addr: std::net::SocketAddr,
    n: usize,
) {
    let mut tasks = Vec::new();
    for i in 0..n {
        let client = reactor.connect_tcp(addr, Duration::from_secs(10)).unwrap();
        tasks.push(tokio::spawn(async move {
            for round in 0..3u8 {
                let body = pattern(64 + i % 512, round.wrapping_add(i as u8));
                client.write(frame(&body));
                client.flush().await.unwrap();
                let back = client.read_frame(frame_len).await.unwrap().unwrap();
                assert_eq!(&back[4..], &body[..]);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[test]
fn tcp_echo_round_trips_frames_of_many_sizes() {
    let reactor = reactor(Config::default());
    run(30, async {
        let listener = Arc::new(reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap());
        let addr = listener.local_addr().unwrap();
        serve_echo(Arc::clone(&listener));
        let client = reactor.connect_tcp(addr, Duration::from_secs(5)).unwrap();
        echo_sizes(&client, &[0, 1, 100, 1024, 65_536, 1 << 20, 3 << 20]).await;
        listener.close();
    });
    reactor.shutdown();
}

#[test]
fn unix_socket_echo_works_too() {
    let dir = std::env::temp_dir().join(format!("netpoll-unix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("echo.sock");
    let reactor = reactor(Config::default());
    run(30, async {
        let listener = Arc::new(reactor.listen_unix(&path).unwrap());
        serve_echo(Arc::clone(&listener));
        let client = reactor.connect_unix(&path, Duration::from_secs(5)).unwrap();
        for n in 0..100u8 {
            client.write(frame(&pattern(100 + n as usize, n)));
            client.flush().await.unwrap();
            let back = client.read_frame(frame_len).await.unwrap().unwrap();
            assert_eq!(&back[4..], &pattern(100 + n as usize, n)[..]);
        }
        listener.close();
    });
    reactor.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn frames_split_at_every_byte_boundary_arrive_whole() {
    // A plain blocking client writes two frames in two pieces, cut at every position,
    // with a pause between the pieces so they arrive as separate reads.
    let reactor = reactor(Config::default());
    run(60, async {
        let listener = Arc::new(reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap());
        let addr = listener.local_addr().unwrap();
        serve_echo(Arc::clone(&listener));
        let wire: Vec<u8> = [frame(&pattern(37, 1)), frame(&pattern(5, 2))].concat();
        let expected = wire.clone();
        tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_nodelay(true).unwrap();
            for cut in 0..=wire.len() {
                s.write_all(&wire[..cut]).unwrap();
                std::thread::sleep(Duration::from_millis(1));
                s.write_all(&wire[cut..]).unwrap();
                let mut back = vec![0u8; wire.len()];
                s.read_exact(&mut back).unwrap();
                assert_eq!(back, expected, "cut at {cut}");
            }
        })
        .await
        .unwrap();
        listener.close();
    });
    reactor.shutdown();
}

#[test]
fn two_thousand_connections_echo_at_once() {
    let reactor = reactor(Config {
        pollers: 2,
        ..Config::default()
    });
    run(120, async {
        let listener = Arc::new(reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap());
        let addr = listener.local_addr().unwrap();
        serve_echo(Arc::clone(&listener));
        echo_from_many_clients(&reactor, addr, 2000).await;
        listener.close();
    });
    reactor.shutdown();
}

#[test]
fn pollers_on_the_runtime_echo_as_poller_threads_do() {
    run(120, async {
        let reactor = netpoll_rs::Reactor::on_runtime(
            &tokio::runtime::Handle::current(),
            Config {
                pollers: 2,
                ..Config::default()
            },
        )
        .unwrap();
        let listener = Arc::new(reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap());
        let addr = listener.local_addr().unwrap();
        serve_echo(Arc::clone(&listener));
        // Large frames (several turns of the poller) and many connections at once.
        let client = reactor.connect_tcp(addr, Duration::from_secs(5)).unwrap();
        echo_sizes(&client, &[0, 1, 1024, 1 << 20, 5 << 20]).await;
        echo_from_many_clients(&reactor, addr, 500).await;
        listener.close();
        drop(client);
        reactor.shutdown();
        assert_eq!(reactor.socket_count(), 0);
    });
}

#[test]
fn reuse_port_lets_two_listeners_share_a_port() {
    use netpoll_rs::SocketOptions;
    let reactor = reactor(Config::default());
    let reuse = SocketOptions {
        reuse_port: true,
        ..SocketOptions::default()
    };
    let first = reactor
        .listen_tcp_with("127.0.0.1:0".parse().unwrap(), reuse)
        .unwrap();
    let addr = first.local_addr().unwrap();
    let second = reactor.listen_tcp_with(addr, reuse).unwrap();
    assert_eq!(second.local_addr(), Some(addr));
    // Without the option on the newcomer the port is taken.
    let err = reactor.listen_tcp(addr).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    drop((first, second));
    reactor.shutdown();
}

/// A client connection and the server side of it, both on `reactor`.
async fn connected_pair(reactor: &netpoll_rs::Reactor) -> (Connection, Connection) {
    let listener = reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let client = reactor.connect_tcp(addr, Duration::from_secs(5)).unwrap();
    let server = listener.accept().await.unwrap();
    (client, server)
}

#[test]
fn with_input_peeks_and_skips_in_place() {
    let reactor = reactor(Config::default());
    run(30, async {
        let (client, server) = connected_pair(&reactor).await;
        client.write(frame(b"first"));
        client.write(frame(b"second"));
        client.flush().await.unwrap();
        // Both frames in the input (the poller reads them), nothing taken yet.
        let both = 4 + 5 + 4 + 6;
        wait_until(10, "both frames to arrive", || server.input_len() == both).await;
        let first = server.read_frame(frame_len).await.unwrap().unwrap();
        assert_eq!(&first[4..], b"first");
        let peeked = server.with_input(|b| b.peek(4).map(|h| h.to_vec()));
        assert_eq!(peeked.as_deref(), Some(&[0, 0, 0, 6][..]));
        server.with_input(|b| b.skip(4));
        assert_eq!(server.with_input(|b| b.next(6)), &b"second"[..]);
        assert_eq!(server.input_len(), 0);
    });
    reactor.shutdown();
}

#[test]
fn an_idle_connection_gives_its_input_block_back_and_reuses_one() {
    let reactor = reactor(Config::default());
    run(30, async {
        let (client, server) = connected_pair(&reactor).await;
        assert_eq!(server.input_capacity(), 0, "no block before any input");
        let mut blocks = Vec::new();
        for n in 0..5u8 {
            client.write(frame(&pattern(1000, n)));
            client.flush().await.unwrap();
            let got = server.read_frame(frame_len).await.unwrap().unwrap();
            assert_eq!(&got[4..], &pattern(1000, n)[..]);
            // The whole input was taken: the block went back to the pool.
            assert_eq!(server.input_capacity(), 0);
            blocks.push(got.as_ptr() as usize);
            drop(got);
        }
        // Each frame was dropped before the next read, so the same block came back
        // from the pool every time (frames start at the same address).
        assert!(blocks.windows(2).all(|w| w[0] == w[1]), "{blocks:x?}");
    });
    reactor.shutdown();
}

/// A reactor whose pollers are tasks of the current runtime.
fn on_runtime(config: Config) -> netpoll_rs::Reactor {
    netpoll_rs::Reactor::on_runtime(&tokio::runtime::Handle::current(), config).unwrap()
}

#[test]
fn pollers_on_the_runtime_deliver_everything_before_end_of_stream() {
    run(60, async {
        let reactor = on_runtime(Config::default());
        let listener = reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        // A plain client sends 300 frames and half-closes, then reads the answer.
        let client = tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            for n in 0..300u32 {
                s.write_all(&frame(&pattern(500 + n as usize, n as u8)))
                    .unwrap();
            }
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut answer = Vec::new();
            s.read_to_end(&mut answer).unwrap();
            answer
        });
        let server = listener.accept().await.unwrap();
        for n in 0..300u32 {
            let got = server.read_frame(frame_len).await.unwrap().unwrap();
            assert_eq!(
                &got[4..],
                &pattern(500 + n as usize, n as u8)[..],
                "frame {n}"
            );
        }
        assert!(server.read_frame(frame_len).await.unwrap().is_none());
        server.write(frame(b"done"));
        server.close_write().await.unwrap();
        assert_eq!(client.await.unwrap(), &frame(b"done")[..]);
        reactor.shutdown();
    });
}

#[test]
fn pollers_on_the_runtime_respect_the_high_water_mark() {
    run(60, async {
        // Under io_uring the input passes the mark by the ring's buffers at most (here
        // 16 KiB, as one read does under epoll).
        let reactor = on_runtime(Config {
            input_high_water: 128 * 1024,
            read_chunk: 16 * 1024,
            ring_buffers: 2,
            ring_buffer_size: 8 * 1024,
            ..Config::default()
        });
        let listener = reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let total: usize = 8 << 20;
        let writer = tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            let body = pattern(4092, 9);
            let one = frame(&body);
            for _ in 0..total / one.len() {
                s.write_all(&one).unwrap();
            }
        });
        let server = listener.accept().await.unwrap();
        // Nobody reads: the input reaches the mark (however long the writer or the
        // poller is held up), then stops there, at most one read above it.
        let mut most = 0;
        wait_until(10, "the input reaches the mark", || {
            most = most.max(server.input_len());
            most >= 128 * 1024
        })
        .await;
        for _ in 0..50 {
            most = most.max(server.input_len());
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert!(most <= 128 * 1024 + 16 * 1024, "input reached {most}");
        let frames = total / 4096;
        for _ in 0..frames {
            let got = server.read_frame(frame_len).await.unwrap().unwrap();
            assert_eq!(&got[4..], &pattern(4092, 9)[..]);
        }
        writer.await.unwrap();
        reactor.shutdown();
    });
}
