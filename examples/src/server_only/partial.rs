//! Partial load (`rpc-bench --server-only --rate 25%,50%,75%`): each server offered a
//! steady rate of calls in an open loop ([`open_loop`](crate::open_loop)), at shares
//! of Volo's saturated rate measured first in the same run, and what it costs there.
//!
//! Servers run at 20-60% of what they can do; a closed loop at saturation hides what
//! they spend there (a busy-polling reactor costs nothing extra when it is never
//! idle) and understates their tail latency (coordinated omission). Here:
//! 1. Volo's server is driven to saturation by a closed loop from the load generator
//!    with the same callers (`saturation ...` line), when a rate is a share;
//! 2. each server (ours in each spin mode, Volo's, and a Kitex server run from a
//!    command line if given) is offered each rate for the window, in a fresh child
//!    pinned to the server CPUs, `rounds` times, in turns (A B C, then C B A...), and
//!    the runs are pooled: on a shared machine runs vary from one to the next, and
//!    neighbouring runs of different servers see the same machine.
//!
//! Per server and rate, a `partial` line: the rate offered and achieved, the latency
//! from each call's due time (p50, p99, p999, max), errors, late calls (see
//! [`Report::late`]), the server's CPU use in cores (CPU time over wall time) and per
//! call, its context switches per call and its wake-ups per call (voluntary context
//! switches: a thread that waited and was woken), and the load generator's CPU use.
//! Then `partial_ratio` lines: ours over Volo's (and over Kitex's) of cores and p99 at
//! each rate.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use super::{LoadGen, Measured, ServerKind, ServerProcess, measure, on_cpus};
use crate::cli::Usage;
use crate::load::{Plan, Report};

/// A rate on the command line: a share of Volo's saturated rate (`25%`) or calls a
/// second (`30000`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateSpec {
    /// A fraction (0.25 for `25%`) of Volo's saturated rate.
    Share(f64),
    /// Calls a second.
    PerSecond(f64),
}

impl std::str::FromStr for RateSpec {
    type Err = Usage;

    fn from_str(s: &str) -> Result<RateSpec, Usage> {
        let s = s.trim();
        let bad = || {
            Usage(format!(
                "rate {s:?}: calls a second (30000) or a share (25%)"
            ))
        };
        let (number, share) = match s.strip_suffix('%') {
            Some(n) => (n, true),
            None => (s, false),
        };
        let n: f64 = number.trim().parse().map_err(|_| bad())?;
        if !n.is_finite() || n <= 0.0 {
            return Err(bad());
        }
        Ok(if share {
            RateSpec::Share(n / 100.0)
        } else {
            RateSpec::PerSecond(n)
        })
    }
}

impl RateSpec {
    /// `share=25%` or `share=-`.
    fn share_field(self) -> String {
        match self {
            RateSpec::Share(f) => format!("share={}%", f * 100.0),
            RateSpec::PerSecond(_) => "share=-".into(),
        }
    }

    /// Calls a second, given Volo's saturated rate.
    fn resolve(self, saturated: f64) -> f64 {
        match self {
            RateSpec::Share(f) => f * saturated,
            RateSpec::PerSecond(r) => r,
        }
    }
}

/// What [`partial`] runs.
#[derive(Debug, Clone)]
pub struct PartialSettings {
    /// The program to run as server child (it calls
    /// [`serve_if_asked`](super::serve_if_asked)).
    pub exe: PathBuf,
    /// Ours (in each spin mode) and Volo's.
    pub servers: Vec<ServerKind>,
    /// A Kitex server's command line (see [`ServerProcess::spawn_command`]).
    pub kitex: Option<String>,
    /// The load generator.
    pub loadgen: LoadGen,
    /// Callers: at most this many calls in flight (one connection each for ours).
    pub concurrency: usize,
    /// Message bytes.
    pub size: usize,
    /// Unmeasured time before each window.
    pub warmup: Duration,
    /// The measured window of each run.
    pub window: Duration,
    /// The rates, in order.
    pub rates: Vec<RateSpec>,
    /// Runs of each server at each rate, pooled (the servers' order reverses from
    /// one run to the next).
    pub rounds: usize,
    /// The server child's CPUs.
    pub server_cpus: Vec<usize>,
    /// The load generator's CPUs.
    pub client_cpus: Vec<usize>,
    /// Draw a progress bar for each run.
    pub progress: bool,
}

/// One server at one rate, its runs pooled.
#[derive(Debug)]
struct Point {
    server: ServerKind,
    spec: RateSpec,
    rate: f64,
    run: Measured,
    /// Each run's cores.
    cores_by_round: Vec<f64>,
}

impl Point {
    fn line(&self, loadgen: LoadGen, concurrency: usize, size: usize) -> String {
        let run = &self.run;
        format!(
            "partial {} {} loadgen={} conc={concurrency} size={size} {} server_cores={:.3} \
             server_cpu_us_per_call={:.2} csw_per_call={:.3} wakeups_per_call={:.3} \
             client_util={:.3} rounds={} cores_by_round={}",
            self.server.fields(),
            self.spec.share_field(),
            loadgen.name(),
            run.report.open_line(self.rate),
            run.server_cores(),
            run.per_call(run.server_cpu_us),
            run.per_call(run.server_vcsw + run.server_ivcsw),
            run.per_call(run.server_vcsw),
            run.client_cores(),
            self.cores_by_round.len(),
            self.cores_by_round
                .iter()
                .map(|c| format!("{c:.3}"))
                .collect::<Vec<_>>()
                .join("/"),
        )
    }

