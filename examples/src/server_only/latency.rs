//! Latency at low concurrency (`rpc-bench --server-only --latency`): each server under
//! a closed loop of 1, 4 and 16 callers, 64-byte and 1 KiB messages, from our load
//! generator and from Volo's.
//!
//! A closed loop of a few callers is where a server's wake-ups show: every call finds
//! the server asleep unless it spun through the gap, so the latency of a lone call is
//! mostly the time it takes to wake the server, and the CPU per call says what a spin
//! that avoided it cost. The servers: ours in each spin mode (`adaptive`, the default;
//! `fixed`; `off`), Volo's, and a Kitex server run from a command line when given; each
//! in a fresh child pinned to the server CPUs, in turns (A B C, then C B A...), `rounds`
//! times, the runs pooled.
//!
//! Per server, load generator, callers and size, a line
//! `latency server=<name> loadgen=<name> callers=N size=B qps=.. p50_us=.. p99_us=..
//! cpu_us_per_call=..` (`<name>`: `ours-adaptive`, `ours-fixed`, `ours-off`, with
//! `-uring` after `ours` on io_uring, `volo`, `kitex`; `cpu_us_per_call`: the server's
//! CPU time over the calls answered), then `latency_ratio of=<ours-..>/volo` lines with
//! the ratios of calls per second, p50, p99 and CPU per call (and `/kitex` ones with a
//! Kitex server).

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use super::{LoadGen, Measured, ServerKind, ServerProcess, measure, on_cpus};
use crate::cli::Usage;
use crate::load::Plan;

/// The callers of each case when none are given.
pub const CALLERS: [usize; 3] = [1, 4, 16];
/// The message sizes of each case when none are given.
pub const SIZES: [usize; 2] = [64, 1024];

/// What [`latency`] runs.
#[derive(Debug, Clone)]
pub struct LatencySettings {
    /// The program to run as server child (it calls
    /// [`serve_if_asked`](super::serve_if_asked)).
    pub exe: PathBuf,
    /// Ours (in each spin mode) and Volo's.
    pub servers: Vec<ServerKind>,
    /// A Kitex server's command line (see [`ServerProcess::spawn_command`]).
    pub kitex: Option<String>,
    /// The load generators.
    pub loadgens: Vec<LoadGen>,
    /// Callers, one case each.
    pub callers: Vec<usize>,
    /// Message bytes, one case each.
    pub sizes: Vec<usize>,
    /// Unmeasured time before each window.
    pub warmup: Duration,
    /// The measured window of each run.
    pub window: Duration,
    /// Runs of each case per server, pooled.
    pub rounds: usize,
    /// The server child's CPUs.
    pub server_cpus: Vec<usize>,
    /// The load generator's CPUs.
    pub client_cpus: Vec<usize>,
    /// Draw a progress bar for each run.
    pub progress: bool,
}

/// One server, load generator, callers and size: its runs pooled.
#[derive(Debug)]
struct Point {
    server: ServerKind,
    loadgen: LoadGen,
    callers: usize,
    size: usize,
    run: Measured,
}

impl Point {
    fn key(&self) -> (ServerKind, LoadGen, usize, usize) {
        (self.server, self.loadgen, self.callers, self.size)
    }

    fn line(&self) -> String {
        let report = &self.run.report;
        format!(
            "latency server={} loadgen={} callers={} size={} qps={:.0} p50_us={} p99_us={} \
             cpu_us_per_call={:.2}",
            server_name(self.server),
            self.loadgen.name(),
            self.callers,
            self.size,
            report.qps(),
            report.quantile_us(0.5),
            report.quantile_us(0.99),
            self.run.server_cpu_us_per_call(),
        )
    }
}

/// `ours-adaptive`, `ours-uring-fixed`..., `volo`, `kitex`.
pub fn server_name(server: ServerKind) -> String {
    match server {
        ServerKind::Ours { spin, driver } => format!("{}-{}", driver.server_label(), spin.name()),
        other => other.name().to_string(),
    }
}

