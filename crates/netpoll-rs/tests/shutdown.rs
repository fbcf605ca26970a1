//! `Reactor::shutdown` with work in flight. One test in a file of its own: it counts the
//! process's open fds and its `netpoll-*` threads, which other tests running at the
//! same time in the same process would change.

mod common;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use netpoll_rs::{BufferSizes, Config, Connection, Listener, SocketOptions};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Threads of this process named `netpoll-*` (the reactor's pollers).
fn netpoll_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|name| name.starts_with("netpoll-"))
        })
        .count()
}

/// What `count` returns once it returns `expected`, or after five seconds.
fn settled(count: fn() -> usize, expected: usize) -> usize {
    for _ in 0..5000 {
        if count() == expected {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    count()
}

/// Accepts until the listener fails; hands back what it accepted and the error.
fn accept_all(listener: Arc<Listener>) -> tokio::task::JoinHandle<(Vec<Connection>, io::Error)> {
    tokio::spawn(async move {
        let mut accepted = Vec::new();
        loop {
            match listener.accept().await {
                Ok(conn) => accepted.push(conn),
                Err(e) => return (accepted, e),
            }
        }
    })
}

/// A task waiting for a frame that never comes.
fn await_frame(conn: Arc<Connection>) -> tokio::task::JoinHandle<io::Result<Option<Bytes>>> {
    tokio::spawn(async move { conn.read_frame(frame_len).await })
}

/// What `task` returns, failing if it is still waiting after five seconds.
async fn woken<T>(what: &str, task: tokio::task::JoinHandle<T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap_or_else(|_| panic!("{what} still waits after the shutdown"))
        .unwrap()
}

#[test]
fn shutdown_wakes_every_waiter_stops_the_pollers_and_releases_every_fd() {
    // tokio's signal driver (its `signal` feature is on in this workspace) opens a
    // socket pair the first time a runtime starts, and keeps it for the life of the
    // process: start one first, so that the count below sees only what the reactor
    // opens and closes.
    drop(runtime());
    let fds_before = open_fds();
    assert_eq!(netpoll_threads(), 0, "netpoll threads before any reactor");
    let dir = TempDir::new("shutdown");
    let reactor = reactor(Config {
        pollers: 2,
        // The accepting side stops reading early, so a big write stays pending.
        input_high_water: 64 * 1024,
        read_chunk: 16 * 1024,
        ..Config::default()
    });
    // A thread names itself once it runs: give them a moment.
    assert_eq!(settled(netpoll_threads, 2), 2, "one thread per poller");

    run(60, async {
        let tcp = Arc::new(reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap());
        let unix = Arc::new(reactor.listen_unix(dir.path("s")).unwrap());
        let addr = tcp.local_addr().unwrap();
        let tcp_accepting = accept_all(Arc::clone(&tcp));
        let unix_accepting = accept_all(Arc::clone(&unix));

        // Readers waiting for frames their peers never send, over TCP and Unix.
        let tcp_reader = Arc::new(reactor.connect_tcp(addr, Duration::from_secs(5)).unwrap());
        let unix_reader = Arc::new(
            reactor
                .connect_unix(dir.path("s"), Duration::from_secs(5))
                .unwrap(),
        );
        let tcp_reading = await_frame(Arc::clone(&tcp_reader));
        let unix_reading = await_frame(Arc::clone(&unix_reader));

        // A writer whose flush cannot finish: a small send buffer, and a peer that
        // stops reading at its high-water mark.
        let options = SocketOptions {
            buffers: BufferSizes {
                send: Some(16 * 1024),
                recv: None,
            },
            ..SocketOptions::default()
        };
        let writer = Arc::new(
            reactor
                .connect_tcp_with(addr, Duration::from_secs(5), options)
                .unwrap(),
        );
        writer.write(frame(&pattern(8 << 20, 1)));
        // Says when the flush is pending, so that the shutdown surely comes after.
        let (pending, flush_pending) = tokio::sync::oneshot::channel();
        let flushing = tokio::spawn({
            let writer = Arc::clone(&writer);
            async move {
                let mut flush = Box::pin(writer.flush());
                let first = poll_once(&mut flush).await;
                assert!(first.is_pending(), "8 MiB went out at once: {first:?}");
                let _ = pending.send(());
                flush.await
            }
        });

        // Two listeners, three connections and their three accepted ends.
        wait_until(10, "every connection is accepted", || {
            reactor.socket_count() == 8
        })
        .await;
        within(10, "the flush is pending", flush_pending)
            .await
            .expect("the flush task's first poll");
        // Give the other waiting tasks time to get to their first `Pending` (those
        // that do not get there first fail the same way after the shutdown).
        tokio::time::sleep(Duration::from_millis(50)).await;
        for (name, finished) in [
            ("tcp accept", tcp_accepting.is_finished()),
            ("unix accept", unix_accepting.is_finished()),
            ("tcp read_frame", tcp_reading.is_finished()),
            ("unix read_frame", unix_reading.is_finished()),
            ("flush", flushing.is_finished()),
        ] {
            assert!(!finished, "{name} finished before the shutdown");
        }
        assert!(open_fds() > fds_before);

        // It joins the poller threads: a blocking call.
        let r = reactor.clone();
        tokio::task::spawn_blocking(move || r.shutdown())
            .await
            .unwrap();
        // Joined threads leave /proc/self/task a moment after the join returns.
        assert_eq!(
            settled(netpoll_threads, 0),
            0,
            "poller threads left after shutdown"
        );
        assert_eq!(reactor.socket_count(), 0, "sockets left after shutdown");

        // Every waiting task wakes up with an error.
        let (tcp_accepted, e) = woken("tcp accept", tcp_accepting).await;
        assert_eq!(tcp_accepted.len(), 2);
        assert_eq!(e.kind(), io::ErrorKind::NotConnected, "{e:?}");
        let (unix_accepted, e) = woken("unix accept", unix_accepting).await;
        assert_eq!(unix_accepted.len(), 1);
        assert_eq!(e.kind(), io::ErrorKind::NotConnected, "{e:?}");
        for (name, task) in [("tcp", tcp_reading), ("unix", unix_reading)] {
            let e = woken(name, task).await.expect_err(name);
            assert_eq!(e.kind(), io::ErrorKind::NotConnected, "{name}: {e:?}");
        }
        // The flush sends from its own task: one woken by a writable event just
        // before the shutdown may be in `sendmsg` when the other poller closes the
        // accepted end (each poller closes its sockets as it stops), and then fails
        // with the peer's close rather than with this one's.
        let e = woken("flush", flushing).await.expect_err("flush");
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::NotConnected
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::ConnectionReset
            ),
            "{e:?}"
        );

        // Later calls fail at once; nothing is open any more.
        for conn in [&*tcp_reader, &*unix_reader, &*writer]
            .into_iter()
            .chain(&tcp_accepted)
            .chain(&unix_accepted)
        {
            assert!(!conn.is_open());
            assert!(conn.read_frame(frame_len).await.is_err());
            conn.write(frame(b"late"));
            assert!(conn.flush().await.is_err());
        }
        assert!(tcp.accept().await.is_err());
        assert!(unix.accept().await.is_err());
        assert!(tcp.local_addr().is_none());
        // Idempotent.
        reactor.shutdown();
        assert_eq!(reactor.socket_count(), 0);
    });

    drop(reactor);
    drop(dir);
    assert_eq!(settled(netpoll_threads, 0), 0);
    assert_eq!(
        open_fds(),
        fds_before,
        "fds left open after dropping everything"
    );
}
