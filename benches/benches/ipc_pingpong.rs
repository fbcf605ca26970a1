//! Ping-pong over shm-ipc, a Unix socket and TCP loopback, 64 B to 4 MiB.
//!
//! Run it with `cargo bench -p benches --bench ipc_pingpong` (under a minute: 25 cases
//! of 1.8 s, plus the build). Settings, all optional: `IPC_BENCH_SECS=3` (measured
//! window per case, default 1.5; fractions are fine), `IPC_BENCH_SPIN_US=50` (the shm
//! reader's spin, default 200 µs), and arguments after `--` that select transports or
//! sizes by name (`floor`, `shm`, `shm-copy`, `uds`, `tcp`, `64KiB`).
//!
//! # What is measured
//!
//! Two threads of one process, each with its own current-thread tokio runtime: a server
//! and a client, one connection, one message in flight (closed loop). Each round trip:
//!
//! 1. the client fills a request of N bytes (every byte written, a pattern that depends
//!    on the round trip) and sends it;
//! 2. the server receives it and sums every byte, fills a reply of N bytes with a
//!    pattern seeded by that sum, and sends it;
//! 3. the client receives the reply, sums every byte, and checks the sum against the
//!    one it expects (so both ends read every byte; a wrong byte aborts the run).
//!
//! Transports:
//! - `floor`: no transport, the bound for any: the two threads share a request and a
//!   reply buffer and hand turns over through one atomic word that the waiting side
//!   spins on (no runtime, no syscall). What is left is the byte work itself: filling
//!   and summing N bytes that the other core just wrote or read, twice per round trip.
//!   A transport's `MB/s` over `floor`'s is how close it comes to free. The waiting
//!   side yields its thread after a short spin; even so, when the scheduler puts both
//!   threads on one core for a run, `floor` collapses (to about a tenth): ignore such
//!   a run.
//! - `shm`: shm-ipc with [`Config::default`] (64 MiB per side) but a 200 µs spin
//!   before the reader parks (the default is 50 µs; a reply that comes within the spin
//!   costs no wake-up through the socket). Each side fills its message in place in
//!   shared memory (`Stream::send_with`), and the receiver sums the bytes in place (the
//!   `Bytes` chunks over the sender's slices): no copy at all.
//! - `shm-copy`: the same with `Stream::send` of the filled buffer, which copies it into
//!   shared slices (the API for a message that already exists).
//! - `uds`: `tokio::net::UnixStream`, a 4-byte length then the bytes (`write_all` of one
//!   buffer; `read_exact` into a reused buffer).
//! - `tcp`: the same over 127.0.0.1 with `TCP_NODELAY`.
//!
//! Reported: `MB/s`, message bytes moved in both directions per second (2 × N per round
//! trip); `p50`/`p99`, round-trip time in microseconds over every round trip of the
//! window; and the ratios of shm to uds (throughput shm/uds, and p50 uds/shm: above 1
//! means shm is faster), of shm to tcp, and of shm to the floor (1 would be a transport
//! that costs nothing; the best shm/uds any transport could reach here is floor/uds).
//!
//! The machine's cores are shared by both ends (and whatever else runs), so compare
//! within one run; the absolute figures are the cost of both ends together.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shm_ipc::{Config, Listener, Session};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

const SIZES: [(usize, &str); 5] = [
    (64, "64B"),
    (1 << 10, "1KiB"),
    (64 << 10, "64KiB"),
    (1 << 20, "1MiB"),
    (4 << 20, "4MiB"),
];
const TRANSPORTS: [&str; 5] = ["floor", "shm", "shm-copy", "uds", "tcp"];
const WARMUP: Duration = Duration::from_millis(300);
/// The shm reader's spin before it parks (the default is 50 µs).
const SPIN_US: u64 = 200;

fn fill(buf: &mut [u8], seed: u8) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = seed.wrapping_add(i as u8);
    }
}

