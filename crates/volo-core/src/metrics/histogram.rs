//! The latency histogram: observed with atomic adds, no lock.
//!
//! prometheus-client's `Histogram` takes a mutex on every observation; with the
//! client's and the server's threads observing every call, that lock was the
//! largest part of what the metrics cost (see the module docs). This one keeps a
//! counter per bucket and the sum in nanoseconds: an observation is two atomic adds
//! on the calling thread's view of the cache lines, and its bucket is found from the
//! bit length of the latency, not by a search.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::{MetricType, TypedMetric};

/// The first bucket's upper bound, in nanoseconds (50 µs); each next one doubles.
const FIRST_NS: u64 = 50_000;
/// Finite buckets: 50 µs to 6.55 s; then `+Inf`.
pub(crate) const BUCKETS: usize = 18;

/// A histogram of latencies with the buckets 50 µs, 100 µs, ... 6.55 s, `+Inf`
/// (cheap to clone: clones share the counts).
#[derive(Debug, Clone, Default)]
pub(crate) struct LatencyHistogram(Arc<Cells>);

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

impl LatencyHistogram {
    /// Counts one call that took `took`.
    pub(crate) fn observe(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.0.buckets[bucket(ns)].fetch_add(1, Ordering::Relaxed);
        self.0.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut buckets = [(0.0, 0); BUCKETS + 1];
        let mut count = 0;
        for (i, (bound, n)) in buckets.iter_mut().enumerate() {
            *bound = if i < BUCKETS {
                (FIRST_NS << i) as f64 / 1e9
            } else {
                f64::INFINITY
            };
            *n = self.0.buckets[i].load(Ordering::Relaxed);
            count += *n;
        }
        // The count is the buckets' total, so the two always agree in one scrape.
        let sum = self.0.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(
            sum,
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
}
