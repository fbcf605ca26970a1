//! `rpc-bench`: the whole stack: our EchoService server and our client in one
//! process, one closed-loop run per transport (`--transports`), a progress bar while
//! each runs, then a table and one
//! the whole stack: our EchoService server and our client in one process, one
//! closed-loop run per transport, a progress bar while each runs, then a table and one
//! line per transport: `transport=<name> qps=<n> p50_us=<n> p99_us=<n> p999_us=<n>
//! errors=<n>`. Each figure is client and server together; to compare servers (ours
//! against Volo's, each in a pinned process, driven by the same load generator), see
//! *Server-only mode* below.
//!
//! Transports: `tokio` (TCP on tokio's own sockets on both sides: the baseline),
//! `netpoll` (TCP on netpoll-rs), `uring` (TCP on netpoll-rs with io_uring pollers on
//! both sides), `uds` (a Unix-domain socket on netpoll-rs), `shm` (shm-ipc: shared
//! memory, with a Unix socket for control and wake-ups). With
//! `--mux` the client sends its calls over two mux connections per peer
//! (TTHeader framing only) instead of a pool with one connection per caller.
//!
//! The server runs on a tokio runtime with one worker thread of its own, the client on
//! another: a server and its clients in two processes would not share threads either.
//! Compare the rows with each other; they share the machine's cores.
//!
//! `--stack` picks the client's stack: `default` (what `EchoServiceClient::builder()`
//! builds: timeout, service breaker, retry, backup, balancer with instance breakers)
//! or `bare` (the transport with only the balancer that names the instance above it):
//! the two in one run give what the default stack costs. After the transport lines,
//! `client_cpu transport=<name> ns_per_call=<n>` gives the CPU time (user and system)
//! of the client runtime's thread per call over the measured window, read from
//! `/proc` (10 ms ticks). While the client's pollers spin between events (netpoll-rs's
//! `spin`) the thread is busy between calls too, so under full load this is close to
//! its whole time per call, not only its work.
//!
//! `paired` measures the default stack's cost where runs vary more from one to the
//! next than the cost itself (a shared VM): one server, both clients, and the window
//! cut into one-second slices run alternately on the bare and the default stack (bare
//! first, then default first, and so on), so each pair of slices sees the same
//! machine. Instead of the table it prints a `pair transport=<name> n=<i>
//! bare_qps=<n> default_qps=<n>` line per pair and, per transport,
//! `paired transport=<name> pairs=<n> bare_qps=<mean> default_qps=<mean>
//! qps_ratio=<mean of the pairs' default/bare> qps_ratio_se=<its standard error>
//! bare_cpu_ns=<mean> default_cpu_ns=<mean>`.
//!
//! `--metrics on` counts metrics on both sides (`volo_core::metrics`: the server's
//! and the client's `metrics` settings, one `Metrics` for the whole run);
//! `--metrics-addr HOST:PORT` serves them at `http://HOST:PORT/metrics` while the run
//! lasts (and turns them on). `--metrics on,off` measures what they cost the way
//! `paired` measures the stack: two servers, one counting and one not, each with a
//! default-stack client of its own doing the same, in one-second slices taken
//! alternately; it prints `pair transport=<name> n=<i> off_qps=<n> on_qps=<n>` per
//! pair and `paired transport=<name> pairs=<n> off_qps=<mean> on_qps=<mean>
//! qps_ratio=<mean of on/off> qps_ratio_se=<se> off_cpu_ns=<mean> on_cpu_ns=<mean>`.
//!
//! `--pin` puts every thread of the server side (its runtime, its pollers) on CPU 0 and
//! every thread of the client side on CPU 1, as two processes pinned to a core each
//! would be: the scheduler no longer moves them or puts both on one core. (On the
//! 2-core VM this was written on it did not narrow the run-to-run spread; `paired`
//! does.) The calls per second are then those of the slower side.
//!
//! # Stream mode (`--stream server,client,bidi,bidi-pingpong`)
//!
//! `rpc-bench --stream KIND[,...] [--concurrency N] [--size BYTES] [--duration SECS]
//! [--stream-server ours|CMD ...]` measures streams (Kitex's StreamX over TTHeader) against
//! ping-pong calls of the same messages: a StreamService server (`stream-server`, or
//! `CMD`, e.g. a Kitex StreamX server) pinned to CPU 0, this load generator pinned to
//! CPU 1, a ping-pong run and then one run per kind, each printing
//! `stream=<kind> msgs_per_s=.. p50_us=.. p99_us=.. errors=.. server_cpu_us_per_msg=..
//! server_cores=..`. What a message and its latency are for each kind:
//! `examples::stream_bench`.
//!
//! # Server-only mode (`--server-only`): the kitex-benchmark method
//!
//! `rpc-bench --server-only [--concurrency 1,100] [--warmup SECS] [--rounds N]
//! [--loadgen ours,volo] [--server-spin adaptive|fixed|off|LIST]
//! [--server-io epoll|uring|LIST] [--server-cpus LIST]
//! [--client-cpus LIST] ...` (`rpc-bench --help` lists the flags of both modes)
//!
//! Compares servers rather than whole stacks. The server under test runs in a process
//! of its own (this program run again with a hidden `--serve ours|volo` subcommand),
//! pinned with `sched_setaffinity` to `--server-cpus` (default 0, one tokio worker per
//! CPU); the load generator runs in this process, pinned to `--client-cpus` (default 1).
//! The servers: ours (`volo_core::server::Server` with the generated
//! `EchoServiceServer` on netpoll-rs, default config; `--server-spin` sets how its
//! reactor polls between events: `adaptive`, the default, `fixed`, the 50 µs spin
//! after every burst it had before, or `off`; a list runs each; `--server-io uring`
//! puts its pollers on io_uring, reported as `server=ours-uring`, and
//! `--server-io epoll,uring` runs both) and Volo's (`volo_peer::serve`). Every server is driven by the same load generators: our
//! `EchoServiceClient` (`--stack`, default `bare` here, so that the client spends
//! little per call) and Volo's client (`volo_peer::VoloClient`); `--mux` adds
//! our client over two mux connections (`ours-mux`) and Volo's mux server
//! (`volo_peer::serve_mux`, `server=volo-mux`, with `ratio
//! of=ours/volo-mux` lines beside the `of=ours/volo` ones); `raw` is no client at
//! all: a request encoded once, written on a connection per caller, each reply read
//! whole and checked, the least a caller can spend per call. Both clients speak TTHeader over Framed, Binary, so the
//! servers read the same bytes. Each case (load generator, callers) runs every server
//! once per round, each in a fresh child, in turns (A B, then B A), `--rounds` times
//! (default 2), and the rounds are pooled; defaults: 1 KiB messages, 1 and 100
//! callers, 1 s warm-up and a 10 s window per run.
//!
//! Over each window the child reports its own `getrusage(RUSAGE_SELF)` (user + system
//! CPU time of all its threads) and its memory (`VmRSS`, `VmHWM`) when asked at the
//! window's start and end. Per case, a line:
//! `server_only server=ours spin=adaptive loadgen=ours conc=100 size=1024 qps=.. p50_us=..
//! p99_us=.. p999_us=.. errors=.. server_cpu_us_per_call=.. server_util=..
//! client_util=.. server_hwm_kb=.. rounds=.. qps_rounds=../..`, where
//! `server_cpu_us_per_call` is the server's CPU time over the calls answered in the
//! window and `server_util` that time over the window's wall time (1.0: one core busy
//! throughout). `client_util` is the same for this process: the side near 1.0 limits
//! the QPS. With one core each, a server that is not the bottleneck shows it in a
//! `server_util` below 1 and is compared by its CPU per call. A spinning reactor keeps
//! its core busy between calls, which shows here as CPU per call. Then, per load
//! generator and callers, `ratio of=ours/volo spin=.. loadgen=.. conc=.. size=..
//! qps=.. cpu_per_call=.. p50=.. p99=.. qps_by_round=../.. cpu_per_call_by_round=../..`
//! (above 1: ours is more; pooled, then round by round, each round's two runs being
//! close in time, so their spread is the noise of the machine), and with `off` and
//! another mode in `--server-spin` a `spin mode=.. ...` line: the latency with that
//! spin and without, beside the CPU it costs. A `round` line after each run shows the
//! spread.
//!
//! # Partial load (`--server-only --rate 25%,50%,75%`)
//!
//! `rpc-bench --server-only --rate LIST [--kitex-server CMD] [--concurrency N]
//! [--loadgen raw] [--server-spin ..] [--rounds N] [--duration SECS]`
//!
//! Servers run at a fraction of what they can do, and a closed loop at saturation
//! hides what they spend there. This mode first drives Volo's server to saturation
//! with a closed loop (`saturation ...` line), then offers each server each rate of
//! `--rate` (a share of that saturated rate, `25%`, or calls a second, `30000`) in an
//! open loop ([`examples::open_loop`]: calls due on a fixed schedule whatever the
//! replies do, latency from each call's due time, at most `--concurrency` (default 100)
//! at once), from the `raw` load generator by default (one core of it can offer the
//! most). The servers: ours in each `--server-spin` mode, Volo's, and with
//! `--kitex-server CMD` a Kitex server run by `sh -c CMD`, `{addr}` in it replaced by
//! the address to listen on (or `--addr ADDR` appended), pinned like the others; its
//! usage is read from `/proc` (CPU time in 10 ms ticks, context switches of its live
//! threads). Each server runs each rate `--rounds` times (default 2), in turns, and the
//! runs are pooled: a `round` line after each, then per server and rate
//! `partial server=.. spin=.. share=.. loadgen=.. conc=.. size=.. rate=<offered>
//! qps=<achieved> p50_us=.. p99_us=.. p999_us=.. max_us=.. errors=.. late=..
//! server_cores=.. server_cpu_us_per_call=.. csw_per_call=.. wakeups_per_call=..
//! client_util=.. rounds=.. cores_by_round=../..` (`server_cores`: CPU time over wall
//! time; `wakeups_per_call`: voluntary context switches, each a thread that waited and
//! was woken, per call; `late`: calls that started more than 1 ms after they were due
//! because no caller was free), and `partial_ratio of=ours/volo|ours/kitex spin=..
//! share=.. rate=.. cores=.. cpu_per_call=.. p99=..` lines.
//!
//! # Latency at low concurrency (`--server-only --latency`)
//!
//! `rpc-bench --server-only --latency [--concurrency 1,4,16] [--size 64,1024]
//! [--loadgen ours,volo] [--server-spin adaptive,fixed,off] [--kitex-server CMD]
//! [--rounds N] [--duration SECS]`
//!
//! Closed loops of a few callers, where every call that finds a server asleep pays
//! for waking it. Each server (ours in each spin mode by default, Volo's, a Kitex
//! server when given) runs each case (size, callers, load generator) `--rounds` times
//! in turns, in a fresh pinned child, 5 s windows by default, and the runs are pooled:
//! `latency server=<name> loadgen=<name> callers=N size=B qps=.. p50_us=.. p99_us=..
//! cpu_us_per_call=..` per case (`<name>`: `ours-adaptive`, `ours-fixed`, `ours-off`,
//! `volo`, `kitex`), then `latency_ratio of=ours-<spin>/volo ...` lines. See
//! [`examples::server_only::LatencySettings`].
//!
//! `rpc-bench --idle-conns N [--idle-secs SECS] [--server-spin ..] [--server-cpus LIST]
//! [--client-cpus LIST]`: for each server, N connections opened, each used for one
//! call (so the server has really taken it on) and left idle, and
//! `idle server=.. spin=.. conns=N opened=.. closed_by_server=.. rss_before_kb=..
//! rss_after_kb=.. rss_per_conn_bytes=.. idle_secs=.. idle_cpu_ms_per_s=..`: the
//! server's resident memory growth per connection (user space; socket buffers are the
//! kernel's) and its CPU time while nothing is sent (default window 5 s). Both
//! processes raise `RLIMIT_NOFILE` to their hard limit first; `nofile` lines say what it
//! was and is.
//!
//! Figures from a shared machine are indicative: compare within one run, read the
//! load average in the first line, and the spread in the `round` lines.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{ArgGroup, Parser, ValueEnum};
use examples::cli::{Usage, fail, refuse};
use examples::echo::EchoServiceClient;
use examples::echo_service::{
    BareStack, EchoCall, EchoStack, RunningEcho, bare_client, default_client,
};
use examples::load::{Plan, Report, closed_loop, progress_wanted};
use examples::options::{self, DriverArg, FramingArg, OnOff, ProtocolArg, SpinArg};
use examples::server_only::{
    self, ClientStack, CpuList, IdleSettings, LatencySettings, LoadGenName, PartialSettings,
    RateSpec, Settings as ServerOnly,
};
use examples::stream_bench::{self, StreamBenchSettings, StreamKind};
use volo_core::client::ClientConfig;
use volo_core::client::{ConnectionPool, WireFormat};
use volo_core::codec::{Framing, Protocol};
use volo_core::config::{Observability, TransportConfig};
use volo_core::context::Address;
use volo_core::metrics::Metrics;
use volo_core::server::ServerConfig;
use volo_core::transport::TransportKind;

