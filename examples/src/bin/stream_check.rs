//! `stream-check --addr ADDR`: runs the interop checks of a StreamService server
//! (idl/stream.thrift; ours, `stream-server`, or one built from Kitex's StreamX) and
//! prints `PASS <check>` or `FAIL <check>: <why>` for each: a ping-pong `echo` call;
//! server, client and bidirectional streams (a client stream of 1 MiB too), header
//! metadata, a cancelled stream, an exception and a business status in the trailer,
//! failing server and client streams; and a passed deadline: a server stream of 5
//! answers 100 ms apart, under a deadline of `--deadline-ms` (default 250; it must be
//! under the stream's 500 ms for the check to pass). Exits 0 when every check
//! passed, 1 otherwise, 2 on bad flags. `stream-check --help` lists the flags.
//!
//! # Load
//!
//! `stream-check --load N --duration SECS (--addr A[,B...] | --discover
//! etcd://HOST:PORT[,HOST:PORT...])` runs no checks: it keeps N bidirectional
//! streams going for SECS seconds (default 10) through the generated client
//! (`StreamServiceClient::builder()`, the framework's default stack: discovery, the
//! balancer with a breaker per instance, the retry of an opening that never left, the
//! opening's timeout). Each stream echoes 32 messages of 1 KiB, each awaited before
//! the next, then is closed and a new one opened (`examples::stream_load`); each
//! stream has a deadline of 10 s.
//!
//! The instances are a fixed list (`--addr`, static discovery, each of weight 100),
//! or those registered in etcd under StreamService (`--discover`, as
//! `stream-server --registry` registers; it needs the `etcd` feature, see the crate
//! docs, and without it is refused), followed as they come and go: each change is
//! printed on stderr as it comes, `stream-check: discovered unix_ms=<n>
//! added=<addrs> removed=<addrs> updated=<addrs> now=<n>`.
//!
//! Output:
//! - on stderr, a line for each stream that did not end well, as it ends:
//!   `stream-check: <open_failure|broken|error> instance=<addr> unix_ms=<n>
//!   echoes=<n>: <why>`;
//! - on stderr at the end, a line per instance, `stream-check: instance=<addr>
//!   opened=<n> open_failures=<n> broken=<n> errors=<n> attempts_failed=<n>
//!   first_unix_ms=<n> last_unix_ms=<n>` (the attempts are the openings tried on it,
//!   those the stack retried elsewhere included; the times, when its first and last
//!   attempts ended);
//! - on stdout, exactly one line: `streams opened=<n> open_failures=<n> broken=<n>
//!   msgs=<n> errors=<n>`. `open_failures`: openings that returned an error (one the
//!   stack retried and then opened is not one); `broken`: streams cut by a lost
//!   instance (their connection failed after they opened); `msgs`: echoes that came
//!   back right; `errors`: streams that failed any other way.
//!
//! It exits 0 when no opening failed and no stream failed (`open_failures=0
//! errors=0`: streams broken by a lost instance are the fleet's doing, not the
//! client's), 1 otherwise.

use std::time::Duration;

use clap::{ArgGroup, Parser};
use examples::attempts::InstanceCounts;
use examples::cli::{Usage, fail, refuse};
use examples::options::{self, EtcdUrl, IoArg};
use examples::registry::{RegistryLayout, etcd_target, follow};
use examples::stream::{StreamServiceClient, StreamServiceStreamClient};
use examples::stream_load::{self, STREAM_DEADLINE, StreamLoad};
use examples::stream_service::check_peer;
use volo_core::client::{ClientConfig, Discover, Instance, StaticDiscover, StreamClient};
use volo_core::context::Address;

/// Checks a StreamService server's calls and streams, one line per check; or, with
/// --load, keeps streams going over several instances.
#[derive(Debug, Parser)]
#[command(name = "stream-check", version, args_override_self = true)]
#[command(group(ArgGroup::new("instances").required(true).args(["addr", "discover"])))]
struct Cli {
    /// The server: host:port, unix:PATH or shm:PATH; with --load, the instances,
    /// comma-separated.
    #[arg(long, value_name = "ADDR[,ADDR...]", value_delimiter = ',',
          value_parser = options::address)]
    addr: Vec<Address>,

    /// With --load: follows the instances registered in etcd under StreamService
    /// (needs the `etcd` feature).
    #[arg(long, value_name = "etcd://HOST:PORT[,HOST:PORT...]", requires = "load",
          value_parser = options::etcd_url)]
    discover: Option<EtcdUrl>,

    /// The sockets' implementation.
    #[arg(long, value_enum, value_name = "IO", default_value = "netpoll")]
    io: IoArg,

    /// The deadline check's deadline, in milliseconds (its stream takes 500 ms).
    #[arg(long, value_name = "MS", default_value_t = 250, conflicts_with = "load",
          value_parser = clap::value_parser!(u64).range(1..))]
    deadline_ms: u64,

    /// Instead of the checks: keeps N bidirectional streams going, and prints what
    /// became of them.
    #[arg(long, value_name = "N", value_parser = options::at_least_one())]
    load: Option<usize>,

    /// With --load: how long streams are opened, in seconds.
    #[arg(long, value_name = "SECS", default_value = "10", requires = "load",
          value_parser = options::positive_seconds)]
    duration: Duration,
}

