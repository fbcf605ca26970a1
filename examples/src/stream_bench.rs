//! `rpc-bench --stream server,client,bidi`: streams against ping-pong calls, with the
//! server in a process of its own pinned to CPU 0 and this load generator pinned to
//! CPU 1 (the kitex-benchmark method: the server's CPU per message is the figure).
//!
//! The servers are `stream-server` (built next to this program, `--stream-server
//! ours`, the default) and any StreamService servers run from a command line
//! (`--stream-server CMD`, `{addr}` replaced by the address to listen on, as for
//! `--kitex-server`): a Kitex StreamX server, say. Given several times, each server
//! is measured in turn with the same load, in one run. Each
//! kind runs with `--concurrency` callers (one stream each at a time), `--size`-byte
//! messages, a warm-up and a `--duration` window, in this order:
//!
//! - `pingpong`: `echo` calls over TTHeader, one connection per caller: a message is
//!   a call, its latency the call's;
//! - `server`: server streams of 1000 answers each, opened again and again: a message
//!   is an answer, its latency the time since the one before (or since the stream
//!   opened);
//! - `client`: client streams of 1000 requests each: a message is a request, counted
//!   once the server's count confirms it, its latency what its `send` took (waits for
//!   credit included);
//! - `bidi`: one bidirectional stream per caller with up to 32 messages in flight: a
//!   message is an echo, its latency from its send to its echo;
//! - `bidi-pingpong`: one bidirectional stream per caller, each message sent once
//!   the echo of the one before came back (the pattern Kitex's clients make): a
//!   message is an echo, its latency from its send to its echo.
//!
//! All streams share one connection (as Kitex's client shares one by default). Each
//! kind prints `stream=<kind> msgs_per_s=<n> p50_us=<n> p99_us=<n> errors=<n>
//! server_cpu_us_per_msg=<n> server_cores=<n> server=<ours|cmdN>`: the server's CPU
//! time (user and system, from `/proc`) over the window, per message and per second.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use thrift_wire::Utf8Bytes;
use tokio::sync::Semaphore;
use volo_core::client::{ClientConfig, ClientContext};
use volo_core::context::Address;

use crate::server_only::{ProcessUsage, ServerKind, ServerProcess, pin};
use crate::stream::{Request, StreamServiceClient, StreamServiceStreamClient};

/// Messages per server or client stream before it is opened again.
pub const BATCH: i32 = 1000;
/// Messages in flight on each bidirectional stream.
pub const IN_FLIGHT: usize = 32;

/// A kind of stream to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StreamKind {
    /// Server streams.
    Server,
    /// Client streams.
    Client,
    /// Bidirectional streams, 32 messages in flight on each.
    Bidi,
    /// Bidirectional streams, one message in flight on each.
    BidiPingpong,
}

/// What [`run`] measures.
#[derive(Debug, Clone)]
pub struct StreamBenchSettings {
    /// The kinds, in order (the ping-pong run comes first).
    pub kinds: Vec<StreamKind>,
    /// The servers, each measured in turn with the same load: `ours` (`stream-server`
    /// next to this program) or a command line. Empty: `ours`.
    pub servers: Vec<String>,
    /// Callers.
    pub concurrency: usize,
    /// Bytes of each message's `msg`.
    pub size: usize,
    /// Unmeasured time before each window.
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
}

/// What one kind measured.
#[derive(Debug, Default)]
struct Tally {
    msgs: u64,
    errors: u64,
    latencies_ns: Vec<u64>,
}

impl Tally {
    fn record(&mut self, at: Instant, window: &Window, latency: Duration) {
        if window.holds(at) {
            self.msgs += 1;
            self.latencies_ns.push(latency.as_nanos() as u64);
        }
    }

    fn error(&mut self, at: Instant, window: &Window) {
        if window.holds(at) {
            self.errors += 1;
        }
    }
}

/// The measured window.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    end: Instant,
}

impl Window {
    fn holds(&self, at: Instant) -> bool {
        at >= self.start && at < self.end
    }
}

/// Runs the benchmark; returns its report lines.
pub fn run(s: &StreamBenchSettings) -> io::Result<Vec<String>> {
    pin(&[1])?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let mut lines = Vec::new();
    let ours = ["ours".to_owned()];
    let servers = if s.servers.is_empty() {
        &ours[..]
    } else {
        &s.servers[..]
    };
    for (i, server) in servers.iter().enumerate() {
        let label = match server.as_str() {
            "ours" => "ours".to_owned(),
            _ => format!("cmd{}", i + 1),
        };
        lines.extend(run_server(s, &rt, server, &label)?);
    }
    Ok(lines)
}

