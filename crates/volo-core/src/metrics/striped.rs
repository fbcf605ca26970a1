//! Counters, gauges and latency histograms kept in stripes, one cache line apart, a
//! thread adding to its own stripe.
//!
//! A call is counted on the thread that runs it, and the threads of one side (the
//! server's pollers, the client's runtime workers) run on different cores. With one
//! atomic per value, each add pulls the value's cache line from the core that added
//! last: on two cores taking calls in turn, most adds of a call (the count, the
//! in-flight gauge up and down, the histogram's bucket and sum, the bytes in and out)
//! were cache misses. Here each thread is given a stripe the first time it counts
//! (round robin), so threads on different cores touch different lines, and a scrape
//! adds the stripes up. The price is memory: [`stripes`] copies of each value, 128
//! bytes apart.
//!
//! prometheus-client's own `Counter`, `Gauge` and `Histogram` are one atomic (or a
//! lock) each; these encode the same way (a counter, a gauge, a histogram), so a
//! scraper sees no difference.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::{MetricType, TypedMetric};

/// The most stripes a value has, however many cores there are.
const MAX_STRIPES: usize = 8;

/// The number of stripes of every value: the cores this process may run on,
/// rounded up to a power of two, at most [`MAX_STRIPES`].
pub(crate) fn stripes() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .next_power_of_two()
            .min(MAX_STRIPES)
    })
}

/// The calling thread's stripe, below [`stripes`].
fn mine() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    MINE.with(|m| {
        let mut i = m.get();
        if i == usize::MAX {
            i = NEXT.fetch_add(1, Ordering::Relaxed);
            m.set(i);
        }
        // A power of two: the mask is the modulo.
        i & (stripes() - 1)
    })
}

/// One stripe, alone on its cache lines (128 bytes: adjacent-line prefetch pairs
/// 64-byte lines on x86).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

/// A value's stripes.
#[derive(Debug)]
struct Stripes<T>(Box<[Padded<T>]>);

impl<T: Default> Default for Stripes<T> {
    fn default() -> Self {
        Stripes((0..stripes()).map(|_| Padded::default()).collect())
    }
}

impl<T> Stripes<T> {
    /// The calling thread's stripe.
    fn mine(&self) -> &T {
        // `mine()` is below `stripes()`, the length; `get` keeps this free of panics
        // even so.
        match self.0.get(mine()) {
            Some(p) => &p.0,
            None => &self.0[0].0,
        }
    }

    fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.iter().map(|p| &p.0)
    }
}

/// A counter (cheap to clone: clones share it).
#[derive(Debug, Clone, Default)]
pub(crate) struct StripedCounter(Arc<Stripes<AtomicU64>>);

impl StripedCounter {
    pub(crate) fn inc(&self) {
        self.inc_by(1);
    }

    pub(crate) fn inc_by(&self, n: u64) {
        self.0.mine().fetch_add(n, Ordering::Relaxed);
    }

    /// The total over the stripes.
    pub(crate) fn get(&self) -> u64 {
        self.0
            .iter()
            .fold(0u64, |a, s| a.wrapping_add(s.load(Ordering::Relaxed)))
    }
}

