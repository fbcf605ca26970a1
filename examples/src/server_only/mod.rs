//! Server-only benchmarks, the kitex-benchmark method: the server under test runs in a
//! process of its own, pinned to its own CPU(s); the load generator runs in the bench
//! process, pinned to the other(s); every server is driven by the same load generator,
//! and the server's own CPU time per call is reported beside QPS and latency.
//!
//! - [`ServerProcess`] starts a server child (our `Server` with the generated
//!   `EchoServiceServer` on netpoll-rs, or volo-thrift's through `volo_peer::serve`) by
//!   running the bench program again with [`SERVE`]; programs that use this module call
//!   [`serve_if_asked`] first thing in `main`.
//! - [`run`] drives each server from each [`LoadGen`] at each concurrency for a number
//!   of rounds, the servers in turns (A B, then B A...), and pools the rounds into one
//!   [`Case`] each; [`summary`] gives their lines and the ratios ours/volo.
//! - [`idle()`] opens thousands of idle connections to each server and reports what they
//!   cost it in memory and in CPU while nothing is sent.
//!
//! What is measured, per case, over the window after the warm-up:
//! - QPS and p50/p99/p999 latency of the calls, from the load generator ([`Report`]);
//! - the server process's CPU time (user + system, `getrusage(RUSAGE_SELF)` read by the
//!   child when asked at the window's start and end) divided by the calls answered in
//!   the window: `server_cpu_us_per_call`; and divided by the window's wall time:
//!   `server_util`, as a fraction of one core (its threads and pollers included, and
//!   the time a busy-polling reactor spins between calls);
//! - the same for the load generator's process, `client_util`. With a core each, the
//!   side near 1.0 is the one that limits the QPS: when `client_util` is ~1.0 and
//!   `server_util` is below it, the server had time to spare, and its CPU per call, not
//!   its QPS, says how efficient it is.

mod idle;
mod latency;
mod partial;
mod process;
mod raw;
mod sys;

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use volo_core::client::ClientConfig;
use volo_core::codec::{Framing, Protocol};
use volo_core::context::Address;

pub use idle::{IdleSettings, idle};
pub use latency::{CALLERS, LatencySettings, SIZES, latency, server_name};
pub use partial::{PartialSettings, RateSpec, partial};
pub use process::{SERVE, ServerKind, ServerProcess, serve_if_asked};
pub use sys::{
    CpuList, NoFile, ProcessUsage, SavedCpus, load_average, on_cpus, parse_cpus, pin, raise_nofile,
};

use clap::ValueEnum;

use crate::cli::Usage;
use crate::echo_service::{EchoCall, EchoStack, bare_client, default_client};
use crate::load::{Plan, Report, closed_loop};
use crate::open_loop::open_loop;
use crate::options::{DriverArg, SpinArg};
use volo_core::client::{ConnectionPool, WireFormat};

/// Which client stack our load generator calls through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientStack {
    /// What `EchoServiceClient::builder()` builds ([`default_client`]).
    Default,
    /// The transport and the balancer alone ([`bare_client`]): the least client work
    /// per call.
    Bare,
}

/// The load generator: whose client, in a closed loop (each caller waits for its
/// answer before the next call), every answer checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadGen {
    /// Our `EchoServiceClient` on netpoll-rs, speaking what Volo's client speaks
    /// (TTHeader over Framed, Binary): a pool with a connection per caller or, with
    /// `mux`, every caller over two connections (`ConnectionPool::mux`). Its
    /// reactor keeps the fixed 50 µs spin (`--spin fixed`), not the adaptive default:
    /// the load generator has a core of its own, and the figures from before the
    /// adaptive spin were taken with it.
    Ours {
        /// The client's stack.
        stack: ClientStack,
        /// Mux calls over two connections, replies matched by sequence id.
        mux: bool,
    },
    /// Volo's client (`volo_peer::VoloClient`), with Volo's defaults: a pool with a
    /// connection per caller.
    Volo,
    /// No client: a request encoded once, written on a connection per caller, each
    /// reply read whole and checked (see `raw.rs`). The least a caller can spend per
    /// call, so that one core offers a server the most.
    Raw,
}

impl LoadGen {
    /// `ours`, `ours-mux`, `volo` or `raw`.
    pub fn name(self) -> &'static str {
        match self {
            LoadGen::Ours { mux: false, .. } => "ours",
            LoadGen::Ours { mux: true, .. } => "ours-mux",
            LoadGen::Volo => "volo",
            LoadGen::Raw => "raw",
        }
    }
}