/// RPC echo, client and server, over each transport: calls per second and latency.
/// With --server-only (or --idle-conns), our server against Volo's, each in a pinned
/// process of its own, under the same load generators.
#[derive(Debug, Parser)]
#[command(name = "rpc-bench", version, args_override_self = true)]
#[command(group(ArgGroup::new("server_side").multiple(true).args(["server_only", "idle_conns"])))]
struct Cli {
    /// The transports to run, in order.
    #[arg(
        long,
        value_enum,
        value_name = "TRANSPORT[,...]",
        value_delimiter = ',',
        default_value = "tokio,netpoll,uds,shm",
        conflicts_with = "server_side"
    )]
    transports: Vec<BenchTransport>,

    /// Callers, each with one call in flight [default: 100; with --server-only, a
    /// comma-separated list, one case each: 1,100].
    #[arg(long, value_name = "N[,N...]", value_delimiter = ',',
          value_parser = options::at_least_one())]
    concurrency: Vec<usize>,

    /// Bytes of each message [default: 1024; with --latency, a comma-separated list,
    /// one case each: 64,1024].
    #[arg(long, value_name = "BYTES[,...]", value_delimiter = ',',
          value_parser = options::at_least_one())]
    size: Vec<usize>,

    /// The measured window of each run, in seconds [default: 15; with --server-only 10].
    #[arg(long, value_name = "SECS", value_parser = options::positive_seconds)]
    duration: Option<Duration>,

    /// The framing.
    #[arg(
        long,
        value_enum,
        default_value = "ttheader",
        conflicts_with = "server_side"
    )]
    framing: FramingArg,

    /// The protocol.
    #[arg(
        long,
        value_enum,
        default_value = "binary",
        conflicts_with = "server_side"
    )]
    protocol: ProtocolArg,

    /// The client sends its calls over two mux connections per peer (ttheader only);
    /// with --server-only, adds our mux client as a load generator (ours-mux).
    /// Every server-only line says how many calls one server read and one server write
    /// carried (`calls_per_recv`, `calls_per_send`).
    #[arg(long)]
    mux: bool,

    /// The client's stack [default: default; with --server-only bare, and not paired].
    #[arg(long, value_enum)]
    stack: Option<Stack>,

    /// The server's threads on CPU 0, the client's on CPU 1.
    #[arg(long, conflicts_with = "server_side")]
    pin: bool,

    /// Metrics on both sides: off, on, or on,off (compared in alternate slices)
    /// [default: off, or on with --metrics-addr].
    #[arg(
        long,
        value_enum,
        value_name = "on|off|on,off",
        value_delimiter = ',',
        conflicts_with = "server_side"
    )]
    metrics: Vec<OnOff>,

    /// Serves the run's metrics at http://HOST:PORT/metrics (turns them on).
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "server_side")]
    metrics_addr: Option<SocketAddr>,

    /// Server-only mode: each server in a pinned process of its own.
    #[arg(long)]
    server_only: bool,

    /// (server-only) Unmeasured time before each window, in seconds.
    #[arg(long, value_name = "SECS", default_value = "1", requires = "server_side",
          value_parser = options::seconds)]
    warmup: Duration,

    /// (server-only) Runs of each case per server, pooled.
    #[arg(long, value_name = "N", default_value = "2", requires = "server_side",
          value_parser = options::at_least_one())]
    rounds: usize,

    /// (server-only) The load generators: ours, volo, ours-mux, raw (pre-encoded
    /// requests on plain connections) [default: ours,volo; with --rate, raw].
    #[arg(
        long,
        value_enum,
        value_name = "NAME[,...]",
        value_delimiter = ',',
        requires = "server_side"
    )]
    loadgen: Vec<LoadGenName>,

    /// (server-only) How our server's pollers spin between events: adaptive, fixed
    /// (50 µs after every burst, the old default), off, or a list (each compared)
    /// [default: adaptive; with --latency adaptive,fixed,off].
    #[arg(
        long,
        value_enum,
        value_name = "MODE[,...]",
        value_delimiter = ',',
        requires = "server_side"
    )]
    server_spin: Vec<SpinArg>,

    /// (server-only) Our server's reactor driver: epoll, uring (io_uring), or a list
    /// (each compared, as `server=ours` and `server=ours-uring`).
    #[arg(
        long,
        value_enum,
        value_name = "DRIVER[,...]",
        value_delimiter = ',',
        default_value = "epoll",
        requires = "server_side"
    )]
    server_io: Vec<DriverArg>,

    /// (server-only) The server child's CPUs, e.g. 0 or 0,2 or 1-3.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "0",
        requires = "server_side"
    )]
    server_cpus: CpuList,

    /// (server-only) The load generator's CPUs.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "1",
        requires = "server_side"
    )]
    client_cpus: CpuList,

    /// (server-only) Partial load: each server offered these rates in an open loop,
    /// as shares of Volo's saturated rate measured first (25%) or in calls a second.
    #[arg(
        long,
        value_name = "RATE[,...]",
        value_delimiter = ',',
        requires = "server_only"
    )]
    rate: Vec<RateSpec>,

    /// (server-only) Latency at low concurrency: closed loops of 1, 4 and 16 callers
    /// (or --concurrency), 64 B and 1 KiB (or --size), against ours in every spin mode
    /// (or --server-spin), Volo's and a --kitex-server if given.
    #[arg(long, requires = "server_only", conflicts_with = "rate")]
    latency: bool,

    /// (server-only, with --rate or --latency) A Kitex server to compare too: a command
    /// line run through `sh -c`, with {addr} replaced by the address to listen on (or
    /// `--addr ADDR` appended).
    #[arg(long, value_name = "CMD")]
    kitex_server: Option<String>,

    /// Stream mode: server, client, bidi and bidi-pingpong streams (a list), after a ping-pong run at
    /// the same size and callers, against a pinned streaming server.
    #[arg(
        long,
        value_enum,
        value_name = "KIND[,...]",
        value_delimiter = ',',
        conflicts_with = "server_side"
    )]
    stream: Vec<StreamKind>,

    /// (stream) A streaming server: `ours` (this build's stream-server, the default)
    /// or a command line run through `sh -c`, with {addr} replaced by the address to
    /// listen on. Repeat it to measure several in one run.
    #[arg(long, value_name = "ours|CMD", requires = "stream")]
    stream_server: Vec<String>,

    /// Idle-connections mode: N connections to each server, each used once, then idle.
    #[arg(long, value_name = "N")]
    idle_conns: Option<usize>,

    /// (idle) How long the connections stay idle, in seconds.
    #[arg(long, value_name = "SECS", default_value = "5", requires = "idle_conns",
          value_parser = options::positive_seconds)]
    idle_secs: Duration,
}

