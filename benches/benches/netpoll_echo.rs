//! Echo benchmark: netpoll-rs against tokio's own `TcpStream`, over 127.0.0.1.
//!
//! Run it with `cargo bench -p benches --bench netpoll_echo` (about two and a half
//! minutes: 12 cases of 3.5 s, 3 rounds). Settings, all optional:
//!
//! - `NETPOLL_BENCH_SECS=10`: the measured window per case and round (default 3; fractions
//!   are fine).
//! - `NETPOLL_BENCH_ROUNDS=1`: how many times every case runs (default 3). The order of
//!   the variants alternates from round to round and the rounds are pooled (QPS is all
//!   round trips over all windows; percentiles are over all samples); each round's QPS is
//!   printed too, so the spread shows how noisy the machine was.
//! - `NETPOLL_BENCH_RUNTIME=shared`: the other runtime layout (see below; default `split`).
//! - `NETPOLL_BENCH_POLLERS=2`: poller threads per netpoll-rs reactor (default:
//!   `Config::default()`'s, 1 on a small machine).
//! - Arguments after `--` select cases, for profiling one: a whole label (`tokio/1`,
//!   `"netpoll busy_poll off/100"`) or part of a variant's name (`tokio`, `busy_poll on`).
//!
//! # What is measured
//!
//! An echo server and its clients, in one process. Frames are a 4-byte big-endian length
//! and a body of 1 KiB. Each client connection runs a closed loop: send one frame, wait
//! for its echo, record the round trip, repeat. Every echo is compared in full with what
//! was sent (a 1 KiB `memcmp`, the same for every variant; each client's bytes differ, so
//! crossed connections show too); a wrong echo, an I/O error, or a client or server that
//! does not stop within 10 s of the window's end aborts the run with a message and exit
//! status 1. Each case runs with 1 and with 100 client connections, for three variants:
//!
//! - `tokio`: `tokio::net::TcpStream` on both sides, the idiomatic way (what tokio-util's
//!   `FramedRead` does): frames are read with `read_buf` into a reused `BytesMut` (64 KiB
//!   reserved before each read, so one `read` takes what arrived, as netpoll-rs's default
//!   `read_chunk` does) and cut with `split_to`; the server echoes the frame it cut with
//!   `write_all`, the client sends a prepared frame with `write_all`. So both variants
//!   make one `read` and one write per message per side. `TCP_NODELAY` is on on both sides,
//!   as netpoll-rs sets it by default.
//! - `netpoll busy_poll on`: netpoll-rs with `Config::busy_poll` on (after a batch with
//!   events the poller keeps polling with a zero timeout, yielding between polls, for
//!   `Config::spin`, 50 µs, after the last event, and only then blocks); the server echoes the `Bytes` that `read_frame` returned (no copy) with
//!   `write` + `flush`, the client sends a clone of one prepared `Bytes` the same way.
//! - `netpoll busy_poll off`: the same with the poller blocking in `epoll_wait` as soon as
//!   a batch is handled.
//! - `netpoll on_runtime`: netpoll-rs with its poller as a task of each side's tokio
//!   runtime (`Reactor::on_runtime`, busy_poll on) instead of a thread of its own: tokio's
//!   reactor watches the poller's epoll fd, so a handler is woken on its own thread.
//! - `netpoll inline`: netpoll-rs with the work done by [`Handler`]s on the poller
//!   threads (`Connection::serve_inline`, Netpoll's `OnRequest` style; busy_poll on): the
//!   server's handler moves each whole frame from the input to the output (no copy) and
//!   returns, the poller sends it at once; the client's handler checks the echo, records
//!   the round trip and queues the next frame. No task or waker takes part; the
//!   runtimes only accept and time the window.
//! - `netpoll inline, busy off`: the same with busy_poll off.
//!
//! Every case builds fresh runtimes (and reactors), the same for every variant. The
//! default layout, `split`: the server runs on a current-thread tokio runtime on a thread
//! of its own, the clients on another current-thread runtime on the main thread, and a
//! netpoll-rs variant gives each side its own `Reactor` (`Config::default()`, so 1 poller
//! thread here), as a server and its clients in two processes would have. Why: an RPC
//! request crosses from the client's threads to the server's, and this layout keeps that
//! crossing. The alternative, `shared` (one multi-thread runtime with 2 workers for both
//! sides, one reactor), lets tokio run a one-connection ping-pong entirely on one worker:
//! the client's write makes the server socket readable, the same worker's next
//! `epoll_wait` sees it, and so on, with no thread switch at all (about 50 context
//! switches in a whole 2.5 s run, against 2 per round trip in `split`). That is a
//! co-location shortcut no client and server in different processes get, and it makes the
//! one-connection ratio about 0.2 instead of about 0.5; at 100 connections both layouts
//! give similar ratios. Either way, tokio has one thread per side doing both I/O and
//! handlers, and netpoll-rs adds its poller thread(s): that is netpoll-rs's design (reads
//! on the poller, handlers on tokio), and its cost is part of what is measured. The
//! inline variants are the exception: their poller thread does all the work of its side.
//!
//! Per case: a warm-up of 0.5 s (not recorded), then the measured window. Reported:
//!
//! - `QPS`: round trips completed in the window, all connections together, per second.
//! - `p50`/`p99`/`p999`: round-trip latency in microseconds, over every round trip of
//!   the window (each client records into a preallocated and pre-touched `Vec<u32>` of
//!   nanoseconds, so recording does not allocate; the samples are sorted at the end).
//!   With 100 connections in a closed loop, latency is about 100 / QPS (Little's law).
//! - `allocs/msg`: heap allocations (`alloc`, `alloc_zeroed` and `realloc` calls, counted
//!   by `alloc_count::CountingAlloc` as the global allocator) made by every thread during the
//!   window, divided by the round trips. It counts client and server together: one round
//!   trip is a request and its echo, on both ends. 0.000 means nothing in the steady
//!   state allocates.
//! - `cpu %`: CPU time the whole process used during the window (user + system, from
//!   `/proc/self/stat`), as a share of one core; 200 is both cores busy. Busy polling
//!   trades CPU for latency, and this column shows the price.
//! - `min/max` (100 connections): the fewest round trips one connection made over the
//!   most one made (the worst window); near 1 means every connection was served alike.
//!
//! # Reading the ratios
//!
//! The last table divides figures of the same run: `QPS netpoll/tokio` above 1 means
//! netpoll-rs completes more round trips per second; `p99 tokio/netpoll` (and `p50`)
//! above 1 means netpoll-rs's latency is lower. 1.00 means no difference.
//!
//! # Caveat
//!
//! Clients and server share the machine's cores (2 here) with each other, so every
//! figure is the cost of both ends together; and on a busy machine other work takes its
//! share too (the load average printed at the start says how busy it was). With one
//! connection the figures also depend on whether the scheduler puts the two ends on the
//! same core (a cheap local wake-up) or not (an inter-processor interrupt, slow in a VM):
//! on a shared 2-core VM one round's QPS can be twice another's, which is why the rounds
//! alternate and are shown one by one. Compare the variants with each other, within one
//! run, and treat differences smaller than the rounds' spread as noise; the absolute
//! figures are not what a server reaches with its clients on other machines.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use alloc_count::{CountingAlloc, allocations};
use bytes::{BufMut, Bytes, BytesMut};
use netpoll_rs::{Config, Connection, Handler, Io, Listener, Reactor};
use thrift_wire::LinkBuffer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinSet;

