//! Closed-loop load: `concurrency` workers, each making one call at a time for a fixed
//! time, every call's latency recorded; and the report every load program prints.
//!
//! A call counts in the measured window when it *starts* in it: every call counted ends
//! as a success or an error (the workers' calls in flight when the window closes are
//! waited for, up to [`DRAIN_LIMIT`]), so `ok + errors` is the number of calls made,
//! unless some never ended ([`Report::unfinished`]). The window is also cut into
//! seconds ([`Report::timeline`]): how a run went over time, around a fault say.

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How long [`closed_loop`] waits, once the window is over, for the calls still in
/// flight: longer than a client's default call timeout (10 s), so only a call that
/// outlives its own deadline is left [unfinished](Report::unfinished).
pub const DRAIN_LIMIT: Duration = Duration::from_secs(15);

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Calls started in the measured window.
    pub calls: u64,
    /// Calls started in the window that succeeded.
    pub ok: u64,
    /// Calls started in the window that failed.
    pub errors: u64,
    /// Open loop only: calls of the window that started more than
    /// [`LATE`](crate::open_loop::LATE) after their scheduled time, because no caller
    /// was free (they are made all the same, and their latency counts from the
    /// scheduled time). Always 0 in a closed loop.
    pub late: u64,
    /// The measured window.
    pub elapsed: Duration,
    /// Latencies of the successful calls in nanoseconds, sorted.
    pub latencies_ns: Vec<u64>,
    /// The window second by second, the first second first (with a window of a
    /// fractional number of seconds, the last one is partial). Its `ok` and `errors`
    /// add up to the report's.
    pub timeline: Vec<Second>,
}

/// One second of the measured window: the calls that started in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Second {
    /// Which second: 0 for the first of the window.
    pub t: u64,
    /// Calls started in it that succeeded.
    pub ok: u64,
    /// Calls started in it that failed.
    pub errors: u64,
    /// The p99 of the latencies of its successful calls, in microseconds (0 with none).
    pub p99_us: u64,
}

impl Second {
    /// `t=<second> ok=<n> errors=<n> p99_us=<n>`.
    pub fn line(&self) -> String {
        format!(
            "t={} ok={} errors={} p99_us={}",
            self.t, self.ok, self.errors, self.p99_us
        )
    }
}

/// The latency at quantile `q` (0..=1) of `sorted` (nanoseconds) in microseconds,
/// nearest rank; 0 with no samples.
pub(crate) fn quantile_us(sorted: &[u64], q: f64) -> u64 {
    let n = sorted.len();
    if n == 0 {
        return 0;
    }
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    sorted[rank - 1] / 1000
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
        quantile_us(&self.latencies_ns, q)
    }

    /// Calls started in the window that had neither succeeded nor failed
    /// [`DRAIN_LIMIT`] after it closed (a call that hangs): `calls - ok - errors`.
    pub fn unfinished(&self) -> u64 {
        self.calls.saturating_sub(self.ok + self.errors)
    }

    /// `calls=<n> ok=<n> errors=<n> unfinished=<n>`: what became of every call made.
    pub fn calls_line(&self) -> String {
        format!(
            "calls={} ok={} errors={} unfinished={}",
            self.calls,
            self.ok,
            self.errors,
            self.unfinished()
        )
    }

    /// Adds `other`'s calls to these, as if both windows were one run: counts and
    /// windows add up, latencies merge (sorted). The timeline, which belongs to a run,
    /// is dropped.
    pub fn pool(&mut self, other: Report) {
        self.calls += other.calls;
        self.late += other.late;
        self.ok += other.ok;
        self.errors += other.errors;
        self.elapsed += other.elapsed;
        self.latencies_ns.extend(other.latencies_ns);
        self.latencies_ns.sort_unstable();
        self.timeline.clear();
    }

    /// The slowest successful call, in microseconds (0 with none).
    pub fn max_us(&self) -> u64 {
        self.latencies_ns.last().map_or(0, |ns| ns / 1000)
    }

    /// `rate=<offered> qps=<achieved> p50_us=<n> p99_us=<n> p999_us=<n> max_us=<n>
    /// errors=<n> late=<n>`: the line an open-loop run ends with.
    pub fn open_line(&self, rate: f64) -> String {
        format!(
            "rate={rate:.0} qps={:.0} p50_us={} p99_us={} p999_us={} max_us={} errors={} late={}",
            self.qps(),
            self.quantile_us(0.50),
            self.quantile_us(0.99),
            self.quantile_us(0.999),
            self.max_us(),
            self.errors,
            self.late
        )
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

/// One second of one worker's calls.
#[derive(Debug, Default)]
pub(crate) struct Bucket {
    pub(crate) ok: u64,
    pub(crate) errors: u64,
    pub(crate) latencies_ns: Vec<u64>,
}

impl Bucket {
    /// Counts a call that ended, its latency with it when it succeeded.
    pub(crate) fn record(&mut self, success: bool, latency: Duration, room: usize) {
        if success {
            if self.latencies_ns.capacity() == 0 {
                self.latencies_ns.reserve(room);
            }
            self.ok += 1;
            self.latencies_ns.push(latency.as_nanos() as u64);
        } else {
            self.errors += 1;
        }
    }
}

/// One worker's calls in the window, kept where [`closed_loop`] can read them even if
/// the worker never ends.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) calls: u64,
    /// Calls that started late (open loop only).
    pub(crate) late: u64,
    pub(crate) seconds: Vec<Bucket>,
}

