//! `local-first`: what local-first routing gains. A whole-stack measurement, in one
//! process: client and both servers share the machine's cores. `local-first --help`
//! lists the flags. It is built only with the `etcd` feature
//! (`cargo run --release -p examples --features etcd --bin local-first`).
//!
//! Two `EchoService` instances register in etcd (a real one: `--etcd`, or one this
//! program starts on a free loopback port with a temporary data directory, which
//! needs the `etcd` binary):
//! - L, the local one, serves TCP, a Unix socket and shared memory, and registers
//!   this machine's identity;
//! - R, the remote-addressed one, serves TCP only and registers another host's
//!   identity, so that a client takes it for an instance on another machine.
//!
//! A client discovers them through etcd and runs a closed loop (`--concurrency`
//! callers, `--size`-byte messages) for `--duration` seconds, once per mode:
//! - `off`: local-first off; both instances over TCP, power of two choices;
//! - `share=F`: L over shared memory, `F` of the calls to it (power of two choices
//!   on each side), for each `F` of `--shares` (default `1,0.8`).
//!
//! The modes take turns for `--rounds` rounds. Output, per mode and round: `mode=<m>
//! round=<n> qps=<n> p50_us=<n> p99_us=<n> local=<share of attempts on L>
//! cpu_us_per_call=<n> cores=<n>` (the process's CPU time, client and servers
//! together, per answered attempt, and over wall time: shared memory's readers spin
//! briefly before they park, which costs CPU that `cores` shows); then per mode the
//! medians over rounds and their ratios to `off`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use etcd_registry::{EtcdConfig, EtcdDiscover, EtcdRegistry};
use examples::attempts::InstanceCounts;
use examples::cli::{Usage, fail};
use examples::echo::{EchoServiceClient, EchoServiceServer};
use examples::echo_service::{Echo, EchoCall};
use examples::load::{Plan, Report, closed_loop};
use examples::options::{self, EtcdUrl};
use examples::server_only::ProcessUsage;
use volo_core::client::{Discover, LoadBalance, LocalFirst, PowerOfTwoChoices};
use volo_core::context::Address;
use volo_core::registry::{RegistryInfo, Route};
use volo_core::server::Server;

/// What local-first routing gains: two EchoService instances in etcd, one local and one
/// registered as another host's, called with local-first routing (over shared memory)
/// and without, in turns.
#[derive(Debug, Parser)]
#[command(name = "local-first", version, args_override_self = true)]
struct Cli {
    /// The measured window of each run, in seconds.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = options::positive_seconds)]
    duration: Duration,

    /// Callers, each with one call in flight.
    #[arg(long, value_name = "N", default_value = "50", value_parser = options::at_least_one())]
    concurrency: usize,

    /// Bytes of each message.
    #[arg(long, value_name = "BYTES", default_value_t = 1024)]
    size: usize,

    /// Rounds, each running every mode once.
    #[arg(long, value_name = "N", default_value = "2", value_parser = options::at_least_one())]
    rounds: usize,

    /// The local shares to measure, one mode each (beside `off`).
    #[arg(long, value_name = "F[,F...]", value_delimiter = ',', default_value = "1,0.8",
          value_parser = options::share)]
    shares: Vec<f64>,

    /// An etcd to use [default: one started on a free loopback port, which needs the
    /// etcd binary].
    #[arg(long, value_name = "etcd://HOST:PORT[,HOST:PORT...]", value_parser = options::etcd_url)]
    etcd: Option<EtcdUrl>,
}

/// The host identity R registers: not this machine's.
const ELSEWHERE: &str = "0000000000000000000000000000e15e";

fn main() {
    if let Err(e) = run(Cli::parse()) {
        fail("local-first", e);
    }
}

/// A way of routing the calls.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Off,
    Share(f64),
}

impl Mode {
    fn name(self) -> String {
        match self {
            Mode::Off => "off".into(),
            Mode::Share(f) => format!("share={f}"),
        }
    }
}

/// What one run of one mode measured.
struct Measured {
    mode: Mode,
    report: Report,
    /// The share of attempts L answered.
    local: f64,
    /// The process's CPU time (client and both servers) per answered attempt, µs,
    /// over the run (warm-up and window).
    cpu_us_per_call: f64,
    /// The process's CPU time over the run's wall time: cores kept busy (a spin
    /// counts).
    cores: f64,
}

