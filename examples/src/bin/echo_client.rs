//! `echo-client (--addr <ADDR>[,<ADDR>...] | --discover etcd://HOST:PORT)
//! [--transport ttheader|theader|framed|buffered]
//! [--protocol binary|compact|json] [--concurrency N] [--size BYTES] [--duration SECS]
//! [--io netpoll|tokio] [--multiplex] [--balance random|rr|wrr|p2c|hash]
//! [--no-idempotent] [--backup-ms N] [--per-instance] [--timeline] [--service NAME]
//! [--local-share F] [--access-log N]`: closed-loop load on
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
//! # Discovery
//!
//! `--discover etcd://HOST:PORT[,HOST:PORT...]` follows the instances registered in
//! etcd under `--service` (default `EchoService`, as `echo-server --registry`
//! registers), instead of a fixed `--addr` list: instances that register get calls as
//! soon as the watch reports them, instances that leave (deregistered, or their lease
//! ended) get none, and while etcd is away the last list is kept. Each change is
//! printed on stderr as it comes: `echo-client: discovered unix_ms=<n> added=<addrs>
//! removed=<addrs> updated=<addrs> now=<n>` (comma-separated addresses, `-` for none).
//! The per-instance lines are printed.
//!
//! Without `--local-share` every instance is called over TCP. With `--local-share F`
//! (0 to 1), an instance registered from this host (the same `/etc/machine-id`) is
//! called over shared memory, or its Unix socket when it has no shared-memory address,
//! and `F` of the calls go to such local instances while one can take them, the rest
//! to the others (by `--balance` on each side).
//!
//! With `--access-log N` one call in N, warm-up included, is logged on stderr (method,
//! service, instance, status, duration, attempts, request and reply bytes: the
//! client's access log, see `volo_core::client::trace`).
//!
//! # Transports
//!
//! Without `--multiplex` the callers share a pool of connections per instance, one
//! call at a time on each (as many connections as callers). With it, all calls to an
//! instance go over two connections, many in flight on each, replies matched by
//! sequence id; that needs TTHeader framing, so `--multiplex` with `--transport framed`
//! or `buffered` is refused rather than silently measured another way.

use std::time::Duration;

use etcd_registry::{EtcdConfig, EtcdDiscover};
use examples::attempts::{InstanceCounts, unix_ms};
use examples::cli::{Args, Usage};
use examples::echo::EchoServiceClient;
use examples::echo_service::EchoCall;
use examples::load::{Plan, closed_loop, progress_wanted};
use examples::options;
use futures_util::StreamExt;
use volo_core::client::{
    BackupDelay, BackupPolicy, Change, ClientConfig, ConsistentHash, Discover, Instance,
    LoadBalance, LocalFirst, PowerOfTwoChoices, RoundRobin, StaticDiscover, WeightedRandom,
    WeightedRoundRobin,
};
use volo_core::registry::Route;

const HELP: &str = "usage: echo-client (--addr <host:port|unix:PATH|shm:PATH>[,<addr>...] | \
--discover etcd://HOST:PORT) [--service NAME] [--local-share F] \
[--transport ttheader|theader|framed|buffered] [--protocol binary|compact|json] [--concurrency N] \
[--size BYTES] [--duration SECS] [--io netpoll|tokio] [--multiplex] \
[--balance random|rr|wrr|p2c|hash] [--no-idempotent] [--backup-ms N] [--per-instance] \
[--timeline] [--access-log N]";

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
    /// The balancer, around the local ones first when `local_share` is given.
    fn make(self, local_share: Option<f64>) -> Box<dyn LoadBalance> {
        let plain: Box<dyn LoadBalance> = match self {
            Balancer::Random => Box::new(WeightedRandom::default()),
            Balancer::RoundRobin => Box::new(RoundRobin::new()),
            Balancer::WeightedRoundRobin => Box::new(WeightedRoundRobin::new()),
            Balancer::PowerOfTwo => Box::new(PowerOfTwoChoices::new()),
            Balancer::Hash => Box::new(ConsistentHash::default()),
        };
        match local_share {
            Some(share) => Box::new(LocalFirst::with_share(plain, share)),
            None => plain,
        }
    }

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

/// `added=<addrs> removed=<addrs> updated=<addrs> now=<n>` for a discovery change.
fn change_line(change: &Change) -> String {
    let list = |l: &[Instance]| {
        if l.is_empty() {
            "-".to_string()
        } else {
            l.iter()
                .map(|i| i.address.to_string())
                .collect::<Vec<_>>()
                .join(",")
        }
    };
    format!(
        "added={} removed={} updated={} now={}",
        list(&change.added),
        list(&change.removed),
        list(&change.updated),
        change.instances.len()
    )
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
        "discover",
        "service",
        "local-share",
        "access-log",
    ])?;
    let discover_url: Option<String> = args.optional("discover")?;
    let addrs = match (&discover_url, args.optional::<String>("addr")?) {
        (None, Some(list)) => options::addresses(&list)?,
        (Some(_), None) => Vec::new(),
        _ => return Err(Usage("give one of --addr and --discover".into())),
    };
    let service: String = args.get("service", "EchoService".to_string())?;
    let local_share: Option<f64> = args.optional("local-share")?;
    if local_share.is_some_and(|f| !(0.0..=1.0).contains(&f)) {
        return Err(Usage(
            "--local-share is a share of the calls, 0 to 1".into(),
        ));
    }
    let concurrency: usize = args.get("concurrency", 100)?;
    let size: usize = args.get("size", 1024)?;
    let duration: f64 = args.get("duration", 10.0)?;
    let balancer = Balancer::parse(&args.get("balance", "p2c".to_string())?)?;
    let idempotent = !args.flag("no-idempotent");
    let backup_ms: Option<u64> = args.optional("backup-ms")?;
    let per_instance = args.flag("per-instance") || addrs.len() > 1 || discover_url.is_some();
    let timeline = args.flag("timeline");
    let config = ClientConfig {
        framing: options::framing(&args.get("transport", "ttheader".to_string())?)?,
        protocol: options::protocol(&args.get("protocol", "binary".to_string())?)?,
        transport: options::io(&args.get("io", "netpoll".to_string())?)?,
        max_connections: concurrency.max(1),
        multiplex: args.flag("multiplex"),
        access_log: options::access_log(args.optional("access-log")?),
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
        let discover: Box<dyn Discover> = match &discover_url {
            Some(url) => {
                let route = match local_share {
                    Some(_) => Route::for_this_host(),
                    None => Route::tcp_only(),
                };
                let config = EtcdConfig::new(options::etcd(url)?);
                let found = EtcdDiscover::connect(config, &service, route)
                    .await
                    .map_err(|e| Usage(format!("--discover {url}: {e}")))?;
                eprintln!(
                    "echo-client: discovered unix_ms={} {}",
                    unix_ms(),
                    change_line(&Change::between(&[], &found.instances()))
                );
                let mut changes = found.changes();
                tokio::spawn(async move {
                    while let Some(change) = changes.next().await {
                        let line = change_line(&change);
                        eprintln!("echo-client: discovered unix_ms={} {line}", unix_ms());
                    }
                });
                Box::new(found)
            }
            None => Box::new(StaticDiscover::new(
                addrs.iter().cloned().map(Instance::new),
            )),
        };
        let mut builder = EchoServiceClient::builder()
            .discover(discover)
            .config(config)
            .layer_inner(counts.layer())
            .load_balance(balancer.make(local_share));
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
        let target = discover_url.clone().unwrap_or_else(|| list.join(","));
        eprintln!(
            "echo-client: {target}, {concurrency} callers, {size}-byte messages, {duration} s"
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
