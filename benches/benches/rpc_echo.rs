//! End-to-end RPC echo: this framework against CloudWeGo Volo (volo-thrift), same IDL
//! (idl/echo.thrift), same payload, same machine, same run.
//!
//! Run it with `cargo bench -p benches --bench rpc_echo` (about 1.5 minutes). Settings:
//! `RPC_BENCH_SECS` (measured window per case and round, default 3), `RPC_BENCH_ROUNDS`
//! (default 3; variants alternate in order from round to round and rounds are pooled),
//! `RPC_BENCH_SIZE` (message bytes, default 1024). Arguments after `--` select variants
//! by part of their name (`volo`, `netpoll`, `tokio`, `mux`).
//!
//! # What is measured
//!
//! `echo(Request { action: "echo", msg: <size bytes> })` in a closed loop: 1 caller, then
//! 100 callers, each waiting for its answer before the next call; every answer is
//! checked. The server runs on a tokio runtime with one worker thread, the client on
//! another (client and server of an RPC do not share threads). Variants:
//!
//! - `volo`: volo-thrift's generated server and client with Volo's defaults
//!   (TTHeader + Framed + Binary; one call at a time per pooled connection).
//! - `ours netpoll`: our generated server and client on netpoll-rs, speaking the same
//!   TTHeader + Framed + Binary as Volo's client (so the bytes on the wire match).
//! - `ours tokio`: the same over plain tokio sockets: the baseline that shows what the
//!   reactor adds.
//! - `ours mux`: our client multiplexing all callers over two netpoll-rs connections
//!   (`ClientConfig::multiplex`; replies matched by TTHeader sequence id) against the
//!   same server. Volo's client here stays on its default pooled connections.
//!
//! Reported: QPS (successful calls per second over the window), p50/p99/p999 latency in
//! microseconds (every call of the window), errors, and the ratios against Volo measured
//! in the same run. The machine's cores are shared by client and server: compare only
//! within one run, and treat differences smaller than the rounds' spread as noise.

use std::time::Duration;

use examples::echo::EchoServiceClient;
use examples::echo_service::{EchoCall, RunningEcho};
use examples::load::{Plan, Report, closed_loop};
use volo_core::client::ClientConfig;
use volo_core::codec::Framing;
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
                    framing: Framing::TTHeader,
                    ttheader_framed: true,
                    transport: io,
                    max_connections: callers,
                    multiplex: variant == Variant::OursMux,
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
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let selected: Vec<Variant> = Variant::ALL
        .into_iter()
        .filter(|v| filters.is_empty() || filters.iter().any(|f| v.name().contains(f.as_str())))
        .collect();
    if selected.is_empty() {
        fail(&format!("no variant matches {filters:?}"));
    }
    let window = Duration::from_secs_f64(env_f64("RPC_BENCH_SECS", 3.0));
    let rounds = env_f64("RPC_BENCH_ROUNDS", 3.0) as usize;
    let size = env_f64("RPC_BENCH_SIZE", 1024.0) as usize;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "rpc_echo: echo of {size}-byte messages, {:.1} s windows, {rounds} round(s), {} CPUs, \
         load {}",
        window.as_secs_f64(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
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
                        acc.ok += r.ok;
                        acc.errors += r.errors;
                        acc.elapsed += r.elapsed;
                        acc.latencies_ns.extend(r.latencies_ns);
                        rounds.push(qps);
                    }
                    None => pooled.push(((v, callers), r, vec![qps])),
                }
            }
        }
    }
    for (_, r, _) in &mut pooled {
        r.latencies_ns.sort_unstable();
    }
    pooled.sort_by_key(|((v, c), _, _)| (*c, Variant::ALL.iter().position(|x| x == v)));
    println!();
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
        "{:<28} {:>14} {:>14} {:>14}",
        "ratios (>1: ours better)", "QPS ours/volo", "p50 volo/ours", "p99 volo/ours"
    );
    for callers in CALLERS {
        for v in [Variant::OursNetpoll, Variant::OursTokio, Variant::OursMux] {
            if let (Some(base), Some(r)) = (find(Variant::Volo, callers), find(v, callers)) {
                let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
                println!(
                    "{:<28} {:>14.2} {:>14.2} {:>14.2}",
                    format!("{}, {callers} caller(s)", v.name()),
                    r.qps() / base.qps(),
                    ratio(base.quantile_us(0.5), r.quantile_us(0.5)),
                    ratio(base.quantile_us(0.99), r.quantile_us(0.99)),
                );
            }
        }
    }
}
