//! Server-only mode's pieces with real processes, on loopback, each bounded in time:
//! the `--serve` child of `rpc-bench` answers `usage` and exits when its stdin ends;
//! a dropped handle kills it; idle connections and a short run produce their lines.
//! Nothing here times anything: the figures are only checked to exist.

mod support;

use std::path::Path;
use std::time::Duration;

use examples::options::{DriverArg, SpinArg};
use examples::server_only::{self, ClientStack, IdleSettings, ServerKind, ServerProcess, Settings};

fn rpc_bench() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_rpc-bench"))
}

/// The CPUs of this test process (any machine has CPU 0 in practice, but the set may
/// be restricted).
fn a_cpu() -> Vec<usize> {
    let cpus = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Cpus_allowed_list:")
                    .map(|v| v.trim().to_string())
            })
        })
        .unwrap_or_else(|| "0".into());
    let first = cpus.split([',', '-']).next().unwrap_or("0");
    server_only::parse_cpus(first).unwrap()
}

#[test]
fn a_server_child_answers_usage_and_ends_with_its_stdin() {
    let uring = ServerKind::Ours {
        spin: SpinArg::Off,
        driver: DriverArg(netpoll_rs::Driver::IoUring),
    };
    for kind in [uring, ServerKind::OURS, ServerKind::Volo] {
        let mut child = ServerProcess::spawn(rpc_bench(), kind, &a_cpu()).unwrap();
        assert!(child.addr().ip().is_loopback(), "{}", child.addr());
        assert!(child.nofile().starts_with("was="), "{:?}", child.nofile());
        let first = child.usage().unwrap();
        let second = child.usage().unwrap();
        assert!(second.cpu_us() >= first.cpu_us(), "{first:?} {second:?}");
        assert!(
            first.rss_kb > 0 && first.hwm_kb >= first.rss_kb,
            "{first:?}"
        );
        // Closes stdin; fails if the child is not gone within its limit (5 s).
        child.stop().unwrap();
    }
}

#[test]
fn a_dropped_server_child_is_killed() {
    let child = ServerProcess::spawn(
        rpc_bench(),
        ServerKind::Ours {
            spin: SpinArg::Fixed,
            driver: DriverArg(netpoll_rs::Driver::Epoll),
        },
        &a_cpu(),
    )
    .unwrap();
    let addr = child.addr();
    drop(child);
    // Killed and reaped: nothing listens there any more.
    assert!(std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
}

#[test]
fn idle_connections_are_opened_used_and_counted() {
    let cpus = a_cpu();
    let settings = IdleSettings {
        exe: rpc_bench().into(),
        servers: server_only::servers("fixed").unwrap(),
        conns: 3,
        size: 64,
        window: Duration::from_millis(100),
        settle: Duration::from_millis(50),
        server_cpus: cpus.clone(),
        client_cpus: cpus,
    };
    let lines = server_only::idle(&settings).unwrap();
    for server in ["server=ours spin=fixed", "server=volo spin=n/a"] {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("idle {server} ")))
            .unwrap_or_else(|| panic!("no idle line for {server}: {lines:?}"));
        assert!(
            line.contains(" conns=3 opened=3 closed_by_server=0 "),
            "{line}"
        );
    }
    assert!(
        !lines.iter().any(|l| l.starts_with("idle_stopped")),
        "{lines:?}"
    );
}

#[test]
fn a_short_run_reports_every_case_and_the_ratios() {
    let cpus = a_cpu();
    let settings = Settings {
        exe: rpc_bench().into(),
        // Mux: ours-mux among the load generators, volo-mux among the servers.
        servers: server_only::servers_of(
            &[SpinArg::Off],
            &[DriverArg(netpoll_rs::Driver::Epoll)],
            true,
        ),
        loadgens: server_only::loadgens("ours,volo", ClientStack::Bare, true).unwrap(),
        concurrency: vec![2],
        size: 128,
        warmup: Duration::from_millis(100),
        window: Duration::from_millis(300),
        rounds: 1,
        server_cpus: cpus.clone(),
        client_cpus: cpus,
        progress: false,
    };
    let cases = server_only::run(&settings).unwrap();
    assert_eq!(cases.len(), 3 * 3, "three servers, three load generators");
    for case in &cases {
        assert!(case.report.ok > 0, "{}", case.line());
        assert_eq!(case.report.errors, 0, "{}", case.line());
        assert!(case.wall > Duration::ZERO, "{}", case.line());
    }
    let summary = server_only::summary(&cases);
    let ratios: Vec<&String> = summary
        .iter()
        .filter(|l| {
            l.starts_with("ratio of=ours/volo spin=off ")
                || l.starts_with("ratio of=ours/volo-mux spin=off ")
        })
        .collect();
    assert_eq!(ratios.len(), 2 * 3, "{summary:?}");
    for line in ratios {
        // One round: one ratio per round-by-round field, no separator.
        let by_round = line.split(" qps_by_round=").nth(1).unwrap_or_default();
        assert!(!by_round.is_empty() && !by_round.contains('/'), "{line}");
    }
}