/// The sum of all bytes: the same for every transport, and cheap enough not to hide
/// the transports' differences. Eight bytes at a time: the even and the odd bytes of a
/// little-endian word are added into four 16-bit lanes of a `u64`, which cannot
/// overflow within 128 words (128 × 2 × 255 < 65,536); then the lanes are added up.
/// The compiler vectorises the word loop. Over bytes in this core's cache it takes
/// about two thirds of the time of summing bytes into `u16` lanes (the form this bench
/// used before); over bytes that the other core just wrote, as here, the two are
/// alike: moving the bytes between the cores is what costs (the `floor` row).
fn sum(bytes: &[u8]) -> u64 {
    const EVEN: u64 = 0x00ff_00ff_00ff_00ff;
    let mut total = 0;
    for block in bytes.chunks(8 * 128) {
        let mut words = block.chunks_exact(8);
        let mut lanes = 0u64;
        for w in &mut words {
            let w = u64::from_le_bytes(w.try_into().expect("chunks_exact(8) gives 8 bytes"));
            lanes += (w & EVEN) + ((w >> 8) & EVEN);
        }
        let lane = |k: u32| (lanes >> (16 * k)) & 0xffff;
        total += lane(0) + lane(1) + lane(2) + lane(3);
        total += words.remainder().iter().map(|&b| u64::from(b)).sum::<u64>();
    }
    total
}

/// The sum of `fill(buf of len, seed)`, without the buffer.
fn expected_sum(len: usize, seed: u8) -> u64 {
    let full = (len / 256) as u64 * (255 * 256 / 2);
    full + (0..len % 256)
        .map(|i| u64::from(seed.wrapping_add(i as u8)))
        .sum::<u64>()
}

/// `Config::default()` with the reader's spin at [`SPIN_US`] (or `IPC_BENCH_SPIN_US`).
fn shm_config() -> Config {
    let us = std::env::var("IPC_BENCH_SPIN_US")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SPIN_US);
    Config::default().spin(Duration::from_micros(us))
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("ipc_pingpong: {msg}");
    std::process::exit(1);
}

struct Outcome {
    round_trips: u64,
    secs: f64,
    samples: Vec<u32>,
}

/// The client's closed loop; `rt` does one round trip of the request with seed `seed`
/// and returns the sum of the reply.
async fn client_loop(
    size: usize,
    window: Duration,
    mut rt: impl AsyncFnMut(u8) -> io::Result<u64>,
) -> Outcome {
    let mut samples = Vec::with_capacity(1 << 20);
    let start = Instant::now();
    let mut measured_from = None;
    let mut n = 0u64;
    let mut round = 0u64;
    loop {
        let seed = round as u8;
        let t = Instant::now();
        let got = rt(seed)
            .await
            .unwrap_or_else(|e| fail(format!("round trip: {e}")));
        let took = t.elapsed();
        let want = expected_sum(size, expected_sum(size, seed) as u8);
        if got != want {
            fail(format!("bad reply at {size} bytes: sum {got}, want {want}"));
        }
        round += 1;
        let now = Instant::now();
        match measured_from {
            None if now - start >= WARMUP => measured_from = Some(now),
            None => {}
            Some(from) => {
                n += 1;
                if samples.len() < samples.capacity() {
                    samples.push(took.as_nanos().min(u32::MAX as u128) as u32);
                }
                if now - from >= window {
                    return Outcome {
                        round_trips: n,
                        secs: (now - from).as_secs_f64(),
                        samples,
                    };
                }
            }
        }
    }
}

// ------------------------------------------------------------------ socket transports

async fn serve_socket<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) -> io::Result<()> {
    let mut req = Vec::new();
    let mut reply = Vec::new();
    loop {
        let mut len = [0u8; 4];
        match s.read_exact(&mut len).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let len = u32::from_le_bytes(len) as usize;
        req.resize(len, 0);
        s.read_exact(&mut req).await?;
        let seed = sum(&req) as u8;
        reply.resize(4 + len, 0);
        reply[..4].copy_from_slice(&(len as u32).to_le_bytes());
        fill(&mut reply[4..], seed);
        s.write_all(&reply).await?;
    }
}

async fn socket_round_trip<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    req: &mut [u8],
    reply: &mut Vec<u8>,
    seed: u8,
) -> io::Result<u64> {
    let len = req.len() - 4;
    fill(&mut req[4..], seed);
    s.write_all(req).await?;
    let mut head = [0u8; 4];
    s.read_exact(&mut head).await?;
    if u32::from_le_bytes(head) as usize != len {
        return Err(io::Error::other("reply of the wrong length"));
    }
    reply.resize(len, 0);
    s.read_exact(reply).await?;
    Ok(sum(reply))
}

async fn socket_client<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    size: usize,
    window: Duration,
) -> Outcome {
    let mut req = vec![0u8; 4 + size];
    req[..4].copy_from_slice(&(size as u32).to_le_bytes());
    let mut reply = Vec::with_capacity(size);
    client_loop(size, window, async |seed: u8| {
        socket_round_trip(&mut s, &mut req, &mut reply, seed).await
    })
    .await
}