/// `--size` in the modes that take one size (1 KiB when none is given).
fn one_size(sizes: &[usize]) -> usize {
    match sizes {
        [] => 1024,
        [n] => *n,
        _ => refuse::<Cli>("--size takes one number here (a list with --latency)"),
    }
}

/// `--transports`' names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BenchTransport {
    /// TCP on tokio's own sockets, both sides (the baseline).
    Tokio,
    /// TCP on netpoll-rs.
    Netpoll,
    /// TCP on netpoll-rs with io_uring pollers, both sides (`netpoll_rs::Driver`).
    Uring,
    /// A Unix-domain socket on netpoll-rs.
    Uds,
    /// shm-ipc: shared memory, a Unix socket for control and wake-ups.
    Shm,
}

/// `--stream`: see [`examples::stream_bench`].
fn stream_mode(cli: Cli) -> Result<(), Usage> {
    let concurrency = match cli.concurrency[..] {
        [] => 100,
        [n] => n,
        _ => refuse::<Cli>("--concurrency takes one number with --stream"),
    };
    let settings = StreamBenchSettings {
        kinds: cli.stream,
        servers: cli.stream_server,
        concurrency,
        size: one_size(&cli.size),
        warmup: Duration::from_secs(1),
        duration: cli.duration.unwrap_or(Duration::from_secs(10)),
    };
    let lines = stream_bench::run(&settings).map_err(|e| Usage(format!("stream bench: {e}")))?;
    for line in lines {
        println!("{line}");
    }
    Ok(())
}

