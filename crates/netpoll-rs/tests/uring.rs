//! The io_uring driver on its own terms, whatever `NETPOLL_DRIVER` says: it runs here
//! (a silent fallback would fail these tests), its receive buffers run dry and fill
//! again, connections close and reactors stop while the kernel holds their sends, and
//! a process whose kernel refuses io_uring falls back to epoll with one log line.
//! (The rest of this crate's tests run on both drivers: CI runs them again with
//! `NETPOLL_DRIVER=io_uring`.)

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use common::{Echo, frame, frame_len, pattern, run, wait_until, within};
use netpoll_rs::{Config, Driver, Handler, Io, Reactor};

const PEER_TIMEOUT: Duration = Duration::from_secs(20);

fn ring(config: Config) -> Reactor {
    let reactor = Reactor::new(Config {
        driver: Driver::IoUring,
        ..config
    })
    .expect("reactor");
    assert_eq!(
        reactor.driver(),
        Driver::IoUring,
        "io_uring is available on this kernel, yet the reactor fell back to epoll"
    );
    reactor
}

/// Reads until the connection ends (end of stream, or an error such as a reset);
/// returns the bytes read.
fn read_until_the_end(mut s: TcpStream) -> usize {
    let mut total = 0;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n,
        }
    }
}

fn peer(addr: std::net::SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(PEER_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(PEER_TIMEOUT)).unwrap();
    s
}

/// Many connections at once through a ring of two 512-byte buffers: the receives
/// run dry (`ENOBUFS` ends them), are armed again once the buffers are back, and
/// every byte arrives, in order, on every connection.
#[test]
fn a_ring_of_two_small_buffers_serves_many_connections_whole() {
    let reactor = ring(Config {
        ring_buffers: 2,
        ring_buffer_size: 512,
        ..Config::default()
    });
    run(60, async {
        let listener = reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok(conn) = listener.accept().await {
                conn.serve_inline(Echo);
            }
        });
        let clients: Vec<_> = (0..16u8)
            .map(|i| {
                tokio::task::spawn_blocking(move || {
                    let mut s = peer(addr);
                    let frames: Vec<u8> = (0..40usize)
                        .flat_map(|k| frame(&pattern(1 + (k * 997 + i as usize * 31) % 6000, i)))
                        .collect();
                    let mut w = s.try_clone().unwrap();
                    let sent = frames.clone();
                    let writer = std::thread::spawn(move || {
                        w.write_all(&sent).unwrap();
                        w.shutdown(Shutdown::Write).unwrap();
                    });
                    let mut got = Vec::new();
                    s.read_to_end(&mut got).unwrap();
                    writer.join().unwrap();
                    assert!(got == frames, "connection {i}: the echo differs");
                })
            })
            .collect();
        for c in clients {
            within(30, "a client", c).await.unwrap();
        }
    });
}

/// A handler that answers its first frame with `size` bytes and then closes the
/// connection (a peer that does not read holds that send on the ring).
struct Flood {
    size: usize,
}

impl Handler for Flood {
    fn on_input(&mut self, io: &mut Io<'_>) {
        if io.input().is_empty() {
            return;
        }
        let n = io.input().len();
        io.input().skip(n);
        io.output()
            .insert(bytes::Bytes::from(pattern(self.size, 3)));
        io.close();
    }
}

/// A connection closed while the kernel holds its send (the peer reads nothing): the
/// send is cancelled, the socket is closed, it leaves the reactor, and the peer, once
/// it reads, gets what the kernel had queued and then the end, not all 64 MiB.
#[test]
fn a_connection_closed_with_a_send_on_the_ring_goes_away() {
    let reactor = ring(Config::default());
    run(60, async {
        let listener = reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::task::spawn_blocking(move || {
            let mut s = peer(addr);
            s.write_all(&frame(b"go")).unwrap();
            s
        })
        .await
        .unwrap();
        let conn = listener.accept().await.unwrap();
        let handle = conn.inline_handle();
        conn.serve_inline(Flood { size: 64 << 20 });
        // 64 MiB cannot fit in the sockets: the send stays on the ring.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(handle.is_open(), "closing waits for the output");
        handle.close();
        wait_until(10, "the connection leaves the reactor", || {
            reactor.socket_count() == 1
        })
        .await;
        let got = tokio::task::spawn_blocking(move || read_until_the_end(client));
        let total = within(20, "the peer sees the end", got).await.unwrap();
        assert!(total < 64 << 20, "the whole send went out: {total} bytes");
    });
}

