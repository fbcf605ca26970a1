//! RPC echo, this framework against CloudWeGo Volo (volo-thrift): same IDL
//! (idl/echo.thrift), same payload, same machine, same run, measured two ways.
//!
//! Run it with `cargo bench -p benches --bench rpc_echo` (about 4 minutes with the
//! defaults). Settings: `RPC_BENCH_SECS` (measured window per case and round, default
//! 3), `RPC_BENCH_ROUNDS` (default 3; variants alternate in order from round to round
//! and rounds are pooled), `RPC_BENCH_SIZE` (message bytes, default 1024). Arguments
//! after `--`: `server-only` or `whole-stack` runs that part alone; other words select
//! whole-stack variants by part of their name (`volo`, `netpoll`, `tokio`, `mux`), and
//! then only the whole-stack part runs.
//!
//! Both parts: `echo(Request { action: "echo", msg: <size bytes> })` in a closed loop,
//! 1 caller and then 100 callers, each waiting for its answer before the next call;
//! every answer is checked. QPS is successful calls per second over the window;
//! p50/p99/p999 are the latencies of every call of the window, in microseconds.
//!
//! # Server only (the kitex-benchmark method)
//!
//! Compares the servers alone, with the code of `rpc-bench --server-only`
//! ([`examples::server_only`], whose docs say what each figure is). Each server runs in
//! a process of its own (this bench binary run again with `--serve`), pinned with
//! `sched_setaffinity` to CPU 0 (`RPC_BENCH_SERVER_CPUS`), one tokio worker per CPU:
//! ours (`Server` + generated `EchoServiceServer` on netpoll-rs, default config; with
//! `RPC_BENCH_SERVER_SPIN=off` its reactor's busy poll is off, `on,off` runs both) and
//! Volo's (`volo_peer::serve`). The load generators run here, pinned to CPU 1
//! (`RPC_BENCH_CLIENT_CPUS`), and drive every server alike: our client on its bare
//! stack (`ours`), our client over two mux connections (`ours-mux`), and Volo's
//! client (`volo`), all speaking TTHeader over Framed, Binary. Servers alternate (A B,
//! then B A) within each case. Lines: `server_only server=.. spin=.. loadgen=.. conc=..
//! size=.. qps=.. p50_us=.. p99_us=.. p999_us=.. errors=.. server_cpu_us_per_call=..
//! server_util=.. client_util=.. ...`, where `server_cpu_us_per_call` is the server
//! process's user + system CPU time (`getrusage`) over the calls answered in the
//! window and `server_util` that time over the window (1.0: one core busy); then
//! `ratio of=ours/volo ... qps=.. cpu_per_call=.. p50=.. p99=.. qps_by_round=..
//! cpu_per_call_by_round=..` per load generator and callers (pooled, then round by
//! round: the spread). With `RPC_BENCH_IDLE_CONNS=N`, also `idle server=.. conns=N
//! rss_per_conn_bytes=.. idle_cpu_ms_per_s=..`: the server's memory growth per idle
//! connection and its CPU use while nothing is sent (a 5 s window).
//!
//! # Whole stack (our client+server vs Volo's client+server)
//!
//! Server and client in this process, the server on a tokio runtime with one worker
//! thread, the client on another (client and server of an RPC do not share threads);
//! each variant pairs a client with a server of its own framework, so the figures are
//! those of both sides together, sharing the machine's cores. Variants:
//!
//! - `volo`: volo-thrift's generated server and client with Volo's defaults
//!   (TTHeader + Framed + Binary; one call at a time per pooled connection).
//! - `ours netpoll`: our generated server and client on netpoll-rs, speaking the same
//!   TTHeader + Framed + Binary as Volo's client (so the bytes on the wire match).
//! - `ours tokio`: the same over plain tokio sockets: the baseline that shows what the
//!   reactor adds.
//! - `ours mux`: our client sending all callers' calls over two netpoll-rs mux
//!   connections (`ConnectionPool::mux`; replies matched by TTHeader sequence id)
//!   against the same server. Volo's client here stays on its default pooled connections.
//!
//! Reported: QPS, p50/p99/p999, errors, and the ratios against Volo measured in the same
//! run, under a heading that says they are whole-stack figures.
//!
//! Compare only within one run, and treat differences smaller than the rounds' spread
//! as noise: the first line gives the load average the run started under.

use std::time::Duration;

use examples::echo::EchoServiceClient;
use examples::echo_service::{EchoCall, RunningEcho};
use examples::load::{Plan, Report, closed_loop};
use examples::server_only::{self, ClientStack, IdleSettings};
use volo_core::client::ClientConfig;
use volo_core::client::{ConnectionPool, WireFormat};
use volo_core::codec::Framing;
use volo_core::config::TransportConfig;
use volo_core::context::Address;
use volo_core::transport::TransportKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Volo,
    OursNetpoll,
    OursTokio,
    OursMux,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::Volo,
        Variant::OursNetpoll,
        Variant::OursTokio,
        Variant::OursMux,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::Volo => "volo",
            Variant::OursNetpoll => "ours netpoll",
            Variant::OursTokio => "ours tokio",
            Variant::OursMux => "ours mux",
        }
    }
}

