//! Open-loop load, the way wrk2 makes it: calls are due on a fixed schedule, `rate` a
//! second evenly spaced, whatever the replies do, and each call's latency counts from
//! the time it was *due*, not from the time it could start.
//!
//! A closed loop (see [`closed_loop`](crate::load::closed_loop)) waits for a reply
//! before its next call: a server that stalls is sent less, and the calls that would
//! have come meanwhile are never measured (coordinated omission). Here a stall shows
//! in full: the calls due during it wait for a free caller, start late, and their
//! latency includes the wait. And a server is offered a steady fraction of what it can
//! do, the load servers really run at, where what it costs in CPU per call, not its
//! peak rate, is what matters.
//!
//! How it runs:
//! - A pacer task releases every call to the callers as it comes due. It does not
//!   wait on tokio's timer for that (its ticks are a millisecond apart: the calls
//!   would go out in bursts), nor on a thread of its own (a thread switch per call,
//!   which at tens of thousands of calls a second costs the load generator more than
//!   the calls): it yields to the runtime and reads the clock again, so the calls go
//!   out within microseconds of their time, and it sleeps only while the next call
//!   is more than 2 ms away. While calls are less than that apart, it keeps one
//!   thread of the load generator busy: the load generator needs a core of its own.
//! - `plan.concurrency` callers (tasks) take the released calls in order, one at a
//!   time each. A call that finds no caller free waits for one; it is made all the
//!   same, counted as [late](crate::load::Report::late) when it starts more than
//!   [`LATE`] after it was due. Calls are counted, never dropped: the window holds
//!   exactly `rate × duration` calls (rounded down), and every one ends as a success,
//!   an error or [unfinished](crate::load::Report::unfinished).
//! - The calls due in the warm-up are made but not measured. The window's calls
//!   that are still queued or in flight when it closes are waited for, up to
//!   [`DRAIN_LIMIT`] after it.
//! - The rate achieved ([`Report::qps`](crate::load::Report::qps)) is the successful
//!   calls over the time from the window's first due call to the later of the
//!   window's end and the last of its calls' end: below the rate offered when the
//!   server falls behind.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::load::{DRAIN_LIMIT, Plan, Report, Tally, assemble, join_by, watch_window};

/// How long after it was due a call may start and still be on time.
pub const LATE: Duration = Duration::from_millis(1);

/// When each call is due: call `k` (from 0) at `start + k / rate`. The warm-up's calls
/// come first, then the window's.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    start: Instant,
    /// Nanoseconds between two calls.
    gap_ns: f64,
    /// The warm-up's calls: `0..warm`.
    warm: u64,
    /// All calls: the window's are `warm..total`.
    total: u64,
    /// The length of a timeline step, in calls (a second's worth, at least one).
    per_step: u64,
}

impl Schedule {
    fn new(start: Instant, rate: f64, warmup: Duration, window: Duration) -> Schedule {
        let rate = rate.max(1e-3);
        let count = |d: Duration| (d.as_secs_f64() * rate).floor() as u64;
        let warm = count(warmup);
        Schedule {
            start,
            gap_ns: 1e9 / rate,
            warm,
            total: warm + count(window),
            per_step: (rate.floor() as u64).max(1),
        }
    }

    /// When call `k` is due.
    fn due(&self, k: u64) -> Instant {
        self.start + Duration::from_nanos((k as f64 * self.gap_ns) as u64)
    }

    /// How many calls are due at `now` (those due at or before it), at most `total`.
    fn due_by(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.start).as_nanos() as f64;
        ((since / self.gap_ns).floor() as u64)
            .saturating_add(1)
            .min(self.total)
    }

    /// The timeline step of call `k` when it is one of the window's.
    fn step(&self, k: u64) -> Option<usize> {
        (self.warm..self.total)
            .contains(&k)
            .then(|| ((k - self.warm) / self.per_step) as usize)
    }

    /// The window's timeline steps.
    fn steps(&self) -> usize {
        (self.total - self.warm).div_ceil(self.per_step).max(1) as usize
    }
}

