//! The breaker's state machine: closed, open, half-open. It owns no clock (every
//! method takes `now`) and no lock (its owners put it behind one), so its rules can be
//! tested by feeding it instants.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::window::Window;

/// When a breaker opens, how long it stays open, and how it closes again.
///
/// Two sets of defaults: [`BreakerConfig::service`] (also [`Default`]) for the breaker
/// of a whole callee service, [`BreakerConfig::instance`] for the breaker of each
/// instance. Values out of range are raised to the smallest that works (a count of 0
/// counts as 1, a window of 0 buckets as 1 bucket).
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerConfig {
    /// The share of failed calls in the window at or above which the breaker opens
    /// (with at least [`min_samples`](Self::min_samples) calls in it and at least one
    /// failure); above 1.0 the rate never opens it. Default 0.5, as in Kitex.
    pub error_rate: f64,
    /// Calls (successes and failures) the window must hold before the error rate is
    /// judged. Default 200 for a service, as in Kitex; 10 for an instance.
    pub min_samples: u64,
    /// Failures in a row that open the breaker whatever the window says (0: never).
    /// Default 0 for a service (only the rate counts, as in Kitex), 10 for an
    /// instance: after a long healthy run the window is full of successes and the rate
    /// alone would take most of the window to notice that an instance died.
    pub consecutive_failures: u32,
    /// The span the error rate is measured over. Default 10 s.
    pub window: Duration,
    /// Buckets the window is cut into: a sample stops counting between
    /// `window - window / buckets` and `window` after it happened. Default 10 (of 1 s).
    pub buckets: u32,
    /// How long the breaker stays open (fails calls fast) before letting trial calls
    /// through. Default 5 s.
    pub open_for: Duration,
    /// Trial calls let through at once while half-open; more wait for the next
    /// (they are refused, as when open). Default 3: little load on a callee that may
    /// still be sick, yet one trial that hangs until its timeout does not hold the
    /// breaker half-open on its own.
    pub half_open_probes: u32,
    /// Successful trial calls in a row that close the breaker; one failed trial opens
    /// it again for [`open_for`](Self::open_for). Default 3.
    pub half_open_successes: u32,
}

impl Default for BreakerConfig {
    /// [`BreakerConfig::service`].
    fn default() -> Self {
        Self::service()
    }
}

impl BreakerConfig {
    /// A breaker that never opens (a rate above 1.0, no count of failures in a row):
    /// how a builder turns a breaker off.
    pub fn disabled() -> Self {
        BreakerConfig {
            error_rate: 2.0,
            consecutive_failures: 0,
            ..Self::service()
        }
    }

    /// The defaults for a service breaker: opens at an error rate of 50% over 10 s once
    /// 200 calls were seen, stays open 5 s, closes after 3 successful trials.
    pub fn service() -> Self {
        BreakerConfig {
            error_rate: 0.5,
            min_samples: 200,
            consecutive_failures: 0,
            window: Duration::from_secs(10),
            buckets: 10,
            open_for: Duration::from_secs(5),
            half_open_probes: 3,
            half_open_successes: 3,
        }
    }

    /// The defaults for an instance breaker: as [`service`](Self::service) but judged
    /// from 10 calls, and open after 10 failures in a row, so that at tens of calls a
    /// second a dead instance is out of the rotation within a fraction of a second.
    pub fn instance() -> Self {
        BreakerConfig {
            min_samples: 10,
            consecutive_failures: 10,
            ..Self::service()
        }
    }
}

/// Where a breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls go through; their outcomes are counted.
    Closed,
    /// Calls fail fast until [`BreakerConfig::open_for`] has passed.
    Open,
    /// A few trial calls go through; their outcomes close or reopen the breaker.
    HalfOpen,
}

/// What a finished call tells a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The callee answered (a result, or an exception it chose to send).
    Success,
    /// The callee failed to answer (see [`super::counts_as_failure`]).
    Failure,
    /// Nothing about the callee: the call never reached it, or was cancelled.
    Ignored,
}

