//! `echo-client (--addr ADDR[,ADDR...] | --discover etcd://HOST:PORT)`: closed-loop
//! load on EchoService instances: `--concurrency` callers, each sending `echo` with a
//! `--size`-byte message and waiting for the answer, for `--duration` seconds after a
//! one-second warm-up. Every answer is checked. An address is `host:port`,
//! `unix:PATH` or `shm:PATH`. `echo-client --help` lists the flags; a flag given
//! twice takes its last value (`--meta` and `--persistent` add up instead).
//!
//! `--rate QPS` makes it an open loop instead, as wrk2 does: calls are due `QPS` times
//! a second, evenly spaced, whatever the replies do, made by at most `--concurrency`
//! callers at once; each call's latency counts from the time it was due, and a call
//! that found no caller free is made late rather than dropped, and counted
//! ([`examples::open_loop`]).
//!
//! `--method` picks another method than `echo`: `echo_or_fail` asks in turn for an
//! answer and for its declared `EchoError` (each checked: a call counts as an error
//! unless the reply, or the exception, carries the message sent), and `notify` sends
//! the oneway event, which counts as answered once it is written.
//!
//! Output, on stdout:
//! - with `--timeline`, one line per second of the measured window:
//!   `t=<second> ok=<n> errors=<n> p99_us=<n>` (the calls that started in that second:
//!   answered, failed for the caller, and the p99 of the answered ones; `t=0` first);
//! - with more than one address, or `--per-instance`, one line per instance:
//!   `instance=<addr> ok=<n> failed=<n>`, the attempts it answered and those that
//!   failed (warm-up included; retries and backup requests are attempts too, and an
//!   attempt cancelled because its backup answered first counts as neither);
//! - with `--meta` or `--persistent`, `echo-client: backward <k=v,...>`: the backward
//!   metainfo values of the first reply (`-` for none; no line if no call was
//!   answered);
//! - `calls=<n> ok=<n> errors=<n> unfinished=<n>`: the calls started in the window,
//!   and what became of them (`unfinished`: still running 15 s after the window);
//! - last, exactly `qps=<n> p50_us=<n> p99_us=<n> p999_us=<n> errors=<n>`; with
//!   `--rate`, `rate=<offered> qps=<achieved> p50_us=<n> p99_us=<n> p999_us=<n>
//!   max_us=<n> errors=<n> late=<n>` (`late`: calls that started more than 1 ms
//!   after they were due).
//!
//! # Several instances
//!
//! `--addr A,B,C` is a fixed list of instances (static discovery), each of weight
//! 100. The client stack is the framework's default: call timeout (10 s, or
//! `--timeout-ms`; over TTHeader the time left travels to the server), service
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
//! `echo` and `echo_or_fail` are marked idempotent (they have no effect on the
//! server; `notify`, which counts, is not), so a call that failed
//! after it may have reached an instance (a connection reset by an instance that died)
//! is retried on another one; `--no-idempotent` turns that off, and then only calls
//! that never left (a refused connect) are retried. `--backup-ms N` sends a backup
//! request to another instance for an `echo` that has not answered after N ms, the
//! first answer winning; it needs `echo` idempotent, since both attempts may run.
//!
//! # Governance
//!
//! `--governance etcd://HOST:PORT` (the `etcd` feature) follows this client's rules
//! in etcd, in Kitex's config-etcd layout, as caller `echo-client`:
//! `{prefix}/echo-client/{--service}/rpc_timeout`, `retry` and `circuit_break`
//! (`--governance-prefix`, default `/KitexConfig`; see `etcd_registry::governance`),
//! taken up while it runs; they come before `--timeout-ms` and the retry flags for
//! the methods they name.
//!
//! # Discovery
//!
//! `--discover etcd://HOST:PORT[,HOST:PORT...]` (which needs the `etcd` feature, see
//! the crate docs; without it, it is refused) follows the instances registered in
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
//! With `--rack R` and/or `--zone Z` the balancer is wrapped in locality tiers
//! (`volo_core::client::Tiered`): instances of this host first, then of rack `R` in
//! zone `Z`, then of zone `Z`, then any, by the `rack` and `zone` tags they registered
//! with (`echo-server --registry ... --tag rack=R --tag zone=Z`); a tier's calls
//! spill to the next only for instances that cannot take them.
//!
//! With `--access-log N` one call in N, warm-up included, is logged on stderr (method,
//! service, instance, status, duration, attempts, request and reply bytes: the
//! client's access log, see `volo_core::client::trace`).
//!
//! # Metainfo
//!
//! `--meta KEY=VALUE` (transient: the callee sees it, and it goes no further) and
//! `--persistent KEY=VALUE` (passed on hop after hop), each repeatable, are set on
//! every call by a layer around the whole call (as in the middleware example of
//! `docs/governance.md`). They travel in TTHeader and THeader framing; Framed and Buffered carry
//! none. `echo-server --show-metainfo` prints what it received.
//!
//! # Transports
//!
//! `--transport` names the framing: `ttheader` (the default), `ttheader-framed`
//! (TTHeader around a Framed payload, what Kitex's clients send by default),
//! `theader`, `framed` or `buffered`.
//!
//! Without `--mux` the callers share a pool of connections per instance, one
//! call at a time on each (as many connections as callers). With it, all calls to an
//! instance go over two connections, many in flight on each, replies matched by
//! sequence id; that needs TTHeader framing (`ttheader` or `ttheader-framed`), so
//! `--mux` with any other `--transport` is refused rather than silently measured
//! another way.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgGroup, CommandFactory, FromArgMatches, Parser, ValueEnum};
use examples::attempts::InstanceCounts;
use examples::cli::{Usage, fail, refuse};
use examples::echo::EchoServiceClient;
use examples::echo_service::{EchoCall, EchoMethod};
use examples::load::{Plan, closed_loop, progress_wanted};
use examples::open_loop::open_loop;
use examples::options::{self, ClientFramingArg, EtcdUrl, IoArg, ProtocolArg};
use examples::registry::{GovernanceArgs, RegistryLayout, etcd_target, follow};
use volo_core::client::{
    BackupDelay, BackupPolicy, ClientConfig, ClientContext, ClientRequest, ClientResponse,
    ConsistentHash, Discover, Error, Instance, LoadBalance, LocalFirst, PowerOfTwoChoices,
    RoundRobin, StaticDiscover, WeightedRandom, WeightedRoundRobin,
};
use volo_core::client::{ConnectionPool, Tiered, WireFormat};
use volo_core::codec::Framing;
use volo_core::config::{Observability, TransportConfig};
use volo_core::context::Address;
use volo_core::registry::Locality;
use volo_core::service::{Service, layer_fn};