impl TypedMetric for StripedCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for StripedCounter {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.get(), None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// A gauge that goes up and down (cheap to clone: clones share it). A call may go
/// up on one thread and down on another: each stripe may be negative, the total is
/// right.
#[derive(Debug, Clone, Default)]
pub(crate) struct StripedGauge(Arc<Stripes<AtomicI64>>);

impl StripedGauge {
    pub(crate) fn inc(&self) {
        self.0.mine().fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn dec(&self) {
        self.0.mine().fetch_sub(1, Ordering::Relaxed);
    }

    /// The total over the stripes.
    pub(crate) fn get(&self) -> i64 {
        self.0
            .iter()
            .fold(0i64, |a, s| a.wrapping_add(s.load(Ordering::Relaxed)))
    }
}

impl TypedMetric for StripedGauge {
    const TYPE: MetricType = MetricType::Gauge;
}

impl EncodeMetric for StripedGauge {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.get())
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// The first bucket's upper bound, in nanoseconds (50 µs); each next one doubles.
const FIRST_NS: u64 = 50_000;
/// Finite buckets: 50 µs to 6.55 s; then `+Inf`.
pub(crate) const BUCKETS: usize = 18;

/// One stripe of a histogram.
#[derive(Debug, Default)]
struct Cells {
    /// Observations per bucket (not cumulative), the last one `+Inf`.
    buckets: [AtomicU64; BUCKETS + 1],
    /// The sum of the observations, in nanoseconds (584 years before it wraps).
    sum_ns: AtomicU64,
}

/// The bucket of `ns`: the first whose upper bound is at or above it.
fn bucket(ns: u64) -> usize {
    if ns <= FIRST_NS {
        return 0;
    }
    // ns in (FIRST << (i - 1), FIRST << i] has (ns - 1) / FIRST in [2^(i-1), 2^i).
    let q = (ns - 1) / FIRST_NS;
    let i = (u64::BITS - q.leading_zeros()) as usize;
    i.min(BUCKETS)
}

/// A histogram of latencies with the buckets 50 µs, 100 µs, ... 6.55 s, `+Inf`
/// (cheap to clone: clones share the counts). An observation is two atomic adds,
/// its bucket found from the latency's bit length, not by a search.
#[derive(Debug, Clone, Default)]
pub(crate) struct LatencyHistogram(Arc<Stripes<Cells>>);

impl LatencyHistogram {
    /// Counts one call that took `took`.
    pub(crate) fn observe(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let cells = self.0.mine();
        cells.buckets[bucket(ns)].fetch_add(1, Ordering::Relaxed);
        cells.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// The observations per bucket (not cumulative) and their sum in nanoseconds,
    /// over the stripes.
    fn totals(&self) -> ([u64; BUCKETS + 1], u64) {
        let mut buckets = [0u64; BUCKETS + 1];
        let mut sum = 0u64;
        for cells in self.0.iter() {
            for (total, b) in buckets.iter_mut().zip(&cells.buckets) {
                *total = total.wrapping_add(b.load(Ordering::Relaxed));
            }
            sum = sum.wrapping_add(cells.sum_ns.load(Ordering::Relaxed));
        }
        (buckets, sum)
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let (counts, sum_ns) = self.totals();
        let mut buckets = [(0.0, 0); BUCKETS + 1];
        for (i, (bound, n)) in buckets.iter_mut().enumerate() {
            *bound = if i < BUCKETS {
                (FIRST_NS << i) as f64 / 1e9
            } else {
                f64::INFINITY
            };
            *n = counts[i];
        }
        // The count is the buckets' total, so the two always agree in one scrape.
        let count = counts.iter().sum();
        encoder.encode_histogram::<NoLabelSet>(
            sum_ns as f64 / 1e9,
            count,
            &buckets,
            None::<&std::collections::HashMap<usize, Exemplar<NoLabelSet, f64>>>,
        )
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_latency_goes_to_the_first_bucket_at_or_above_it() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(50_000), 0);
        assert_eq!(bucket(50_001), 1);
        assert_eq!(bucket(100_000), 1);
        assert_eq!(bucket(100_001), 2);
        assert_eq!(bucket(FIRST_NS << 17), 17, "6.55 s, the last finite bound");
        assert_eq!(bucket((FIRST_NS << 17) + 1), BUCKETS, "+Inf");
        assert_eq!(bucket(u64::MAX), BUCKETS);
        for i in 1..BUCKETS {
            let bound = FIRST_NS << i;
            assert_eq!(bucket(bound), i);
            assert_eq!(bucket(bound / 2 + 1), i);
        }
    }

    #[test]
    fn threads_count_in_stripes_and_the_totals_add_them_up() {
        let counter = StripedCounter::default();
        let gauge = StripedGauge::default();
        let histogram = LatencyHistogram::default();
        // More threads than stripes, so some share one; each thread takes its
        // stripe on its first add.
        std::thread::scope(|s| {
            for t in 0..(2 * stripes() + 3) as u64 {
                let (counter, gauge, histogram) = (&counter, &gauge, &histogram);
                s.spawn(move || {
                    for _ in 0..1000 {
                        counter.inc();
                        gauge.inc();
                        histogram.observe(Duration::from_micros(70));
                    }
                    counter.inc_by(t);
                });
            }
        });
        let threads = (2 * stripes() + 3) as u64;
        assert_eq!(counter.get(), threads * 1000 + (0..threads).sum::<u64>());
        assert_eq!(gauge.get(), (threads * 1000) as i64);
        let (buckets, sum) = histogram.totals();
        assert_eq!(buckets[1], threads * 1000, "70 µs is in (50, 100] µs");
        assert_eq!(buckets.iter().sum::<u64>(), threads * 1000);
        assert_eq!(sum, threads * 1000 * 70_000);
    }

    #[test]
    fn a_gauge_up_on_one_thread_and_down_on_another_totals_right() {
        let gauge = StripedGauge::default();
        for _ in 0..5 {
            gauge.inc();
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..3 {
                    gauge.dec();
                }
            });
        });
        assert_eq!(gauge.get(), 2);
    }
}