/// Leave to make one call, given by [`Breaker::try_acquire_at`] and handed back with the
/// call's outcome to [`Breaker::finish`]. Not `Clone`: one outcome per admitted call.
#[derive(Debug)]
pub(crate) struct Permit {
    /// The breaker's generation when the call was let through: an outcome from an
    /// earlier one (the breaker opened or closed meanwhile) is not counted.
    generation: u64,
    /// Whether the call holds one of the half-open trial slots.
    probe: bool,
}

impl Permit {
    /// Whether the call holds a half-open trial slot.
    #[cfg(test)]
    pub(crate) fn is_probe(&self) -> bool {
        self.probe
    }
}

/// A change of state caused by a finished call, which owners that count open breakers
/// must know of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// None.
    None,
    /// Closed to open.
    Opened,
    /// Half-open back to open.
    Reopened,
    /// Half-open to closed.
    Closed,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Closed,
    Open { until: Instant },
    HalfOpen { probes: u32, successes: u32 },
}

/// One breaker (see the [module docs](super)).
#[derive(Debug)]
pub(crate) struct Breaker {
    config: BreakerConfig,
    phase: Phase,
    /// Goes up at every change of phase, so late outcomes are told apart.
    generation: u64,
    window: Window,
    /// Failures in a row while closed.
    failures_in_a_row: u32,
}

impl Breaker {
    /// A closed breaker with an empty window at `now`.
    pub(crate) fn new(config: BreakerConfig, now: Instant) -> Self {
        let config = BreakerConfig {
            min_samples: config.min_samples.max(1),
            buckets: config.buckets.max(1),
            half_open_probes: config.half_open_probes.max(1),
            half_open_successes: config.half_open_successes.max(1),
            ..config
        };
        Breaker {
            window: Window::new(config.window, config.buckets, now),
            config,
            phase: Phase::Closed,
            generation: 0,
            failures_in_a_row: 0,
        }
    }

    /// Changes when the breaker opens, keeping its state and what its window holds.
    pub(crate) fn set_thresholds(
        &mut self,
        error_rate: f64,
        min_samples: u64,
        consecutive_failures: u32,
    ) {
        self.config.error_rate = error_rate;
        self.config.min_samples = min_samples.max(1);
        self.config.consecutive_failures = consecutive_failures;
    }

