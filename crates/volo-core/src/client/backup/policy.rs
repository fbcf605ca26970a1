//! When a backup request goes out, and the latencies that decide it.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How long the first attempt may run before a backup request goes out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BackupDelay {
    /// Always this long.
    Fixed(Duration),
    /// The `pct` quantile (0.99: the p99) of the latencies of the last
    /// [`SAMPLES`](BackupDelay::SAMPLES) successful attempts through the layer, kept
    /// within `min..=max`. Until [`WARM_UP`](BackupDelay::WARM_UP) attempts have
    /// succeeded the delay is `max`: with the latencies unknown, a short delay would
    /// double ordinary calls rather than the slow ones. `min` keeps a service that
    /// answers in microseconds from getting a backup on every scheduling hiccup.
    Percentile {
        /// The quantile, in `0.0..=1.0`.
        pct: f64,
        /// The delay is never shorter.
        min: Duration,
        /// The delay is never longer; also the delay while warming up.
        max: Duration,
    },
}

impl BackupDelay {
    /// Latencies a [`Percentile`](BackupDelay::Percentile) delay is computed over: the
    /// most recent ones.
    pub const SAMPLES: usize = 1000;
    /// Successful attempts a [`Percentile`](BackupDelay::Percentile) delay waits for
    /// before it follows the latencies.
    pub const WARM_UP: usize = 100;
}

impl Default for BackupDelay {
    /// The p99, within 10 ms ..= 1 s.
    fn default() -> Self {
        BackupDelay::Percentile {
            pct: 0.99,
            min: Duration::from_millis(10),
            max: Duration::from_secs(1),
        }
    }
}

/// When a slow call gets a second attempt on another instance (see
/// [`Backup`](super::Backup) for the rules).
///
/// ```
/// use std::time::Duration;
/// use volo_core::client::{BackupDelay, BackupPolicy};
///
/// let policy = BackupPolicy::new(BackupDelay::Fixed(Duration::from_millis(20)))
///     .idempotent(["get_user"]);
/// assert!(policy.is_idempotent("get_user"));
/// ```
#[derive(Debug, Clone)]
pub struct BackupPolicy {
    pub(super) delay: BackupDelay,
    pub(super) idempotent: HashSet<String>,
    pub(super) budget_ratio: f64,
    pub(super) chain_stop: bool,
}

impl Default for BackupPolicy {
    /// [`BackupDelay::default`] (the p99 within 10 ms ..= 1 s), no method idempotent,
    /// budget 0.1, chain stop on.
    fn default() -> Self {
        BackupPolicy::new(BackupDelay::default())
    }
}

impl BackupPolicy {
    /// Backups after `delay`, for no method until some are marked
    /// [`idempotent`](BackupPolicy::idempotent), within a budget of 0.1 backups per
    /// call, with chain stop on.
    pub fn new(delay: BackupDelay) -> Self {
        BackupPolicy {
            delay,
            idempotent: HashSet::new(),
            budget_ratio: 0.1,
            chain_stop: true,
        }
    }

    /// How long the first attempt may run before the backup goes out.
    pub fn delay(mut self, delay: BackupDelay) -> Self {
        self.delay = delay;
        self
    }

    /// Marks `methods` idempotent (in addition to those marked already): only these
    /// get backups, since both attempts may run. Default: none.
    pub fn idempotent<I, M>(mut self, methods: I) -> Self
    where
        I: IntoIterator<Item = M>,
        M: Into<String>,
    {
        self.idempotent.extend(methods.into_iter().map(Into::into));
        self
    }

    /// Whether `method` was marked idempotent.
    pub fn is_idempotent(&self, method: &str) -> bool {
        self.idempotent.contains(method)
    }

    /// Backups allowed per call made through one layer (0.1: at most 10% extra load,
    /// plus up to 10 at once after a quiet spell). Clamped to `0.0..=1.0`. Default 0.1.
    pub fn budget_ratio(mut self, ratio: f64) -> Self {
        self.budget_ratio = ratio;
        self
    }

    /// Whether a call carrying the mark of a request retried upstream
    /// ([`RETRY_KEY`](crate::client::RETRY_KEY)) gets no backup. Default true.
    pub fn chain_stop(mut self, on: bool) -> Self {
        self.chain_stop = on;
        self
    }
}