fn main() {
    server_only::serve_if_asked();
    // `cargo bench` passes `--bench` to every target it runs.
    let cli = Cli::parse_from(std::env::args_os().filter(|a| a != "--bench"));
    let result = if cli.server_only || cli.idle_conns.is_some() {
        server_only_mode(cli)
    } else if !cli.stream.is_empty() {
        stream_mode(cli)
    } else {
        whole_stack(cli)
    };
    if let Err(e) = result {
        fail("rpc-bench", e);
    }
}

struct Settings {
    concurrency: usize,
    size: usize,
    duration: Duration,
    framing: Framing,
    protocol: Protocol,
    mux: bool,
    /// The client stack: the default one, the bare transport, or both in turns.
    stack: Stack,
    /// The server's threads on CPU 0, the client's on CPU 1.
    pin: bool,
    /// Metrics on both sides (`--metrics on`), or `None`.
    metrics: Option<Metrics>,
    /// `--metrics on,off`: a counting server and client against plain ones.
    compare_metrics: bool,
}

/// The whole stack, one run per transport.
fn whole_stack(cli: Cli) -> Result<(), Usage> {
    let concurrency = match cli.concurrency[..] {
        [] => 100,
        [n] => n,
        _ => refuse::<Cli>("--concurrency takes one number here (a list with --server-only)"),
    };
    let metrics_on = match cli.metrics[..] {
        [] => cli.metrics_addr.is_some(),
        _ => cli.metrics.iter().any(|m| m.is_on()),
    };
    if cli.metrics_addr.is_some() && !metrics_on {
        refuse::<Cli>("--metrics-addr needs --metrics on");
    }
    let compare_metrics = metrics_on && cli.metrics.contains(&OnOff::Off);
    if cli.mux && cli.framing.0 != Framing::TTHeader {
        refuse::<Cli>("--mux needs --framing ttheader");
    }
    let metrics = metrics_on.then(Metrics::new);
    // The endpoint's own runtime, for as long as the run lasts.
    let _endpoint = match (&metrics, cli.metrics_addr) {
        (Some(m), Some(addr)) => {
            let rt = runtime("rpcb-metrics")?;
            let server = rt
                .block_on(m.serve(addr))
                .map_err(|e| Usage(format!("--metrics-addr {addr}: {e}")))?;
            println!(
                "rpc-bench: metrics at http://{}/metrics",
                server.local_addr()
            );
            Some((server, rt))
        }
        _ => None,
    };
    let transports: Vec<String> = (cli.transports.iter())
        .filter_map(ValueEnum::to_possible_value)
        .map(|t| t.get_name().to_string())
        .collect();
    let settings = Settings {
        concurrency,
        size: one_size(&cli.size),
        duration: cli.duration.unwrap_or(Duration::from_secs(15)),
        framing: cli.framing.0,
        protocol: cli.protocol.0,
        mux: cli.mux,
        stack: cli.stack.unwrap_or(Stack::Default),
        pin: cli.pin,
        metrics,
        compare_metrics,
    };
    println!(
        "rpc-bench: echo of {}-byte messages, {} callers, {:.0} s per transport, {:?}/{:?}{}, \
         {} CPUs",
        settings.size,
        settings.concurrency,
        settings.duration.as_secs_f64(),
        settings.framing,
        settings.protocol,
        if settings.mux { ", mux" } else { "" },
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    if settings.stack == Stack::Paired || settings.compare_metrics {
        for t in &transports {
            let s = &settings;
            let line = with_server(t, s, |clients| paired(clients, s, t))?;
            println!("{line}");
        }
        return Ok(());
    }
    let mut rows = Vec::new();
    let mut cpu = Vec::new();
    for t in &transports {
        let (report, per_call) = bench_one(t, &settings)?;
        rows.push((t.clone(), report));
        cpu.push((t.clone(), per_call));
    }
    println!();
    println!(
        "{:<10} {:>10} {:>9} {:>9} {:>9} {:>7}",
        "transport", "QPS", "p50 µs", "p99 µs", "p999 µs", "errors"
    );
    for (t, r) in &rows {
        println!(
            "{:<10} {:>10.0} {:>9} {:>9} {:>9} {:>7}",
            t,
            r.qps(),
            r.quantile_us(0.5),
            r.quantile_us(0.99),
            r.quantile_us(0.999),
            r.errors
        );
    }
    println!();
    for (t, r) in &rows {
        println!("transport={t} {}", r.line());
    }
    for (t, per_call) in cpu {
        if let Some(ns) = per_call {
            println!("client_cpu transport={t} ns_per_call={ns}");
        }
    }
    Ok(())
}

/// Which client stack a run measures (`--stack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Stack {
    /// What `EchoServiceClient::builder()` builds: timeout, breakers, retry, backup,
    /// balancer.
    Default,
    /// The transport with only the balancer that names the instance.
    Bare,
    /// Both, in alternate one-second slices against one server.
    Paired,
}