impl Tally {
    /// The bucket of timeline step `second`, made if needed.
    pub(crate) fn bucket(&mut self, second: usize) -> &mut Bucket {
        if self.seconds.len() <= second {
            self.seconds.resize_with(second + 1, Bucket::default);
        }
        &mut self.seconds[second]
    }
}

/// Runs `call` in a closed loop from `plan.concurrency` tasks and measures the window.
/// `call` returns whether the call succeeded.
///
/// Calls are counted when they start in the window; those in flight when it closes
/// are waited for, up to [`DRAIN_LIMIT`] (the ones still running then are given up
/// and reported as [unfinished](Report::unfinished)).
pub async fn closed_loop<F, Fut>(plan: Plan, label: &str, call: F) -> Report
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let cuts = Cuts {
        second: Duration::from_secs(1),
        drain: DRAIN_LIMIT,
    };
    run(plan, label, call, cuts).await
}

/// How [`run`] cuts time: the timeline's step and the drain's limit (shorter in tests).
#[derive(Debug, Clone, Copy)]
struct Cuts {
    second: Duration,
    drain: Duration,
}

/// [`closed_loop`] with its own [`Cuts`].
async fn run<F, Fut>(plan: Plan, label: &str, call: F, cuts: Cuts) -> Report
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let step = cuts.second.as_nanos().max(1);
    // The window's start, once measuring.
    let window: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let stopped = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let workers = plan.concurrency.max(1);
    // Room for about 200k calls per second, split between workers.
    let per_second = (200_000 / workers).max(64);
    // The window's whole seconds; the few milliseconds the window overruns (the timer
    // is late) count in the last.
    let seconds = (plan.duration.as_nanos().div_ceil(step) as usize).max(1);
    let mut tallies = Vec::with_capacity(workers);
    let mut handles = Vec::with_capacity(workers);
    for _ in 0..workers {
        let call = call.clone();
        let window = Arc::clone(&window);
        let stopped = Arc::clone(&stopped);
        let done = Arc::clone(&done);
        let tally = Arc::new(Mutex::new(Tally::default()));
        tallies.push(Arc::clone(&tally));
        handles.push(tokio::spawn(async move {
            while !stopped.load(Ordering::Relaxed) {
                let start = Instant::now();
                // In the window: started after it opened and before it closed.
                let second = match window.get() {
                    Some(&opened) if !stopped.load(Ordering::Relaxed) => {
                        tally.lock().unwrap_or_else(PoisonError::into_inner).calls += 1;
                        let since = start.saturating_duration_since(opened).as_nanos();
                        let t = (since / step) as usize;
                        Some(t.min(seconds - 1))
                    }
                    _ => None,
                };
                let success = call().await;
                let took = start.elapsed();
                if !success {
                    // A call may fail without waiting (no instance to call): without
                    // a yield, workers failing in a loop would never let the runtime
                    // run its timers, and the window would never close.
                    tokio::task::yield_now().await;
                }
                let Some(second) = second else { continue };
                let mut tally = tally.lock().unwrap_or_else(PoisonError::into_inner);
                tally.bucket(second).record(success, took, per_second);
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(plan.warmup).await;
    let start = *window.get_or_init(Instant::now);
    watch_window(label, start, plan, &done).await;
    stopped.store(true, Ordering::Relaxed);
    let elapsed = start.elapsed();
    if plan.progress {
        eprintln!();
    }
    // The calls in flight started in the window: wait for them, within the limit.
    join_by(handles, Instant::now() + cuts.drain).await;
    assemble(elapsed, seconds, tallies)
}

/// Waits until `plan.duration` after `start`, drawing the progress bar (with the calls
/// `done` so far) every 200 ms when `plan.progress`.
pub(crate) async fn watch_window(label: &str, start: Instant, plan: Plan, done: &AtomicU64) {
    while start.elapsed() < plan.duration {
        let left = plan.duration.saturating_sub(start.elapsed());
        tokio::time::sleep(left.min(Duration::from_millis(200))).await;
        if plan.progress {
            draw(
                label,
                start.elapsed(),
                plan.duration,
                done.load(Ordering::Relaxed),
            );
        }
    }
}

/// Waits for the workers until `deadline`, and aborts those still running then.
pub(crate) async fn join_by(handles: Vec<tokio::task::JoinHandle<()>>, deadline: Instant) {
    for mut handle in handles {
        if tokio::time::timeout_at(deadline, &mut handle)
            .await
            .is_err()
        {
            handle.abort();
        }
    }
}

/// The report of a window of `seconds` timeline steps from the workers' tallies (taken
/// out of them).
pub(crate) fn assemble(
    elapsed: Duration,
    seconds: usize,
    tallies: Vec<Arc<Mutex<Tally>>>,
) -> Report {
    let mut report = Report {
        elapsed,
        ..Report::default()
    };
    let mut merged: Vec<Bucket> = Vec::new();
    merged.resize_with(seconds, Bucket::default);
    for tally in tallies {
        let tally = std::mem::take(&mut *tally.lock().unwrap_or_else(PoisonError::into_inner));
        report.calls += tally.calls;
        report.late += tally.late;
        for (into, from) in merged.iter_mut().zip(tally.seconds) {
            into.ok += from.ok;
            into.errors += from.errors;
            into.latencies_ns.extend(from.latencies_ns);
        }
    }
    for (t, mut bucket) in merged.into_iter().enumerate() {
        bucket.latencies_ns.sort_unstable();
        report.ok += bucket.ok;
        report.errors += bucket.errors;
        report.timeline.push(Second {
            t: t as u64,
            ok: bucket.ok,
            errors: bucket.errors,
            p99_us: quantile_us(&bucket.latencies_ns, 0.99),
        });
        report.latencies_ns.extend(bucket.latencies_ns);
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
            ..Report::default()
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
    fn pooled_reports_add_up_and_merge_latencies() {
        let run = |ok: u64, from: u64| Report {
            calls: ok + 1,
            ok,
            errors: 1,
            late: 2,
            elapsed: Duration::from_secs(1),
            latencies_ns: (from..from + ok).map(|i| i * 1000).collect(),
            timeline: vec![Second::default()],
        };
        let mut pooled = run(100, 1);
        pooled.pool(run(300, 101));
        assert_eq!((pooled.calls, pooled.ok, pooled.errors), (402, 400, 2));
        assert_eq!(pooled.late, 4);
        assert_eq!(pooled.max_us(), 400);
        assert_eq!(pooled.elapsed, Duration::from_secs(2));
        assert_eq!(pooled.qps(), 200.0);
        assert!(pooled.latencies_ns.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(pooled.quantile_us(0.5), 200);
        assert!(pooled.timeline.is_empty());
    }

    /// A runtime on tokio's paused clock: its time moves only when every task waits,
    /// straight to the next timer, so a window holds the same calls however slow the
    /// machine is.
    fn paused_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap()
    }

    #[test]
    fn a_closed_loop_counts_successes_and_failures() {
        let rt = paused_runtime();
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
        assert_eq!(report.calls, report.ok + report.errors);
        assert_eq!(report.unfinished(), 0);
    }

    #[test]
    fn the_timeline_adds_up_and_a_hung_call_is_unfinished() {
        let rt = paused_runtime();
        let n = Arc::new(AtomicU64::new(0));
        // "Seconds" of 100 ms, a window of two and a half.
        let cuts = Cuts {
            second: Duration::from_millis(100),
            drain: Duration::from_millis(100),
        };
        let plan = Plan {
            concurrency: 2,
            warmup: Duration::ZERO,
            duration: Duration::from_millis(250),
            progress: false,
        };
        let report = rt.block_on(run(
            plan,
            "test",
            move || {
                let n = Arc::clone(&n);
                async move {
                    let i = n.fetch_add(1, Ordering::Relaxed);
                    if i == 5 {
                        // One call never ends.
                        std::future::pending::<()>().await;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    i.is_multiple_of(2)
                }
            },
            cuts,
        ));
        let t: Vec<u64> = report.timeline.iter().map(|s| s.t).collect();
        assert_eq!(t, [0, 1, 2], "two whole steps and a half");
        let ok: u64 = report.timeline.iter().map(|s| s.ok).sum();
        let errors: u64 = report.timeline.iter().map(|s| s.errors).sum();
        assert_eq!((ok, errors), (report.ok, report.errors));
        assert!(report.ok > 0 && report.errors > 0, "{report:?}");
        assert_eq!(report.unfinished(), 1, "{report:?}");
        assert_eq!(report.calls, report.ok + report.errors + 1);
        let first = report.timeline[0];
        assert!(first.p99_us >= 1000, "{first:?}");
        assert_eq!(
            first.line(),
            format!(
                "t=0 ok={} errors={} p99_us={}",
                first.ok, first.errors, first.p99_us
            )
        );
        assert_eq!(
            report.calls_line(),
            format!(
                "calls={} ok={} errors={} unfinished=1",
                report.calls, report.ok, report.errors
            )
        );
    }

    /// Calls that fail at once, without waiting (no instance listed yet), do not keep
    /// the run from ending: the window closes on time.
    #[test]
    fn calls_failing_without_waiting_do_not_hold_the_window_open() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let cuts = Cuts {
            second: Duration::from_millis(100),
            drain: Duration::from_millis(100),
        };
        let plan = Plan {
            concurrency: 4,
            warmup: Duration::ZERO,
            duration: Duration::from_millis(200),
            progress: false,
        };
        // On a thread of its own: a run that never ends fails the test, not hangs it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let report = rt.block_on(run(plan, "test", || async { false }, cuts));
            let _ = tx.send(report);
        });
        let report = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the run ended");
        assert!(report.errors > 0 && report.ok == 0, "{report:?}");
        assert_eq!(report.unfinished(), 0);
    }
}