/// Measures one server (`ours` or a command line), reported as `label`.
fn run_server(
    s: &StreamBenchSettings,
    rt: &tokio::runtime::Runtime,
    server: &str,
    label: &str,
) -> io::Result<Vec<String>> {
    let (command, kind) = match server {
        "ours" => {
            let exe = std::env::current_exe()?;
            let dir = exe
                .parent()
                .ok_or_else(|| io::Error::other("this program has no directory"))?;
            let command = format!("{} --addr {{addr}}", dir.join("stream-server").display());
            let kind = ServerKind::OURS;
            (command, kind)
        }
        command => (command.to_owned(), ServerKind::Kitex),
    };
    let mut server = ServerProcess::spawn_command(&command, kind, &[0])?;
    let addr = Address::Tcp(server.addr());
    let mut lines = vec![format!(
        "stream_bench server={label} command={:?} conc={} size={} warmup_s={} duration_s={} server_cpus=0 client_cpus=1",
        command,
        s.concurrency,
        s.size,
        s.warmup.as_secs_f64(),
        s.duration.as_secs_f64()
    )];
    let mut kinds = vec![None];
    kinds.extend(s.kinds.iter().copied().map(Some));
    for kind in kinds {
        let name = kind.map_or("pingpong", kind_name);
        let (tally, used) = rt.block_on(measure(kind, &addr, s, &mut server))?;
        let mut latencies = tally.latencies_ns;
        latencies.sort_unstable();
        let q = |q: f64| {
            if latencies.is_empty() {
                return 0;
            }
            let i = ((latencies.len() as f64 * q) as usize).min(latencies.len() - 1);
            latencies[i] / 1000
        };
        let secs = s.duration.as_secs_f64();
        let cpu_us = used as f64;
        let line = format!(
            "stream={name} msgs_per_s={:.0} p50_us={} p99_us={} errors={} server_cpu_us_per_msg={:.2} server_cores={:.2} server={label}",
            tally.msgs as f64 / secs,
            q(0.50),
            q(0.99),
            tally.errors,
            cpu_us / tally.msgs.max(1) as f64,
            cpu_us / 1e6 / secs
        );
        eprintln!("{line}");
        lines.push(line);
    }
    server.stop()?;
    Ok(lines)
}

fn kind_name(k: StreamKind) -> &'static str {
    match k {
        StreamKind::Server => "server",
        StreamKind::Client => "client",
        StreamKind::Bidi => "bidi",
        StreamKind::BidiPingpong => "bidi-pingpong",
    }
}

fn request(action: &str, msg: &Utf8Bytes, count: i32) -> Request {
    Request {
        action: Utf8Bytes::from(action.to_owned()),
        msg: msg.clone(),
        count,
    }
}

/// Runs one kind (`None`: ping-pong) for the warm-up and the window; returns what
/// the window saw and the server's CPU time over it, in µs.
async fn measure(
    kind: Option<StreamKind>,
    addr: &Address,
    s: &StreamBenchSettings,
    server: &mut ServerProcess,
) -> io::Result<(Tally, u64)> {
    let start = Instant::now() + s.warmup;
    let window = Window {
        start,
        end: start + s.duration,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let msg = Utf8Bytes::from("m".repeat(s.size));
    let streams = Arc::new(StreamServiceStreamClient::connect(
        addr.clone(),
        &ClientConfig::default(),
    )?);
    let calls = StreamServiceClient::builder()
        .address(addr.clone())
        .build()?;
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..s.concurrency {
        let (stop, msg, streams, calls) = (
            Arc::clone(&stop),
            msg.clone(),
            Arc::clone(&streams),
            calls.clone(),
        );
        workers.spawn(async move {
            let mut t = Tally::default();
            while !stop.load(Ordering::Relaxed) {
                match kind {
                    None => {
                        let t0 = Instant::now();
                        let ok = calls
                            .echo_with(&mut ClientContext::new(), request("p", &msg, 0))
                            .await
                            .is_ok();
                        let now = Instant::now();
                        match ok {
                            true => t.record(now, &window, now - t0),
                            false => t.error(now, &window),
                        }
                    }
                    Some(StreamKind::Server) => {
                        server_stream(&streams, &msg, &window, &mut t).await
                    }
                    Some(StreamKind::Client) => {
                        client_stream(&streams, &msg, &window, &mut t).await
                    }
                    Some(StreamKind::Bidi) => {
                        bidi_stream(&streams, &msg, &window, &stop, &mut t).await
                    }
                    Some(StreamKind::BidiPingpong) => {
                        bidi_pingpong(&streams, &msg, &window, &stop, &mut t).await
                    }
                }
            }
            t
        });
    }
    tokio::time::sleep_until(window.start.into()).await;
    let before = server.usage()?;
    tokio::time::sleep_until(window.end.into()).await;
    let after = server.usage()?;
    stop.store(true, Ordering::Relaxed);
    let mut total = Tally::default();
    let drained = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(t) = workers.join_next().await {
            let t = t.map_err(io::Error::other)?;
            total.msgs += t.msgs;
            total.errors += t.errors;
            total.latencies_ns.extend(t.latencies_ns);
        }
        Ok::<_, io::Error>(())
    })
    .await;
    drained.map_err(|_| io::Error::other("the callers did not stop within 30 s"))??;
    Ok((total, cpu_us(&after) - cpu_us(&before)))
}

