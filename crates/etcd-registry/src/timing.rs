//! The registry's times as pure functions of their inputs: lease length, keepalive
//! interval and retry backoff, so they are tested without sleeping.

use std::time::Duration;

/// The first wait after a failure.
pub(crate) const BACKOFF_FIRST: Duration = Duration::from_millis(50);
/// The longest wait between two tries.
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The lease TTL etcd is asked for: `ttl` in whole seconds, rounded up, at least 1
/// (etcd's granularity), and at most `i64::MAX`.
pub(crate) fn lease_ttl_secs(ttl: Duration) -> i64 {
    let secs = ttl
        .as_secs()
        .saturating_add(u64::from(ttl.subsec_nanos() > 0));
    i64::try_from(secs.max(1)).unwrap_or(i64::MAX)
}

/// How often a lease of `ttl_secs` seconds is kept alive: every third of it, so two
/// keepalives in a row may be lost before it runs out (etcd's own clients use the
/// same ratio).
pub(crate) fn keepalive_interval(ttl_secs: i64) -> Duration {
    let ttl = Duration::from_secs(u64::try_from(ttl_secs.max(1)).unwrap_or(1));
    ttl / 3
}

/// The wait before try `failures + 1` after `failures` failures in a row (at least
/// one): [`BACKOFF_FIRST`] doubling each time, at most [`BACKOFF_MAX`].
pub(crate) fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    BACKOFF_FIRST
        .saturating_mul(1 << doublings)
        .min(BACKOFF_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_ttls_round_up_to_whole_seconds() {
        let ms = Duration::from_millis;
        assert_eq!(lease_ttl_secs(Duration::ZERO), 1);
        assert_eq!(lease_ttl_secs(ms(1)), 1);
        assert_eq!(lease_ttl_secs(ms(1000)), 1);
        assert_eq!(lease_ttl_secs(ms(1001)), 2);
        assert_eq!(lease_ttl_secs(Duration::from_secs(10)), 10);
        assert_eq!(lease_ttl_secs(Duration::MAX), i64::MAX);
    }

    #[test]
    fn keepalives_come_every_third_of_the_ttl() {
        assert_eq!(keepalive_interval(1), Duration::from_nanos(333_333_333));
        assert_eq!(keepalive_interval(3), Duration::from_secs(1));
        assert_eq!(keepalive_interval(10), Duration::from_nanos(3_333_333_333));
        // Nonsense in, a short but sane interval out.
        assert_eq!(keepalive_interval(0), keepalive_interval(1));
        assert_eq!(keepalive_interval(-5), keepalive_interval(1));
    }

    #[test]
    fn backoff_doubles_from_50ms_up_to_2s() {
        let got: Vec<u128> = (1..=8).map(|n| backoff(n).as_millis()).collect();
        assert_eq!(got, [50, 100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(backoff(0), BACKOFF_FIRST);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }
}
