//! The retry budget: retries allowed in proportion to calls made.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Retries allowed: a bucket that each call fills by `ratio` of a token and each retry
/// empties by one, holding at most `max` (so at most about `ratio` of the calls are
/// retried, plus a little headroom for a quiet start).
#[derive(Debug)]
pub struct RetryBudget {
    /// Tokens in thousandths.
    milli: Arc<AtomicU64>,
    per_call: u64,
    max: u64,
}

impl RetryBudget {
    /// A budget of `ratio` retries per call (0.1: one in ten), holding at most `max`
    /// retries, starting full.
    pub fn new(ratio: f64, max: u32) -> Self {
        let max = u64::from(max) * 1000;
        RetryBudget {
            milli: Arc::new(AtomicU64::new(max)),
            per_call: (ratio.clamp(0.0, 1.0) * 1000.0) as u64,
            max,
        }
    }

    /// A call was made.
    pub fn deposit(&self) {
        // Full is the usual state (retries are rare): a read, not a write to a line
        // every caller shares.
        if self.milli.load(Ordering::Relaxed) >= self.max {
            return;
        }
        let _ = self
            .milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| {
                Some((m + self.per_call).min(self.max))
            });
    }

    /// Takes one retry; `false` when the budget is spent.
    pub fn withdraw(&self) -> bool {
        self.milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| {
                m.checked_sub(1000)
            })
            .is_ok()
    }
}

impl Default for RetryBudget {
    /// One retry per ten calls, at most ten at once.
    fn default() -> Self {
        RetryBudget::new(0.1, 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_budget_refills_by_calls() {
        let b = RetryBudget::new(0.5, 2);
        assert!(b.withdraw() && b.withdraw());
        assert!(!b.withdraw(), "spent");
        b.deposit();
        assert!(!b.withdraw(), "half a token is not a retry");
        b.deposit();
        assert!(b.withdraw());
        for _ in 0..100 {
            b.deposit();
        }
        assert!(b.withdraw() && b.withdraw() && !b.withdraw(), "capped at 2");
    }
}
