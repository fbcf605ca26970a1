//! How long to wait before a retry, and the randomness that spreads the waits.

use std::time::Duration;

use crate::random::Xorshift;

/// The wait before each retry.
///
/// Waiting lets a failure that comes from load (a full queue, a restarting instance)
/// clear before the next attempt; spreading the waits at random ("jitter") keeps the
/// clients that failed together from retrying together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    /// Retry at once.
    None,
    /// The same wait before every retry.
    Fixed(Duration),
    /// Before retry `n` (1 for the first), a wait drawn uniformly from
    /// `0..=min(max, base * 2^(n-1))` ("full jitter": the cap doubles per retry, the
    /// wait is anywhere below it).
    Exponential {
        /// The cap before the first retry.
        base: Duration,
        /// The cap never grows past this.
        max: Duration,
    },
    /// A wait drawn uniformly from `min..=max` before every retry (Kitex's `random`
    /// backoff).
    Random {
        /// The shortest wait.
        min: Duration,
        /// The longest wait.
        max: Duration,
    },
}

impl From<crate::governance::BackoffRule> for Backoff {
    fn from(rule: crate::governance::BackoffRule) -> Self {
        use crate::governance::BackoffRule;
        match rule {
            BackoffRule::None => Backoff::None,
            BackoffRule::Fixed(d) => Backoff::Fixed(d),
            BackoffRule::Random { min, max } => Backoff::Random { min, max },
        }
    }
}

impl Default for Backoff {
    /// Exponential from 10 ms up to 1 s, with full jitter.
    fn default() -> Self {
        Backoff::Exponential {
            base: Duration::from_millis(10),
            max: Duration::from_secs(1),
        }
    }
}

impl Backoff {
    /// The wait before retry `retry` (1 for the first), drawing from `jitter` when the
    /// wait is random.
    pub(crate) fn delay(&self, retry: u32, jitter: &Xorshift) -> Duration {
        match *self {
            Backoff::None => Duration::ZERO,
            Backoff::Fixed(d) => d,
            Backoff::Exponential { base, max } => {
                let doublings = retry.saturating_sub(1).min(31);
                let cap = base.saturating_mul(1 << doublings).min(max);
                up_to(cap, jitter)
            }
            Backoff::Random { min, max } => {
                min.saturating_add(up_to(max.saturating_sub(min), jitter))
            }
        }
    }
}

/// A wait drawn uniformly from `0..=cap`.
fn up_to(cap: Duration, jitter: &Xorshift) -> Duration {
    // Nanoseconds fit u64 for any wait under 584 years.
    let cap_nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
    match cap_nanos.checked_add(1) {
        Some(span) => Duration::from_nanos(jitter.next() % span),
        None => Duration::from_nanos(jitter.next()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_waits_stay_within_their_bounds() {
        let jitter = Xorshift::new(3);
        let (min, max) = (Duration::from_millis(5), Duration::from_millis(9));
        let b = Backoff::Random { min, max };
        let waits: Vec<Duration> = (0..200).map(|i| b.delay(i % 4 + 1, &jitter)).collect();
        assert!(waits.iter().all(|w| (min..=max).contains(w)), "{waits:?}");
        assert!(waits.iter().any(|w| *w < Duration::from_millis(6)));
        assert!(waits.iter().any(|w| *w > Duration::from_millis(8)));
    }

    #[test]
    fn exponential_waits_stay_under_a_doubling_cap() {
        let jitter = Xorshift::new(7);
        let b = Backoff::Exponential {
            base: Duration::from_millis(10),
            max: Duration::from_millis(50),
        };
        let caps = [10, 20, 40, 50, 50, 50];
        for (i, cap) in caps.iter().enumerate() {
            let cap = Duration::from_millis(*cap);
            let waits: Vec<Duration> = (0..200).map(|_| b.delay(i as u32 + 1, &jitter)).collect();
            assert!(
                waits.iter().all(|w| *w <= cap),
                "retry {}: {waits:?}",
                i + 1
            );
            // Full jitter: the waits spread over the whole range below the cap.
            assert!(waits.iter().any(|w| *w < cap / 4), "retry {}", i + 1);
            assert!(waits.iter().any(|w| *w > cap * 3 / 4), "retry {}", i + 1);
        }
        assert!(b.delay(u32::MAX, &jitter) <= Duration::from_millis(50));
    }

    #[test]
    fn fixed_and_none_do_not_draw() {
        let jitter = Xorshift::new(1);
        let d = Duration::from_millis(3);
        assert_eq!(Backoff::Fixed(d).delay(5, &jitter), d);
        assert_eq!(Backoff::None.delay(1, &jitter), Duration::ZERO);
    }

    #[test]
    fn one_seed_gives_one_sequence() {
        let (a, b) = (Xorshift::new(42), Xorshift::new(42));
        let xs: Vec<u64> = (0..8).map(|_| a.next()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs[0], xs[1]);
    }
}