/// The servers to compare: ours with each spin of the comma-separated list (`adaptive`,
/// `fixed`, `off`) on epoll, then Volo's.
pub fn servers(spin: &str) -> Result<Vec<ServerKind>, Usage> {
    let spins = pieces(spin, |s| {
        format!("--server-spin {s:?}: adaptive, fixed or off (or a list)")
    })?;
    Ok(servers_of(
        &spins,
        &[DriverArg(netpoll_rs::Driver::Epoll)],
        false,
    ))
}

/// The servers to compare: ours with each driver of `drivers` and each spin of
/// `spins` (once each), then Volo's, and Volo's mux server when `mux`.
pub fn servers_of(spins: &[SpinArg], drivers: &[DriverArg], mux: bool) -> Vec<ServerKind> {
    let mut servers = Vec::new();
    for &driver in drivers {
        for &spin in spins {
            let kind = ServerKind::Ours { spin, driver };
            if !servers.contains(&kind) {
                servers.push(kind);
            }
        }
    }
    servers.push(ServerKind::Volo);
    if mux {
        servers.push(ServerKind::VoloMux);
    }
    servers
}

/// A load generator's name on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoadGenName {
    /// Our client, a connection per caller.
    Ours,
    /// Volo's client.
    Volo,
    /// Our client, mux over two connections.
    OursMux,
    /// No client: pre-encoded requests on plain connections.
    Raw,
}

/// The load generators named in `list` (`ours`, `volo`, `ours-mux`, comma-separated),
/// ours on `stack`; with `mux`, `ours-mux` is added if not named.
pub fn loadgens(list: &str, stack: ClientStack, mux: bool) -> Result<Vec<LoadGen>, Usage> {
    let names = pieces(list, |n| {
        format!("load generator {n:?}: ours, volo, ours-mux or raw")
    })?;
    Ok(loadgens_of(&names, stack, mux))
}

/// The load generators of `names` (once each), ours on `stack`; with `mux`,
/// `ours-mux` is added if not named.
pub fn loadgens_of(names: &[LoadGenName], stack: ClientStack, mux: bool) -> Vec<LoadGen> {
    let mut out = Vec::new();
    for &name in names.iter().chain(mux.then_some(&LoadGenName::OursMux)) {
        let loadgen = match name {
            LoadGenName::Ours => LoadGen::Ours { stack, mux: false },
            LoadGenName::OursMux => LoadGen::Ours { stack, mux: true },
            LoadGenName::Volo => LoadGen::Volo,
            LoadGenName::Raw => LoadGen::Raw,
        };
        if !out.contains(&loadgen) {
            out.push(loadgen);
        }
    }
    out
}

/// The values of a comma-separated `list` (blanks and empty pieces skipped), at least
/// one; `bad` says what is wrong with a piece that is none of them.
fn pieces<T: ValueEnum>(list: &str, bad: impl Fn(&str) -> String) -> Result<Vec<T>, Usage> {
    let mut out = Vec::new();
    for piece in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        out.push(T::from_str(piece, false).map_err(|_| Usage(bad(piece)))?);
    }
    if out.is_empty() {
        return Err(Usage(bad(list)));
    }
    Ok(out)
}

/// What [`run`] runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The program to run as server child (it calls [`serve_if_asked`]); usually
    /// `std::env::current_exe()`.
    pub exe: PathBuf,
    /// The servers, in the order of even rounds (odd rounds reverse it).
    pub servers: Vec<ServerKind>,
    /// The load generators.
    pub loadgens: Vec<LoadGen>,
    /// Callers, one case each.
    pub concurrency: Vec<usize>,
    /// Message bytes of each `echo`.
    pub size: usize,
    /// Unmeasured time before each window (connections opened, caches warm).
    pub warmup: Duration,
    /// The measured window of each run.
    pub window: Duration,
    /// Runs of each case per server, pooled.
    pub rounds: usize,
    /// The server child's CPUs (its threads: one tokio worker each).
    pub server_cpus: Vec<usize>,
    /// The load generator's CPUs (its threads: one tokio worker each).
    pub client_cpus: Vec<usize>,
    /// Draw a progress bar for each run.
    pub progress: bool,
}