// ------------------------------------------------------------------ allocation counting

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

// ------------------------------------------------------------------ the plan

/// Body bytes per frame.
const BODY: usize = 1024;
/// Bytes asked of the kernel per read by the tokio variant (netpoll-rs's default
/// `read_chunk` too).
const READ_CHUNK: usize = 64 * 1024;
/// Tokio worker threads of the `shared` layout's runtime.
const WORKERS: usize = 2;
/// Client connections per case.
const CONNS: [usize; 2] = [1, 100];
/// How long clients and servers get to stop once the window closes before the run is
/// declared hung.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Latency samples preallocated per second of window, spread over the connections (far
/// above what two cores reach; a client that fills its share counts the rest without
/// recording them, and the report says so).
const SAMPLES_PER_SEC: f64 = 1_000_000.0;

/// Client phases: round trips are recorded only in `MEASURE`; `STOP` ends the loops.
const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Tokio,
    NetpollBusy,
    NetpollNoBusy,
    NetpollOnRuntime,
    NetpollInline,
    NetpollInlineNoBusy,
}

impl Variant {
    const ALL: [Variant; 6] = [
        Variant::Tokio,
        Variant::NetpollBusy,
        Variant::NetpollNoBusy,
        Variant::NetpollOnRuntime,
        Variant::NetpollInline,
        Variant::NetpollInlineNoBusy,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::Tokio => "tokio",
            Variant::NetpollBusy => "netpoll busy_poll on",
            Variant::NetpollNoBusy => "netpoll busy_poll off",
            Variant::NetpollOnRuntime => "netpoll on_runtime",
            Variant::NetpollInline => "netpoll inline",
            Variant::NetpollInlineNoBusy => "netpoll inline, busy off",
        }
    }

    /// The reactor's configuration, `None` for tokio.
    fn netpoll_config(self, plan: &Plan) -> Option<Config> {
        let busy_poll = match self {
            Variant::Tokio => return None,
            Variant::NetpollBusy => true,
            Variant::NetpollNoBusy => false,
            Variant::NetpollOnRuntime | Variant::NetpollInline => true,
            Variant::NetpollInlineNoBusy => false,
        };
        let default = Config::default();
        Some(Config {
            busy_poll,
            // "busy_poll on" is the fixed 50 µs spin these variants were made to
            // measure, not the adaptive one (which at one caller rarely spins).
            adaptive_spin: false,
            pollers: plan.pollers.unwrap_or(default.pollers),
            ..default
        })
    }

    /// The reactor for a side whose runtime is `runtime`: poller threads, or (for
    /// `on_runtime`) poller tasks on that runtime; `None` for tokio.
    fn reactor(
        self,
        plan: &Plan,
        runtime: &tokio::runtime::Handle,
        label: &str,
    ) -> Option<Reactor> {
        let config = self.netpoll_config(plan)?;
        let reactor = match self {
            Variant::NetpollOnRuntime => Reactor::on_runtime(runtime, config),
            _ => Reactor::new(config),
        };
        Some(reactor.unwrap_or_else(|e| fail(&format!("{label}: reactor: {e}"))))
    }
}