/// A reactor that stops while its ring holds sends to peers that do not read stops
/// within the second it gives the kernel, and the peers see their connections end.
#[test]
fn shutdown_with_sends_on_the_ring_ends_promptly() {
    let reactor = ring(Config::default());
    run(60, async {
        let listener = reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut peers = Vec::new();
        for _ in 0..4 {
            let s = tokio::task::spawn_blocking(move || {
                let mut s = peer(addr);
                s.write_all(&frame(b"go")).unwrap();
                s
            })
            .await
            .unwrap();
            let conn = listener.accept().await.unwrap();
            // Not closing: it sends 32 MiB, which stays on the ring.
            struct Hold;
            impl Handler for Hold {
                fn on_input(&mut self, io: &mut Io<'_>) {
                    let n = io.input().len();
                    if n > 0 {
                        io.input().skip(n);
                        io.output().insert(bytes::Bytes::from(vec![7u8; 32 << 20]));
                    }
                }
            }
            conn.serve_inline(Hold);
            peers.push(s);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        let r = reactor.clone();
        within(
            10,
            "shutdown",
            tokio::task::spawn_blocking(move || r.shutdown()),
        )
        .await
        .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "shutdown took {:?}",
            started.elapsed()
        );
        assert_eq!(reactor.socket_count(), 0);
        for s in peers {
            let ended = tokio::task::spawn_blocking(move || read_until_the_end(s));
            within(20, "a peer sees its end", ended).await.unwrap();
        }
    });
}

/// Pollers on a runtime run rings too: frames of many sizes, read by a task.
#[test]
fn a_ring_on_the_runtime_carries_frames_to_tasks() {
    run(60, async {
        let reactor = Reactor::on_runtime(
            &tokio::runtime::Handle::current(),
            Config {
                driver: Driver::IoUring,
                ring_buffer_size: 4096,
                ..Config::default()
            },
        )
        .unwrap();
        assert_eq!(reactor.driver(), Driver::IoUring);
        let listener = reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let frames: Vec<bytes::Bytes> = (0..50)
            .map(|i| frame(&pattern(i * 1500, i as u8)))
            .collect();
        let sent = frames.clone();
        let writer = tokio::task::spawn_blocking(move || {
            let mut s = peer(addr);
            for f in &sent {
                s.write_all(f).unwrap();
            }
            let mut back = Vec::new();
            s.shutdown(Shutdown::Write).unwrap();
            s.read_to_end(&mut back).unwrap();
            back
        });
        let conn = listener.accept().await.unwrap();
        for want in &frames {
            let got = within(10, "a frame", conn.read_frame(frame_len))
                .await
                .unwrap()
                .expect("a frame before the end");
            assert_eq!(got, *want);
            conn.write(got);
            conn.flush().await.unwrap();
        }
        assert!(conn.read_frame(frame_len).await.unwrap().is_none());
        drop(conn);
        let back = within(10, "the echo", writer).await.unwrap();
        assert_eq!(back, frames.concat());
        reactor.shutdown();
    });
}

/// Set in the child process of the fallback test.
const CHILD: &str = "NETPOLL_URING_TEST_CHILD";

/// A process whose seccomp filter refuses `io_uring_setup` (as container runtimes do)
/// asks for io_uring: its reactor runs on epoll, serves, and says so in one log line.
/// The filter is installed in a child process (this test binary run again), so the
/// other tests keep their rings.
#[test]
fn a_kernel_that_refuses_io_uring_gets_epoll_and_one_log_line() {
    if std::env::var_os(CHILD).is_some() {
        return child_without_io_uring();
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_kernel_that_refuses_io_uring_gets_epoll_and_one_log_line",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .expect("the child runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("child: epoll served"), "{stdout}");
    let lines = format!("{stdout}{stderr}");
    assert_eq!(
        lines.matches("io_uring is unavailable here").count(),
        1,
        "one log line for a reactor of 3 pollers:\n{lines}"
    );
}

#[cfg(target_arch = "x86_64")]
fn refuse_io_uring_setup() {
    use nix::libc;
    // SAFETY: plain data for the BPF program; `BPF_STMT`/`BPF_JUMP` only build structs.
    let filter = unsafe {
        [
            // The syscall number is the first word of `seccomp_data`.
            libc::BPF_STMT((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, 0),
            libc::BPF_JUMP(
                (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
                libc::SYS_io_uring_setup as u32,
                0,
                1,
            ),
            libc::BPF_STMT(
                (libc::BPF_RET | libc::BPF_K) as u16,
                libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
            ),
            libc::BPF_STMT(
                (libc::BPF_RET | libc::BPF_K) as u16,
                libc::SECCOMP_RET_ALLOW,
            ),
        ]
    };
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `prog` points at `filter`, both alive for the calls; the kernel copies
    // the program. No new privileges is required for an unprivileged filter.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const libc::sock_fprog
            ),
            0,
            "seccomp: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn child_without_io_uring() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .init();
    #[cfg(target_arch = "x86_64")]
    refuse_io_uring_setup();
    let reactor = Reactor::new(Config {
        driver: Driver::IoUring,
        pollers: 3,
        ..Config::default()
    })
    .expect("a reactor on epoll");
    assert_eq!(reactor.driver(), Driver::Epoll);
    run(30, async {
        let listener = reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok(conn) = listener.accept().await {
                conn.serve_inline(Echo);
            }
        });
        let back = tokio::task::spawn_blocking(move || {
            let mut s = peer(addr);
            let f = frame(b"over epoll");
            s.write_all(&f).unwrap();
            let mut back = vec![0u8; f.len()];
            s.read_exact(&mut back).unwrap();
            back
        })
        .await
        .unwrap();
        assert_eq!(&back[4..], b"over epoll");
    });
    println!("child: epoll served");
}
