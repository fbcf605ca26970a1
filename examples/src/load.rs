//! Closed-loop load: `concurrency` workers, each making one call at a time for a fixed
//! time, every call's latency recorded; and the report every load program prints.

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Calls that succeeded in the measured window.
    pub ok: u64,
    /// Calls that failed in the measured window.
    pub errors: u64,
    /// The measured window.
    pub elapsed: Duration,
    /// Latencies of the successful calls in nanoseconds, sorted.
    pub latencies_ns: Vec<u64>,
}

impl Report {
    /// Successful calls per second.
    pub fn qps(&self) -> f64 {
        if self.elapsed.is_zero() {
            return 0.0;
        }
        self.ok as f64 / self.elapsed.as_secs_f64()
    }

    /// The latency at quantile `q` (0..=1) in microseconds, nearest rank; 0 with no
    /// samples.
    pub fn quantile_us(&self, q: f64) -> u64 {
        let n = self.latencies_ns.len();
        if n == 0 {
            return 0;
        }
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        self.latencies_ns[rank - 1] / 1000
    }

    /// `qps=<n> p50_us=<n> p99_us=<n> p999_us=<n> errors=<n>`: the line the load
    /// programs end with.
    pub fn line(&self) -> String {
        format!(
            "qps={:.0} p50_us={} p99_us={} p999_us={} errors={}",
            self.qps(),
            self.quantile_us(0.50),
            self.quantile_us(0.99),
            self.quantile_us(0.999),
            self.errors
        )
    }
}

/// Load settings.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Calls in flight (one per worker).
    pub concurrency: usize,
    /// Unmeasured time first (connections opened, caches warm).
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// Draw a progress bar on stderr (when it is a terminal, or when forced).
    pub progress: bool,
}

/// Runs `call` in a closed loop from `plan.concurrency` tasks and measures the window.
/// `call` returns whether the call succeeded.
pub async fn closed_loop<F, Fut>(plan: Plan, label: &str, call: F) -> Report
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let measuring = Arc::new(AtomicBool::new(false));
    let stopped = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::with_capacity(plan.concurrency);
    // Room for about 200k calls per second over the window, split between workers.
    let per_worker =
        ((plan.duration.as_secs_f64() * 200_000.0) as usize / plan.concurrency.max(1)).max(1024);
    for _ in 0..plan.concurrency.max(1) {
        let call = call.clone();
        let measuring = Arc::clone(&measuring);
        let stopped = Arc::clone(&stopped);
        let done = Arc::clone(&done);
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_worker);
            let (mut ok, mut errors) = (0u64, 0u64);
            while !stopped.load(Ordering::Relaxed) {
                let start = Instant::now();
                let success = call().await;
                let took = start.elapsed();
                if measuring.load(Ordering::Relaxed) && !stopped.load(Ordering::Relaxed) {
                    if success {
                        ok += 1;
                        latencies.push(took.as_nanos() as u64);
                    } else {
                        errors += 1;
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
            (ok, errors, latencies)
        }));
    }
    tokio::time::sleep(plan.warmup).await;
    measuring.store(true, Ordering::Relaxed);
    let start = Instant::now();
    let show = plan.progress;
    while start.elapsed() < plan.duration {
        let left = plan.duration.saturating_sub(start.elapsed());
        tokio::time::sleep(left.min(Duration::from_millis(200))).await;
        if show {
            draw(
                label,
                start.elapsed(),
                plan.duration,
                done.load(Ordering::Relaxed),
            );
        }
    }
    stopped.store(true, Ordering::Relaxed);
    let elapsed = start.elapsed();
    if show {
        eprintln!();
    }
    let mut report = Report {
        elapsed,
        ..Report::default()
    };
    for w in workers {
        if let Ok((ok, errors, latencies)) = w.await {
            report.ok += ok;
            report.errors += errors;
            report.latencies_ns.extend(latencies);
        }
    }
    report.latencies_ns.sort_unstable();
    report
}

/// Whether a progress bar should be drawn: stderr is a terminal, or
/// `RPC_PROGRESS=1` forces it.
pub fn progress_wanted() -> bool {
    std::env::var("RPC_PROGRESS").map_or_else(|_| std::io::stderr().is_terminal(), |v| v == "1")
}

fn draw(label: &str, elapsed: Duration, total: Duration, calls: u64) {
    const WIDTH: usize = 30;
    let frac = (elapsed.as_secs_f64() / total.as_secs_f64()).clamp(0.0, 1.0);
    let filled = (frac * WIDTH as f64) as usize;
    let qps = calls as f64 / elapsed.as_secs_f64().max(1e-9);
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r{label:<10} [{}{}] {:>3.0}% {qps:>9.0} calls/s",
        "=".repeat(filled),
        " ".repeat(WIDTH - filled),
        frac * 100.0
    );
    let _ = err.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let r = Report {
            ok: 1000,
            errors: 2,
            elapsed: Duration::from_secs(2),
            latencies_ns: (1..=1000).map(|i| i * 1000).collect(),
        };
        assert_eq!(r.quantile_us(0.5), 500);
        assert_eq!(r.quantile_us(0.99), 990);
        assert_eq!(r.quantile_us(0.999), 999);
        assert_eq!(
            r.line(),
            "qps=500 p50_us=500 p99_us=990 p999_us=999 errors=2"
        );
        assert_eq!(
            Report::default().line(),
            "qps=0 p50_us=0 p99_us=0 p999_us=0 errors=0"
        );
    }

    #[test]
    fn a_closed_loop_counts_successes_and_failures() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let n = Arc::new(AtomicU64::new(0));
        let report = rt.block_on(closed_loop(
            Plan {
                concurrency: 4,
                warmup: Duration::from_millis(20),
                duration: Duration::from_millis(200),
                progress: false,
            },
            "test",
            move || {
                let n = Arc::clone(&n);
                async move {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    // Every fourth call fails.
                    !n.fetch_add(1, Ordering::Relaxed).is_multiple_of(4)
                }
            },
        ));
        assert!(report.ok > 0 && report.errors > 0, "{report:?}");
        assert_eq!(report.latencies_ns.len() as u64, report.ok);
        assert!(report.latencies_ns.windows(2).all(|w| w[0] <= w[1]));
    }
}