// ------------------------------------------------------------------ shm-ipc

async fn serve_shm(listener: Listener, in_place: bool) -> io::Result<()> {
    let session = listener.accept().await?;
    let Some(stream) = session.accept_stream().await? else {
        return Ok(());
    };
    let mut reply = Vec::new();
    while let Some(msg) = stream.recv().await? {
        let len = msg.len();
        let seed = msg.into_chunks().iter().map(|c| sum(c)).sum::<u64>() as u8;
        if in_place {
            stream
                .send_with(len, |at, dst| fill(dst, seed.wrapping_add(at as u8)))
                .await?;
        } else {
            reply.resize(len, 0);
            fill(&mut reply, seed);
            stream.send(&reply[..]).await?;
        }
    }
    Ok(())
}

async fn shm_client(path: PathBuf, size: usize, window: Duration, in_place: bool) -> Outcome {
    let session = Session::connect(&path, shm_config())
        .await
        .unwrap_or_else(|e| fail(format!("connect: {e}")));
    let stream = session.open_stream().unwrap_or_else(|e| fail(e));
    let mut req = vec![0u8; size];
    let rt = async |seed: u8| -> io::Result<u64> {
        // The answer is due from the send on: the reader polls for it.
        let _due = session.reply_due();
        if in_place {
            stream
                .send_with(size, |at, dst| fill(dst, seed.wrapping_add(at as u8)))
                .await?;
        } else {
            fill(&mut req, seed);
            stream.send(&req[..]).await?;
        }
        let msg = stream
            .recv()
            .await?
            .ok_or_else(|| io::Error::other("the server closed"))?;
        Ok(msg.into_chunks().iter().map(|c| sum(c)).sum())
    };
    let out = client_loop(size, window, rt).await;
    session.close();
    out
}

// ------------------------------------------------------------------ the floor

/// Whose turn it is in [`Floor`].
const CLIENT_TURN: u32 = 0;
const SERVER_TURN: u32 = 1;
const STOP: u32 = 2;

/// Two threads of one process sharing a request and a reply buffer, handing turns over
/// with one atomic word that the waiting side spins on: the same byte work as the
/// transports, with no transport at all.
struct Floor {
    turn: AtomicU32,
    request: Mutex<Vec<u8>>,
    reply: Mutex<Vec<u8>>,
}

