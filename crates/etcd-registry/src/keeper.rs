//! Keeping one registration's lease, without I/O: what to do next and after how
//! long, given what etcd answered and when (the driver in `registry.rs` does the
//! requests, reads the clock and logs what this reports).

use std::time::{Duration, Instant};

use crate::timing::{backoff, keepalive_interval};

/// How a keepalive went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeepAlive {
    /// etcd renewed the lease.
    Alive,
    /// etcd answered that the lease is gone (TTL 0, not found).
    Gone,
    /// No answer: etcd is unreachable, or the request failed or timed out.
    Failed,
}

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Task {
    /// Keep this lease alive.
    KeepAlive(i64),
    /// Grant a new lease and put the key with it, then revoke `old` (a lease taken
    /// for lost that etcd may still hold).
    Register {
        /// The lease to revoke once registered again.
        old: Option<i64>,
    },
}

/// A change of state worth one log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Report {
    /// etcd stopped answering (logged once, not on every retry).
    Down,
    /// etcd answers again, and the lease survived.
    Up,
    /// The lease is gone: etcd said so.
    LeaseGone,
    /// The lease is taken for lost: etcd did not answer for a whole TTL.
    LeasePresumedLost,
    /// Registered again, under a new lease.
    Registered(i64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Holding `lease`, last renewed (or granted) at `renewed`.
    Leased { lease: i64, renewed: Instant },
    /// Without a lease; `old` may still exist in etcd.
    Lost { old: Option<i64> },
}

/// One registration's lease keeping.
#[derive(Debug)]
pub(crate) struct Keeper {
    ttl: Duration,
    interval: Duration,
    state: State,
    /// Failed requests in a row.
    failures: u32,
    /// Whether [`Report::Down`] was the last word on etcd's reachability.
    down: bool,
}

impl Keeper {
    /// Keeping `lease` of `ttl_secs` seconds, granted at `now`.
    pub(crate) fn new(lease: i64, ttl_secs: i64, now: Instant) -> Self {
        Keeper {
            ttl: Duration::from_secs(u64::try_from(ttl_secs).unwrap_or(1)),
            interval: keepalive_interval(ttl_secs),
            state: State::Leased {
                lease,
                renewed: now,
            },
            failures: 0,
            down: false,
        }
    }

    /// The lease held, or the last one held (what deregistering revokes).
    pub(crate) fn lease(&self) -> Option<i64> {
        match self.state {
            State::Leased { lease, .. } => Some(lease),
            State::Lost { old } => old,
        }
    }

    /// How long to wait, then what to do: keepalives every interval while they
    /// succeed, retries with a backoff (never later than the interval) while they
    /// fail, and registering again at once when the lease is lost, with a backoff
    /// while that fails.
    pub(crate) fn next(&self) -> (Duration, Task) {
        match self.state {
            State::Leased { lease, .. } => {
                let wait = if self.failures == 0 {
                    self.interval
                } else {
                    backoff(self.failures).min(self.interval)
                };
                (wait, Task::KeepAlive(lease))
            }
            State::Lost { old } => {
                let wait = if self.failures == 0 {
                    Duration::ZERO
                } else {
                    backoff(self.failures)
                };
                (wait, Task::Register { old })
            }
        }
    }

    /// A keepalive answered `outcome` at `now`.
    pub(crate) fn on_keepalive(&mut self, outcome: KeepAlive, now: Instant) -> Vec<Report> {
        let State::Leased { lease, renewed } = self.state else {
            return Vec::new();
        };
        let mut reports = Vec::new();
        match outcome {
            KeepAlive::Alive => {
                self.state = State::Leased {
                    lease,
                    renewed: now,
                };
                self.failures = 0;
                if std::mem::take(&mut self.down) {
                    reports.push(Report::Up);
                }
            }
            KeepAlive::Gone => {
                self.state = State::Lost { old: None };
                self.failures = 0;
                self.down = false;
                reports.push(Report::LeaseGone);
            }
            KeepAlive::Failed => {
                self.failures = self.failures.saturating_add(1);
                if !std::mem::replace(&mut self.down, true) {
                    reports.push(Report::Down);
                }
                if now.saturating_duration_since(renewed) >= self.ttl {
                    self.state = State::Lost { old: Some(lease) };
                    reports.push(Report::LeasePresumedLost);
                }
            }
        }
        reports
    }

