//! Generic calls end to end: the same echo server called through the generated client,
//! through a generic client passing encoded bytes (`call_binary`, a proxy's
//! pass-through) and through a generic client speaking JSON (`call_json`, a gateway's
//! call), all on one client stack, in one run.
//!
//! Run it with `cargo bench -p benches --bench generic_echo` (about a minute with the
//! defaults). Settings as `rpc_echo`'s: `RPC_BENCH_SECS` (window per case and round,
//! default 3), `RPC_BENCH_ROUNDS` (default 3; the variants' order turns from round to
//! round and rounds are pooled), `RPC_BENCH_SIZE` (message bytes, default 1024).
//!
//! Server and client share this process, each on a tokio runtime with one worker (so
//! they share the machine's cores, as a gateway and the service it calls would not);
//! the server is the generated `EchoService` on netpoll-rs, the client stack
//! TTHeader + Framed + Binary with one connection per caller. `echo(Request { action:
//! "echo", msg: <size bytes> })` in a closed loop, 1 caller and then 100; every answer
//! is checked (the decoded message, the reply's byte length, the reply's JSON text).
//! Lines: `generic_echo variant=.. conc=.. qps=.. p50_us=.. p99_us=.. p999_us=..
//! errors=..`, then `ratio of=<variant>/generated conc=.. qps=.. p99=..`.

use std::time::Duration;

use bytes::Bytes;
use examples::echo::{EchoServiceClient, EchoServiceEchoArgs, Request};
use examples::echo_service::RunningEcho;
use examples::load::{Plan, Report, closed_loop};
use thrift_dynamic::Descriptor;
use thrift_generic::GenericClient;
use thrift_wire::{Binary, Codec, LinkBuffer, Utf8Bytes};
use volo_core::client::{Client, ClientConfig, ClientContext, ConnectionPool, WireFormat};
use volo_core::codec::Framing;
use volo_core::context::Address;
use volo_core::transport::TransportKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Generated,
    Binary,
    Json,
}

impl Variant {
    const ALL: [Variant; 3] = [Variant::Generated, Variant::Binary, Variant::Json];

    fn name(self) -> &'static str {
        match self {
            Variant::Generated => "generated",
            Variant::Binary => "generic-binary",
            Variant::Json => "generic-json",
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
    eprintln!("generic_echo: {msg}");
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
    let server = RunningEcho::start(&server_rt, TransportKind::Netpoll, &Address::Tcp(localhost))
        .unwrap_or_else(|e| fail(&format!("server: {e}")));
    let addr = server.addr.clone();
    let report = client_rt.block_on(async {
        let config = ClientConfig {
            format: WireFormat {
                framing: Framing::TTHeader,
                ttheader_framed: true,
                ..Default::default()
            },
            pool: ConnectionPool {
                max_per_instance: callers,
                ..Default::default()
            },
            ..ClientConfig::default()
        };
        let client = Client::builder("EchoService")
            .address(addr)
            .config(config)
            .build()
            .unwrap_or_else(|e| fail(&format!("client: {e}")));
        let msg = "x".repeat(size);
        match variant {
            Variant::Generated => {
                let generated = EchoServiceClient::new(client);
                let req = Request {
                    action: Utf8Bytes::from_static("echo"),
                    msg: Utf8Bytes::from(msg),
                };
                closed_loop(plan, variant.name(), move || {
                    let (generated, req) = (generated.clone(), req.clone());
                    async move {
                        let want = req.msg.clone();
                        matches!(generated.echo(req).await, Ok(r) if r.msg == want)
                    }
                })
                .await
            }
            Variant::Binary => {
                let generic = generic(client);
                let args = EchoServiceEchoArgs {
                    req: Request {
                        action: Utf8Bytes::from_static("echo"),
                        msg: Utf8Bytes::from(msg),
                    },
                };
                let codec = Codec::<Binary>::new();
                let mut buf = LinkBuffer::new();
                let n = codec
                    .encode(&args, &mut buf)
                    .unwrap_or_else(|e| fail(&format!("encoding: {e}")));
                let args = buf.next(n);
                // The result struct (field 0: a Response of the same two strings) is as
                // long as the arguments struct (field 1: the Request).
                let want = n;
                closed_loop(plan, variant.name(), move || {
                    let (generic, args) = (generic.clone(), args.clone());
                    async move {
                        let reply = generic
                            .call_binary(&mut ClientContext::new(), "echo", args)
                            .await;
                        matches!(reply, Ok(r) if r.len() == want)
                    }
                })
                .await
            }
            Variant::Json => {
                let generic = generic(client);
                let args = Bytes::from(format!(r#"{{"req":{{"action":"echo","msg":"{msg}"}}}}"#));
                let want = Bytes::from(format!(r#"{{"action":"echo","msg":"{msg}"}}"#));
                closed_loop(plan, variant.name(), move || {
                    let (generic, args, want) = (generic.clone(), args.clone(), want.clone());
                    async move {
                        let reply = generic
                            .call_json(&mut ClientContext::new(), "echo", &args)
                            .await;
                        matches!(reply, Ok(r) if r == want)
                    }
                })
                .await
            }
        }
    });
    drop(client_rt);
    if let Err(e) = server.stop(&server_rt) {
        fail(&format!("server stop: {e}"));
    }
    report
}

/// A generic client of echo over `client`, its IDL read from `idl/echo.thrift`.
fn generic(client: Client) -> GenericClient<volo_core::client::DefaultStack> {
    let idl = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../idl/echo.thrift");
    let desc = Descriptor::from_files(&[idl], &[] as &[&str])
        .unwrap_or_else(|e| fail(&format!("idl/echo.thrift: {e}")));
    GenericClient::new(client, desc, "EchoService").unwrap_or_else(|e| fail(&e.to_string()))
}

fn main() {
    let window = Duration::from_secs_f64(env_f64("RPC_BENCH_SECS", 3.0));
    let rounds = env_f64("RPC_BENCH_ROUNDS", 3.0) as usize;
    let size = env_f64("RPC_BENCH_SIZE", 1024.0) as usize;
    println!(
        "generic_echo: echo of {size}-byte messages, {:.1} s windows, {rounds} round(s), \
         {} CPUs, load {}",
        window.as_secs_f64(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        examples::server_only::load_average()
    );
    for callers in CALLERS {
        let mut pooled: Vec<Report> = Variant::ALL.iter().map(|_| Report::default()).collect();
        for round in 0..rounds.max(1) {
            for k in 0..Variant::ALL.len() {
                let i = (k + round) % Variant::ALL.len();
                pooled[i].pool(run_case(Variant::ALL[i], callers, size, window));
            }
        }
        for (v, r) in Variant::ALL.iter().zip(&pooled) {
            println!(
                "generic_echo variant={} conc={callers} {}",
                v.name(),
                r.line()
            );
        }
        let base = &pooled[0];
        for (v, r) in Variant::ALL.iter().zip(&pooled).skip(1) {
            println!(
                "ratio of={}/generated conc={callers} qps={:.2} p99={:.2}",
                v.name(),
                r.qps() / base.qps().max(1e-9),
                r.quantile_us(0.99) as f64 / base.quantile_us(0.99).max(1) as f64
            );
        }
    }
}
