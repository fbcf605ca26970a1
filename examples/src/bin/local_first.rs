//! `local-first [--duration SECS] [--concurrency N] [--size BYTES] [--rounds N]
//! [--shares F,F...] [--etcd etcd://HOST:PORT]`: what local-first routing gains. A
//! whole-stack measurement, in one process: client and both servers share the
//! machine's cores.
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

use etcd_registry::testing::Etcd;
use etcd_registry::{EtcdConfig, EtcdDiscover, EtcdRegistry};
use examples::attempts::InstanceCounts;
use examples::cli::{Args, Usage};
use examples::echo::{EchoServiceClient, EchoServiceServer};
use examples::echo_service::{Echo, EchoCall};
use examples::load::{Plan, Report, closed_loop};
use examples::server_only::ProcessUsage;
use volo_core::client::{Discover, LoadBalance, LocalFirst, PowerOfTwoChoices};
use volo_core::context::Address;
use volo_core::registry::{RegistryInfo, Route};
use volo_core::server::Server;

const HELP: &str = "usage: local-first [--duration SECS] [--concurrency N] [--size BYTES] \
[--rounds N] [--shares F,F...] [--etcd etcd://HOST:PORT]";

/// The host identity R registers: not this machine's.
const ELSEWHERE: &str = "0000000000000000000000000000e15e";

fn main() {
    if let Err(e) = run() {
        eprintln!("local-first: {e}\n{HELP}");
        std::process::exit(2);
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

fn run() -> Result<(), Usage> {
    let args = Args::parse(std::env::args().skip(1), &[])?;
    args.only(&[
        "duration",
        "concurrency",
        "size",
        "rounds",
        "shares",
        "etcd",
    ])?;
    let duration: f64 = args.get("duration", 5.0)?;
    let concurrency: usize = args.get("concurrency", 50)?;
    let size: usize = args.get("size", 1024)?;
    let rounds: usize = args.get("rounds", 2)?;
    let mut modes = vec![Mode::Off];
    for f in args.get("shares", "1,0.8".to_string())?.split(',') {
        let f: f64 = f
            .trim()
            .parse()
            .map_err(|e| Usage(format!("--shares {f:?}: {e}")))?;
        if !(0.0..=1.0).contains(&f) {
            return Err(Usage(format!("--shares {f}: a share is 0 to 1")));
        }
        modes.push(Mode::Share(f));
    }
    if duration.is_nan() || duration <= 0.0 || concurrency == 0 || rounds == 0 {
        return Err(Usage(
            "--duration, --concurrency and --rounds must be above 0".into(),
        ));
    }
    // Our own etcd unless one is given; it lives as long as the measurement.
    let (url, _etcd) = match args.optional::<String>("etcd")? {
        Some(url) => (url, None),
        None => {
            let etcd = Etcd::start().ok_or_else(|| {
                Usage("no etcd binary: install etcd-server, or give --etcd".into())
            })?;
            (etcd.url(), Some(etcd))
        }
    };
    let endpoints = examples::options::etcd(&url)?;
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
    duration: f64,
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
    duration: f64,
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
        duration: Duration::from_secs_f64(duration),
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
