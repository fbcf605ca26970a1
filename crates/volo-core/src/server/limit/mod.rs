//! Server-side limits: a cap on the calls in progress and on the calls per second,
//! checked when a frame has been read and refused at once when over.
//!
//! # Why
//!
//! - **Before decoding.** A limit is there to protect the server when it has more work
//!   than it can do; decoding the arguments of a call it is about to refuse would spend
//!   CPU and memory on exactly the calls it cannot afford. So the drivers ask the
//!   [`Limiter`] as soon as a frame is cut and its message header (method name and
//!   sequence id, which the refusal must carry) is read, before the arguments are
//!   touched. Kitex does the same: its default QPS limiter acts in the `OnRead` hook,
//!   before deserialisation, on non-mux connections.
//! - **Refuse rather than queue.** A queue in front of an overloaded server only adds
//!   latency to every call behind it, and the callers' timeouts expire while their calls
//!   wait; their retries then add load. A refusal costs the server one small reply and
//!   tells the caller at once. (The queueing limit, [`ServerCapacity::max_inflight`],
//!   stays as the backstop: a call admitted here may still wait there if
//!   `max_concurrency` is above it.)
//! - **What the client does with a refusal.** The reply is a `TApplicationException`
//!   `INTERNAL_ERROR` whose message starts with [`OVERLOAD_PREFIX`] (see [`refusal`]).
//!   A client that checks [`is_overload`] knows the handler never ran, so the call is
//!   safe to send to another instance even when it is not idempotent, and it can count
//!   the instance as overloaded rather than broken.
//!
//! The logic is pure: no I/O, no thread, no timer. The QPS bucket reads the time from
//! the [`Clock`] it is given and computes its refill from the elapsed time, so tests
//! drive it with a [`ManualClock`](crate::clock::ManualClock).
//!
//! # Defaults
//!
//! Both limits are off by default: as in Kitex, where `server.WithLimit` is opt-in, a
//! server limits nothing beyond [`ServerConfig`] unless told to.
//!
//! | [`LimitConfig`] field | Default | When set to `Some(n)` |
//! |---|---|---|
//! | [`max_concurrency`](LimitConfig::max_concurrency) | `None`: no limit beyond [`ServerCapacity::max_inflight`] (which queues) | at most `n` calls in progress across all connections, from admission until the reply is written or the call is dropped; more are refused; `Some(0)` refuses all |
//! | [`max_qps`](LimitConfig::max_qps) | `None`: no rate limit | a token bucket refilled continuously at `n` per second, holding at most a burst of `max(n / 10, 1)` (a tenth of a second's worth) and full at the start; a call takes one token or is refused; `Some(0)` refuses all |
//!
//! The burst is kept small on purpose: a bucket that could hold a whole second's worth
//! would let `n` calls in within one millisecond after an idle spell, which is the kind
//! of spike the limit is meant to stop.
//!
//! # Cost
//!
//! [`Limiter::try_acquire`] is called for every frame. With both limits off it checks
//! two `Option`s and returns a permit that holds nothing: no atomic operation, no clock
//! read, no allocation, so a driver can keep a `Limiter` unconditionally (or skip even
//! that behind [`Limiter::is_enabled`]). With limits on it is lock-free: one
//! compare-and-swap on a counter for the concurrency limit (and a reference count for
//! the permit), one clock read and one compare-and-swap for the QPS limit. A server
//! that follows a [governance](crate::governance) ([`LimitLayer::governed`]) also
//! reads the governance's version (an atomic) and loads the limiter in force (an
//! `ArcSwap` load) per call.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use volo_core::clock::ManualClock;
//! use volo_core::refusal::is_overload;
//! use volo_core::server::limit::{LimitConfig, Limiter, Overloaded, refusal};
//!
//! let clock = ManualClock::new();
//! let config = LimitConfig {
//!     max_concurrency: Some(1),
//!     max_qps: Some(20), // a burst of 2
//! };
//! let limiter = Limiter::new(config, clock.clone());
//!
//! let first = limiter.try_acquire().unwrap();
//! let over = limiter.try_acquire().unwrap_err();
//! assert_eq!(over, Overloaded::Concurrency { limit: 1 });
//! assert!(is_overload(&refusal(&over))); // what the caller is answered with
//! drop(first); // the call was answered
//!
//! drop(limiter.try_acquire().unwrap()); // the second token of the burst
//! assert_eq!(limiter.try_acquire().unwrap_err(), Overloaded::Qps { limit: 20 });
//! clock.advance(Duration::from_millis(50)); // one token at 20 a second
//! assert!(limiter.try_acquire().is_ok());
//! ```
//!
//! [`ServerConfig`]: super::ServerConfig
//! [`ServerCapacity::max_inflight`]: crate::server::ServerCapacity::max_inflight
//! [`OVERLOAD_PREFIX`]: crate::refusal::OVERLOAD_PREFIX
//! [`is_overload`]: crate::refusal::is_overload