    /// Adds a run's calls and usage to the pool.
    fn add(&mut self, run: Measured) {
        self.cores_by_round.push(run.server_cores());
        self.run.pool(run);
    }
}

/// Runs [`PartialSettings`]: prints each run's `partial` line as it ends, and returns
/// the `partial_ratio` lines. The calling thread is pinned to the load generator's
/// CPUs while it runs, and put back after.
pub fn partial(s: &PartialSettings) -> Result<Vec<String>, Usage> {
    on_cpus(&s.client_cpus, || partial_pinned(s)).map_err(|e| Usage(format!("partial load: {e}")))
}

fn partial_pinned(s: &PartialSettings) -> io::Result<Vec<String>> {
    let plan = Plan {
        concurrency: s.concurrency,
        warmup: s.warmup,
        duration: s.window,
        progress: s.progress,
    };
    let threads = s.client_cpus.len();
    let mut saturated = 0.0;
    if s.rates.iter().any(|r| matches!(r, RateSpec::Share(_))) {
        let mut volo = ServerProcess::spawn(&s.exe, ServerKind::Volo, &s.server_cpus)?;
        let run = measure(&mut volo, s.loadgen, plan, None, s.size, threads)?;
        volo.stop()?;
        saturated = run.report.qps();
        println!(
            "saturation server=volo loadgen={} conc={} size={} {}",
            s.loadgen.name(),
            s.concurrency,
            s.size,
            run.report.line()
        );
        if saturated <= 0.0 {
            return Err(io::Error::other(
                "Volo's server answered no call at saturation",
            ));
        }
    }
    let mut servers = s.servers.clone();
    if s.kitex.is_some() {
        servers.push(ServerKind::Kitex);
    }
    let mut points: Vec<Point> = Vec::new();
    for &spec in &s.rates {
        for &server in &servers {
            points.push(Point {
                server,
                spec,
                rate: spec.resolve(saturated),
                run: Measured::default(),
                cores_by_round: Vec::new(),
            });
        }
    }
    let mut turn = 0;
    for round in 0..s.rounds.max(1) {
        for &spec in &s.rates {
            let rate = spec.resolve(saturated);
            let mut order = servers.clone();
            if turn % 2 == 1 {
                order.reverse();
            }
            turn += 1;
            for server in order {
                let mut child =
                    ServerProcess::spawn_kind(&s.exe, server, s.kitex.as_deref(), &s.server_cpus)?;
                let run = measure(&mut child, s.loadgen, plan, Some(rate), s.size, threads)?;
                child.stop()?;
                println!(
                    "round n={round} {} {} {} server_cores={:.3}",
                    server.fields(),
                    spec.share_field(),
                    run.report.open_line(rate),
                    run.server_cores(),
                );
                if let Some(point) = points
                    .iter_mut()
                    .find(|p| p.server == server && p.spec == spec)
                {
                    point.add(run);
                }
            }
        }
    }
    println!();
    for point in &points {
        println!("{}", point.line(s.loadgen, s.concurrency, s.size));
    }
    Ok(ratios(&points))
}

/// `partial_ratio of=<ours|ours-uring>/<other> spin=.. share=.. rate=.. cores=..
/// cpu_per_call=.. p99=..` for each of our spin modes against Volo's and Kitex's, at
/// each rate.
fn ratios(points: &[Point]) -> Vec<String> {
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let p99 = |r: &Report| r.quantile_us(0.99) as f64;
    let mut lines = Vec::new();
    for ours in points {
        let ServerKind::Ours { spin, driver } = ours.server else {
            continue;
        };
        for other in [ServerKind::Volo, ServerKind::Kitex] {
            let Some(them) = points
                .iter()
                .find(|p| p.server == other && p.spec == ours.spec)
            else {
                continue;
            };
            lines.push(format!(
                "partial_ratio of={}/{} spin={} {} rate={:.0} cores={:.3} cpu_per_call={:.3} \
                 p99={:.3}",
                driver.server_label(),
                other.name(),
                spin.name(),
                ours.spec.share_field(),
                ours.rate,
                ratio(ours.run.server_cores(), them.run.server_cores()),
                ratio(
                    ours.run.server_cpu_us_per_call(),
                    them.run.server_cpu_us_per_call()
                ),
                ratio(p99(&ours.run.report), p99(&them.run.report)),
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_shares_or_calls_a_second() {
        assert_eq!("25%".parse::<RateSpec>().unwrap(), RateSpec::Share(0.25));
        assert_eq!(
            " 30000 ".parse::<RateSpec>().unwrap(),
            RateSpec::PerSecond(30000.0)
        );
        for bad in ["", "%", "0%", "-5", "x%", "inf"] {
            assert!(bad.parse::<RateSpec>().is_err(), "{bad}");
        }
        assert_eq!(RateSpec::Share(0.5).resolve(80_000.0), 40_000.0);
        assert_eq!(RateSpec::PerSecond(123.0).resolve(80_000.0), 123.0);
        assert_eq!(RateSpec::Share(0.25).share_field(), "share=25%");
    }
}