/// Checks that a reactor has no sockets left, then shuts it down.
fn finish_reactor(label: &str, reactor: Option<Reactor>) {
    let Some(reactor) = reactor else { return };
    let left = reactor.socket_count();
    if left != 0 {
        eprintln!(
            "netpoll_echo: {label}: {left} sockets still registered after every \
             connection and the listener closed"
        );
    }
    reactor.shutdown();
}

#[derive(Debug, Clone, Copy)]
struct Plan {
    warmup: Duration,
    window: Duration,
    rounds: usize,
    topology: Topology,
    /// Poller threads per reactor, when not `Config::default()`'s.
    pollers: Option<usize>,
}

impl Plan {
    fn from_env() -> Plan {
        let secs = env_f64("NETPOLL_BENCH_SECS", 3.0);
        let rounds = env_f64("NETPOLL_BENCH_ROUNDS", 3.0);
        if !(secs > 0.0 && secs.is_finite()) {
            fail("NETPOLL_BENCH_SECS must be a positive number of seconds");
        }
        if !((1.0..=100.0).contains(&rounds) && rounds.fract() == 0.0) {
            fail("NETPOLL_BENCH_ROUNDS must be a whole number from 1 to 100");
        }
        let topology = match std::env::var("NETPOLL_BENCH_RUNTIME").as_deref() {
            Err(_) | Ok("split") => Topology::Split,
            Ok("shared") => Topology::Shared,
            Ok(other) => fail(&format!(
                "NETPOLL_BENCH_RUNTIME={other:?}: expected \"shared\" or \"split\""
            )),
        };
        let pollers = std::env::var("NETPOLL_BENCH_POLLERS").ok().map(|v| {
            v.trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| (1..=64).contains(&n))
                .unwrap_or_else(|| fail(&format!("NETPOLL_BENCH_POLLERS={v:?}: expected 1 to 64")))
        });
        Plan {
            pollers,
            warmup: Duration::from_millis(500),
            window: Duration::from_secs_f64(secs),
            rounds: rounds as usize,
            topology,
        }
    }
}

fn env_f64(name: &str, default: f64) -> f64 {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| fail(&format!("{name}={v:?} is not a number"))),
        Err(_) => default,
    }
}

/// Prints `msg` and exits: used for wrong echoes, hangs and setup failures, where
/// unwinding through a runtime with stuck tasks could itself hang.
fn fail(msg: &str) -> ! {
    eprintln!("netpoll_echo: {msg}");
    std::process::exit(1)
}

// ------------------------------------------------------------------ shared pieces

/// The frame client `id` sends: its length, then `BODY` bytes of a pattern seeded by
/// `id` (so an echo from another connection would not match).
fn frame_for(id: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(4 + BODY);
    f.put_u32(BODY as u32);
    f.extend((0..BODY).map(|i| (i as u8).wrapping_mul(31).wrapping_add(id as u8 ^ 0x5a)));
    f
}

/// netpoll-rs's framing: a whole frame is the 4-byte length plus that many bytes.
fn frame_len(buf: &mut LinkBuffer) -> io::Result<Option<usize>> {
    Ok(buf
        .peek(4)
        .map(|h| 4 + u32::from_be_bytes([h[0], h[1], h[2], h[3]]) as usize))
}

fn check_echo(n: u64, sent: &[u8], back: &[u8]) -> io::Result<()> {
    if back == sent {
        return Ok(());
    }
    let at = sent
        .iter()
        .zip(back)
        .position(|(a, b)| a != b)
        .unwrap_or(sent.len().min(back.len()));
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "message {n}: the echo ({} bytes) differs from the {} bytes sent, first at \
             byte {at}",
            back.len(),
            sent.len()
        ),
    ))
}

fn closed_early() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the server closed the connection",
    )
}

/// One client's latency samples in nanoseconds, in memory allocated (and touched)
/// before the run.
struct Samples {
    ns: Vec<u32>,
    /// Round trips of the window that found `ns` full.
    unrecorded: u64,
}

impl Samples {
    fn with_capacity(n: usize) -> Samples {
        // Filling with a non-zero value writes every page before the run (a zeroed
        // `vec!` comes from `calloc`, whose pages may stay untouched until first use).
        let mut ns = Vec::with_capacity(n);
        ns.resize(n, u32::MAX);
        ns.clear();
        Samples { ns, unrecorded: 0 }
    }

    #[inline]
    fn record(&mut self, rtt: Duration) {
        if self.ns.len() < self.ns.capacity() {
            self.ns
                .push(u32::try_from(rtt.as_nanos()).unwrap_or(u32::MAX));
        } else {
            self.unrecorded += 1;
        }
    }