/// Runs `call` on a fixed schedule of `rate` calls a second from at most
/// `plan.concurrency` callers at once, and measures the window (see the module's
/// docs). `call` returns whether the call succeeded.
pub async fn open_loop<F, Fut>(plan: Plan, rate: f64, label: &str, call: F) -> Report
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    open_loop_with(plan, rate, label, call, DRAIN_LIMIT).await
}

/// [`open_loop`] with its own drain limit (shorter in tests).
async fn open_loop_with<F, Fut>(
    plan: Plan,
    rate: f64,
    label: &str,
    call: F,
    drain: Duration,
) -> Report
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let workers = plan.concurrency.max(1);
    let schedule = Schedule::new(Instant::now(), rate, plan.warmup, plan.duration);
    let released = Arc::new(Semaphore::new(0));
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    // Nanoseconds from the schedule's start to the end of the window's last call.
    let last_end = Arc::new(AtomicU64::new(0));
    let abandon = Arc::new(AtomicBool::new(false));
    let room = (schedule.per_step as usize / workers).max(64);
    let pacer = {
        let released = Arc::clone(&released);
        let abandon = Arc::clone(&abandon);
        tokio::spawn(async move { pace(schedule, &released, &abandon, workers).await })
    };
    let mut tallies = Vec::with_capacity(workers);
    let mut handles = Vec::with_capacity(workers);
    for _ in 0..workers {
        let call = call.clone();
        let (released, next, done, last_end) = (
            Arc::clone(&released),
            Arc::clone(&next),
            Arc::clone(&done),
            Arc::clone(&last_end),
        );
        let tally = Arc::new(Mutex::new(Tally::default()));
        tallies.push(Arc::clone(&tally));
        handles.push(tokio::spawn(async move {
            loop {
                match released.acquire().await {
                    Ok(permit) => permit.forget(),
                    Err(_) => break,
                }
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= schedule.total {
                    break;
                }
                let due = schedule.due(k);
                let step = schedule.step(k);
                let late = Instant::now().saturating_duration_since(due) > LATE;
                if step.is_some() {
                    let mut tally = tally.lock().unwrap_or_else(PoisonError::into_inner);
                    tally.late += u64::from(late);
                }
                let success = call().await;
                let end = Instant::now();
                if !success {
                    // A call that fails without waiting must not keep the runtime
                    // from its timers.
                    tokio::task::yield_now().await;
                }
                done.fetch_add(1, Ordering::Relaxed);
                let Some(step) = step else { continue };
                let since = end.saturating_duration_since(schedule.start).as_nanos() as u64;
                last_end.fetch_max(since, Ordering::Relaxed);
                let mut tally = tally.lock().unwrap_or_else(PoisonError::into_inner);
                tally
                    .bucket(step)
                    .record(success, end.saturating_duration_since(due), room);
            }
        }));
    }
    let window_start = schedule.due(schedule.warm);
    let window_end = window_start + plan.duration;
    watch_window(label, window_start.into(), plan, &done).await;
    if plan.progress {
        eprintln!();
    }
    join_by(handles, (window_end + drain).into()).await;
    // Callers that gave up leave calls released: the pacer is done or told to stop.
    abandon.store(true, Ordering::Relaxed);
    let _ = pacer.await;
    let last = schedule.start + Duration::from_nanos(last_end.load(Ordering::Relaxed));
    let elapsed = last.max(window_end).saturating_duration_since(window_start);
    let mut report = assemble(elapsed, schedule.steps(), tallies);
    // Every call of the window was due, whether or not a caller took it.
    report.calls = schedule.total - schedule.warm;
    report
}

/// The pacer: releases each call when it is due, then one stop token per caller.
///
/// It sleeps on tokio's timer only while the next call is more than [`SPIN_AHEAD`]
/// away (that timer ticks by the millisecond), and polls the clock between yields to
/// the runtime for the rest, so that calls go out within microseconds of their time.
async fn pace(schedule: Schedule, released: &Semaphore, abandon: &AtomicBool, workers: usize) {
    let mut given = 0;
    while given < schedule.total && !abandon.load(Ordering::Relaxed) {
        let now = Instant::now();
        let due = schedule.due_by(now);
        if due > given {
            released.add_permits((due - given) as usize);
            given = due;
        }
        let next = schedule.due(given);
        if next.saturating_duration_since(now) > SPIN_AHEAD * 2 {
            tokio::time::sleep_until((next - SPIN_AHEAD).into()).await;
        } else {
            tokio::task::yield_now().await;
        }
    }
    released.add_permits(workers);
}