    /// The state at `now` (open turns half-open once `open_for` has passed).
    pub(crate) fn state(&self, now: Instant) -> BreakerState {
        match self.phase {
            Phase::Closed => BreakerState::Closed,
            Phase::Open { until } if now < until => BreakerState::Open,
            Phase::Open { .. } | Phase::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// Whether [`try_acquire_at`](Self::try_acquire_at) would let a call through at `now`.
    pub(crate) fn is_available(&self, now: Instant) -> bool {
        match self.phase {
            Phase::Closed => true,
            Phase::Open { until } => now >= until,
            Phase::HalfOpen { probes, .. } => probes < self.config.half_open_probes,
        }
    }

    /// Leave for a call at `now`: always while closed, never while open, and while
    /// half-open as long as a trial slot is free (the permit then holds it).
    #[cfg(test)]
    pub(crate) fn try_acquire(&mut self, now: Instant) -> Option<Permit> {
        self.try_acquire_at(|| now)
    }

    /// Leave for a call, as the tests' `try_acquire` gives it, reading the time only
    /// when the phase needs it (an open breaker checks whether its open time is over):
    /// a closed breaker, the common case, lets a call through without a clock read.
    pub(crate) fn try_acquire_at(&mut self, now: impl FnOnce() -> Instant) -> Option<Permit> {
        if let Phase::Open { until } = self.phase {
            if now() < until {
                return None;
            }
            self.enter(Phase::HalfOpen {
                probes: 0,
                successes: 0,
            });
        }
        match &mut self.phase {
            Phase::Closed => Some(Permit {
                generation: self.generation,
                probe: false,
            }),
            Phase::HalfOpen { probes, .. } if *probes < self.config.half_open_probes => {
                *probes += 1;
                Some(Permit {
                    generation: self.generation,
                    probe: true,
                })
            }
            Phase::HalfOpen { .. } | Phase::Open { .. } => None,
        }
    }

    /// The call `permit` let through ended at `now` with `outcome`: counts it (if the
    /// breaker is still in the phase that let it through), frees its trial slot, and
    /// opens or closes the breaker when the rules say so.
    pub(crate) fn finish(&mut self, permit: Permit, outcome: Outcome, now: Instant) -> Change {
        if permit.generation != self.generation {
            return Change::None;
        }
        match &mut self.phase {
            Phase::Closed => {
                match outcome {
                    Outcome::Ignored => return Change::None,
                    Outcome::Success => self.failures_in_a_row = 0,
                    Outcome::Failure => {
                        self.failures_in_a_row = self.failures_in_a_row.saturating_add(1);
                    }
                }
                self.window.record(now, outcome == Outcome::Failure);
                // Judged after a success too: it may be the sample that makes the
                // minimum, with the rate already at the threshold. Not without a
                // failure in the window (the usual case): no rate to judge.
                if (outcome == Outcome::Failure || self.window.has_failures())
                    && self.should_trip(now)
                {
                    self.open(now);
                    Change::Opened
                } else {
                    Change::None
                }
            }
            Phase::HalfOpen { probes, successes } => {
                debug_assert!(permit.probe, "a closed-phase permit of a half-open phase");
                *probes = probes.saturating_sub(1);
                match outcome {
                    Outcome::Ignored => Change::None,
                    Outcome::Success => {
                        *successes += 1;
                        if *successes >= self.config.half_open_successes {
                            self.enter(Phase::Closed);
                            Change::Closed
                        } else {
                            Change::None
                        }
                    }
                    Outcome::Failure => {
                        self.open(now);
                        Change::Reopened
                    }
                }
            }
            // Entering open starts a new generation: no permit of it exists.
            Phase::Open { .. } => Change::None,
        }
    }

    /// Whether the closed breaker's counts call for opening it.
    fn should_trip(&mut self, now: Instant) -> bool {
        let limit = self.config.consecutive_failures;
        if limit > 0 && self.failures_in_a_row >= limit {
            return true;
        }
        let c = self.window.counts(now);
        c.total() >= self.config.min_samples
            && c.failures > 0
            && c.failures as f64 >= self.config.error_rate * c.total() as f64
    }

    #[cold]
    fn open(&mut self, now: Instant) {
        let until = now.checked_add(self.config.open_for).unwrap_or(now);
        self.enter(Phase::Open { until });
    }

    /// `generation * 2 + 1` while closed, 0 otherwise: what [`Guarded`] mirrors.
    fn closed_token(&self) -> u64 {
        match self.phase {
            Phase::Closed => self.generation.wrapping_mul(2) | 1,
            Phase::Open { .. } | Phase::HalfOpen { .. } => 0,
        }
    }

    /// Moves to `phase` with a fresh count: what happened before a change of phase says
    /// nothing about the callee after it.
    #[cold]
    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.generation += 1;
        self.window.clear();
        self.failures_in_a_row = 0;
    }
}

/// A [`Breaker`] behind a lock, shared by the calls of one callee, with `extra` state
/// of its owner under the same lock. Its closed phase is mirrored in an atomic, so a
/// closed breaker (the common case) lets a call through without taking the lock: one
/// lock per call, when its outcome is counted, instead of two.
///
/// A call let through by the mirror just as another thread opens the breaker carries
/// the closed phase's generation, so its outcome is not counted: the same as if it had
/// taken the lock just before the breaker opened.
#[derive(Debug)]
pub(crate) struct Guarded<X> {
    /// [`Breaker::closed_token`] as of the last time the lock was released.
    closed: AtomicU64,
    inner: Mutex<Inner<X>>,
}

/// What [`Guarded`]'s lock holds.
#[derive(Debug)]
pub(crate) struct Inner<X> {
    pub(crate) breaker: Breaker,
    pub(crate) extra: X,
}

impl<X> Guarded<X> {
    pub(crate) fn new(breaker: Breaker, extra: X) -> Self {
        Guarded {
            closed: AtomicU64::new(breaker.closed_token()),
            inner: Mutex::new(Inner { breaker, extra }),
        }
    }