    fn round_trips(&self) -> u64 {
        self.ns.len() as u64 + self.unrecorded
    }
}

/// How the tokio runtimes are laid out: chosen once per run, the same for every variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Topology {
    /// One multi-thread runtime with [`WORKERS`] workers runs the clients and the server;
    /// a netpoll-rs variant has one reactor for both.
    Shared,
    /// The server runs on a current-thread runtime on a thread of its own, the clients on
    /// another; a netpoll-rs variant gives each side its own reactor, as two processes
    /// would have.
    Split,
}

impl Topology {
    fn runtime(self) -> tokio::runtime::Runtime {
        let mut builder = match self {
            Topology::Shared => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(WORKERS);
                b
            }
            Topology::Split => tokio::runtime::Builder::new_current_thread(),
        };
        builder
            .enable_all()
            .build()
            .unwrap_or_else(|e| fail(&format!("tokio runtime: {e}")))
    }

    fn describe(self, pollers: usize) -> String {
        match self {
            Topology::Shared => format!(
                "shared: one tokio multi-thread runtime ({WORKERS} workers) for clients and \
                 server; netpoll-rs: one reactor ({pollers} poller thread(s)) for both sides",
            ),
            Topology::Split => format!(
                "split: tokio current-thread runtimes, one for the server and one for the \
                 clients, each on its own thread; netpoll-rs: a reactor ({pollers} poller \
                 thread(s)) per side",
            ),
        }
    }
}

fn localhost() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// What one case measured in its window.
struct Window {
    elapsed: Duration,
    allocs: u64,
    cpu_ticks: Option<u64>,
}

/// Lets the clients warm up, then opens the window, closes it, and tells the clients to
/// stop. Allocations are counted between the two `allocations()` reads only (reading the CPU
/// time allocates, so it happens outside them).
async fn measure(phase: &AtomicU8, plan: &Plan) -> Window {
    tokio::time::sleep(plan.warmup).await;
    let cpu0 = cpu_ticks();
    let allocs0 = allocations();
    let start = Instant::now();
    phase.store(MEASURE, Ordering::Relaxed);
    tokio::time::sleep(plan.window).await;
    let allocs1 = allocations();
    phase.store(STOP, Ordering::Relaxed);
    let elapsed = start.elapsed();
    let cpu1 = cpu_ticks();
    Window {
        elapsed,
        allocs: allocs1 - allocs0,
        cpu_ticks: cpu0.zip(cpu1).map(|(a, b)| b.saturating_sub(a)),
    }
}

/// User + system CPU time of the whole process so far, in clock ticks ([`USER_HZ`]).
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may hold spaces):
    // state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Clock ticks per second in `/proc` (Linux's `USER_HZ`, 100 on every common platform).
const USER_HZ: f64 = 100.0;

// ------------------------------------------------------------------ tokio

/// Length-prefixed frames from a `TcpStream`, read into one reused `BytesMut`.
struct FrameReader {
    buf: BytesMut,
}

impl FrameReader {
    fn new() -> FrameReader {
        FrameReader {
            buf: BytesMut::with_capacity(READ_CHUNK),
        }
    }

    /// The next whole frame, `None` at a clean end of stream. The frame is cut from the
    /// buffer without copying; once it is dropped, the next `reserve` reuses the memory.
    async fn next(&mut self, stream: &mut TcpStream) -> io::Result<Option<BytesMut>> {
        loop {
            if self.buf.len() >= 4 {
                let len =
                    4 + u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])
                        as usize;
                if self.buf.len() >= len {
                    return Ok(Some(self.buf.split_to(len)));
                }
            }
            self.buf.reserve(READ_CHUNK);
            if stream.read_buf(&mut self.buf).await? == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the connection in the middle of a frame",
                    ))
                };
            }
        }
    }
}

async fn tokio_echo(mut stream: TcpStream) {
    let mut reader = FrameReader::new();
    while let Ok(Some(frame)) = reader.next(&mut stream).await {
        if stream.write_all(&frame).await.is_err() {
            return;
        }
    }
}

async fn tokio_client(
    id: usize,
    mut stream: TcpStream,
    phase: Arc<AtomicU8>,
    mut samples: Samples,
) -> io::Result<Samples> {
    let frame = frame_for(id);
    let mut reader = FrameReader::new();
    let mut n = 0u64;
    while phase.load(Ordering::Relaxed) != STOP {
        let start = Instant::now();
        stream.write_all(&frame).await?;
        let back = reader.next(&mut stream).await?.ok_or_else(closed_early)?;
        let rtt = start.elapsed();
        check_echo(n, &frame, &back)?;
        if phase.load(Ordering::Relaxed) == MEASURE {
            samples.record(rtt);
        }
        n += 1;
    }
    Ok(samples)
}

// ------------------------------------------------------------------ netpoll-rs