/// The latencies of recent successful attempts, and the delay they give.
#[derive(Debug)]
pub(super) struct Latencies {
    delay: BackupDelay,
    inner: Mutex<Ring>,
}

#[derive(Debug)]
struct Ring {
    /// The last [`BackupDelay::SAMPLES`] latencies, oldest overwritten first.
    samples: Vec<Duration>,
    next: usize,
    /// Latencies recorded in all.
    recorded: usize,
    /// The quantile as last computed.
    quantile: Option<Duration>,
}

/// New samples between two computations of the quantile: sorting a thousand
/// latencies on every call would cost more than the rest of the layer.
const REFRESH_EVERY: usize = 20;

impl Latencies {
    pub(super) fn new(delay: BackupDelay) -> Self {
        Latencies {
            delay,
            inner: Mutex::new(Ring {
                samples: Vec::new(),
                next: 0,
                recorded: 0,
                quantile: None,
            }),
        }
    }

    /// The delay before a backup now.
    pub(super) fn delay(&self) -> Duration {
        match self.delay {
            BackupDelay::Fixed(d) => d,
            BackupDelay::Percentile { min, max, .. } => {
                let q = self.lock().quantile;
                q.map_or(max, |q| q.clamp(min, max.max(min)))
            }
        }
    }

    /// A successful attempt took `latency`.
    pub(super) fn record(&self, latency: Duration) {
        let BackupDelay::Percentile { pct, .. } = self.delay else {
            return;
        };
        let mut ring = self.lock();
        if ring.samples.len() < BackupDelay::SAMPLES {
            ring.samples.push(latency);
        } else {
            let at = ring.next;
            ring.samples[at] = latency;
        }
        ring.next = (ring.next + 1) % BackupDelay::SAMPLES;
        ring.recorded += 1;
        let due = ring.recorded >= BackupDelay::WARM_UP
            && (ring.recorded - BackupDelay::WARM_UP).is_multiple_of(REFRESH_EVERY);
        if due {
            let mut sorted = ring.samples.clone();
            // The smallest latency that at least `pct` of the samples do not exceed
            // (less a hair, so that 0.99 * 100 is rank 99 whatever the rounding).
            let rank = (pct.clamp(0.0, 1.0) * sorted.len() as f64 - 1e-9).ceil() as usize;
            let at = rank.clamp(1, sorted.len()) - 1;
            let (_, q, _) = sorted.select_nth_unstable(at);
            ring.quantile = Some(*q);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn p99() -> Latencies {
        Latencies::new(BackupDelay::Percentile {
            pct: 0.99,
            min: 2 * MS,
            max: 500 * MS,
        })
    }

    #[test]
    fn the_delay_is_max_until_warmed_up_then_the_quantile() {
        let l = p99();
        for i in 1..BackupDelay::WARM_UP {
            l.record(i as u32 * MS);
            assert_eq!(l.delay(), 500 * MS, "warming up");
        }
        // 1..=100 ms: 99 of the 100 take at most 99 ms.
        l.record(100 * MS);
        assert_eq!(l.delay(), 99 * MS);
    }

    #[test]
    fn the_delay_stays_within_min_and_max() {
        let fast = p99();
        for _ in 0..BackupDelay::WARM_UP {
            fast.record(MS / 10);
        }
        assert_eq!(fast.delay(), 2 * MS);
        let slow = p99();
        for _ in 0..BackupDelay::WARM_UP {
            slow.record(10 * 500 * MS);
        }
        assert_eq!(slow.delay(), 500 * MS);
    }

    #[test]
    fn old_latencies_leave_the_ring() {
        let l = p99();
        for _ in 0..BackupDelay::SAMPLES {
            l.record(300 * MS);
        }
        assert_eq!(l.delay(), 300 * MS);
        // A whole ring of faster answers replaces the slow ones.
        for _ in 0..BackupDelay::SAMPLES {
            l.record(20 * MS);
        }
        assert_eq!(l.delay(), 20 * MS);
    }

    #[test]
    fn a_fixed_delay_ignores_latencies() {
        let l = Latencies::new(BackupDelay::Fixed(7 * MS));
        for _ in 0..200 {
            l.record(100 * MS);
        }
        assert_eq!(l.delay(), 7 * MS);
    }
}