/// Keys `--balance hash` spreads the calls over.
const HASH_KEYS: u64 = 64;

/// Closed-loop load on EchoService instances: a fixed list (--addr) or those
/// registered in etcd (--discover). The last line of its output is
/// `qps=<n> p50_us=<n> p99_us=<n> p999_us=<n> errors=<n>`.
#[derive(Debug, Parser)]
#[command(name = "echo-client", version, args_override_self = true)]
#[command(group(ArgGroup::new("instances").required(true).args(["addr", "discover"])))]
struct Cli {
    /// The instances, each of weight 100: host:port, unix:PATH or shm:PATH,
    /// comma-separated.
    #[arg(long, value_name = "ADDR[,ADDR...]", value_delimiter = ',',
          value_parser = options::address)]
    addr: Vec<Address>,

    /// Follows the instances registered in etcd under --service (needs the `etcd`
    /// feature).
    #[arg(long, value_name = "etcd://HOST:PORT[,HOST:PORT...]", value_parser = options::etcd_url)]
    discover: Option<EtcdUrl>,

    /// How the instances are written in etcd: `native`, or `kitex` (as Kitex's etcd
    /// registry writes them, under kitex/registry-etcd: Kitex's servers too).
    #[arg(
        long,
        value_enum,
        value_name = "LAYOUT",
        default_value = "native",
        requires = "discover"
    )]
    registry_layout: RegistryLayout,

    // --governance, --governance-prefix: this client's rules, as caller
    // `echo-client`.
    #[command(flatten)]
    governance: GovernanceArgs,

    /// The service name looked up with --discover.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "EchoService",
        requires = "discover"
    )]
    service: String,

    /// This client's rack: with --discover, instances are preferred by locality tier
    /// (this host, this rack, this zone, any; their `rack` and `zone` tags), a tier
    /// spilling to the next only for instances that cannot take a call.
    #[arg(long, value_name = "RACK", requires = "discover")]
    rack: Option<String>,

    /// This client's zone (see --rack).
    #[arg(long, value_name = "ZONE", requires = "discover")]
    zone: Option<String>,

    /// Instances of this host are called over shared memory (or their Unix socket),
    /// and this share of the calls goes to them while one can take them (0 to 1).
    #[arg(long, value_name = "F", value_parser = options::share)]
    local_share: Option<f64>,

    /// The framing.
    #[arg(long, value_enum, value_name = "FRAMING", default_value = "ttheader")]
    transport: ClientFramingArg,

    /// The protocol.
    #[arg(long, value_enum, default_value = "binary")]
    protocol: ProtocolArg,

    /// Callers, each with one call in flight.
    #[arg(long, value_name = "N", default_value = "100", value_parser = options::at_least_one())]
    concurrency: usize,

    /// Open loop: calls due this many times a second, evenly spaced, whatever the
    /// replies do (at most --concurrency at once); latency counts from each call's due
    /// time. Without it, each caller makes its next call when the last is answered.
    #[arg(long, value_name = "QPS", value_parser = options::rate)]
    rate: Option<f64>,

    /// The method called: `echo_or_fail` asks in turn for an answer and for its
    /// exception; `notify` is oneway.
    #[arg(long, value_enum, default_value = "echo")]
    method: EchoMethod,

    /// Each call's timeout in milliseconds, retries and backups included (default: the
    /// client's, 10 s); over TTHeader the time left travels to the server.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    timeout_ms: Option<u64>,

    /// Bytes of each message.
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    size: usize,

    /// The measured window, in seconds (after a one-second warm-up).
    #[arg(long, value_name = "SECS", default_value = "10",
          value_parser = options::positive_seconds)]
    duration: Duration,

    /// The sockets' implementation.
    #[arg(long, value_enum, value_name = "IO", default_value = "netpoll")]
    io: IoArg,

    /// All calls to an instance over two connections, replies matched by sequence id
    /// (TTHeader framing only), instead of a connection per caller.
    #[arg(long)]
    mux: bool,

    /// The balancer.
    #[arg(long, value_enum, value_name = "BALANCER", default_value = "p2c")]
    balance: Balancer,

    /// `echo` is not retried once it may have reached an instance.
    #[arg(long)]
    no_idempotent: bool,

    /// A backup request to another instance for an `echo` not answered after N ms
    /// (not with --no-idempotent: both attempts may run).
    #[arg(long, value_name = "N", conflicts_with = "no_idempotent")]
    backup_ms: Option<u64>,

    /// Prints a line per instance (always, with several instances or --discover).
    #[arg(long)]
    per_instance: bool,

    /// Prints a line per second of the window.
    #[arg(long)]
    timeline: bool,

    /// Logs one call in N on stderr (the client's access log).
    #[arg(long, value_name = "N")]
    access_log: Option<u64>,

    /// Sends this transient metainfo value with every call (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = options::key_value)]
    meta: Vec<(String, String)>,

    /// Sends this persistent metainfo value with every call (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = options::key_value)]
    persistent: Vec<(String, String)>,
}