async fn netpoll_echo(conn: Connection) {
    while let Ok(Some(frame)) = conn.read_frame(frame_len).await {
        conn.write(frame);
        if conn.flush().await.is_err() {
            return;
        }
    }
}

async fn netpoll_client(
    id: usize,
    conn: Connection,
    phase: Arc<AtomicU8>,
    mut samples: Samples,
) -> io::Result<Samples> {
    let frame = Bytes::from(frame_for(id));
    let mut n = 0u64;
    while phase.load(Ordering::Relaxed) != STOP {
        let start = Instant::now();
        conn.write(frame.clone());
        conn.flush().await?;
        let back = conn.read_frame(frame_len).await?.ok_or_else(closed_early)?;
        let rtt = start.elapsed();
        check_echo(n, &frame, &back)?;
        if phase.load(Ordering::Relaxed) == MEASURE {
            samples.record(rtt);
        }
        n += 1;
    }
    Ok(samples)
}

/// The server side of `netpoll inline`: echoes every whole frame from the poller.
struct InlineEcho {
    /// Told when the connection closes (dropped with the handler).
    _closed: oneshot::Sender<()>,
}

impl Handler for InlineEcho {
    fn on_input(&mut self, io: &mut Io<'_>) {
        while let Ok(Some(len)) = frame_len(io.input()) {
            if io.input().len() < len {
                break;
            }
            let frame = io.input().next(len);
            io.output().insert(frame);
        }
    }
}

/// The client side of `netpoll inline`: the closed loop run from the poller, one frame
/// out, its echo back, the next frame out.
struct InlineClient {
    frame: Bytes,
    phase: Arc<AtomicU8>,
    start: Instant,
    n: u64,
    samples: Option<Samples>,
    error: Option<io::Error>,
    done: Option<oneshot::Sender<io::Result<Samples>>>,
}

impl Handler for InlineClient {
    fn on_input(&mut self, io: &mut Io<'_>) {
        let Ok(Some(len)) = frame_len(io.input()) else {
            return;
        };
        if io.input().len() < len {
            if io.peer_closed() {
                self.error = Some(closed_early());
            }
            return;
        }
        let back = io.input().next(len);
        let rtt = self.start.elapsed();
        if let Err(e) = check_echo(self.n, &self.frame, &back) {
            self.error = Some(e);
            io.close();
            return;
        }
        let phase = self.phase.load(Ordering::Relaxed);
        if phase == MEASURE
            && let Some(samples) = self.samples.as_mut()
        {
            samples.record(rtt);
        }
        self.n += 1;
        if phase == STOP {
            io.close();
            return;
        }
        self.start = Instant::now();
        io.output().insert(self.frame.clone());
    }

    fn on_close(&mut self, error: Option<io::Error>) {
        let outcome = match (self.error.take().or(error), self.samples.take()) {
            (None, Some(samples)) if self.phase.load(Ordering::Relaxed) == STOP => Ok(samples),
            (Some(e), _) => Err(e),
            _ => Err(closed_early()),
        };
        if let Some(done) = self.done.take() {
            let _ = done.send(outcome);
        }
    }
}

/// Starts a `netpoll inline` client on `conn`: its first frame goes out now, the rest
/// from the poller. The handle resolves when the loop ends.
fn inline_client(
    id: usize,
    conn: Connection,
    phase: Arc<AtomicU8>,
    samples: Samples,
) -> tokio::task::JoinHandle<io::Result<Samples>> {
    let frame = Bytes::from(frame_for(id));
    let (done, result) = oneshot::channel();
    conn.write(frame.clone());
    conn.serve_inline(InlineClient {
        frame,
        phase,
        start: Instant::now(),
        n: 0,
        samples: Some(samples),
        error: None,
        done: Some(done),
    });
    tokio::spawn(async move { result.await.unwrap_or_else(|_| Err(closed_early())) })
}

// ------------------------------------------------------------------ one case

/// A server's listening socket.
enum ServerListener {
    Tokio(TcpListener),
    Netpoll(Listener),
}

async fn bind(label: &str, reactor: Option<&Reactor>) -> (ServerListener, SocketAddr) {
    let listener = match reactor {
        None => ServerListener::Tokio(
            TcpListener::bind(localhost())
                .await
                .unwrap_or_else(|e| fail(&format!("{label}: bind: {e}"))),
        ),
        Some(reactor) => ServerListener::Netpoll(
            reactor
                .listen_tcp(localhost())
                .unwrap_or_else(|e| fail(&format!("{label}: listen: {e}"))),
        ),
    };
    let addr = match &listener {
        ServerListener::Tokio(l) => l.local_addr().ok(),
        ServerListener::Netpoll(l) => l.local_addr(),
    };
    let addr = addr.unwrap_or_else(|| fail(&format!("{label}: the listener has no address")));
    (listener, addr)
}

