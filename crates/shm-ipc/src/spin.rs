//! How long the session's reader polls shared memory before it parks on the socket.
//!
//! A wake-up through the socket costs the writer a system call and the reader a trip
//! through the scheduler (and, in a runtime busy with other tasks, a wait until the
//! runtime next polls its I/O driver); polling costs a core for as long as it lasts.
//! So the reader polls where it is likely to pay:
//! - while a reply is due (the user holds a [`ReplyDue`](crate::ReplyDue)): the whole
//!   window ([`Config::spin`](crate::Config::spin)), since the peer is answering (a
//!   reader parked when a reply becomes due gets up for it);
//! - otherwise the whole window too, unless the peer's traffic is sparse: once the
//!   recent gaps in it (from running out of work to finding a message; slices given
//!   back do not count, they follow our own messages) average [`SPARSE`] windows or
//!   more, the reader parks at once. Traffic that sparse wakes the reader anyway, and
//!   polling first would only add the window's CPU to each message. Gaps that began
//!   with a reply due are not learned: they measure the peer's answer time, not how
//!   often it speaks unasked.
//!
//! Measured (2026-12-06, echo over `shm:`, one caller, server pinned to CPU 0, load
//! on CPU 1): at 2,000 and 5,000 calls a second the server's CPU per call fell from
//! 81-87 to 23-41 us at the same p50 and p99; at 10,000 and 20,000 a second and in
//! closed loops nothing changed. Parking at once whenever the gaps exceeded one
//! window (and polling twice their average below it) saved more at 10,000-20,000 a
//! second but raised p99 two to nine times there and cut 1 MiB echoes to 0.8x.
//!
//! Whatever the budget, the reader yields at least once before it parks, and goes on
//! polling (up to the window) while its yields come back late: the runtime has other
//! tasks to run, polling between them costs little, and a reader parked in a busy
//! runtime would see the wake byte late. The clock is an input: the rule is tested
//! with instants the test makes up.

use std::time::{Duration, Instant};

/// Traffic whose gaps average this many windows is sparse: the reader parks at once
/// (at the default 50 us window, fewer than about 6,000 messages a second).
pub(crate) const SPARSE: u32 = 3;

/// A yield that takes longer than this ran other tasks: the runtime is busy.
pub(crate) const BUSY_YIELD: Duration = Duration::from_micros(10);

/// The rule, with what it has learned (one per reader).
#[derive(Debug)]
pub(crate) struct SpinRule {
    window: Duration,
    /// The average gap (each new one weighs a quarter); none before the first.
    gap: Option<Duration>,
    /// Since when the reader has had nothing to do, and whether a reply was due then.
    idle_since: Option<(Instant, bool)>,
}

impl SpinRule {
    /// The rule of a reader that polls `window` at most.
    pub(crate) fn new(window: Duration) -> SpinRule {
        SpinRule {
            window,
            gap: None,
            idle_since: None,
        }
    }

    /// The reader found nothing to do at `now`, a reply `due` or not; only the first
    /// call after work counts.
    pub(crate) fn idle(&mut self, now: Instant, due: bool) {
        self.idle_since.get_or_insert((now, due));
    }

    /// The reader found work at `now`: the gap since it went idle is learned, unless
    /// a reply was due when it began.
    pub(crate) fn work(&mut self, now: Instant) {
        let Some((since, due)) = self.idle_since.take() else {
            return;
        };
        if due {
            return;
        }
        let gap = now.saturating_duration_since(since);
        self.gap = Some(match self.gap {
            None => gap,
            Some(avg) => (avg * 3 + gap) / 4,
        });
    }

    /// How long to poll before parking, with a reply `due` or not.
    pub(crate) fn budget(&self, due: bool) -> Duration {
        if due {
            return self.window;
        }
        match self.gap {
            Some(avg) if avg >= self.window * SPARSE => Duration::ZERO,
            _ => self.window,
        }
    }