/// `balance` in locality tiers seen from this host and `rack`/`zone`, when either
/// is given.
fn tiered(
    balance: Box<dyn LoadBalance>,
    rack: Option<&str>,
    zone: Option<&str>,
) -> Box<dyn LoadBalance> {
    if rack.is_none() && zone.is_none() {
        return balance;
    }
    let here = Locality {
        host: volo_core::registry::host_id().map(Into::into),
        rack: rack.map(Into::into),
        zone: zone.map(Into::into),
    };
    Box::new(Tiered::new(balance, here))
}

/// `--balance`'s names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Balancer {
    /// Weighted random.
    Random,
    /// Round robin.
    #[value(name = "rr")]
    RoundRobin,
    /// Smooth weighted round robin.
    #[value(name = "wrr")]
    WeightedRoundRobin,
    /// Power of two choices: of two instances, the one with fewer calls in flight.
    #[value(name = "p2c")]
    PowerOfTwo,
    /// Consistent hash over 64 keys that the calls carry in turn.
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
}

fn main() {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // Clap's `requires = "discover"` does not hold here: --addr, in the same group,
    // puts --discover among the conflicts, and a missing requirement that conflicts
    // is not reported. So the flags that only --discover reads are checked here.
    if cli.discover.is_none() {
        for flag in ["registry_layout", "service"] {
            if matches.value_source(flag) == Some(ValueSource::CommandLine) {
                let flag = flag.replace('_', "-");
                refuse::<Cli>(format!(
                    "--{flag} needs --discover: only discovery reads it"
                ));
            }
        }
    }
    if cli.mux && cli.transport.0.0 != Framing::TTHeader {
        refuse::<Cli>(
            "--mux needs --transport ttheader: replies are matched to calls by the \
             sequence id in their header",
        );
    }
    match run(cli) {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
        }
        Err(e) => fail("echo-client", e),
    }
}

/// The metainfo `--meta` and `--persistent` set on every call, and the backward values
/// of the first reply, as `k=v,...`.
#[derive(Debug, Default)]
struct Metainfo {
    transient: Vec<(String, String)>,
    persistent: Vec<(String, String)>,
    first_backward: OnceLock<String>,
}

/// Around the whole call: sets the metainfo, keeps the first reply's backward values.
#[derive(Clone)]
struct Stamp<S> {
    inner: S,
    metainfo: Arc<Metainfo>,
}