    /// The lock (a panic elsewhere while it was held leaves it usable: the breaker's
    /// state is changed in single steps). Releasing it updates the mirror.
    pub(crate) fn lock(&self) -> GuardedLock<'_, X> {
        GuardedLock {
            closed: &self.closed,
            guard: self.inner.lock().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// [`Breaker::try_acquire_at`], without the lock while the breaker is closed.
    pub(crate) fn try_acquire_at(&self, now: impl FnOnce() -> Instant) -> Option<Permit> {
        let token = self.closed.load(Ordering::Acquire);
        if token != 0 {
            return Some(Permit {
                generation: token >> 1,
                probe: false,
            });
        }
        self.lock().breaker.try_acquire_at(now)
    }
}

/// [`Guarded`]'s lock, held.
pub(crate) struct GuardedLock<'a, X> {
    closed: &'a AtomicU64,
    guard: MutexGuard<'a, Inner<X>>,
}

impl<X> Deref for GuardedLock<'_, X> {
    type Target = Inner<X>;

    fn deref(&self) -> &Inner<X> {
        &self.guard
    }
}

impl<X> DerefMut for GuardedLock<'_, X> {
    fn deref_mut(&mut self) -> &mut Inner<X> {
        &mut self.guard
    }
}

impl<X> Drop for GuardedLock<'_, X> {
    fn drop(&mut self) {
        // Stored while the lock is still held: the mirror changes in the order the
        // phases do.
        self.closed
            .store(self.guard.breaker.closed_token(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> BreakerConfig {
        BreakerConfig {
            min_samples: 4,
            half_open_probes: 2,
            half_open_successes: 2,
            ..BreakerConfig::service()
        }
    }

    fn fail(b: &mut Breaker, now: Instant) -> Change {
        let p = b.try_acquire(now).expect("let through");
        b.finish(p, Outcome::Failure, now)
    }

    fn succeed(b: &mut Breaker, now: Instant) -> Change {
        let p = b.try_acquire(now).expect("let through");
        b.finish(p, Outcome::Success, now)
    }

    #[test]
    fn a_success_that_makes_the_minimum_sample_opens_a_failing_breaker() {
        let t0 = Instant::now();
        let mut b = Breaker::new(config(), t0);
        // 3 failures of 3: under the minimum of 4, nothing yet.
        for _ in 0..3 {
            assert_eq!(fail(&mut b, t0), Change::None);
        }
        // The fourth sample is a success, and 3 of 4 failed: over the 50% rate.
        assert_eq!(succeed(&mut b, t0), Change::Opened);
        // Without failures in the window, successes alone never open it.
        let mut clean = Breaker::new(config(), t0);
        for _ in 0..100 {
            assert_eq!(succeed(&mut clean, t0), Change::None);
        }
        assert_eq!(clean.state(t0), BreakerState::Closed);
    }

    #[test]
    fn opens_on_rate_then_half_opens_then_closes() {
        let t0 = Instant::now();
        let mut b = Breaker::new(config(), t0);
        assert_eq!(succeed(&mut b, t0), Change::None);
        assert_eq!(fail(&mut b, t0), Change::None);
        assert_eq!(succeed(&mut b, t0), Change::None);
        // 2 of 4 failed: 50%.
        assert_eq!(fail(&mut b, t0), Change::Opened);
        assert_eq!(b.state(t0), BreakerState::Open);
        assert!(b.try_acquire(t0).is_none() && !b.is_available(t0));

        let t1 = t0 + Duration::from_secs(5);
        assert_eq!(b.state(t1), BreakerState::HalfOpen);
        assert!(b.is_available(t1));
        let p1 = b.try_acquire(t1).unwrap();
        let p2 = b.try_acquire(t1).unwrap();
        assert!(p1.is_probe() && p2.is_probe());
        assert!(b.try_acquire(t1).is_none(), "two trial slots");
        assert!(!b.is_available(t1));
        assert_eq!(b.finish(p1, Outcome::Success, t1), Change::None);
        assert_eq!(b.finish(p2, Outcome::Success, t1), Change::Closed);
        assert_eq!(b.state(t1), BreakerState::Closed);
    }

    #[test]
    fn a_guarded_breaker_admits_without_the_lock_only_while_closed() {
        let t0 = Instant::now();
        let g = Guarded::new(Breaker::new(config(), t0), ());
        // Closed: the mirror admits, with the closed phase's generation.
        let early = g.try_acquire_at(|| unreachable!("no clock read while closed"));
        let early = early.expect("closed lets calls through");
        assert!(!early.is_probe());
        for _ in 0..4 {
            let p = g.try_acquire_at(|| t0).unwrap();
            g.lock().breaker.finish(p, Outcome::Failure, t0);
        }
        // Opened under the lock: the mirror says so once the lock is released.
        assert_eq!(g.lock().breaker.state(t0), BreakerState::Open);
        assert!(g.try_acquire_at(|| t0).is_none(), "open refuses");
        // The permit taken before it opened belongs to an older phase: not counted.
        let t1 = t0 + Duration::from_secs(5);
        assert_eq!(
            g.lock().breaker.finish(early, Outcome::Success, t1),
            Change::None
        );
        // Half-open trials go through the lock and close it; the mirror follows.
        for _ in 0..2 {
            let p = g.try_acquire_at(|| t1).expect("a trial slot");
            assert!(p.is_probe());
            g.lock().breaker.finish(p, Outcome::Success, t1);
        }
        assert_eq!(g.lock().breaker.state(t1), BreakerState::Closed);
        let p = g.try_acquire_at(|| unreachable!("closed again: no clock read"));
        assert!(p.is_some_and(|p| !p.is_probe()));
    }

    #[test]
    fn outcomes_from_an_earlier_phase_are_not_counted() {
        let t0 = Instant::now();
        let mut b = Breaker::new(config(), t0);
        let early = b.try_acquire(t0).unwrap();
        for _ in 0..3 {
            fail(&mut b, t0);
        }
        assert_eq!(fail(&mut b, t0), Change::Opened);
        let t1 = t0 + Duration::from_secs(5);
        let probe = b.try_acquire(t1).unwrap();
        // The call let through while closed ends now: neither a trial success nor a
        // freed slot.
        assert_eq!(b.finish(early, Outcome::Success, t1), Change::None);
        assert!(b.try_acquire(t1).is_some(), "one slot left, not two");
        assert!(b.try_acquire(t1).is_none());
        assert_eq!(b.finish(probe, Outcome::Failure, t1), Change::Reopened);
        assert_eq!(b.state(t1), BreakerState::Open);
    }

    #[test]
    fn zero_counts_are_raised_and_no_failure_never_trips() {
        let t0 = Instant::now();
        let mut b = Breaker::new(
            BreakerConfig {
                error_rate: 0.0,
                min_samples: 0,
                half_open_probes: 0,
                half_open_successes: 0,
                buckets: 0,
                ..BreakerConfig::service()
            },
            t0,
        );
        for _ in 0..100 {
            assert_eq!(succeed(&mut b, t0), Change::None);
        }
        assert_eq!(fail(&mut b, t0), Change::Opened);
        let t1 = t0 + Duration::from_secs(5);
        assert!(b.try_acquire(t1).is_some_and(|p| p.is_probe()));
    }
}