/// The clients a run may use, over one server (and, to compare metrics on and off,
/// a second server that counts).
struct Clients {
    transport: String,
    addr: Address,
    config: ClientConfig,
    /// The counting server, and the settings of a client that counts too.
    metered: Option<(Address, ClientConfig)>,
}

impl Clients {
    /// The transport with only the balancer above it (which names the instance).
    fn bare(&self) -> Result<EchoServiceClient<BareStack>, Usage> {
        bare_client(self.addr.clone(), self.config.clone()).map_err(|e| self.failed(e))
    }

    /// What `EchoServiceClient::builder()` builds.
    fn default_stack(&self) -> Result<EchoServiceClient, Usage> {
        default_client(self.addr.clone(), self.config.clone()).map_err(|e| self.failed(e))
    }

    /// The default stack counting metrics, to the server that counts them.
    fn metered_stack(&self) -> Result<EchoServiceClient, Usage> {
        let Some((addr, config)) = &self.metered else {
            return Err(Usage("no metered server".into()));
        };
        default_client(addr.clone(), config.clone()).map_err(|e| self.failed(e))
    }

    fn failed(&self, e: std::io::Error) -> Usage {
        Usage(format!("{}: client: {e}", self.transport))
    }
}

/// One transport: a fresh server, `run` on the client runtime with the clients'
/// settings, both stopped.
fn with_server<'a, F, Fut, T>(transport: &'a str, s: &'a Settings, run: F) -> Result<T, Usage>
where
    F: FnOnce(Clients) -> Fut,
    Fut: std::future::Future<Output = Result<T, Usage>> + 'a,
{
    let dir = std::env::temp_dir().join(format!("rpc-bench-{}", std::process::id()));
    let address = |name: &str| -> Result<(TransportKind, Address), Usage> {
        Ok(match transport {
            "tokio" => (TransportKind::Tokio, Address::Tcp(localhost())),
            "netpoll" | "uring" => (TransportKind::Netpoll, Address::Tcp(localhost())),
            _ => {
                std::fs::create_dir_all(&dir)
                    .map_err(|e| Usage(format!("{}: {e}", dir.display())))?;
                let path = dir.join(name);
                let _ = std::fs::remove_file(&path);
                if transport == "shm" {
                    (TransportKind::Netpoll, Address::Shm(path.into()))
                } else {
                    (TransportKind::Netpoll, Address::Unix(path.into()))
                }
            }
        })
    };
    let (io, addr) = address("echo.sock")?;
    let reactor = netpoll_rs::Config {
        driver: if transport == "uring" {
            netpoll_rs::Driver::IoUring
        } else {
            netpoll_rs::Driver::from_env()
        },
        ..Default::default()
    };
    // Threads inherit the CPUs of the thread that starts them: this one is on the
    // server's CPU while the server side starts, then on the client's.
    if s.pin {
        pin_to(0)?;
    }
    let server_rt = runtime("rpcb-server")?;
    let start = |addr: &Address, metrics: Option<Metrics>| {
        let config = ServerConfig {
            transport: TransportConfig {
                kind: io,
                reactor: reactor.clone(),
            },
            observability: Observability {
                metrics,
                ..Default::default()
            },
            ..ServerConfig::default()
        };
        RunningEcho::start_with(&server_rt, config, addr)
            .map_err(|e| Usage(format!("{transport}: binding {addr}: {e}")))
    };
    // Compared: this one plain, a second one counting.
    let plain = if s.compare_metrics {
        None
    } else {
        s.metrics.clone()
    };
    let server = start(&addr, plain.clone())?;
    let metered = match (&s.metrics, s.compare_metrics) {
        (Some(m), true) => Some(start(&address("echo-metered.sock")?.1, Some(m.clone()))?),
        _ => None,
    };
    let addr = server.addr.clone();
    if s.pin {
        pin_to(1)?;
    }
    let client_rt = runtime(CLIENT_THREAD)?;
    let config = ClientConfig {
        format: WireFormat {
            framing: s.framing,
            protocol: s.protocol,
            ..Default::default()
        },
        transport: TransportConfig { kind: io, reactor },
        pool: ConnectionPool {
            max_per_instance: s.concurrency,
            mux: s.mux,
            ..Default::default()
        },
        observability: Observability {
            metrics: plain,
            ..Default::default()
        },
        ..ClientConfig::default()
    };
    let clients = Clients {
        transport: transport.to_string(),
        addr,
        metered: metered.as_ref().map(|m| {
            let config = ClientConfig {
                observability: Observability {
                    metrics: s.metrics.clone(),
                    ..Default::default()
                },
                ..config.clone()
            };
            (m.addr.clone(), config)
        }),
        config,
    };
    let out = client_rt.block_on(run(clients));
    drop(client_rt);
    for server in [Some(server), metered].into_iter().flatten() {
        server
            .stop(&server_rt)
            .map_err(|e| Usage(format!("{transport}: stopping the server: {e}")))?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// One transport, one stack: a closed-loop run.
fn bench_one(transport: &str, s: &Settings) -> Result<(Report, Option<u64>), Usage> {
    let plan = Plan {
        concurrency: s.concurrency,
        warmup: Duration::from_secs(1),
        duration: s.duration,
        progress: progress_wanted(),
    };
    with_server(transport, s, |clients| async move {
        Ok(if s.stack == Stack::Bare {
            load(EchoCall::new(clients.bare()?, s.size), plan, transport).await
        } else {
            load(
                EchoCall::new(clients.default_stack()?, s.size),
                plan,
                transport,
            )
            .await
        })
    })
}

/// The window in one-second slices, alternately on each stack (or, with
/// `--metrics on,off`, on the default stack without and with metrics); the summary
/// line.
async fn paired(clients: Clients, s: &Settings, transport: &str) -> Result<String, Usage> {
    if s.compare_metrics {
        let off = EchoCall::new(clients.default_stack()?, s.size);
        let on = EchoCall::new(clients.metered_stack()?, s.size);
        return alternate((off, "off"), (on, "on"), s, transport).await;
    }
    let bare = EchoCall::new(clients.bare()?, s.size);
    let default = EchoCall::new(clients.default_stack()?, s.size);
    alternate((bare, "bare"), (default, "default"), s, transport).await
}

/// Slices taken alternately on `a` and `b` (a first, then b first, ...); the summary
/// line, whose ratio is b's QPS over a's.
async fn alternate<A: EchoStack, B: EchoStack>(
    (a, a_name): (EchoCall<A>, &str),
    (b, b_name): (EchoCall<B>, &str),
    s: &Settings,
    transport: &str,
) -> Result<String, Usage> {
    let slice = |warmup| Plan {
        concurrency: s.concurrency,
        warmup,
        duration: Duration::from_secs(1),
        progress: false,
    };
    // Both clients' connections opened and warm before the first slice counts.
    load(a.clone(), slice(Duration::from_secs(1)), transport).await;
    load(b.clone(), slice(Duration::from_secs(1)), transport).await;
    let pairs = ((s.duration.as_secs_f64() / 2.0) as usize).max(1);
    // (qps, cpu ns per call) of each slice, per stack.
    let mut a_slices = Vec::with_capacity(pairs);
    let mut b_slices = Vec::with_capacity(pairs);
    let settle = Duration::from_millis(100);
    for i in 0..pairs {
        for b_turn in [i % 2 == 1, i % 2 == 0] {
            if b_turn {
                let (r, cpu) = load(b.clone(), slice(settle), transport).await;
                b_slices.push((r.qps(), cpu.unwrap_or(0) as f64));
            } else {
                let (r, cpu) = load(a.clone(), slice(settle), transport).await;
                a_slices.push((r.qps(), cpu.unwrap_or(0) as f64));
            }
        }
        let (aq, bq) = (a_slices[i].0, b_slices[i].0);
        println!("pair transport={transport} n={i} {a_name}_qps={aq:.0} {b_name}_qps={bq:.0}");
    }
    let ratios: Vec<f64> = a_slices
        .iter()
        .zip(&b_slices)
        .map(|(a, b)| b.0 / a.0)
        .collect();
    let (ratio, se) = mean_and_se(&ratios);
    Ok(format!(
        "paired transport={transport} pairs={pairs} {a_name}_qps={:.0} {b_name}_qps={:.0} \
         qps_ratio={ratio:.4} qps_ratio_se={se:.4} {a_name}_cpu_ns={:.0} {b_name}_cpu_ns={:.0}",
        mean(a_slices.iter().map(|x| x.0)),
        mean(b_slices.iter().map(|x| x.0)),
        mean(a_slices.iter().map(|x| x.1)),
        mean(b_slices.iter().map(|x| x.1)),
    ))
}

/// The mean of `values`.
fn mean(values: impl ExactSizeIterator<Item = f64>) -> f64 {
    let n = values.len() as f64;
    values.sum::<f64>() / n
}

/// The mean of `v` and its standard error (0 with fewer than two values).
fn mean_and_se(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = mean(v.iter().copied());
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

/// The CPU time (user and system) the client runtime's threads have used so far, from
/// `/proc/self/task/*/stat` (in clock ticks of 10 ms, Linux's `USER_HZ`); `None` where
/// that cannot be read.
fn client_cpu() -> Option<Duration> {
    let mut ticks = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
        if comm.trim_end() != CLIENT_THREAD {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        // After the command in parentheses: the state (field 3), ..., utime (14),
        // stime (15).
        let rest = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        ticks += fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    }
    Some(Duration::from_millis(ticks * 10))
}

/// The closed loop over `call`'s client, whatever its stack, and the client's CPU time
/// per call over the measured window, in nanoseconds.
async fn load<T>(call: EchoCall<T>, plan: Plan, label: &str) -> (Report, Option<u64>)
where
    T: EchoStack,
{
    // The CPU time when the window opens (after the warm-up), and when it closed.
    let warmup = plan.warmup;
    let at_start = tokio::spawn(async move {
        tokio::time::sleep(warmup).await;
        client_cpu()
    });
    let report = closed_loop(plan, label, move || {
        let call = call.clone();
        async move { call.call().await }
    })
    .await;
    let end = client_cpu();
    let start = at_start.await.ok().flatten();
    let per_call = match (start, end) {
        (Some(a), Some(b)) if report.calls > 0 => {
            Some((b.saturating_sub(a).as_nanos() / u128::from(report.calls)) as u64)
        }
        _ => None,
    };
    (report, per_call)
}

/// Keeps the calling thread, and the threads it starts from now on, on CPU `cpu`.
fn pin_to(cpu: usize) -> Result<(), Usage> {
    server_only::pin(&[cpu]).map_err(|e| Usage(format!("--pin: {e}")))
}

fn localhost() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 0))
}

