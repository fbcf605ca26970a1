//! `echo-client --addr <host:port|unix:PATH|shm:PATH> [--transport ttheader|framed|buffered]
//! [--protocol binary|compact] [--concurrency N] [--size BYTES] [--duration SECS]
//! [--io netpoll|tokio] [--multiplex]`: closed-loop load on an EchoService server: `concurrency`
//! callers, each sending `echo` with a `size`-byte message and waiting for the answer,
//! for `duration` seconds after a one-second warm-up. Every answer is checked. The last
//! line is exactly `qps=<n> p50_us=<n> p99_us=<n> p999_us=<n> errors=<n>`.
//!
//! Without `--multiplex` the callers share a pool of connections, one call at a time on
//! each (as many connections as callers). With it, all calls go over two connections,
//! many in flight on each, replies matched by sequence id; that needs TTHeader
//! framing, so `--multiplex` with `--transport framed` or `buffered` is refused rather
//! than silently measured another way.

use std::time::Duration;

use examples::cli::{Args, Usage};
use examples::echo::EchoServiceClient;
use examples::echo_service::EchoCall;
use examples::load::{Plan, closed_loop, progress_wanted};
use examples::options;
use volo_core::client::ClientConfig;
use volo_core::context::Address;

const HELP: &str = "usage: echo-client --addr <host:port|unix:PATH|shm:PATH> \
[--transport ttheader|framed|buffered] [--protocol binary|compact] [--concurrency N] \
[--size BYTES] [--duration SECS] [--io netpoll|tokio] [--multiplex]";

fn main() {
    match run() {
        Ok(line) => println!("{line}"),
        Err(e) => {
            eprintln!("echo-client: {e}\n{HELP}");
            std::process::exit(2);
        }
    }
}

fn run() -> Result<String, Usage> {
    let args = Args::parse(std::env::args().skip(1), &["multiplex"])?;
    args.only(&[
        "addr",
        "transport",
        "protocol",
        "concurrency",
        "size",
        "duration",
        "io",
        "multiplex",
    ])?;
    let addr: Address = args.required("addr")?;
    let concurrency: usize = args.get("concurrency", 100)?;
    let size: usize = args.get("size", 1024)?;
    let duration: f64 = args.get("duration", 10.0)?;
    let config = ClientConfig {
        framing: options::framing(&args.get("transport", "ttheader".to_string())?)?,
        protocol: options::protocol(&args.get("protocol", "binary".to_string())?)?,
        transport: options::io(&args.get("io", "netpoll".to_string())?)?,
        max_connections: concurrency.max(1),
        multiplex: args.flag("multiplex"),
        ..ClientConfig::default()
    };
    if config.multiplex && config.framing != volo_core::codec::Framing::TTHeader {
        return Err(Usage(
            "--multiplex needs --transport ttheader: replies are matched to calls by the \
             sequence id in their header"
                .into(),
        ));
    }
    if concurrency == 0 || duration.is_nan() || duration <= 0.0 {
        return Err(Usage("--concurrency and --duration must be above 0".into()));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("runtime: {e}")))?;
    rt.block_on(async {
        let client = EchoServiceClient::builder()
            .address(addr.clone())
            .config(config)
            .build()
            .map_err(|e| Usage(format!("client: {e}")))?;
        let call = EchoCall::new(client, size);
        eprintln!("echo-client: {addr}, {concurrency} callers, {size}-byte messages, {duration} s");
        let plan = Plan {
            concurrency,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs_f64(duration),
            progress: progress_wanted(),
        };
        let report = closed_loop(plan, "echo", move || {
            let call = call.clone();
            async move { call.call().await }
        })
        .await;
        Ok(report.line())
    })
}