fn run(cli: Cli) -> Result<(), Usage> {
    let Cli {
        duration,
        concurrency,
        size,
        rounds,
        shares,
        etcd,
    } = cli;
    let mut modes = vec![Mode::Off];
    modes.extend(shares.into_iter().map(Mode::Share));
    // Our own etcd unless one is given; it lives as long as the measurement.
    let (endpoints, _etcd) = examples::registry::etcd_or_local(etcd)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("runtime: {e}")))?;
    rt.block_on(async {
        let dir = std::env::temp_dir().join(format!("local-first-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| Usage(format!("{}: {e}", dir.display())))?;
        let result = measure(
            &endpoints,
            &dir,
            &modes,
            rounds,
            duration,
            concurrency,
            size,
        )
        .await;
        let _ = std::fs::remove_dir_all(&dir);
        result
    })
}

async fn measure(
    endpoints: &[String],
    dir: &std::path::Path,
    modes: &[Mode],
    rounds: usize,
    duration: Duration,
    concurrency: usize,
    size: usize,
) -> Result<(), Usage> {
    let config = || EtcdConfig::new(endpoints.to_vec());
    let registry = std::sync::Arc::new(
        EtcdRegistry::connect(config())
            .await
            .map_err(|e| Usage(format!("etcd: {e}")))?,
    );
    let path = |name: &str| -> PathBuf { dir.join(name) };
    let local_addrs: Vec<Address> = vec![
        "127.0.0.1:0".parse().expect("an address"),
        Address::Unix(path("l.sock").into()),
        Address::Shm(path("l.shm").into()),
    ];
    let l = Server::new(EchoServiceServer::new(Echo::default()))
        .registry(std::sync::Arc::clone(&registry), RegistryInfo::default())
        .bind_all(&local_addrs)
        .await
        .map_err(|e| Usage(format!("server L: {e}")))?;
    let remote = RegistryInfo {
        host: Some(ELSEWHERE.into()),
        ..RegistryInfo::default()
    };
    let r = Server::new(EchoServiceServer::new(Echo::default()))
        .registry(registry, remote)
        .bind(&"127.0.0.1:0".parse().expect("an address"))
        .await
        .map_err(|e| Usage(format!("server R: {e}")))?;
    let l_addrs: Vec<String> = l.local_addrs().map(ToString::to_string).collect();
    eprintln!(
        "local-first: L on {}, R on {} (registered in etcd as another host's)",
        l_addrs.join(","),
        r.local_addr()
    );
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let serving = [l, r].map(|s| {
        let mut stopped = stopped.clone();
        tokio::spawn(s.serve_with_shutdown(async move {
            let _ = stopped.wait_for(|s| *s).await;
        }))
    });

    let mut all = Vec::new();
    for round in 1..=rounds {
        for &mode in modes {
            let m = one(endpoints, mode, duration, concurrency, size, &l_addrs).await?;
            println!(
                "mode={} round={round} qps={:.0} p50_us={} p99_us={} local={:.3} \
                 cpu_us_per_call={:.2} cores={:.2}",
                mode.name(),
                m.report.qps(),
                m.report.quantile_us(0.50),
                m.report.quantile_us(0.99),
                m.local,
                m.cpu_us_per_call,
                m.cores
            );
            all.push(m);
        }
    }
    let _ = stop.send(true);
    for s in serving {
        let _ = s.await;
    }

    let median = |xs: &mut Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    };
    let summary = |mode: Mode| {
        let of: Vec<&Measured> = all.iter().filter(|m| m.mode == mode).collect();
        let mut qps: Vec<f64> = of.iter().map(|m| m.report.qps()).collect();
        let mut p99: Vec<f64> = of
            .iter()
            .map(|m| m.report.quantile_us(0.99) as f64)
            .collect();
        let mut cpu: Vec<f64> = of.iter().map(|m| m.cpu_us_per_call).collect();
        (median(&mut qps), median(&mut p99), median(&mut cpu))
    };
    let (off_qps, off_p99, off_cpu) = summary(Mode::Off);
    for &mode in modes {
        let (qps, p99, cpu) = summary(mode);
        println!(
            "summary mode={} qps={qps:.0} p99_us={p99:.0} cpu_us_per_call={cpu:.2} \
             qps_ratio={:.2} p99_ratio={:.2} cpu_ratio={:.2}",
            mode.name(),
            qps / off_qps,
            p99 / off_p99,
            cpu / off_cpu
        );
    }
    Ok(())
}

/// One closed-loop run of `mode`.
async fn one(
    endpoints: &[String],
    mode: Mode,
    duration: Duration,
    concurrency: usize,
    size: usize,
    l_addrs: &[String],
) -> Result<Measured, Usage> {
    let route = match mode {
        Mode::Off => Route::tcp_only(),
        Mode::Share(_) => Route::for_this_host(),
    };
    let discover = EtcdDiscover::connect(EtcdConfig::new(endpoints.to_vec()), "EchoService", route)
        .await
        .map_err(|e| Usage(format!("discovery: {e}")))?;
    // The servers register as they start serving: wait for both.
    let mut waited = 0;
    while discover.instances().len() < 2 {
        if waited == 100 {
            return Err(Usage(
                "the two servers did not show up in etcd within 5 s".into(),
            ));
        }
        waited += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let balance: Box<dyn LoadBalance> = match mode {
        Mode::Off => Box::new(PowerOfTwoChoices::new()),
        Mode::Share(f) => Box::new(LocalFirst::with_share(PowerOfTwoChoices::new(), f)),
    };
    let counts = InstanceCounts::new(std::iter::empty::<&Address>());
    let client = EchoServiceClient::builder()
        .discover(discover)
        .load_balance(balance)
        .layer_inner(counts.layer())
        .build()
        .map_err(|e| Usage(format!("client: {e}")))?;
    let call = EchoCall::new(client, size);
    let plan = Plan {
        concurrency,
        warmup: Duration::from_secs(1),
        duration,
        progress: false,
    };
    let usage = || ProcessUsage::of_self().map_err(|e| Usage(format!("getrusage: {e}")));
    let (cpu_before, wall) = (usage()?, std::time::Instant::now());
    let report = closed_loop(plan, &mode.name(), move || {
        let call = call.clone();
        async move { call.call().await }
    })
    .await;
    let (cpu, wall) = (usage()?.cpu_us() - cpu_before.cpu_us(), wall.elapsed());
    let (mut on_l, mut total) = (0u64, 0u64);
    for (addr, c) in counts.snapshot() {
        total += c.ok;
        if l_addrs.contains(&addr) {
            on_l += c.ok;
        }
    }
    if report.errors > 0 {
        return Err(Usage(format!(
            "{}: {} calls failed",
            mode.name(),
            report.errors
        )));
    }
    Ok(Measured {
        mode,
        report,
        local: on_l as f64 / total.max(1) as f64,
        cpu_us_per_call: cpu as f64 / total.max(1) as f64,
        cores: cpu as f64 / wall.as_micros().max(1) as f64,
    })
}