fn cpu_us(u: &ProcessUsage) -> u64 {
    u.utime_us + u.stime_us
}

async fn server_stream(
    c: &StreamServiceStreamClient,
    msg: &Utf8Bytes,
    window: &Window,
    t: &mut Tally,
) {
    let mut prev = Instant::now();
    let mut rx = match c.server_echo(&request("s", msg, BATCH)).await {
        Ok(rx) => rx,
        Err(_) => return t.error(Instant::now(), window),
    };
    loop {
        match rx.recv().await {
            Ok(Some(_)) => {
                let now = Instant::now();
                t.record(now, window, now - prev);
                prev = now;
            }
            Ok(None) => return,
            Err(_) => return t.error(Instant::now(), window),
        }
    }
}

async fn client_stream(
    c: &StreamServiceStreamClient,
    msg: &Utf8Bytes,
    window: &Window,
    t: &mut Tally,
) {
    let Ok(mut s) = c.client_count().await else {
        return t.error(Instant::now(), window);
    };
    let mut sent = Vec::with_capacity(BATCH as usize);
    for _ in 0..BATCH {
        let t0 = Instant::now();
        if s.send(&request("c", msg, 0)).await.is_err() {
            return t.error(Instant::now(), window);
        }
        let now = Instant::now();
        sent.push((now, now - t0));
    }
    let counted = match s.close_send().await {
        Ok(()) => s.recv().await,
        Err(e) => Err(e),
    };
    match counted {
        Ok(Some(r)) if r.msg.as_str() == BATCH.to_string() => {
            for (at, took) in sent {
                t.record(at, window, took);
            }
        }
        _ => t.error(Instant::now(), window),
    }
}

async fn bidi_stream(
    c: &StreamServiceStreamClient,
    msg: &Utf8Bytes,
    window: &Window,
    stop: &Arc<AtomicBool>,
    t: &mut Tally,
) {
    let Ok(s) = c.bidi_echo().await else {
        return t.error(Instant::now(), window);
    };
    let (mut tx, mut rx) = s.split();
    let credits = Arc::new(Semaphore::new(IN_FLIGHT));
    let epoch = Instant::now();
    let sending = {
        let (credits, stop, msg) = (Arc::clone(&credits), Arc::clone(stop), msg.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let Ok(permit) = credits.acquire().await else {
                    break;
                };
                permit.forget();
                let sent_ns = epoch.elapsed().as_nanos().to_string();
                if tx.send(&request(&sent_ns, &msg, 0)).await.is_err() {
                    return false;
                }
            }
            tx.close_send().await.is_ok()
        })
    };
    loop {
        match rx.recv().await {
            Ok(Some(r)) => {
                credits.add_permits(1);
                let now = Instant::now();
                match r.action.parse::<u64>() {
                    Ok(ns) => t.record(now, window, now - (epoch + Duration::from_nanos(ns))),
                    Err(_) => t.error(now, window),
                }
            }
            Ok(None) => break,
            Err(_) => {
                t.error(Instant::now(), window);
                break;
            }
        }
    }
    credits.close();
    if !sending.await.unwrap_or(false) {
        t.error(Instant::now(), window);
    }
}

/// One bidirectional stream, each message sent once the echo of the one before came
/// back, until `stop`.
async fn bidi_pingpong(
    c: &StreamServiceStreamClient,
    msg: &Utf8Bytes,
    window: &Window,
    stop: &Arc<AtomicBool>,
    t: &mut Tally,
) {
    let Ok(mut s) = c.bidi_echo().await else {
        return t.error(Instant::now(), window);
    };
    let m = request("b", msg, 0);
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        if s.send(&m).await.is_err() {
            return t.error(Instant::now(), window);
        }
        match s.recv().await {
            Ok(Some(_)) => {
                let now = Instant::now();
                t.record(now, window, now - t0);
            }
            _ => return t.error(Instant::now(), window),
        }
    }
    let ended = match s.close_send().await {
        Ok(()) => s.recv().await,
        Err(e) => Err(e),
    };
    if !matches!(ended, Ok(None)) {
        t.error(Instant::now(), window);
    }
}