    /// Whether a reader that began polling at `start` with `budget` may park at `now`,
    /// its last yield having taken `last_yield` (none yet: it has not yielded).
    pub(crate) fn may_park(
        &self,
        start: Instant,
        budget: Duration,
        now: Instant,
        last_yield: Option<Duration>,
    ) -> bool {
        let spent = now.saturating_duration_since(start);
        match last_yield {
            // A window of zero: the user asked for no polling at all.
            None => self.window.is_zero(),
            Some(_) if spent >= self.window => true,
            Some(took) => spent >= budget && took <= BUSY_YIELD,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_micros(50);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// Runs `gaps` through the rule: idle at a made-up instant, work that long after.
    fn learn(rule: &mut SpinRule, t: &mut Instant, gaps: &[u64], due: bool) {
        for g in gaps {
            rule.idle(*t, due);
            *t += us(*g);
            rule.work(*t);
        }
    }

    #[test]
    fn a_new_reader_polls_the_whole_window() {
        let rule = SpinRule::new(WINDOW);
        assert_eq!(rule.budget(false), WINDOW);
        assert_eq!(rule.budget(true), WINDOW);
    }

    #[test]
    fn traffic_faster_than_sparse_is_polled_for_the_whole_window() {
        let mut rule = SpinRule::new(WINDOW);
        let mut t = Instant::now();
        learn(&mut rule, &mut t, &[8; 4], false);
        assert_eq!(rule.budget(false), WINDOW);
        learn(&mut rule, &mut t, &[140; 20], false);
        assert_eq!(rule.budget(false), WINDOW, "140 us: under three windows");
    }

    #[test]
    fn sparse_traffic_parks_at_once_unless_a_reply_is_due() {
        let mut rule = SpinRule::new(WINDOW);
        let mut t = Instant::now();
        learn(&mut rule, &mut t, &[1_000], false);
        assert_eq!(rule.budget(false), Duration::ZERO);
        assert_eq!(rule.budget(true), WINDOW, "a due reply is polled for");
        // Traffic that quickens is learned again, through the wake-ups' gaps:
        // 1,000 x 0.75^7 + 10 x (1 - 0.75^7) = 141 us.
        learn(&mut rule, &mut t, &[10; 6], false);
        assert_eq!(rule.budget(false), Duration::ZERO);
        learn(&mut rule, &mut t, &[10], false);
        assert_eq!(rule.budget(false), WINDOW);
    }

    #[test]
    fn gaps_that_began_with_a_reply_due_are_not_learned() {
        let mut rule = SpinRule::new(WINDOW);
        let mut t = Instant::now();
        learn(&mut rule, &mut t, &[1_000], false);
        learn(&mut rule, &mut t, &[5; 20], true);
        assert_eq!(
            rule.budget(false),
            Duration::ZERO,
            "answer times taught nothing"
        );
    }

    #[test]
    fn only_the_first_idle_after_work_starts_a_gap() {
        let mut rule = SpinRule::new(WINDOW);
        let mut t = Instant::now();
        rule.idle(t, false);
        t += us(100);
        rule.idle(t, false);
        t += us(100);
        rule.work(t);
        assert_eq!(rule.budget(false), Duration::ZERO, "one gap of 200 us");
        // Work without idle learns nothing.
        rule.work(t + us(1));
        rule.work(t + us(2));
        assert_eq!(rule.budget(false), Duration::ZERO);
        // 200 x 0.75 + 0 / 4 = 150 us: still three windows.
        learn(&mut rule, &mut t, &[0], false);
        assert_eq!(rule.budget(false), Duration::ZERO);
        learn(&mut rule, &mut t, &[0], false);
        assert_eq!(rule.budget(false), WINDOW);
    }

    #[test]
    fn a_reader_yields_once_before_it_parks_and_polls_on_while_the_runtime_is_busy() {
        let rule = SpinRule::new(WINDOW);
        let start = Instant::now();
        let zero = Duration::ZERO;
        assert!(
            !rule.may_park(start, zero, start, None),
            "not before a yield"
        );
        assert!(rule.may_park(start, zero, start + us(2), Some(us(2))));
        // A yield that ran other tasks: polling goes on, up to the window.
        assert!(!rule.may_park(start, zero, start + us(30), Some(us(30))));
        assert!(rule.may_park(start, zero, start + us(50), Some(us(20))));
        // Within the budget it polls, quick yields or not.
        assert!(!rule.may_park(start, us(20), start + us(5), Some(us(1))));
        assert!(rule.may_park(start, us(20), start + us(21), Some(us(1))));
        let none = SpinRule::new(Duration::ZERO);
        assert!(
            none.may_park(start, zero, start, None),
            "spin(0) parks at once"
        );
    }
}