/// One server, one load generator, one concurrency: its runs pooled.
#[derive(Debug, Clone)]
pub struct Case {
    /// The server.
    pub server: ServerKind,
    /// The load generator.
    pub loadgen: LoadGen,
    /// Callers.
    pub concurrency: usize,
    /// Message bytes.
    pub size: usize,
    /// The calls of all rounds: counts, windows and latencies added up.
    pub report: Report,
    /// Server CPU time over the windows, µs.
    pub server_cpu_us: u64,
    /// Load generator CPU time over the windows, µs.
    pub client_cpu_us: u64,
    /// Wall time of the windows, as the CPU times were read.
    pub wall: Duration,
    /// The server's peak resident memory, KiB (the most of any round).
    pub server_hwm_kb: u64,
    /// Each round's QPS.
    pub qps_rounds: Vec<f64>,
    /// Each round's server CPU µs per call.
    pub cpu_rounds: Vec<f64>,
    /// The server's socket reads and writes over the windows (0: not counted, a
    /// server other than ours).
    pub server_reads: u64,
    /// See `server_reads`.
    pub server_writes: u64,
}

impl Case {
    /// Server CPU µs per call answered (0 with none).
    pub fn server_cpu_us_per_call(&self) -> f64 {
        per_call(self.server_cpu_us, &self.report)
    }

    /// Server CPU time over wall time: 1.0 is one core busy all the time.
    pub fn server_util(&self) -> f64 {
        cores(self.server_cpu_us, self.wall)
    }

    /// Load generator CPU time over wall time.
    pub fn client_util(&self) -> f64 {
        cores(self.client_cpu_us, self.wall)
    }

    /// `server_only server=.. spin=.. loadgen=.. conc=.. size=.. qps=.. p50_us=..
    /// p99_us=.. p999_us=.. errors=.. server_cpu_us_per_call=.. server_util=..
    /// client_util=.. server_hwm_kb=.. rounds=.. qps_rounds=a/b/.. calls_per_recv=..
    /// calls_per_send=..` (the last two `n/a` for a server whose reads are not
    /// counted: not ours).
    pub fn line(&self) -> String {
        let rounds: Vec<String> = self.qps_rounds.iter().map(|q| format!("{q:.0}")).collect();
        let per = |n: u64| {
            if n == 0 {
                "n/a".to_string()
            } else {
                format!("{:.2}", self.report.calls as f64 / n as f64)
            }
        };
        format!(
            "server_only {} loadgen={} conc={} size={} {} server_cpu_us_per_call={:.2} \
             server_util={:.3} client_util={:.3} server_hwm_kb={} rounds={} qps_rounds={} \
             calls_per_recv={} calls_per_send={}",
            self.server.fields(),
            self.loadgen.name(),
            self.concurrency,
            self.size,
            self.report.line(),
            self.server_cpu_us_per_call(),
            self.server_util(),
            self.client_util(),
            self.server_hwm_kb,
            self.qps_rounds.len(),
            rounds.join("/"),
            per(self.server_reads),
            per(self.server_writes),
        )
    }

    fn new(server: ServerKind, loadgen: LoadGen, concurrency: usize, size: usize) -> Case {
        Case {
            server,
            loadgen,
            concurrency,
            size,
            report: Report::default(),
            server_cpu_us: 0,
            client_cpu_us: 0,
            wall: Duration::ZERO,
            server_hwm_kb: 0,
            qps_rounds: Vec::new(),
            cpu_rounds: Vec::new(),
            server_reads: 0,
            server_writes: 0,
        }
    }

    fn add(&mut self, run: Measured) {
        self.qps_rounds.push(run.report.qps());
        self.cpu_rounds.push(run.server_cpu_us_per_call());
        self.report.pool(run.report);
        self.server_cpu_us += run.server_cpu_us;
        self.client_cpu_us += run.client_cpu_us;
        self.wall += run.wall;
        self.server_hwm_kb = self.server_hwm_kb.max(run.server_hwm_kb);
        self.server_reads += run.server_reads;
        self.server_writes += run.server_writes;
    }
}

/// One run against one server child.
#[derive(Debug, Default)]
struct Measured {
    report: Report,
    server_cpu_us: u64,
    client_cpu_us: u64,
    wall: Duration,
    server_hwm_kb: u64,
    /// The server's voluntary context switches (waits, each ended by a wake-up) and
    /// involuntary ones (preemptions) over the window.
    server_vcsw: u64,
    server_ivcsw: u64,
    /// The server's socket reads and writes over the window.
    server_reads: u64,
    server_writes: u64,
}