/// Runs [`LatencySettings`]: a `round` line after each run, then returns the `latency`
/// lines and the `latency_ratio` lines. The calling thread is pinned to the load
/// generator's CPUs while it runs, and put back after.
pub fn latency(s: &LatencySettings) -> Result<Vec<String>, Usage> {
    on_cpus(&s.client_cpus, || latency_pinned(s)).map_err(|e| Usage(format!("latency: {e}")))
}

fn latency_pinned(s: &LatencySettings) -> io::Result<Vec<String>> {
    let mut servers = s.servers.clone();
    if s.kitex.is_some() {
        servers.push(ServerKind::Kitex);
    }
    let mut points: Vec<Point> = Vec::new();
    for &size in &s.sizes {
        for &callers in &s.callers {
            for &loadgen in &s.loadgens {
                for &server in &servers {
                    points.push(Point {
                        server,
                        loadgen,
                        callers,
                        size,
                        run: Measured::default(),
                    });
                }
            }
        }
    }
    let threads = s.client_cpus.len();
    let mut turn = 0;
    for round in 0..s.rounds.max(1) {
        for &size in &s.sizes {
            for &callers in &s.callers {
                for &loadgen in &s.loadgens {
                    let mut order = servers.clone();
                    if turn % 2 == 1 {
                        order.reverse();
                    }
                    turn += 1;
                    for server in order {
                        let mut child = ServerProcess::spawn_kind(
                            &s.exe,
                            server,
                            s.kitex.as_deref(),
                            &s.server_cpus,
                        )?;
                        let plan = Plan {
                            concurrency: callers,
                            warmup: s.warmup,
                            duration: s.window,
                            progress: s.progress,
                        };
                        let run = measure(&mut child, loadgen, plan, None, size, threads)?;
                        child.stop()?;
                        println!(
                            "round n={round} server={} loadgen={} callers={callers} \
                             size={size} {} cpu_us_per_call={:.2}",
                            server_name(server),
                            loadgen.name(),
                            run.report.line(),
                            run.server_cpu_us_per_call(),
                        );
                        let key = (server, loadgen, callers, size);
                        if let Some(point) = points.iter_mut().find(|p| p.key() == key) {
                            point.run.pool(run);
                        }
                    }
                }
            }
        }
    }
    let mut lines: Vec<String> = points.iter().map(Point::line).collect();
    lines.extend(ratios(&points));
    Ok(lines)
}

/// `latency_ratio of=<ours-..>/<volo|kitex> loadgen=.. callers=.. size=.. qps=.. p50=..
/// p99=.. cpu_per_call=..`: ours over theirs (above 1 is more: better for `qps`, worse
/// for the others).
fn ratios(points: &[Point]) -> Vec<String> {
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let mut lines = Vec::new();
    for ours in points {
        let ServerKind::Ours { .. } = ours.server else {
            continue;
        };
        for other in [ServerKind::Volo, ServerKind::Kitex] {
            let key = (other, ours.loadgen, ours.callers, ours.size);
            let Some(them) = points.iter().find(|p| p.key() == key) else {
                continue;
            };
            let (a, b) = (&ours.run.report, &them.run.report);
            lines.push(format!(
                "latency_ratio of={}/{} loadgen={} callers={} size={} qps={:.3} p50={:.3} \
                 p99={:.3} cpu_per_call={:.3}",
                server_name(ours.server),
                other.name(),
                ours.loadgen.name(),
                ours.callers,
                ours.size,
                ratio(a.qps(), b.qps()),
                ratio(a.quantile_us(0.5) as f64, b.quantile_us(0.5) as f64),
                ratio(a.quantile_us(0.99) as f64, b.quantile_us(0.99) as f64),
                ratio(
                    ours.run.server_cpu_us_per_call(),
                    them.run.server_cpu_us_per_call()
                ),
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{DriverArg, SpinArg};

    #[test]
    fn servers_are_named_by_driver_and_spin() {
        assert_eq!(server_name(ServerKind::OURS), "ours-adaptive");
        let uring_off = ServerKind::Ours {
            spin: SpinArg::Off,
            driver: DriverArg(netpoll_rs::Driver::IoUring),
        };
        assert_eq!(server_name(uring_off), "ours-uring-off");
        assert_eq!(server_name(ServerKind::Volo), "volo");
        assert_eq!(server_name(ServerKind::Kitex), "kitex");
    }
}