/// How long before a call is due the pacer stops sleeping and starts polling the
/// clock.
const SPIN_AHEAD: Duration = Duration::from_millis(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_spaces_calls_evenly_and_splits_warmup_from_window() {
        let start = Instant::now();
        let s = Schedule::new(
            start,
            1000.0,
            Duration::from_millis(500),
            Duration::from_secs(2),
        );
        assert_eq!((s.warm, s.total), (500, 2500));
        assert_eq!(s.due(0), start);
        assert_eq!(s.due(3), start + Duration::from_millis(3));
        assert_eq!(s.due_by(start), 1, "call 0 is due at the start");
        assert_eq!(s.due_by(start + Duration::from_micros(2_500)), 3);
        assert_eq!(s.due_by(start + Duration::from_secs(60)), 2500, "capped");
        assert_eq!(s.step(499), None, "warm-up");
        assert_eq!(s.step(500), Some(0));
        assert_eq!(s.step(1499), Some(0));
        assert_eq!(s.step(1500), Some(1));
        assert_eq!(s.step(2500), None, "past the end");
        assert_eq!(s.steps(), 2);
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    fn plan(concurrency: usize, warmup_ms: u64, window_ms: u64) -> Plan {
        Plan {
            concurrency,
            warmup: Duration::from_millis(warmup_ms),
            duration: Duration::from_millis(window_ms),
            progress: false,
        }
    }

    /// Every call due in the window is made and counted, successes and failures.
    #[test]
    fn every_call_of_the_window_is_made() {
        let made = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&made);
        let report = runtime().block_on(open_loop_with(
            plan(8, 50, 200),
            2000.0,
            "test",
            move || {
                let n = counted.fetch_add(1, Ordering::Relaxed);
                async move { !n.is_multiple_of(5) }
            },
            Duration::from_secs(10),
        ));
        assert_eq!(report.calls, 400, "{report:?}");
        assert_eq!(report.ok + report.errors, 400, "{report:?}");
        assert!(report.errors >= 70 && report.errors <= 90, "{report:?}");
        assert_eq!(made.load(Ordering::Relaxed), 500, "the warm-up's 100 too");
        assert_eq!(report.unfinished(), 0);
        let ok: u64 = report.timeline.iter().map(|s| s.ok).sum();
        assert_eq!(ok, report.ok);
    }

    /// With one caller and calls that take four times the gap between them, the
    /// schedule runs ahead: the calls are still all made, late, and their latency
    /// counts the wait from when they were due.
    #[test]
    fn calls_that_find_no_caller_free_start_late_and_count_the_wait() {
        let report = runtime().block_on(open_loop_with(
            plan(1, 0, 100),
            200.0,
            "test",
            || async {
                std::thread::sleep(Duration::from_millis(20));
                true
            },
            Duration::from_secs(10),
        ));
        // 20 calls due 5 ms apart, each taking 20 ms: the last starts at least 300 ms
        // after it was due.
        assert_eq!((report.calls, report.ok), (20, 20), "{report:?}");
        assert!(report.late >= 15, "{report:?}");
        let max = *report.latencies_ns.last().unwrap();
        assert!(max >= 300_000_000, "{report:?}");
        // The rate achieved is what the one caller could do, not what was offered.
        assert!(report.qps() < 60.0, "{}", report.qps());
    }

    /// A call that never ends is given up at the drain limit and reported unfinished,
    /// with the calls queued behind it.
    #[test]
    fn calls_left_at_the_drain_limit_are_unfinished() {
        let n = Arc::new(AtomicU64::new(0));
        let report = runtime().block_on(open_loop_with(
            plan(1, 0, 50),
            200.0,
            "test",
            move || {
                let i = n.fetch_add(1, Ordering::Relaxed);
                async move {
                    if i == 3 {
                        std::future::pending::<()>().await;
                    }
                    true
                }
            },
            Duration::from_millis(50),
        ));
        assert_eq!(report.calls, 10, "{report:?}");
        assert_eq!(report.ok, 3, "{report:?}");
        assert_eq!(report.unfinished(), 7, "{report:?}");
    }
}