impl Measured {
    fn server_cpu_us_per_call(&self) -> f64 {
        per_call(self.server_cpu_us, &self.report)
    }

    /// `n` over the calls that ended (0 with none).
    fn per_call(&self, n: u64) -> f64 {
        per_call(n, &self.report)
    }

    /// The server's CPU time over the wall time.
    fn server_cores(&self) -> f64 {
        cores(self.server_cpu_us, self.wall)
    }

    /// The load generator's CPU time over the wall time.
    fn client_cores(&self) -> f64 {
        cores(self.client_cpu_us, self.wall)
    }

    /// Adds `other`'s calls and usage, as if both windows were one run.
    fn pool(&mut self, other: Measured) {
        self.report.pool(other.report);
        self.server_cpu_us += other.server_cpu_us;
        self.client_cpu_us += other.client_cpu_us;
        self.wall += other.wall;
        self.server_hwm_kb = self.server_hwm_kb.max(other.server_hwm_kb);
        self.server_vcsw += other.server_vcsw;
        self.server_ivcsw += other.server_ivcsw;
    }
}

/// `n` (CPU µs, context switches...) over the calls of `report` that ended (0 with
/// none).
fn per_call(n: u64, report: &Report) -> f64 {
    let calls = report.ok + report.errors;
    if calls == 0 {
        return 0.0;
    }
    n as f64 / calls as f64
}

/// `cpu_us` of CPU time over `wall` time, in cores (1.0: one core busy throughout).
fn cores(cpu_us: u64, wall: Duration) -> f64 {
    cpu_us as f64 / 1e6 / wall.as_secs_f64().max(1e-9)
}

/// Runs every case of `s`: for each round, concurrency and load generator, each server
/// in a fresh child (in `s.servers` order in even rounds, reversed in odd ones, so that
/// drift on a shared machine falls on both). Prints a `round` line after each run, and
/// returns the cases pooled over the rounds. The calling thread is pinned to
/// `s.client_cpus` while it runs, and put back after.
pub fn run(s: &Settings) -> io::Result<Vec<Case>> {
    on_cpus(&s.client_cpus, || run_pinned(s))
}

fn run_pinned(s: &Settings) -> io::Result<Vec<Case>> {
    let mut cases: Vec<Case> = Vec::new();
    for &concurrency in &s.concurrency {
        for &loadgen in &s.loadgens {
            for &server in &s.servers {
                cases.push(Case::new(server, loadgen, concurrency, s.size));
            }
        }
    }
    let plan = |concurrency| Plan {
        concurrency,
        warmup: s.warmup,
        duration: s.window,
        progress: s.progress,
    };
    for round in 0..s.rounds {
        for &concurrency in &s.concurrency {
            for &loadgen in &s.loadgens {
                let mut order = s.servers.clone();
                if round % 2 == 1 {
                    order.reverse();
                }
                for server in order {
                    let mut child = ServerProcess::spawn(&s.exe, server, &s.server_cpus)?;
                    let run = measure(
                        &mut child,
                        loadgen,
                        plan(concurrency),
                        None,
                        s.size,
                        s.client_cpus.len(),
                    )?;
                    child.stop()?;
                    println!(
                        "round n={round} {} loadgen={} conc={concurrency} {} \
                         server_cpu_us_per_call={:.2}",
                        server.fields(),
                        loadgen.name(),
                        run.report.line(),
                        run.server_cpu_us_per_call(),
                    );
                    if let Some(case) = cases.iter_mut().find(|c| {
                        (c.server, c.loadgen, c.concurrency) == (server, loadgen, concurrency)
                    }) {
                        case.add(run);
                    }
                }
            }
        }
    }
    Ok(cases)
}

