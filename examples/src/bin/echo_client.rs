//! `echo-client --addr <ADDR>[,<ADDR>...] [--transport ttheader|theader|framed|buffered]
//! [--protocol binary|compact|json] [--concurrency N] [--size BYTES] [--duration SECS]
//! [--io netpoll|tokio] [--multiplex] [--balance random|rr|wrr|p2c|hash]
//! [--no-idempotent] [--backup-ms N] [--per-instance] [--timeline]`: closed-loop load on
//! EchoService instances: `concurrency` callers, each sending `echo` with a `size`-byte
//! message and waiting for the answer, for `duration` seconds after a one-second
//! warm-up. Every answer is checked. An address is `host:port`, `unix:PATH` or
//! `shm:PATH`.
//!
//! Output, on stdout:
//! - with `--timeline`, one line per second of the measured window:
//!   `t=<second> ok=<n> errors=<n> p99_us=<n>` (the calls that started in that second:
//!   answered, failed for the caller, and the p99 of the answered ones; `t=0` first);
//! - with more than one address, or `--per-instance`, one line per instance:
//!   `instance=<addr> ok=<n> failed=<n>`, the attempts it answered and those that
//!   failed (warm-up included; retries and backup requests are attempts too, and an
//!   attempt cancelled because its backup answered first counts as neither);
//! - `calls=<n> ok=<n> errors=<n> unfinished=<n>`: the calls started in the window,
//!   and what became of them (`unfinished`: still running 15 s after the window);
//! - last, exactly `qps=<n> p50_us=<n> p99_us=<n> p999_us=<n> errors=<n>`.
//!
//! # Several instances
//!
//! `--addr A,B,C` is a fixed list of instances (static discovery), each of weight
//! 100. The client stack is the framework's default: call timeout (10 s), service
//! breaker, failure retry, backup requests (off unless `--backup-ms`), the balancer
//! with a breaker per instance (an instance that keeps failing is left out for 5 s,
//! then tried again with a few calls).
//!
//! `--balance` picks the balancer: `random` (weighted random), `rr` (round robin),
//! `wrr` (smooth weighted round robin), `p2c` (power of two choices), `hash`
//! (consistent hash; the calls carry keys 0 to 63 in turn, as 64 users would, so each
//! key sticks to one instance). The default is `p2c`: of two instances taken at
//! random it picks the one with fewer calls in flight, so an instance that slows down,
//! whose calls pile up, gets fewer new ones at once, without any timing or tuning.
//! Random and round robin keep sending it its full share, and every caller that lands
//! there waits.
//!
//! `echo` is marked idempotent (it has no effect on the server), so a call that failed
//! after it may have reached an instance (a connection reset by an instance that died)
//! is retried on another one; `--no-idempotent` turns that off, and then only calls
//! that never left (a refused connect) are retried. `--backup-ms N` sends a backup
//! request to another instance for an `echo` that has not answered after N ms, the
//! first answer winning; it needs `echo` idempotent, since both attempts may run.
//!
//! # Transports
//!
//! Without `--multiplex` the callers share a pool of connections per instance, one
//! call at a time on each (as many connections as callers). With it, all calls to an
//! instance go over two connections, many in flight on each, replies matched by
//! sequence id; that needs TTHeader framing, so `--multiplex` with `--transport framed`
//! or `buffered` is refused rather than silently measured another way.

use std::time::Duration;

use examples::attempts::InstanceCounts;
use examples::cli::{Args, Usage};
use examples::echo::EchoServiceClient;
use examples::echo_service::EchoCall;
use examples::load::{Plan, closed_loop, progress_wanted};
use examples::options;
use volo_core::client::{
    BackupDelay, BackupPolicy, ClientConfig, ConsistentHash, PowerOfTwoChoices, RoundRobin,
    WeightedRandom, WeightedRoundRobin,
};
use volo_core::context::Address;

const HELP: &str = "usage: echo-client --addr <host:port|unix:PATH|shm:PATH>[,<addr>...] \
[--transport ttheader|theader|framed|buffered] [--protocol binary|compact|json] [--concurrency N] \
[--size BYTES] [--duration SECS] [--io netpoll|tokio] [--multiplex] \
[--balance random|rr|wrr|p2c|hash] [--no-idempotent] [--backup-ms N] [--per-instance] \
[--timeline]";