impl<S> Service<ClientContext, ClientRequest> for Stamp<S>
where
    S: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error> + Sync,
{
    type Response = ClientResponse;
    type Error = Error;

    async fn call(
        &self,
        cx: &mut ClientContext,
        req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        let m = &self.metainfo;
        for (k, v) in &m.transient {
            cx.metainfo.set_transient(k.clone(), v.clone());
        }
        for (k, v) in &m.persistent {
            cx.metainfo.set_persistent(k.clone(), v.clone());
        }
        let reply = self.inner.call(cx, req).await;
        if reply.is_ok() && m.first_backward.get().is_none() {
            let _ = m
                .first_backward
                .set(options::pairs_field(cx.metainfo.backward_values()));
        }
        reply
    }
}

fn run(cli: Cli) -> Result<Vec<String>, Usage> {
    let per_instance = cli.per_instance || cli.addr.len() > 1 || cli.discover.is_some();
    let show_backward = !cli.meta.is_empty() || !cli.persistent.is_empty();
    let metainfo = Arc::new(Metainfo {
        transient: cli.meta.clone(),
        persistent: cli.persistent.clone(),
        first_backward: OnceLock::new(),
    });
    let mut config = ClientConfig {
        format: WireFormat {
            framing: cli.transport.0.0,
            ttheader_framed: cli.transport.0.1,
            protocol: cli.protocol.0,
            ..Default::default()
        },
        transport: {
            let mut transport = TransportConfig::default();
            cli.io.apply(&mut transport);
            transport
        },
        pool: ConnectionPool {
            max_per_instance: cli.concurrency,
            mux: cli.mux,
            ..Default::default()
        },
        observability: Observability {
            access_log: options::access_log(cli.access_log),
            ..Default::default()
        },
        ..ClientConfig::default()
    };
    if let Some(ms) = cli.timeout_ms {
        config.timeouts.rpc = Some(Duration::from_millis(ms));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("runtime: {e}")))?;
    rt.block_on(async {
        let counts = InstanceCounts::new(&cli.addr);
        let discover: Box<dyn Discover> = match &cli.discover {
            Some(url) => {
                follow(
                    url,
                    cli.registry_layout,
                    &cli.service,
                    cli.local_share.is_some(),
                    "echo-client",
                )
                .await?
            }
            None => Box::new(StaticDiscover::new(
                cli.addr.iter().cloned().map(Instance::new),
            )),
        };
        let stamp = Arc::clone(&metainfo);
        let mut builder = EchoServiceClient::builder()
            .discover(discover)
            .config(config)
            .layer(layer_fn(move |inner| Stamp {
                inner,
                metainfo: Arc::clone(&stamp),
            }))
            .layer_inner(counts.layer())
            .load_balance(tiered(
                cli.balance.make(cli.local_share),
                cli.rack.as_deref(),
                cli.zone.as_deref(),
            ));
        if !cli.no_idempotent {
            builder = builder.idempotent(["echo", "echo_or_fail"]);
        }
        if let Some(ms) = cli.backup_ms {
            let delay = BackupDelay::Fixed(Duration::from_millis(ms));
            builder = builder.backup(BackupPolicy::new(delay));
        }
        // Followed while the client runs.
        let mut _governed = None;
        if let Some((gov, watch)) = cli.governance.client("echo-client", &cli.service).await? {
            builder = builder.governance(gov);
            _governed = Some(watch);
        }
        let client = builder.build().map_err(|e| Usage(format!("client: {e}")))?;
        let mut call = EchoCall::new(client, cli.size).with_method(cli.method);
        if cli.balance == Balancer::Hash {
            call = call.with_hash_keys(HASH_KEYS);
        }
        let target = match &cli.discover {
            Some(url) => etcd_target(url),
            None => {
                let list: Vec<String> = cli.addr.iter().map(ToString::to_string).collect();
                list.join(",")
            }
        };
        let (concurrency, size, secs) = (cli.concurrency, cli.size, cli.duration.as_secs_f64());
        let method = cli.method.name();
        let pace = cli
            .rate
            .map_or_else(String::new, |rate| format!(", {rate} calls/s open loop"));
        eprintln!(
            "echo-client: {target}, {method}, {concurrency} callers, {size}-byte messages, \
             {secs} s{pace}"
        );
        let plan = Plan {
            concurrency,
            warmup: Duration::from_secs(1),
            duration: cli.duration,
            progress: progress_wanted(),
        };
        let one = move || {
            let call = call.clone();
            async move { call.call().await }
        };
        let report = match cli.rate {
            Some(rate) => open_loop(plan, rate, method, one).await,
            None => closed_loop(plan, method, one).await,
        };
        let mut lines = Vec::new();
        if cli.timeline {
            lines.extend(report.timeline.iter().map(|s| s.line()));
        }
        if per_instance {
            lines.extend(counts.lines());
        }
        if let Some(backward) = metainfo.first_backward.get().filter(|_| show_backward) {
            lines.push(format!("echo-client: backward {backward}"));
        }
        lines.push(report.calls_line());
        lines.push(match cli.rate {
            Some(rate) => report.open_line(rate),
            None => report.line(),
        });
        Ok(lines)
    })
}
