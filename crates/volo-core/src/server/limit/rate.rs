//! The QPS limit: a token bucket that takes the time as an argument.
//!
//! The bucket is kept as one counter, `taken`: the tokens handed out plus those lost to
//! the cap, counted from an epoch. `earned(now)`, the tokens the rate has produced since
//! the epoch, is computed afresh from the elapsed time on every call (never accumulated
//! step by step), so the rate does not drift however often or rarely it is asked; and
//! the bucket holds `burst + earned - taken` tokens, at most `burst`:
//!
//! - a call raises `taken` to at least `earned` (tokens above the burst are lost, which
//!   is what keeps a long idle spell from building up more than one burst), then takes
//!   a token if `taken < earned + burst`;
//! - `earned` is `elapsed_ns * rate / 10^9` in 128-bit arithmetic, which cannot
//!   overflow for any `Duration`, so a long idle spell cannot overflow it either. It
//!   is kept in a `u64`, which holds 136 years of tokens at the largest rate
//!   (`u32::MAX` a second) and far longer at any real one; past that it saturates,
//!   and the bucket, never refilled again, refuses everything.
//!
//! One compare-and-swap on one `AtomicU64`: no lock, no thread, no timer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// The burst of a bucket refilled at `qps` per second: a tenth of a second's worth, at
/// least one token (none for a rate of zero, which refuses everything).
pub(super) fn burst_of(qps: u32) -> u32 {
    if qps == 0 { 0 } else { (qps / 10).max(1) }
}

/// Tokens refilled continuously at `rate` per second, at most `burst` held; full at the
/// epoch.
pub(super) struct TokenBucket {
    rate: u32,
    burst: u64,
    epoch: Instant,
    /// Tokens handed out or lost to the cap since the epoch.
    taken: AtomicU64,
}

impl TokenBucket {
    /// A full bucket, refilled at `rate` per second from `epoch` on.
    pub(super) fn new(rate: u32, epoch: Instant) -> Self {
        TokenBucket {
            rate,
            burst: u64::from(burst_of(rate)),
            epoch,
            taken: AtomicU64::new(0),
        }
    }

    /// The refill rate, per second.
    pub(super) fn rate(&self) -> u32 {
        self.rate
    }

    /// Tokens the rate has produced from the epoch to `now` (none for an instant before
    /// the epoch).
    fn earned(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.epoch).as_nanos();
        // At most (2^64 s * 10^9) * 2^32 < 2^127: no overflow in u128.
        let earned = elapsed * u128::from(self.rate) / NANOS_PER_SEC;
        u64::try_from(earned).unwrap_or(u64::MAX)
    }

    /// Takes a token if the bucket holds one at `now`.
    ///
    /// Instants read on different threads may reach here out of order: one older than
    /// the latest seen only sees fewer tokens, so the limit still holds.
    pub(super) fn try_take(&self, now: Instant) -> bool {
        let earned = self.earned(now);
        let ceiling = earned.saturating_add(self.burst);
        // The counter only counts; it guards no other memory, so Relaxed suffices (all
        // updates of one atomic are totally ordered).
        self.taken
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |taken| {
                let taken = taken.max(earned);
                (taken < ceiling).then_some(taken + 1)
            })
            .is_ok()
    }

    /// Tokens the bucket holds at `now`.
    #[cfg(test)]
    pub(super) fn available(&self, now: Instant) -> u64 {
        let earned = self.earned(now);
        let taken = self.taken.load(Ordering::Relaxed).max(earned);
        earned.saturating_add(self.burst) - taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn drain(bucket: &TokenBucket, now: Instant) -> u64 {
        let mut n = 0;
        while bucket.try_take(now) {
            n += 1;
        }
        n
    }

    #[test]
    fn burst_is_a_tenth_of_the_rate_and_at_least_one() {
        assert_eq!(burst_of(0), 0);
        assert_eq!(burst_of(1), 1);
        assert_eq!(burst_of(19), 1);
        assert_eq!(burst_of(100), 10);
        assert_eq!(burst_of(u32::MAX), u32::MAX / 10);
    }

    #[test]
    fn a_bucket_starts_full_and_refills_one_token_per_period() {
        let t0 = Instant::now();
        let bucket = TokenBucket::new(100, t0);
        assert_eq!(drain(&bucket, t0), 10);
        assert!(!bucket.try_take(t0 + Duration::from_millis(9)));
        assert!(bucket.try_take(t0 + Duration::from_millis(10)));
        assert!(!bucket.try_take(t0 + Duration::from_millis(10)));
        assert_eq!(drain(&bucket, t0 + Duration::from_millis(55)), 4);
    }

    #[test]
    fn the_rate_does_not_drift_with_how_often_it_is_asked() {
        // 3 per second: a period of 333.33... ms. Asked every millisecond for ten
        // seconds, it hands out the burst plus exactly 30.
        let t0 = Instant::now();
        let bucket = TokenBucket::new(3, t0);
        let mut taken = 0;
        for ms in 0..=10_000 {
            taken += drain(&bucket, t0 + Duration::from_millis(ms));
        }
        assert_eq!(taken, 1 + 30);
    }

    #[test]
    fn an_instant_before_the_epoch_sees_no_refill() {
        let t0 = Instant::now() + Duration::from_secs(1);
        let bucket = TokenBucket::new(10, t0);
        assert!(bucket.try_take(t0 - Duration::from_millis(500)));
        assert!(!bucket.try_take(t0 - Duration::from_millis(500)));
    }

    #[test]
    fn a_very_long_idle_spell_holds_one_burst_at_the_largest_rate() {
        let t0 = Instant::now();
        let bucket = TokenBucket::new(u32::MAX, t0);
        // A century idle: 1.35e19 tokens earned, no overflow, one burst held.
        let later = t0 + Duration::from_secs(100 * 365 * 24 * 3600);
        assert_eq!(bucket.available(later), u64::from(u32::MAX / 10));
        assert!(bucket.try_take(later));
        assert_eq!(bucket.available(later), u64::from(u32::MAX / 10) - 1);
    }
}