const CALLERS: [usize; 2] = [1, 100];

fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
        .unwrap_or(default)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// A setting's value, or the bench stops with what was wrong with it.
fn or_fail<T>(r: Result<T, examples::cli::Usage>) -> T {
    r.unwrap_or_else(|e| fail(&e.0))
}

fn fail(msg: &str) -> ! {
    eprintln!("rpc_echo: {msg}");
    std::process::exit(1)
}

/// One case: a fresh server and client, a closed-loop run, both stopped.
fn run_case(variant: Variant, callers: usize, size: usize, window: Duration) -> Report {
    let server_rt = runtime();
    let client_rt = runtime();
    let plan = Plan {
        concurrency: callers,
        warmup: Duration::from_secs(1),
        duration: window,
        progress: false,
    };
    let localhost = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    match variant {
        Variant::Volo => {
            let server = server_rt
                .block_on(volo_peer::serve(localhost))
                .unwrap_or_else(|e| fail(&format!("volo server: {e}")));
            let addr = server.local_addr();
            let report = client_rt.block_on(async {
                let client = volo_peer::VoloClient::new(addr);
                let req = volo_peer::echo::Request {
                    action: "echo".into(),
                    msg: "x".repeat(size).into(),
                };
                closed_loop(plan, "volo", move || {
                    let client = client.clone();
                    let req = req.clone();
                    async move {
                        let want = req.msg.clone();
                        matches!(client.echo_request(req).await, Ok(r) if r.msg == want)
                    }
                })
                .await
            });
            drop(client_rt);
            if let Err(e) = server_rt.block_on(server.stop()) {
                fail(&format!("volo server stop: {e}"));
            }
            report
        }
        Variant::OursNetpoll | Variant::OursTokio | Variant::OursMux => {
            let io = if variant == Variant::OursTokio {
                TransportKind::Tokio
            } else {
                TransportKind::Netpoll
            };
            let server = RunningEcho::start(&server_rt, io, &Address::Tcp(localhost))
                .unwrap_or_else(|e| fail(&format!("server: {e}")));
            let addr = server.addr.clone();
            let report = client_rt.block_on(async {
                let config = ClientConfig {
                    format: WireFormat {
                        framing: Framing::TTHeader,
                        ttheader_framed: true,
                        ..Default::default()
                    },
                    transport: TransportConfig {
                        kind: io,
                        ..Default::default()
                    },
                    pool: ConnectionPool {
                        max_per_instance: callers,
                        mux: variant == Variant::OursMux,
                        ..Default::default()
                    },
                    ..ClientConfig::default()
                };
                let client = EchoServiceClient::builder()
                    .address(addr)
                    .config(config)
                    .build()
                    .unwrap_or_else(|e| fail(&format!("client: {e}")));
                let call = EchoCall::new(client, size);
                closed_loop(plan, variant.name(), move || {
                    let call = call.clone();
                    async move { call.call().await }
                })
                .await
            });
            drop(client_rt);
            if let Err(e) = server.stop(&server_rt) {
                fail(&format!("server stop: {e}"));
            }
            report
        }
    }
}