/// Partial load, end to end: Volo's saturation measured, then ours, Volo's and an
/// outside server (our own `echo-server` run from a command line, as a Kitex server
/// would be) offered a share of it and a fixed rate from the raw load generator; a
/// ratio line for each of ours against each other server at each rate.
#[test]
fn partial_load_offers_each_server_each_rate() {
    let cpus = a_cpu();
    let settings = server_only::PartialSettings {
        exe: rpc_bench().into(),
        servers: server_only::servers("off").unwrap(),
        kitex: Some(format!(
            "{} --addr {{addr}}",
            env!("CARGO_BIN_EXE_echo-server")
        )),
        loadgen: server_only::LoadGen::Raw,
        concurrency: 4,
        size: 128,
        warmup: Duration::from_millis(100),
        window: Duration::from_millis(300),
        rates: vec!["5%".parse().unwrap(), "300".parse().unwrap()],
        rounds: 1,
        server_cpus: cpus.clone(),
        client_cpus: cpus,
        progress: false,
    };
    let lines = server_only::partial(&settings).unwrap();
    for other in ["volo", "kitex"] {
        for share in ["share=5% ", "share=- rate=300 "] {
            let wanted = format!("partial_ratio of=ours/{other} spin=off {share}");
            assert!(
                lines.iter().any(|l| l.starts_with(&wanted)),
                "no {wanted:?}: {lines:?}"
            );
        }
    }
    assert_eq!(lines.len(), 4, "{lines:?}");
}

/// Latency mode, end to end: ours in two spin modes, Volo's and an outside server (our
/// `echo-server` from a command line, as a Kitex server would be), two sizes and two
/// caller counts from one load generator: a `latency` line with the documented
/// fields for every case, calls made in each, and a ratio line for each of ours
/// against each other server in each case.
#[test]
fn latency_mode_reports_every_server_in_every_case() {
    let cpus = a_cpu();
    let settings = server_only::LatencySettings {
        exe: rpc_bench().into(),
        servers: server_only::servers("adaptive,off").unwrap(),
        kitex: Some(format!(
            "{} --addr {{addr}}",
            env!("CARGO_BIN_EXE_echo-server")
        )),
        loadgens: server_only::loadgens("ours", ClientStack::Bare, false).unwrap(),
        callers: vec![1, 2],
        sizes: vec![64, 1024],
        warmup: Duration::from_millis(100),
        window: Duration::from_millis(200),
        rounds: 1,
        server_cpus: cpus.clone(),
        client_cpus: cpus,
        progress: false,
    };
    let lines = server_only::latency(&settings).unwrap();
    let cases: Vec<&String> = lines.iter().filter(|l| l.starts_with("latency ")).collect();
    assert_eq!(cases.len(), 4 * 2 * 2, "{lines:?}");
    for server in ["ours-adaptive", "ours-off", "volo", "kitex"] {
        for (callers, size) in [(1, 64), (1, 1024), (2, 64), (2, 1024)] {
            let prefix =
                format!("latency server={server} loadgen=ours callers={callers} size={size} ");
            let line = cases
                .iter()
                .find(|l| l.starts_with(&prefix))
                .unwrap_or_else(|| panic!("no {prefix:?}: {lines:?}"));
            assert_eq!(
                support::field_names(line),
                [
                    "latency",
                    "server",
                    "loadgen",
                    "callers",
                    "size",
                    "qps",
                    "p50_us",
                    "p99_us",
                    "cpu_us_per_call"
                ],
                "{line}"
            );
            assert!(!line.contains(" qps=0 "), "{line}");
        }
    }
    let ratios = lines
        .iter()
        .filter(|l| l.starts_with("latency_ratio of=ours-"));
    assert_eq!(ratios.count(), 2 * 2 * 4, "{lines:?}");
}