/// A closed loop (or with `rate`, an open loop at that many calls a second) from
/// `loadgen` against `server` on a runtime of `threads` workers (on the calling
/// thread's CPUs); the server's and this process's CPU time read when the window opens
/// and when it closes.
fn measure(
    server: &mut ServerProcess,
    loadgen: LoadGen,
    plan: Plan,
    rate: Option<f64>,
    size: usize,
    threads: usize,
) -> io::Result<Measured> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name("loadgen")
        .enable_all()
        .build()?;
    let addr = server.addr();
    let label = format!("{}>{}", loadgen.name(), server.kind().name());
    let task = {
        // Volo's client and our transport start tasks when made.
        let _in = rt.enter();
        match loadgen {
            LoadGen::Raw => {
                let caller = raw::RawCaller::new(addr, size)?;
                spawn_loop(&rt, plan, rate, label, move || {
                    let caller = caller.clone();
                    async move { caller.call().await }
                })
            }
            LoadGen::Volo => {
                let client = volo_peer::VoloClient::new(addr);
                let req = volo_peer::echo::Request {
                    action: "echo".into(),
                    msg: "x".repeat(size).into(),
                };
                spawn_loop(&rt, plan, rate, label, move || {
                    let client = client.clone();
                    let req = req.clone();
                    async move {
                        let want = req.msg.clone();
                        matches!(client.echo_request(req).await, Ok(r) if r.msg == want)
                    }
                })
            }
            LoadGen::Ours { stack, mux } => {
                let mut config = ClientConfig {
                    format: WireFormat {
                        framing: Framing::TTHeader,
                        ttheader_framed: true,
                        protocol: Protocol::Binary,
                        ..Default::default()
                    },
                    pool: ConnectionPool {
                        max_per_instance: plan.concurrency,
                        mux,
                        ..Default::default()
                    },
                    ..ClientConfig::default()
                };
                // The instrument stays what it was when the figures began: a load
                // generator has a core of its own, and its own wake-ups would add
                // to every latency it measures.
                SpinArg::Fixed.apply(&mut config.transport.reactor);
                let addr = Address::Tcp(addr);
                match stack {
                    ClientStack::Bare => {
                        let call = EchoCall::new(bare_client(addr, config)?, size);
                        spawn_ours(&rt, plan, rate, label, call)
                    }
                    ClientStack::Default => {
                        let call = EchoCall::new(default_client(addr, config)?, size);
                        spawn_ours(&rt, plan, rate, label, call)
                    }
                }
            }
        }
    };
    // The loop opens its window after `plan.warmup` and closes it `plan.duration` later;
    // read both processes' usage then.
    std::thread::sleep(plan.warmup);
    let (server_start, client_start, opened) =
        (server.usage()?, ProcessUsage::of_self()?, Instant::now());
    std::thread::sleep(plan.duration);
    let (server_end, client_end, closed) =
        (server.usage()?, ProcessUsage::of_self()?, Instant::now());
    let report = rt.block_on(task).map_err(io::Error::other)?;
    // Closes the load generator's connections before the server goes.
    drop(rt);
    Ok(Measured {
        report,
        server_cpu_us: server_end.cpu_us().saturating_sub(server_start.cpu_us()),
        client_cpu_us: client_end.cpu_us().saturating_sub(client_start.cpu_us()),
        wall: closed - opened,
        server_hwm_kb: server_end.hwm_kb,
        server_vcsw: server_end.vcsw.saturating_sub(server_start.vcsw),
        server_ivcsw: server_end.ivcsw.saturating_sub(server_start.ivcsw),
        server_reads: server_end.reads.saturating_sub(server_start.reads),
        server_writes: server_end.writes.saturating_sub(server_start.writes),
    })
}

/// [`closed_loop`] over `call` as a task of `rt`, or with `rate`, [`open_loop`].
fn spawn_loop<F, Fut>(
    rt: &tokio::runtime::Runtime,
    plan: Plan,
    rate: Option<f64>,
    label: String,
    call: F,
) -> tokio::task::JoinHandle<Report>
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    rt.spawn(async move {
        match rate {
            Some(rate) => open_loop(plan, rate, &label, call).await,
            None => closed_loop(plan, &label, call).await,
        }
    })
}

/// [`spawn_loop`] over our client, whatever its stack.
fn spawn_ours<T>(
    rt: &tokio::runtime::Runtime,
    plan: Plan,
    rate: Option<f64>,
    label: String,
    call: EchoCall<T>,
) -> tokio::task::JoinHandle<Report>
where
    T: EchoStack,
{
    spawn_loop(rt, plan, rate, label, move || {
        let call = call.clone();
        async move { call.call().await }
    })
}