/// Accepts and echoes until `stop`, then closes the listener and waits for every
/// connection to end (each ends when its client closes).
async fn serve(label: String, listener: ServerListener, inline: bool, stop: Arc<Notify>) {
    let mut conns = JoinSet::new();
    match listener {
        ServerListener::Tokio(listener) => loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, _) = accepted
                        .unwrap_or_else(|e| fail(&format!("{label}: accept: {e}")));
                    stream
                        .set_nodelay(true)
                        .unwrap_or_else(|e| fail(&format!("{label}: TCP_NODELAY: {e}")));
                    conns.spawn(tokio_echo(stream));
                }
                () = stop.notified() => break,
            }
        },
        ServerListener::Netpoll(listener) => {
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let conn = accepted
                            .unwrap_or_else(|e| fail(&format!("{label}: accept: {e}")));
                        if inline {
                            let (closed, on_close) = oneshot::channel();
                            conn.serve_inline(InlineEcho { _closed: closed });
                            conns.spawn(async move {
                                let _ = on_close.await;
                            });
                        } else {
                            conns.spawn(netpoll_echo(conn));
                        }
                    }
                    () = stop.notified() => break,
                }
            }
            listener.close();
        }
    }
    let all = async {
        while let Some(done) = conns.join_next().await {
            if let Err(e) = done {
                fail(&format!("{label}: a server connection panicked: {e}"));
            }
        }
    };
    if tokio::time::timeout(STOP_TIMEOUT, all).await.is_err() {
        fail(&format!(
            "{label}: server connections did not end within {STOP_TIMEOUT:?} of their \
             clients closing (a hang)"
        ));
    }
}

/// Connects `conns` clients, runs them through warm-up and window, and stops them.
async fn run_clients(
    label: &str,
    addr: SocketAddr,
    reactor: Option<&Reactor>,
    inline: bool,
    conns: usize,
    plan: &Plan,
) -> (Window, Vec<Samples>) {
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let per_client = samples_per_client(conns, plan);
    let mut clients = Vec::with_capacity(conns);
    for id in 0..conns {
        let samples = Samples::with_capacity(per_client);
        let phase = Arc::clone(&phase);
        let client = match reactor {
            None => {
                let stream = TcpStream::connect(addr)
                    .await
                    .unwrap_or_else(|e| fail(&format!("{label}: connect: {e}")));
                stream
                    .set_nodelay(true)
                    .unwrap_or_else(|e| fail(&format!("{label}: TCP_NODELAY: {e}")));
                tokio::spawn(tokio_client(id, stream, phase, samples))
            }
            Some(reactor) => {
                // A blocking connect, before any client runs: the kernel completes a
                // loopback handshake without waiting for the server's accept.
                let conn = reactor
                    .connect_tcp(addr, Duration::from_secs(5))
                    .unwrap_or_else(|e| fail(&format!("{label}: connect: {e}")));
                if inline {
                    inline_client(id, conn, phase, samples)
                } else {
                    tokio::spawn(netpoll_client(id, conn, phase, samples))
                }
            }
        };
        clients.push(client);
    }
    let window = measure(&phase, plan).await;
    let mut samples = Vec::with_capacity(conns);
    for (id, client) in clients.into_iter().enumerate() {
        match tokio::time::timeout(STOP_TIMEOUT, client).await {
            Ok(Ok(Ok(s))) => samples.push(s),
            Ok(Ok(Err(e))) => fail(&format!("{label}: client {id}: {e}")),
            Ok(Err(e)) => fail(&format!("{label}: client {id} panicked: {e}")),
            Err(_) => fail(&format!(
                "{label}: client {id} did not stop within {STOP_TIMEOUT:?} of the window's \
                 end (a hang)"
            )),
        }
    }
    (window, samples)
}

/// Runs one variant with `conns` connections: starts its reactor(s), runtime(s) and
/// server, runs the clients, then stops everything and checks that it stopped.
fn run_case(
    variant: Variant,
    conns: usize,
    plan: &Plan,
    topology: Topology,
) -> (Window, Vec<Samples>) {
    let label = format!(
        "{} with {conns} connection{}",
        variant.name(),
        if conns == 1 { "" } else { "s" }
    );
    let stop = Arc::new(Notify::new());
    let inline = matches!(
        variant,
        Variant::NetpollInline | Variant::NetpollInlineNoBusy
    );
    match topology {
        Topology::Shared => {
            let rt = topology.runtime();
            let reactor = variant.reactor(plan, rt.handle(), &label);
            let out = rt.block_on(async {
                let (listener, addr) = bind(&label, reactor.as_ref()).await;
                let server =
                    tokio::spawn(serve(label.clone(), listener, inline, Arc::clone(&stop)));
                let out = run_clients(&label, addr, reactor.as_ref(), inline, conns, plan).await;
                stop.notify_one();
                match tokio::time::timeout(2 * STOP_TIMEOUT, server).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => fail(&format!("{label}: the server panicked: {e}")),
                    Err(_) => fail(&format!("{label}: the server did not stop (a hang)")),
                }
                out
            });
            finish_reactor(&label, reactor);
            rt.shutdown_timeout(STOP_TIMEOUT);
            out
        }
        Topology::Split => {
            let (addr_tx, addr_rx) = mpsc::channel();
            let (done_tx, done_rx) = mpsc::channel();
            let server = std::thread::Builder::new()
                .name("echo-server".into())
                .spawn({
                    let label = label.clone();
                    let stop = Arc::clone(&stop);
                    let plan = *plan;
                    move || {
                        let rt = topology.runtime();
                        let reactor = variant.reactor(&plan, rt.handle(), &label);
                        rt.block_on(async {
                            let (listener, addr) = bind(&label, reactor.as_ref()).await;
                            let _ = addr_tx.send(addr);
                            serve(label.clone(), listener, inline, stop).await;
                        });
                        finish_reactor(&label, reactor);
                        rt.shutdown_timeout(STOP_TIMEOUT);
                        let _ = done_tx.send(());
                    }
                })
                .unwrap_or_else(|e| fail(&format!("{label}: server thread: {e}")));
            let addr = addr_rx
                .recv_timeout(STOP_TIMEOUT)
                .unwrap_or_else(|e| fail(&format!("{label}: the server did not start: {e}")));
            let rt = topology.runtime();
            let reactor = variant.reactor(plan, rt.handle(), &label);
            let out = rt.block_on(run_clients(
                &label,
                addr,
                reactor.as_ref(),
                inline,
                conns,
                plan,
            ));
            finish_reactor(&label, reactor);
            rt.shutdown_timeout(STOP_TIMEOUT);
            stop.notify_one();
            if done_rx.recv_timeout(2 * STOP_TIMEOUT).is_err() {
                fail(&format!("{label}: the server did not stop (a hang)"));
            }
            if server.join().is_err() {
                fail(&format!("{label}: the server thread panicked"));
            }
            out
        }
    }
}