fn main() {
    let cli = Cli::parse();
    let rt = tokio::runtime::Runtime::new().unwrap_or_else(|e| {
        eprintln!("stream-check: no runtime: {e}");
        std::process::exit(1)
    });
    let passed = match cli.load {
        Some(streams) => rt.block_on(load(&cli, streams)),
        None => match cli.addr.as_slice() {
            [addr] => rt.block_on(checks(&cli, addr)),
            _ => refuse::<Cli>("the checks run against one server: one --addr (or --load)"),
        },
    };
    match passed {
        Ok(passed) => std::process::exit(i32::from(!passed)),
        Err(e) => fail("stream-check", e),
    }
}

/// Runs the checks against `addr`, a line each; whether all passed.
async fn checks(cli: &Cli, addr: &Address) -> Result<bool, Usage> {
    let mut config = ClientConfig::default();
    cli.io.apply(&mut config.transport);
    let no_client = |e: std::io::Error| Usage(format!("no client: {e}"));
    let open = |timeout: Option<Duration>| {
        StreamClient::new("StreamService", addr.clone(), &config).map(|c| {
            let c = match timeout {
                Some(t) => c.with_timeout(t),
                None => c,
            };
            StreamServiceStreamClient::new(c)
        })
    };
    let c = open(None).map_err(no_client)?;
    let slow = open(Some(Duration::from_millis(cli.deadline_ms))).map_err(no_client)?;
    let calls = StreamServiceClient::builder()
        .address(addr.clone())
        .config(config.clone())
        .build()
        .map_err(no_client)?;
    let mut failed = 0;
    for (name, result) in check_peer(&calls, &c, &slow).await {
        match result {
            Ok(()) => println!("PASS {name}"),
            Err(why) => {
                failed += 1;
                println!("FAIL {name}: {why}");
            }
        }
    }
    // The process exits next: the rsts of the streams the checks dropped (the
    // cancel, the deadline) leave first, so the server sees them, not a cut.
    c.client().close().await;
    slow.client().close().await;
    Ok(failed == 0)
}

/// Keeps `streams` bidirectional streams going over the instances; whether none
/// failed but by a lost instance.
async fn load(cli: &Cli, streams: usize) -> Result<bool, Usage> {
    let mut config = ClientConfig::default();
    cli.io.apply(&mut config.transport);
    config.streams.timeout = Some(STREAM_DEADLINE);
    let attempts = InstanceCounts::new(&cli.addr);
    let (discover, target): (Box<dyn Discover>, String) = match &cli.discover {
        Some(url) => (
            follow(
                url,
                RegistryLayout::Native,
                "StreamService",
                false,
                "stream-check",
            )
            .await?,
            etcd_target(url),
        ),
        None => {
            let list: Vec<String> = cli.addr.iter().map(ToString::to_string).collect();
            let instances = cli.addr.iter().cloned().map(Instance::new);
            (Box::new(StaticDiscover::new(instances)), list.join(","))
        }
    };
    let client = StreamServiceClient::builder()
        .discover(discover)
        .config(config)
        .layer_inner(attempts.layer())
        .build()
        .map_err(|e| Usage(format!("client: {e}")))?;
    let plan = StreamLoad::new(streams).duration(cli.duration);
    eprintln!(
        "stream-check: {target}, {streams} bidi streams of {} echoes of {} bytes, {} s",
        plan.messages,
        plan.size,
        cli.duration.as_secs_f64()
    );
    let closer = client.clone();
    let report = stream_load::run(client, plan).await;
    // The process exits next: the streams' last frames leave first.
    closer.client().close_streams().await;
    for line in report.instance_lines(&attempts) {
        eprintln!("stream-check: {line}");
    }
    println!("{}", report.line());
    Ok(report.passed())
}