/// Spins until `turn` is no longer `value`; after a while it yields the thread between
/// looks, so that on a busy machine the other side can run.
fn wait_while(turn: &AtomicU32, value: u32) -> u32 {
    let mut spins = 0u32;
    loop {
        let now = turn.load(Ordering::Acquire);
        if now != value {
            return now;
        }
        if spins < 1 << 10 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

fn run_floor(size: usize, window: Duration) -> Outcome {
    let floor = Arc::new(Floor {
        turn: AtomicU32::new(CLIENT_TURN),
        request: Mutex::new(vec![0; size]),
        reply: Mutex::new(vec![0; size]),
    });
    let server_side = Arc::clone(&floor);
    let server = std::thread::spawn(move || {
        let f = &*server_side;
        while wait_while(&f.turn, CLIENT_TURN) == SERVER_TURN {
            let seed = sum(&f.request.lock().unwrap()) as u8;
            fill(&mut f.reply.lock().unwrap(), seed);
            f.turn.store(CLIENT_TURN, Ordering::Release);
        }
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let out = rt.block_on(client_loop(size, window, async |seed: u8| {
        fill(&mut floor.request.lock().unwrap(), seed);
        floor.turn.store(SERVER_TURN, Ordering::Release);
        wait_while(&floor.turn, SERVER_TURN);
        Ok(sum(&floor.reply.lock().unwrap()))
    }));
    floor.turn.store(STOP, Ordering::Release);
    if server.join().is_err() {
        fail("the floor's server thread panicked");
    }
    out
}

// ------------------------------------------------------------------ cases

fn run_case(transport: &str, size: usize, window: Duration) -> Outcome {
    if transport == "floor" {
        return run_floor(size, window);
    }
    let dir = std::env::temp_dir();
    let path = dir.join(format!("ipc-pingpong-{}-{transport}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<String>();
    let server_path = path.clone();
    let transport_s = transport.to_string();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            match transport_s.as_str() {
                "shm" | "shm-copy" => {
                    let l = Listener::bind(&server_path, shm_config())?;
                    ready_tx.send(String::new()).unwrap();
                    serve_shm(l, transport_s == "shm").await
                }
                "uds" => {
                    let l = UnixListener::bind(&server_path)?;
                    ready_tx.send(String::new()).unwrap();
                    let (s, _) = l.accept().await?;
                    serve_socket(s).await
                }
                _ => {
                    let l = TcpListener::bind("127.0.0.1:0").await?;
                    ready_tx.send(l.local_addr()?.to_string()).unwrap();
                    let (s, _) = l.accept().await?;
                    s.set_nodelay(true)?;
                    serve_socket(s).await
                }
            }
        })
    });
    let addr = ready_rx
        .recv()
        .unwrap_or_else(|_| fail("the server did not start"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = rt.block_on(async {
        match transport {
            "shm" => shm_client(path.clone(), size, window, true).await,
            "shm-copy" => shm_client(path.clone(), size, window, false).await,
            "uds" => {
                let s = UnixStream::connect(&path).await.unwrap_or_else(|e| fail(e));
                socket_client(s, size, window).await
            }
            _ => {
                let s = TcpStream::connect(&addr).await.unwrap_or_else(|e| fail(e));
                s.set_nodelay(true).unwrap();
                socket_client(s, size, window).await
            }
        }
    });
    drop(rt);
    match server.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => fail(format!("{transport} server: {e}")),
        Err(_) => fail(format!("{transport} server panicked")),
    }
    let _ = std::fs::remove_file(&path);
    out
}

struct Row {
    mbps: f64,
    p50: f64,
    p99: f64,
    n: u64,
}

fn row(size: usize, mut o: Outcome) -> Row {
    o.samples.sort_unstable();
    let pct = |p: f64| {
        let i = ((o.samples.len() as f64 * p) as usize).min(o.samples.len().saturating_sub(1));
        o.samples.get(i).map_or(0.0, |&ns| f64::from(ns) / 1000.0)
    };
    Row {
        mbps: (2 * size) as f64 * o.round_trips as f64 / o.secs / 1e6,
        p50: pct(0.50),
        p99: pct(0.99),
        n: o.round_trips,
    }
}

fn main() {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let picked = |name: &str| filters.is_empty() || filters.iter().any(|f| f == name);
    let secs: f64 = std::env::var("IPC_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.5);
    let window = Duration::from_secs_f64(secs);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "ipc_pingpong: one connection, closed loop, client and server on two threads of one \
         process; {secs} s per case after {} ms of warm-up; load average {}",
        WARMUP.as_millis(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "{:>6}  {:>8}  {:>10}  {:>9}  {:>9}  {:>11}",
        "size", "via", "MB/s", "p50 µs", "p99 µs", "round trips"
    );
    let mut ratios = Vec::new();
    for (size, label) in SIZES {
        let any_size = filters.iter().any(|f| SIZES.iter().any(|(_, l)| l == f));
        if any_size && !filters.iter().any(|f| f == label) {
            continue;
        }
        let mut rows = Vec::new();
        for t in TRANSPORTS {
            let any_t = filters.iter().any(|f| TRANSPORTS.contains(&f.as_str()));
            if any_t && !picked(t) {
                continue;
            }
            let r = row(size, run_case(t, size, window));
            println!(
                "{label:>6}  {t:>8}  {:>10.1}  {:>9.1}  {:>9.1}  {:>11}",
                r.mbps, r.p50, r.p99, r.n
            );
            rows.push((t, r));
        }
        let get = |name: &str| rows.iter().find(|(t, _)| *t == name).map(|(_, r)| r);
        for shm_name in ["shm", "shm-copy"] {
            if let (Some(shm), Some(uds)) = (get(shm_name), get("uds")) {
                ratios.push((
                    label,
                    shm_name,
                    shm.mbps / uds.mbps,
                    uds.p50 / shm.p50,
                    get("tcp").map(|tcp| shm.mbps / tcp.mbps),
                    get("floor").map(|floor| shm.mbps / floor.mbps),
                ));
            }
        }
    }
    if !ratios.is_empty() {
        println!();
        println!(
            "{:>6}  {:>8}  {:>13}  {:>13}  {:>13}  {:>15}",
            "size", "shm", "MB/s shm/uds", "p50 uds/shm", "MB/s shm/tcp", "MB/s shm/floor"
        );
        let show = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.2}"));
        for (label, shm, thr, p50, tcp, floor) in ratios {
            let (tcp, floor) = (show(tcp), show(floor));
            println!("{label:>6}  {shm:>8}  {thr:>13.2}  {p50:>13.2}  {tcp:>13}  {floor:>15}");
        }
    }
}