    /// Registering again gave `lease` (`None`: it failed) at `now`.
    pub(crate) fn on_register(&mut self, lease: Option<i64>, now: Instant) -> Vec<Report> {
        match lease {
            Some(lease) => {
                self.state = State::Leased {
                    lease,
                    renewed: now,
                };
                self.failures = 0;
                self.down = false;
                vec![Report::Registered(lease)]
            }
            None => {
                self.failures = self.failures.saturating_add(1);
                if std::mem::replace(&mut self.down, true) {
                    Vec::new()
                } else {
                    vec![Report::Down]
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_healthy_lease_is_kept_alive_every_third_of_its_ttl() {
        let t0 = Instant::now();
        let mut k = Keeper::new(7, 3, t0);
        assert_eq!(k.next(), (ms(1000), Task::KeepAlive(7)));
        assert!(k.on_keepalive(KeepAlive::Alive, t0 + ms(1000)).is_empty());
        assert_eq!(k.next(), (ms(1000), Task::KeepAlive(7)));
        assert_eq!(k.lease(), Some(7));
    }

    #[test]
    fn an_outage_is_reported_once_retried_with_backoff_then_taken_for_lost() {
        let t0 = Instant::now();
        let mut k = Keeper::new(7, 3, t0);
        let mut now = t0 + ms(1000);
        assert_eq!(k.on_keepalive(KeepAlive::Failed, now), [Report::Down]);
        let mut waits = Vec::new();
        loop {
            let (wait, task) = k.next();
            if task != Task::KeepAlive(7) {
                assert_eq!(task, Task::Register { old: Some(7) });
                break;
            }
            waits.push(wait.as_millis());
            now += wait;
            let reports = k.on_keepalive(KeepAlive::Failed, now);
            if now - t0 >= Duration::from_secs(3) {
                assert_eq!(reports, [Report::LeasePresumedLost]);
            } else {
                assert!(reports.is_empty(), "{reports:?}");
            }
        }
        // Backoff, capped by the keepalive interval, until the TTL has passed.
        assert_eq!(waits, [50, 100, 200, 400, 800, 1000]);
        // Registering again fails quietly while etcd stays away, then succeeds.
        assert_eq!(k.next(), (ms(2000), Task::Register { old: Some(7) }));
        assert!(k.on_register(None, now).is_empty());
        assert_eq!(k.next().0, ms(2000));
        assert_eq!(k.lease(), Some(7));
        assert_eq!(k.on_register(Some(9), now), [Report::Registered(9)]);
        assert_eq!(k.next(), (ms(1000), Task::KeepAlive(9)));
    }

    #[test]
    fn a_short_outage_keeps_the_lease() {
        let t0 = Instant::now();
        let mut k = Keeper::new(7, 3, t0);
        assert_eq!(
            k.on_keepalive(KeepAlive::Failed, t0 + ms(1000)),
            [Report::Down]
        );
        assert!(k.on_keepalive(KeepAlive::Failed, t0 + ms(1050)).is_empty());
        assert_eq!(
            k.on_keepalive(KeepAlive::Alive, t0 + ms(1150)),
            [Report::Up]
        );
        assert_eq!(k.next(), (ms(1000), Task::KeepAlive(7)));
        // The TTL counts from the last renewal, not from the grant.
        assert_eq!(
            k.on_keepalive(KeepAlive::Failed, t0 + ms(4000)),
            [Report::Down]
        );
        assert_eq!(k.next().1, Task::KeepAlive(7));
    }

    #[test]
    fn a_lease_etcd_says_is_gone_is_registered_again_at_once() {
        let t0 = Instant::now();
        let mut k = Keeper::new(7, 10, t0);
        assert_eq!(k.on_keepalive(KeepAlive::Gone, t0), [Report::LeaseGone]);
        assert_eq!(k.next(), (Duration::ZERO, Task::Register { old: None }));
        assert_eq!(k.lease(), None);
        // Before registering succeeds, a keepalive outcome means nothing.
        assert!(k.on_keepalive(KeepAlive::Alive, t0).is_empty());
        assert_eq!(k.on_register(None, t0), [Report::Down]);
        assert_eq!(k.next(), (ms(50), Task::Register { old: None }));
    }
}