/// The lines that sum `cases` up: one `server_only` line per case; a `ratio` line per
/// load generator, concurrency and setting of our server with ours/volo of QPS, server
/// CPU per call, p50 and p99 (over 1 is more: better for QPS, worse for the others),
/// pooled, then QPS and CPU per call round by round (`a/b/..`: the spread);
/// and, when our server ran with the spin off and another way (`adaptive`, `fixed`), a
/// `spin` line per other way, load generator and concurrency with what that spin buys
/// in latency and costs in CPU (`_on`: with it; `_off`: without).
pub fn summary(cases: &[Case]) -> Vec<String> {
    let mut lines: Vec<String> = cases.iter().map(Case::line).collect();
    let find = |server, loadgen, concurrency| {
        cases
            .iter()
            .find(|c| (c.server, c.loadgen, c.concurrency) == (server, loadgen, concurrency))
    };
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let q = |c: &Case, q| c.report.quantile_us(q) as f64;
    // Round by round: the two runs of a round were close in time.
    let by_round = |ours: &[f64], theirs: &[f64]| {
        let r: Vec<String> = ours
            .iter()
            .zip(theirs)
            .map(|(a, b)| format!("{:.3}", ratio(*a, *b)))
            .collect();
        r.join("/")
    };
    for c in cases {
        let ServerKind::Ours { .. } = c.server else {
            continue;
        };
        for other in [ServerKind::Volo, ServerKind::VoloMux] {
            let Some(theirs) = find(other, c.loadgen, c.concurrency) else {
                continue;
            };
            lines.push(format!(
                "ratio of=ours/{} {} loadgen={} conc={} size={} qps={:.3} cpu_per_call={:.3} \
                 p50={:.3} p99={:.3} qps_by_round={} cpu_per_call_by_round={}",
                other.name(),
                c.server.fields().replace("server=ours ", ""),
                c.loadgen.name(),
                c.concurrency,
                c.size,
                ratio(c.report.qps(), theirs.report.qps()),
                ratio(c.server_cpu_us_per_call(), theirs.server_cpu_us_per_call()),
                ratio(q(c, 0.5), q(theirs, 0.5)),
                ratio(q(c, 0.99), q(theirs, 0.99)),
                by_round(&c.qps_rounds, &theirs.qps_rounds),
                by_round(&c.cpu_rounds, &theirs.cpu_rounds),
            ));
        }
    }
    for c in cases {
        let ServerKind::Ours { spin, driver } = c.server else {
            continue;
        };
        if spin == SpinArg::Off {
            continue;
        }
        let off = ServerKind::Ours {
            spin: SpinArg::Off,
            driver,
        };
        let Some(off) = find(off, c.loadgen, c.concurrency) else {
            continue;
        };
        lines.push(format!(
            "spin mode={} loadgen={} conc={} size={} p50_us_on={} p50_us_off={} p99_us_on={} \
             p99_us_off={} qps_on={:.0} qps_off={:.0} server_cpu_us_per_call_on={:.2} \
             server_cpu_us_per_call_off={:.2} server_util_on={:.3} server_util_off={:.3}",
            spin.name(),
            c.loadgen.name(),
            c.concurrency,
            c.size,
            c.report.quantile_us(0.5),
            off.report.quantile_us(0.5),
            c.report.quantile_us(0.99),
            off.report.quantile_us(0.99),
            c.report.qps(),
            off.report.qps(),
            c.server_cpu_us_per_call(),
            off.server_cpu_us_per_call(),
            c.server_util(),
            off.server_util(),
        ));
    }
    lines
}

/// `server-only: ...`: the first line of a run, with what it runs on (CPUs, the load
/// average) so that figures can be read against it.
pub fn header(s: &Settings) -> String {
    let servers: Vec<String> = s.servers.iter().map(|k| k.fields()).collect();
    let loadgens: Vec<&str> = s.loadgens.iter().map(|l| l.name()).collect();
    format!(
        "server-only: echo of {}-byte messages, callers {:?}, {:.1} s windows after {:.1} s \
         warm-up, {} round(s); servers [{}] on CPUs {:?}, load generators [{}] on CPUs {:?}; \
         {} CPUs, load {}",
        s.size,
        s.concurrency,
        s.window.as_secs_f64(),
        s.warmup.as_secs_f64(),
        s.rounds,
        servers.join(", "),
        s.server_cpus,
        loadgens.join(", "),
        s.client_cpus,
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_average(),
    )
}