mod concurrency;
mod error;
mod layer;
mod rate;

use std::fmt;
use std::sync::Arc;

pub use error::{Overloaded, refusal};
pub use layer::{Limit, LimitLayer};

use crate::clock::{Clock, SystemClock};
use concurrency::{Slot, Slots};
use rate::TokenBucket;

/// Which limits a [`Limiter`] enforces; `LimitConfig::default()` enforces none (see the
/// [module docs](self#defaults) for the table).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitConfig {
    /// Calls in progress at once across all connections of the server, counted from
    /// admission until the call is answered or dropped; more are refused, not queued.
    /// `None` (the default): no limit here beyond
    /// [`ServerCapacity::max_inflight`](crate::server::ServerCapacity::max_inflight), which makes
    /// calls wait instead. `Some(0)` refuses every call.
    pub max_concurrency: Option<usize>,
    /// Calls admitted per second, across all connections: a token bucket refilled
    /// continuously at this rate, holding at most [`qps_burst`](Self::qps_burst)
    /// tokens (a tenth of the rate, at least one) and full at the start. `None` (the
    /// default): no rate limit. `Some(0)` refuses every call.
    pub max_qps: Option<u32>,
}

impl LimitConfig {
    /// Whether any limit is set.
    pub fn is_enabled(&self) -> bool {
        self.max_concurrency.is_some() || self.max_qps.is_some()
    }

    /// The most calls the QPS limit admits at once after an idle spell:
    /// `max(max_qps / 10, 1)`, or 0 for a rate of 0; `None` without a QPS limit.
    pub fn qps_burst(&self) -> Option<u32> {
        self.max_qps.map(rate::burst_of)
    }
}

/// Admits or refuses calls against a [`LimitConfig`]; one per server, shared by all its
/// connections (behind the server's `Arc`), and safe to call from any thread.
///
/// The time for the QPS limit comes from the clock `C`: [`SystemClock`] in a server,
/// a [`ManualClock`](crate::clock::ManualClock) in tests.
pub struct Limiter<C: Clock = SystemClock> {
    config: LimitConfig,
    /// The concurrency limit, if set; permits hold a reference to it.
    slots: Option<Arc<Slots>>,
    /// The QPS limit, if set.
    bucket: Option<TokenBucket>,
    clock: C,
}

impl<C: Clock> fmt::Debug for Limiter<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("config", &self.config)
            .field("in_flight", &self.in_flight())
            .finish_non_exhaustive()
    }
}

impl<C: Clock> Limiter<C> {
    /// A limiter enforcing `config`, reading the time from `clock`. The QPS bucket
    /// starts full at `clock.now()`.
    pub fn new(config: LimitConfig, clock: C) -> Self {
        Limiter {
            slots: config.max_concurrency.map(|n| Arc::new(Slots::new(n))),
            bucket: config.max_qps.map(|qps| TokenBucket::new(qps, clock.now())),
            config,
            clock,
        }
    }

    /// The limits enforced.
    pub fn config(&self) -> &LimitConfig {
        &self.config
    }

    /// Whether any limit is enforced. When not, [`try_acquire`](Self::try_acquire)
    /// always succeeds, at the cost of two branches.
    pub fn is_enabled(&self) -> bool {
        self.slots.is_some() || self.bucket.is_some()
    }

    /// Calls holding a [`LimitPermit`] now; `None` when there is no concurrency limit
    /// (then nothing is counted).
    pub fn in_flight(&self) -> Option<usize> {
        self.slots.as_deref().map(Slots::taken)
    }

    /// Admits one call, or says which limit refuses it.
    ///
    /// On success the call holds a concurrency slot (if that limit is set) until the
    /// returned permit is dropped, and has used one QPS token (if that limit is set),
    /// which is not given back. A call refused by the QPS limit gives its slot back at
    /// once, and one refused by the concurrency limit takes no token: the concurrency
    /// limit is checked first because only it can be undone.
    #[inline]
    pub fn try_acquire(&self) -> Result<LimitPermit, Overloaded> {
        self.try_acquire_at(|| self.clock.now())
    }