fn samples_per_client(conns: usize, plan: &Plan) -> usize {
    ((plan.window.as_secs_f64() * SAMPLES_PER_SEC) as usize / conns).max(4096)
}

// ------------------------------------------------------------------ running and reporting

/// One case's figures, pooled over the rounds.
#[derive(Default)]
struct Pooled {
    round_trips: u64,
    elapsed: Duration,
    allocs: u64,
    cpu_ticks: u64,
    /// A window whose CPU time could not be read.
    cpu_unknown: bool,
    ns: Vec<u32>,
    unrecorded: u64,
    idle_clients: usize,
    /// The least, over the windows, of the fewest round trips one connection made over
    /// the most one made.
    fairness: Option<f64>,
    /// Each window's QPS, in the order they ran.
    qps_by_round: Vec<f64>,
}

impl Pooled {
    fn add(&mut self, window: Window, samples: Vec<Samples>) {
        self.elapsed += window.elapsed;
        self.allocs += window.allocs;
        match window.cpu_ticks {
            Some(t) => self.cpu_ticks += t,
            None => self.cpu_unknown = true,
        }
        let window_trips: u64 = samples.iter().map(Samples::round_trips).sum();
        self.qps_by_round
            .push(window_trips as f64 / window.elapsed.as_secs_f64());
        let per_conn = samples.iter().map(Samples::round_trips);
        if let (Some(min), Some(max)) = (per_conn.clone().min(), per_conn.max())
            && max > 0
        {
            let fairness = min as f64 / max as f64;
            self.fairness = Some(self.fairness.map_or(fairness, |f: f64| f.min(fairness)));
        }
        for s in samples {
            if s.round_trips() == 0 {
                self.idle_clients += 1;
            }
            self.round_trips += s.round_trips();
            self.unrecorded += s.unrecorded;
            self.ns.extend_from_slice(&s.ns);
        }
    }

    fn qps(&self) -> f64 {
        self.round_trips as f64 / self.elapsed.as_secs_f64()
    }

    /// The latency at quantile `q` in microseconds (nearest rank; `ns` sorted).
    fn quantile_us(&self, q: f64) -> f64 {
        if self.ns.is_empty() {
            return f64::NAN;
        }
        let rank = ((q * self.ns.len() as f64).ceil() as usize).clamp(1, self.ns.len());
        f64::from(self.ns[rank - 1]) / 1000.0
    }

    fn allocs_per_msg(&self) -> f64 {
        self.allocs as f64 / self.round_trips.max(1) as f64
    }

    fn cpu_percent(&self) -> Option<f64> {
        if self.cpu_unknown {
            return None;
        }
        Some(100.0 * self.cpu_ticks as f64 / USER_HZ / self.elapsed.as_secs_f64())
    }
}

/// A case's name for filtering: `tokio/1`, `netpoll busy_poll on/100`...
fn case_label(variant: Variant, conns: usize) -> String {
    format!("{}/{conns}", variant.name())
}