/// The name of the client runtime's thread, whose CPU time is measured.
const CLIENT_THREAD: &str = "rpcb-client";

fn runtime(name: &str) -> Result<tokio::runtime::Runtime, Usage> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("runtime: {e}")))
}

/// The load generators of the closed-loop server-only modes: those named, or ours and
/// Volo's.
fn closed_loop_loadgens(
    names: &[LoadGenName],
    stack: ClientStack,
    mux: bool,
) -> Vec<server_only::LoadGen> {
    let names = match names {
        [] => &[LoadGenName::Ours, LoadGenName::Volo][..],
        named => named,
    };
    server_only::loadgens_of(names, stack, mux)
}

/// `--server-only` and `--idle-conns`: each server in a pinned process of its own.
fn server_only_mode(cli: Cli) -> Result<(), Usage> {
    let stack = match cli.stack.unwrap_or(Stack::Bare) {
        Stack::Bare => ClientStack::Bare,
        Stack::Default => ClientStack::Default,
        Stack::Paired => refuse::<Cli>("--stack paired is not for --server-only: bare or default"),
    };
    let exe = std::env::current_exe().map_err(|e| Usage(format!("this program's path: {e}")))?;
    let spins = match &cli.server_spin {
        s if !s.is_empty() => s.clone(),
        _ if cli.latency => vec![SpinArg::Adaptive, SpinArg::Fixed, SpinArg::Off],
        _ => vec![SpinArg::Adaptive],
    };
    if cli.kitex_server.is_some() && cli.rate.is_empty() && !cli.latency {
        refuse::<Cli>("--kitex-server needs --rate or --latency");
    }
    let servers = server_only::servers_of(&spins, &cli.server_io, cli.mux);
    let (server_cpus, client_cpus) = (cli.server_cpus.0, cli.client_cpus.0);
    if server_cpus.iter().any(|c| client_cpus.contains(c)) {
        eprintln!(
            "rpc-bench: server and load generator share CPUs {server_cpus:?} / {client_cpus:?}"
        );
    }
    let failed = |e: std::io::Error| Usage(format!("server-only: {e}"));
    if let Some(conns) = cli.idle_conns {
        let settings = IdleSettings {
            exe,
            servers,
            conns,
            size: one_size(&cli.size),
            window: cli.idle_secs,
            settle: Duration::from_secs(1),
            server_cpus,
            client_cpus,
        };
        println!(
            "rpc-bench idle: {conns} idle connections per server, servers on CPUs {:?}, \
             connections opened from CPUs {:?}, load {}",
            settings.server_cpus,
            settings.client_cpus,
            server_only::load_average()
        );
        for line in server_only::idle(&settings).map_err(failed)? {
            println!("{line}");
        }
        return Ok(());
    }
    if !cli.rate.is_empty() {
        let names = match cli.loadgen {
            l if l.is_empty() => vec![LoadGenName::Raw],
            l => l,
        };
        let loadgens = server_only::loadgens_of(&names, stack, cli.mux);
        let settings = PartialSettings {
            exe,
            servers,
            kitex: cli.kitex_server,
            loadgen: loadgens[0],
            concurrency: cli.concurrency.first().copied().unwrap_or(100),
            size: one_size(&cli.size),
            warmup: cli.warmup,
            window: cli.duration.unwrap_or(Duration::from_secs(10)),
            rates: cli.rate,
            rounds: cli.rounds,
            server_cpus,
            client_cpus,
            progress: progress_wanted(),
        };
        println!(
            "partial load: echo of {}-byte messages, {} callers at most, {:.1} s windows \
             after {:.1} s warm-up, {} round(s), rates {:?}; load generator {} on CPUs \
             {:?}, servers on CPUs {:?}; load {}",
            settings.size,
            settings.concurrency,
            settings.window.as_secs_f64(),
            settings.warmup.as_secs_f64(),
            settings.rounds,
            settings.rates,
            settings.loadgen.name(),
            settings.client_cpus,
            settings.server_cpus,
            server_only::load_average()
        );
        for line in server_only::partial(&settings)? {
            println!("{line}");
        }
        return Ok(());
    }
    if cli.latency {
        let callers = match &cli.concurrency {
            c if c.is_empty() => server_only::CALLERS.to_vec(),
            c => c.clone(),
        };
        let sizes = match &cli.size {
            s if s.is_empty() => server_only::SIZES.to_vec(),
            s => s.clone(),
        };
        let settings = LatencySettings {
            exe,
            servers,
            kitex: cli.kitex_server,
            loadgens: closed_loop_loadgens(&cli.loadgen, stack, cli.mux),
            callers,
            sizes,
            warmup: cli.warmup,
            window: cli.duration.unwrap_or(Duration::from_secs(5)),
            rounds: cli.rounds,
            server_cpus,
            client_cpus,
            progress: progress_wanted(),
        };
        println!(
            "latency: closed loops of {:?} callers, {:?}-byte messages, {:.1} s windows \
             after {:.1} s warm-up, {} round(s); servers [{}] on CPUs {:?}, load \
             generators [{}] on CPUs {:?}; load {}",
            settings.callers,
            settings.sizes,
            settings.window.as_secs_f64(),
            settings.warmup.as_secs_f64(),
            settings.rounds,
            settings
                .servers
                .iter()
                .map(|s| server_only::server_name(*s))
                .chain(settings.kitex.as_ref().map(|_| "kitex".to_string()))
                .collect::<Vec<_>>()
                .join(", "),
            settings.server_cpus,
            settings
                .loadgens
                .iter()
                .map(|l| l.name())
                .collect::<Vec<_>>()
                .join(", "),
            settings.client_cpus,
            server_only::load_average()
        );
        println!();
        for line in server_only::latency(&settings)? {
            println!("{line}");
        }
        return Ok(());
    }
    let concurrency = match cli.concurrency {
        c if c.is_empty() => vec![1, 100],
        c => c,
    };
    let settings = ServerOnly {
        exe,
        servers,
        loadgens: closed_loop_loadgens(&cli.loadgen, stack, cli.mux),
        concurrency,
        size: one_size(&cli.size),
        warmup: cli.warmup,
        window: cli.duration.unwrap_or(Duration::from_secs(10)),
        rounds: cli.rounds,
        server_cpus,
        client_cpus,
        progress: progress_wanted(),
    };
    println!("{}", server_only::header(&settings));
    let cases = server_only::run(&settings).map_err(failed)?;
    println!();
    for line in server_only::summary(&cases) {
        println!("{line}");
    }
    Ok(())
}