    /// [`try_acquire`](Self::try_acquire) with the time given: `now` is called only
    /// when the QPS limit is set. The server's [`Limit`] layer gives the time its
    /// connection took the call's frame, so the limiter reads no clock of its own.
    #[inline]
    pub fn try_acquire_at(
        &self,
        now: impl FnOnce() -> std::time::Instant,
    ) -> Result<LimitPermit, Overloaded> {
        let slot = match &self.slots {
            None => None,
            Some(slots) => Some(slots.try_take().ok_or(Overloaded::Concurrency {
                limit: slots.limit(),
            })?),
        };
        if let Some(bucket) = &self.bucket
            && !bucket.try_take(now())
        {
            // `slot`, dropped here, gives the concurrency slot back.
            return Err(Overloaded::Qps {
                limit: bucket.rate(),
            });
        }
        Ok(LimitPermit { _slot: slot })
    }
}

/// An admitted call's hold on the concurrency limit, given back when dropped: keep it
/// until the call is answered (or dropped, when its connection closes). Holds nothing
/// when there is no concurrency limit.
#[derive(Debug)]
#[must_use = "the call's concurrency slot is given back as soon as the permit is dropped"]
pub struct LimitPermit {
    _slot: Option<Slot>,
}

impl LimitPermit {
    /// A permit that holds no slot.
    pub(crate) fn none() -> Self {
        LimitPermit { _slot: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn limiter(
        max_concurrency: Option<usize>,
        max_qps: Option<u32>,
    ) -> (Limiter<ManualClock>, ManualClock) {
        let clock = ManualClock::new();
        let config = LimitConfig {
            max_concurrency,
            max_qps,
        };
        (Limiter::new(config, clock.clone()), clock)
    }

    /// Admits calls (dropping their permits at once) until one is refused.
    fn admit_all(limiter: &Limiter<ManualClock>) -> (usize, Overloaded) {
        let mut n = 0;
        loop {
            match limiter.try_acquire() {
                Ok(_) => n += 1,
                Err(over) => return (n, over),
            }
        }
    }

    #[test]
    fn the_default_config_limits_nothing() {
        let config = LimitConfig::default();
        assert_eq!(config.max_concurrency, None);
        assert_eq!(config.max_qps, None);
        assert!(!config.is_enabled());
        assert_eq!(config.qps_burst(), None);
    }

    #[test]
    fn a_disabled_limiter_always_admits() {
        let (limiter, _clock) = limiter(None, None);
        assert!(!limiter.is_enabled());
        let permits: Vec<_> = (0..10_000)
            .map(|_| limiter.try_acquire().expect("no limit"))
            .collect();
        assert_eq!(permits.len(), 10_000);
        assert_eq!(limiter.in_flight(), None);
    }

    #[test]
    fn the_concurrency_cap_refuses_the_next_call_and_admits_again_after_a_drop() {
        let (limiter, _clock) = limiter(Some(3), None);
        assert!(limiter.is_enabled());
        let mut permits: Vec<_> = (0..3).map(|_| limiter.try_acquire().unwrap()).collect();
        assert_eq!(limiter.in_flight(), Some(3));
        assert_eq!(
            limiter.try_acquire().unwrap_err(),
            Overloaded::Concurrency { limit: 3 }
        );
        assert_eq!(limiter.in_flight(), Some(3), "a refusal holds nothing");

        drop(permits.pop());
        assert_eq!(limiter.in_flight(), Some(2));
        permits.push(limiter.try_acquire().expect("a slot was freed"));
        assert!(limiter.try_acquire().is_err());

        drop(permits);
        assert_eq!(limiter.in_flight(), Some(0));
    }

    #[test]
    fn the_qps_bucket_admits_the_burst_then_refuses_and_refills_with_the_clock() {
        let (limiter, clock) = limiter(None, Some(100));
        assert_eq!(limiter.config().qps_burst(), Some(10));
        assert_eq!(admit_all(&limiter), (10, Overloaded::Qps { limit: 100 }));

        // At 100 a second, one token per 10 ms.
        clock.advance(Duration::from_millis(9));
        assert!(limiter.try_acquire().is_err());
        clock.advance(Duration::from_millis(1));
        assert!(limiter.try_acquire().is_ok());
        assert!(limiter.try_acquire().is_err());

        clock.advance(Duration::from_millis(35));
        assert_eq!(admit_all(&limiter).0, 3);
        // The 5 ms left over from the 35 count towards the next token.
        clock.advance(Duration::from_millis(5));
        assert_eq!(admit_all(&limiter).0, 1);
    }

    #[test]
    fn a_long_idle_spell_refills_one_burst_and_no_more() {
        let (limiter, clock) = limiter(None, Some(1_000));
        assert_eq!(admit_all(&limiter).0, 100);
        for idle in [
            Duration::from_secs(1),
            Duration::from_secs(3600),
            Duration::from_secs(10 * 365 * 24 * 3600),
        ] {
            clock.advance(idle);
            assert_eq!(admit_all(&limiter).0, 100, "after {idle:?} idle");
        }
    }

    #[test]
    fn a_low_rate_still_has_a_burst_of_one() {
        let (limiter, clock) = limiter(None, Some(1));
        assert_eq!(admit_all(&limiter), (1, Overloaded::Qps { limit: 1 }));
        clock.advance(Duration::from_millis(999));
        assert!(limiter.try_acquire().is_err());
        clock.advance(Duration::from_millis(1));
        assert!(limiter.try_acquire().is_ok());
    }

    #[test]
    fn limits_of_zero_refuse_everything() {
        let (no_slots, _clock) = limiter(Some(0), None);
        assert_eq!(
            admit_all(&no_slots),
            (0, Overloaded::Concurrency { limit: 0 })
        );
        let (no_rate, clock) = limiter(None, Some(0));
        assert_eq!(no_rate.config().qps_burst(), Some(0));
        assert_eq!(admit_all(&no_rate), (0, Overloaded::Qps { limit: 0 }));
        clock.advance(Duration::from_secs(60));
        assert_eq!(admit_all(&no_rate), (0, Overloaded::Qps { limit: 0 }));
    }

    #[test]
    fn both_limits_together_refuse_by_whichever_is_met_and_waste_nothing() {
        let (limiter, clock) = limiter(Some(2), Some(50)); // a burst of 5
        let a = limiter.try_acquire().unwrap();
        let b = limiter.try_acquire().unwrap();
        // The concurrency limit refuses first and takes no token...
        for _ in 0..10 {
            assert_eq!(
                limiter.try_acquire().unwrap_err(),
                Overloaded::Concurrency { limit: 2 }
            );
        }
        drop((a, b));
        // ...so three tokens of the burst are left.
        for _ in 0..3 {
            drop(limiter.try_acquire().unwrap());
        }
        let held = limiter.try_acquire().unwrap_err();
        assert_eq!(held, Overloaded::Qps { limit: 50 });
        // A QPS refusal gives its slot back.
        assert_eq!(limiter.in_flight(), Some(0));

        clock.advance(Duration::from_millis(20)); // one token at 50 a second
        let c = limiter.try_acquire().unwrap();
        assert_eq!(limiter.in_flight(), Some(1));
        assert_eq!(
            limiter.try_acquire().unwrap_err(),
            Overloaded::Qps { limit: 50 }
        );
        drop(c);
        assert_eq!(limiter.in_flight(), Some(0));
    }

    #[test]
    fn limiters_and_permits_are_send_and_sync() {
        fn send_sync<T: Send + Sync + 'static>() {}
        send_sync::<Limiter>();
        send_sync::<Limiter<ManualClock>>();
        send_sync::<LimitPermit>();
        send_sync::<Overloaded>();

        // A permit taken on one thread and dropped on another frees its slot.
        let (limiter, _clock) = limiter(Some(1), None);
        let permit = limiter.try_acquire().unwrap();
        std::thread::spawn(move || drop(permit)).join().unwrap();
        assert_eq!(limiter.in_flight(), Some(0));
    }

    #[test]
    fn threads_hammering_try_acquire_never_exceed_the_concurrency_cap() {
        const CAP: usize = 3;
        const THREADS: usize = 6;
        const ROUNDS: usize = 20_000;
        let (limiter, _clock) = limiter(Some(CAP), None);
        let inside = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let admitted = AtomicUsize::new(0);
        let start = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    start.wait();
                    for round in 0..ROUNDS {
                        let Ok(permit) = limiter.try_acquire() else {
                            std::hint::spin_loop();
                            continue;
                        };
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        if round % 64 == 0 {
                            std::thread::yield_now(); // hold the slot a while
                        }
                        inside.fetch_sub(1, Ordering::SeqCst);
                        admitted.fetch_add(1, Ordering::Relaxed);
                        drop(permit);
                    }
                });
            }
        });
        let most = most.into_inner();
        assert!(most <= CAP, "{most} calls in progress with a cap of {CAP}");
        assert!(most >= 1 && admitted.into_inner() > 0);
        assert_eq!(limiter.in_flight(), Some(0));
    }
}