/// Keys `--balance hash` spreads the calls over.
const HASH_KEYS: u64 = 64;

fn main() {
    match run() {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
        }
        Err(e) => {
            eprintln!("echo-client: {e}\n{HELP}");
            std::process::exit(2);
        }
    }
}

/// `--balance`'s names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Balancer {
    Random,
    RoundRobin,
    WeightedRoundRobin,
    PowerOfTwo,
    Hash,
}

impl Balancer {
    fn parse(name: &str) -> Result<Self, Usage> {
        Ok(match name {
            "random" => Balancer::Random,
            "rr" => Balancer::RoundRobin,
            "wrr" => Balancer::WeightedRoundRobin,
            "p2c" => Balancer::PowerOfTwo,
            "hash" => Balancer::Hash,
            other => {
                return Err(Usage(format!(
                    "--balance {other:?}: random, rr, wrr, p2c or hash"
                )));
            }
        })
    }
}

/// `--addr`'s comma-separated list.
fn addresses(list: &str) -> Result<Vec<Address>, Usage> {
    let addrs = list
        .split(',')
        .map(|a| {
            a.trim()
                .parse::<Address>()
                .map_err(|e| Usage(format!("--addr {a:?}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if addrs.is_empty() {
        return Err(Usage("--addr needs at least one address".into()));
    }
    Ok(addrs)
}

fn run() -> Result<Vec<String>, Usage> {
    let args = Args::parse(
        std::env::args().skip(1),
        &["multiplex", "no-idempotent", "per-instance", "timeline"],
    )?;
    args.only(&[
        "addr",
        "transport",
        "protocol",
        "concurrency",
        "size",
        "duration",
        "io",
        "multiplex",
        "balance",
        "no-idempotent",
        "backup-ms",
        "per-instance",
        "timeline",
    ])?;
    let addrs = addresses(&args.required::<String>("addr")?)?;
    let concurrency: usize = args.get("concurrency", 100)?;
    let size: usize = args.get("size", 1024)?;
    let duration: f64 = args.get("duration", 10.0)?;
    let balancer = Balancer::parse(&args.get("balance", "p2c".to_string())?)?;
    let idempotent = !args.flag("no-idempotent");
    let backup_ms: Option<u64> = args.optional("backup-ms")?;
    let per_instance = args.flag("per-instance") || addrs.len() > 1;
    let timeline = args.flag("timeline");
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
    if backup_ms.is_some() && !idempotent {
        return Err(Usage(
            "--backup-ms needs echo idempotent (drop --no-idempotent): a backup request \
             runs the call a second time"
                .into(),
        ));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("runtime: {e}")))?;
    rt.block_on(async {
        let counts = InstanceCounts::new(&addrs);
        let mut builder = EchoServiceClient::builder()
            .addresses(addrs.iter().cloned())
            .config(config)
            .layer_inner(counts.layer());
        builder = match balancer {
            Balancer::Random => builder.load_balance(WeightedRandom::default()),
            Balancer::RoundRobin => builder.load_balance(RoundRobin::new()),
            Balancer::WeightedRoundRobin => builder.load_balance(WeightedRoundRobin::new()),
            Balancer::PowerOfTwo => builder.load_balance(PowerOfTwoChoices::new()),
            Balancer::Hash => builder.load_balance(ConsistentHash::default()),
        };
        if idempotent {
            builder = builder.idempotent(["echo"]);
        }
        if let Some(ms) = backup_ms {
            let delay = BackupDelay::Fixed(Duration::from_millis(ms));
            builder = builder.backup(BackupPolicy::new(delay));
        }
        let client = builder.build().map_err(|e| Usage(format!("client: {e}")))?;
        let mut call = EchoCall::new(client, size);
        if balancer == Balancer::Hash {
            call = call.with_hash_keys(HASH_KEYS);
        }
        let list: Vec<String> = addrs.iter().map(ToString::to_string).collect();
        eprintln!(
            "echo-client: {}, {concurrency} callers, {size}-byte messages, {duration} s",
            list.join(",")
        );
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
        let mut lines = Vec::new();
        if timeline {
            lines.extend(report.timeline.iter().map(|s| s.line()));
        }
        if per_instance {
            lines.extend(counts.lines());
        }
        lines.push(report.calls_line());
        lines.push(report.line());
        Ok(lines)
    })
}