fn main() {
    // `cargo bench` passes `--bench`; other arguments select cases, for profiling one: a
    // whole label (`tokio/1`, `netpoll busy_poll off/100`) or part of a variant's name
    // (`tokio`, `busy_poll on`).
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let selected = |variant: Variant, conns: usize| {
        let label = case_label(variant, conns);
        filters.is_empty()
            || filters.iter().any(|f| {
                if f.contains('/') {
                    label == *f
                } else {
                    label.contains(f.as_str())
                }
            })
    };
    let plan = Plan::from_env();
    let before = allocations();
    drop(std::hint::black_box(Vec::<u8>::with_capacity(8)));
    if allocations() == before {
        fail("the counting allocator does not see allocations");
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into());
    println!(
        "netpoll_echo: {BODY}-byte bodies echoed over 127.0.0.1, closed loop, clients and \
         server in this process"
    );
    println!("machine: {cpus} CPUs, load average {load} at start");
    println!(
        "runtime: {}",
        plan.topology
            .describe(plan.pollers.unwrap_or(Config::default().pollers))
    );
    println!(
        "per case: {:.1} s warm-up, {:.1} s window, {} round(s)",
        plan.warmup.as_secs_f64(),
        plan.window.as_secs_f64(),
        plan.rounds
    );
    println!();

    let started = Instant::now();
    let mut pooled: Vec<((Variant, usize), Pooled)> = Vec::new();
    for conns in CONNS {
        for variant in Variant::ALL {
            if selected(variant, conns) {
                pooled.push(((variant, conns), Pooled::default()));
            }
        }
    }
    if pooled.is_empty() {
        fail(&format!("no case matches {filters:?}"));
    }
    for round in 0..plan.rounds {
        for conns in CONNS {
            let mut order = Variant::ALL;
            if round % 2 == 1 {
                order.reverse();
            }
            for variant in order {
                let Some((_, slot)) = pooled.iter_mut().find(|(key, _)| *key == (variant, conns))
                else {
                    continue;
                };
                let (window, samples) = run_case(variant, conns, &plan, plan.topology);
                slot.add(window, samples);
            }
        }
    }
    for (_, p) in &mut pooled {
        p.ns.sort_unstable();
    }

    println!(
        "{:<26} {:>5} {:>10} {:>9} {:>9} {:>9} {:>11} {:>6} {:>8}",
        "variant", "conns", "QPS", "p50 µs", "p99 µs", "p999 µs", "allocs/msg", "cpu %", "min/max"
    );
    for ((variant, conns), p) in &pooled {
        println!(
            "{:<26} {:>5} {:>10.0} {:>9.1} {:>9.1} {:>9.1} {:>11.3} {:>6} {:>8}",
            variant.name(),
            conns,
            p.qps(),
            p.quantile_us(0.50),
            p.quantile_us(0.99),
            p.quantile_us(0.999),
            p.allocs_per_msg(),
            p.cpu_percent()
                .map_or_else(|| "-".to_string(), |c| format!("{c:.0}")),
            p.fairness
                .filter(|_| *conns > 1)
                .map_or_else(|| "-".to_string(), |f| format!("{f:.2}")),
        );
    }
    if plan.rounds > 1 {
        println!();
        println!("QPS of each round (the spread shows how noisy the machine was):");
        for ((variant, conns), p) in &pooled {
            let rounds: Vec<String> = p.qps_by_round.iter().map(|q| format!("{q:.0}")).collect();
            println!(
                "  {:<26} {:>5}  {}",
                variant.name(),
                conns,
                rounds.join("  ")
            );
        }
    }
    for ((variant, conns), p) in &pooled {
        if p.unrecorded > 0 {
            println!(
                "note: {} with {conns} connections: {} round trips found their client's \
                 sample buffer full (counted in QPS, not in the percentiles)",
                variant.name(),
                p.unrecorded
            );
        }
        if p.idle_clients > 0 {
            println!(
                "WARNING: {} with {conns} connections: {} client(s) completed no round trip \
                 in a window (a stalled connection?)",
                variant.name(),
                p.idle_clients
            );
        }
    }

    let find = |v: Variant, c: usize| {
        pooled
            .iter()
            .find(|(key, _)| *key == (v, c))
            .map(|(_, p)| p)
    };
    let mut ratios = Vec::new();
    for conns in CONNS {
        for variant in [
            Variant::NetpollBusy,
            Variant::NetpollNoBusy,
            Variant::NetpollOnRuntime,
            Variant::NetpollInline,
            Variant::NetpollInlineNoBusy,
        ] {
            if let (Some(base), Some(p)) = (find(Variant::Tokio, conns), find(variant, conns)) {
                ratios.push((variant, conns, base, p));
            }
        }
    }
    if !ratios.is_empty() {
        println!();
        println!(
            "{:<38} {:>18} {:>18} {:>18}",
            "ratios (>1: netpoll-rs better)",
            "QPS netpoll/tokio",
            "p99 tokio/netpoll",
            "p50 tokio/netpoll"
        );
        for (variant, conns, base, p) in ratios {
            let conns_label = if conns == 1 { "conn" } else { "conns" };
            println!(
                "{:<38} {:>18.2} {:>18.2} {:>18.2}",
                format!("{}, {conns} {conns_label}", variant.name()),
                p.qps() / base.qps(),
                base.quantile_us(0.99) / p.quantile_us(0.99),
                base.quantile_us(0.50) / p.quantile_us(0.50),
            );
        }
    }
    println!();
    println!(
        "allocs/msg counts client and server together, per round trip; total run time {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