fn main() {
    server_only::serve_if_asked();
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let section = |name: &str| words.iter().any(|w| w == name);
    let filters: Vec<String> = words
        .iter()
        .filter(|w| *w != "server-only" && *w != "whole-stack")
        .cloned()
        .collect();
    let (server_only, whole_stack) = match (section("server-only"), section("whole-stack")) {
        (false, false) => (filters.is_empty(), true),
        chosen => chosen,
    };
    let window = Duration::from_secs_f64(env_f64("RPC_BENCH_SECS", 3.0));
    let rounds = env_f64("RPC_BENCH_ROUNDS", 3.0) as usize;
    let size = env_f64("RPC_BENCH_SIZE", 1024.0) as usize;
    println!(
        "rpc_echo: echo of {size}-byte messages, {:.1} s windows, {rounds} round(s), {} CPUs, \
         load {}",
        window.as_secs_f64(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        server_only::load_average()
    );
    if server_only {
        run_server_only(window, rounds, size);
    }
    if whole_stack {
        run_whole_stack(&filters, window, rounds, size);
    }
}

/// The servers alone, each in a pinned process, driven by the same load generators.
fn run_server_only(window: Duration, rounds: usize, size: usize) {
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("this bench's path: {e}")));
    let servers = or_fail(server_only::servers(&env("RPC_BENCH_SERVER_SPIN", "on")));
    let server_cpus = or_fail(server_only::parse_cpus(&env("RPC_BENCH_SERVER_CPUS", "0")));
    let client_cpus = or_fail(server_only::parse_cpus(&env("RPC_BENCH_CLIENT_CPUS", "1")));
    let settings = server_only::Settings {
        exe: exe.clone(),
        servers: servers.clone(),
        loadgens: or_fail(server_only::loadgens("ours,volo", ClientStack::Bare, true)),
        concurrency: CALLERS.to_vec(),
        size,
        warmup: Duration::from_secs(1),
        window,
        rounds: rounds.max(1),
        server_cpus: server_cpus.clone(),
        client_cpus: client_cpus.clone(),
        progress: false,
    };
    println!();
    println!("server only (each server in its own pinned process, the same load generators)");
    println!("{}", server_only::header(&settings));
    let cases = server_only::run(&settings).unwrap_or_else(|e| fail(&format!("server-only: {e}")));
    for line in server_only::summary(&cases) {
        println!("{line}");
    }
    let conns = env_f64("RPC_BENCH_IDLE_CONNS", 0.0) as usize;
    if conns > 0 {
        let idle = IdleSettings {
            exe,
            servers,
            conns,
            size,
            window: Duration::from_secs(5),
            settle: Duration::from_secs(1),
            server_cpus,
            client_cpus,
        };
        let lines = server_only::idle(&idle).unwrap_or_else(|e| fail(&format!("idle: {e}")));
        for line in lines {
            println!("{line}");
        }
    }
}

/// Our client and server against Volo's client and server, in this process.
fn run_whole_stack(filters: &[String], window: Duration, rounds: usize, size: usize) {
    let selected: Vec<Variant> = Variant::ALL
        .into_iter()
        .filter(|v| filters.is_empty() || filters.iter().any(|f| v.name().contains(f.as_str())))
        .collect();
    if selected.is_empty() {
        fail(&format!("no variant matches {filters:?}"));
    }
    let mut pooled: Vec<((Variant, usize), Report, Vec<f64>)> = Vec::new();
    for round in 0..rounds {
        for callers in CALLERS {
            let mut order = selected.clone();
            if round % 2 == 1 {
                order.reverse();
            }
            for v in order {
                let r = run_case(v, callers, size, window);
                if r.ok == 0 {
                    fail(&format!(
                        "{} with {callers} callers: no call succeeded",
                        v.name()
                    ));
                }
                let qps = r.qps();
                match pooled.iter_mut().find(|(k, _, _)| *k == (v, callers)) {
                    Some((_, acc, rounds)) => {
                        acc.pool(r);
                        rounds.push(qps);
                    }
                    None => pooled.push(((v, callers), r, vec![qps])),
                }
            }
        }
    }
    pooled.sort_by_key(|((v, c), _, _)| (*c, Variant::ALL.iter().position(|x| x == v)));
    println!();
    println!("whole stack (our client+server vs Volo's client+server, in one process)");
    println!(
        "{:<14} {:>7} {:>10} {:>9} {:>9} {:>9} {:>7}   QPS per round",
        "variant", "callers", "QPS", "p50 µs", "p99 µs", "p999 µs", "errors"
    );
    for ((v, c), r, rounds) in &pooled {
        let per_round: Vec<String> = rounds.iter().map(|q| format!("{q:.0}")).collect();
        println!(
            "{:<14} {:>7} {:>10.0} {:>9} {:>9} {:>9} {:>7}   {}",
            v.name(),
            c,
            r.qps(),
            r.quantile_us(0.5),
            r.quantile_us(0.99),
            r.quantile_us(0.999),
            r.errors,
            per_round.join(" ")
        );
    }
    let find = |v: Variant, c: usize| {
        pooled
            .iter()
            .find(|(k, _, _)| *k == (v, c))
            .map(|(_, r, _)| r)
    };
    println!();
    println!(
        "{:<36} {:>14} {:>14} {:>14}",
        "whole-stack ratios (>1: ours better)", "QPS ours/volo", "p50 volo/ours", "p99 volo/ours"
    );
    for callers in CALLERS {
        for v in [Variant::OursNetpoll, Variant::OursTokio, Variant::OursMux] {
            if let (Some(base), Some(r)) = (find(Variant::Volo, callers), find(v, callers)) {
                let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
                println!(
                    "{:<36} {:>14.2} {:>14.2} {:>14.2}",
                    format!("{}, {callers} caller(s)", v.name()),
                    r.qps() / base.qps(),
                    ratio(base.quantile_us(0.5), r.quantile_us(0.5)),
                    ratio(base.quantile_us(0.99), r.quantile_us(0.99)),
                );
            }
        }
    }
}
