//! One timer for the calls of a [`Timeout`](super::Timeout) instead of one per call.
//!
//! A tokio timer per call costs a registration and a cancellation in the runtime's
//! timer wheel, both under one lock that every worker thread takes, and most calls end
//! long before their deadline: every call pays for a timer that almost never fires.
//! `rpc-bench --stack paired` measures what the default stack costs against the bare
//! client, timer included.
//!
//! Here a call writes its deadline and its waker into a slot of a shard (picked by
//! the thread, so worker threads rarely share a lock) and frees the slot when it ends.
//! One sweeper task per watchdog wakes the calls whose deadline has passed. It sleeps
//! until the earliest deadline it knows of, but looks at most once per tick (1% of the
//! shortest time left that the watchdog takes on), so a watched call fails at most a
//! tick after its deadline: the same 1% the layer already allows itself when it reads
//! the time.
//!
//! What the watchdog does not take, the caller gives a timer of its own:
//! - calls with less than [`Watchdog::min_left`] left (a per-call timeout shorter than
//!   the client's, or a deadline carried over from upstream);
//! - calls polled outside a tokio runtime while no sweeper runs (there is nowhere to
//!   start one).
//!
//! The sweeper runs on the runtime of the call that started it. If that runtime shuts
//! down, the sweeper's guard wakes every watched call; the next poll of each starts a
//! sweeper on its own runtime, or gives the call a timer of its own. The sweeper holds
//! the watchdog weakly and ends once the client is gone.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use slab::Slab;

use crate::clock::Clock;

/// Calls with less time left than this never go to a watchdog: a tick of 1% of it
/// would wake the sweeper more often than once a millisecond.
const SHORTEST: Duration = Duration::from_millis(100);

/// The most shards a watchdog has: four per CPU (rounded up to a power of two, so a
/// thread finds its shard with a mask, not a division), up to this. Threads are spread
/// over them by the order in which they first used a watchdog, so worker threads
/// rarely share one.
const MAX_SHARDS: usize = 64;

/// The calls of one [`Timeout`](super::Timeout) (and its clones) that are waiting
/// for their deadline (see the [module docs](self)).
pub(super) struct Watchdog<C> {
    clock: C,
    min_left: Duration,
    tick: Duration,
    shards: Box<[Shard]>,
    /// Whether a sweeper task is running (or being started) for this watchdog.
    sweeping: AtomicBool,
}

impl<C> fmt::Debug for Watchdog<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watchdog")
            .field("min_left", &self.min_left)
            .field("watched", &self.watched())
            .field("sweeping", &self.sweeping.load(Ordering::Relaxed))
            .finish()
    }
}

/// One lock's worth of slots, on cache lines of its own so that threads working in
/// different shards do not share one. Slots freed by ending calls are reused, so the
/// memory held is that of the most calls that were ever watched at once.
#[repr(align(128))]
struct Shard(Mutex<Slab<Entry>>);

impl Shard {
    fn lock(&self) -> MutexGuard<'_, Slab<Entry>> {
        // The slots are consistent between any two statements that change them; a
        // panic elsewhere while the lock was held leaves nothing half done.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct Entry {
    deadline: Instant,
    /// Taken by the sweeper when it wakes the call.
    waker: Option<Waker>,
    expired: bool,
}

/// How a watched wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The deadline has passed.
    Expired,
    /// No sweeper runs and none can be started here (no tokio runtime): the caller
    /// must time the deadline itself.
    Unwatched,
}

impl<C> Watchdog<C> {
    /// The shortest time left of the calls this watchdog takes on.
    pub(super) fn min_left(&self) -> Duration {
        self.min_left
    }

    /// Calls being watched now.
    pub(super) fn watched(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// Slots the shards hold room for, taken or free.
    #[cfg(test)]
    pub(super) fn slots_held(&self) -> usize {
        self.shards.iter().map(|s| s.lock().capacity()).sum()
    }

    /// Wakes the calls whose deadline is at or before `now`; returns the earliest
    /// deadline still waiting.
    fn expire(&self, now: Instant) -> Option<Instant> {
        let mut due = Vec::new();
        let mut earliest: Option<Instant> = None;
        for shard in self.shards.iter() {
            let mut slots = shard.lock();
            for (_, e) in slots.iter_mut().filter(|(_, e)| !e.expired) {
                if e.deadline <= now {
                    e.expired = true;
                    due.extend(e.waker.take());
                } else {
                    earliest = Some(earliest.map_or(e.deadline, |t| t.min(e.deadline)));
                }
            }
        }
        due.into_iter().for_each(Waker::wake);
        earliest
    }

    /// Wakes every watched call, so that each finds the sweeper gone.
    fn wake_all(&self) {
        let mut all = Vec::new();
        for shard in self.shards.iter() {
            let mut slots = shard.lock();
            all.extend(slots.iter_mut().filter_map(|(_, e)| e.waker.take()));
        }
        all.into_iter().for_each(Waker::wake);
    }

    fn shard(&self) -> usize {
        // The count is a power of two.
        thread_index() & (self.shards.len() - 1)
    }
}

impl<C: Clock> Watchdog<C> {
    /// A watchdog for calls with at least `min_left` left (at least 100 ms).
    pub(super) fn new(clock: C, min_left: Duration) -> Arc<Self> {
        let min_left = min_left.max(SHORTEST);
        let shards = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .saturating_mul(4)
            .clamp(1, MAX_SHARDS)
            .next_power_of_two();
        Arc::new(Watchdog {
            clock,
            min_left,
            tick: min_left / 100,
            shards: (0..shards)
                .map(|_| Shard(Mutex::new(Slab::new())))
                .collect(),
            sweeping: AtomicBool::new(false),
        })
    }

    /// Completes when `deadline` has passed (see [`Outcome`]).
    pub(super) fn wait(self: &Arc<Self>, deadline: Instant) -> Wait<'_, C> {
        Wait {
            dog: self,
            deadline,
            at: None,
        }
    }

    /// Starts a sweeper on the current runtime unless one runs. False if none runs
    /// and there is no runtime here.
    // Once per client and runtime: kept out of the calls' code.
    #[cold]
    #[inline(never)]
    fn ensure_sweeper(self: &Arc<Self>) -> bool {
        if self
            .sweeping
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return true;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.sweeping.store(false, Ordering::Release);
            return false;
        };
        // Made before the task so that it is dropped with the task even if the
        // task never runs (a runtime shutting down drops unpolled tasks).
        let guard = SweeperGuard(Arc::downgrade(self));
        // The first timer is made here, in the caller: on a runtime without timers
        // the call fails here, as it would with a timer of its own, rather than
        // every call starting a sweeper that fails.
        let first = self.clock.sleep_until(self.clock.now() + self.tick);
        runtime.spawn(sweep(
            guard,
            first,
            self.clock.clone(),
            self.tick,
            self.min_left,
        ));
        true
    }
}

/// This thread's number, given out in the order threads first ask: worker threads
/// get different shards.
fn thread_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        // Constant-initialised (no lazy-init check on each use); `usize::MAX` until
        // the thread first asks.
        static INDEX: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
    }
    INDEX.with(|i| {
        if i.get() == usize::MAX {
            i.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        i.get()
    })
}

/// Marks the sweeper stopped when its task ends, and wakes the calls it was watching
/// so that they find another sweeper or a timer of their own.
struct SweeperGuard<C: Clock>(Weak<Watchdog<C>>);

impl<C: Clock> Drop for SweeperGuard<C> {
    fn drop(&mut self) {
        if let Some(dog) = self.0.upgrade() {
            // Before the wakers are taken: a call that stores its waker after this
            // sees the flag down under its shard's lock.
            dog.sweeping.store(false, Ordering::Release);
            dog.wake_all();
        }
    }
}

async fn sweep<C: Clock>(
    guard: SweeperGuard<C>,
    first: impl Future<Output = ()>,
    clock: C,
    tick: Duration,
    min_left: Duration,
) {
    // A call is watched only with `min_left` to go, so one that arrives after a sweep
    // has its deadline more than `min_left / 2` after that sweep.
    let longest = min_left / 2;
    first.await;
    loop {
        let Some(dog) = guard.0.upgrade() else {
            return;
        };
        let now = clock.now();
        let earliest = dog.expire(now).unwrap_or(now + longest);
        drop(dog);
        clock
            .sleep_until(earliest.clamp(now + tick, now + longest))
            .await;
    }
}

/// The future of [`Watchdog::wait`].
pub(super) struct Wait<'a, C: Clock> {
    dog: &'a Arc<Watchdog<C>>,
    deadline: Instant,
    /// The shard and slot once registered.
    at: Option<(usize, usize)>,
}

impl<C: Clock> Future for Wait<'_, C> {
    type Output = Outcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        let dog = self.dog;
        loop {
            // The flag is read under the shard's lock, after the waker is in: a
            // sweeper that stops after this takes the waker and wakes it.
            let sweeping = match self.at {
                None => {
                    let shard = dog.shard();
                    let mut slots = dog.shards[shard].lock();
                    let key = slots.insert(Entry {
                        deadline: self.deadline,
                        waker: Some(cx.waker().clone()),
                        expired: false,
                    });
                    let sweeping = dog.sweeping.load(Ordering::Acquire);
                    drop(slots);
                    self.at = Some((shard, key));
                    sweeping
                }
                Some((shard, key)) => {
                    let mut slots = dog.shards[shard].lock();
                    let Some(entry) = slots.get_mut(key) else {
                        // Only this future frees its slot, so this does not happen;
                        // if it did, the call would still end on a timer of its own.
                        drop(slots);
                        self.at = None;
                        return Poll::Ready(Outcome::Unwatched);
                    };
                    if entry.expired {
                        return Poll::Ready(Outcome::Expired);
                    }
                    match &mut entry.waker {
                        Some(w) => w.clone_from(cx.waker()),
                        none => *none = Some(cx.waker().clone()),
                    }
                    dog.sweeping.load(Ordering::Acquire)
                }
            };
            if sweeping {
                return Poll::Pending;
            }
            if !dog.ensure_sweeper() {
                self.release();
                return Poll::Ready(Outcome::Unwatched);
            }
        }
    }
}

impl<C: Clock> Wait<'_, C> {
    fn release(&mut self) {
        if let Some((shard, key)) = self.at.take() {
            let entry = self.dog.shards[shard].lock().try_remove(key);
            // The waker (a task's reference) is dropped after the lock.
            drop(entry);
        }
    }
}

impl<C: Clock> Drop for Wait<'_, C> {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_wakes_only_calls_past_their_deadline() {
        let dog = Watchdog::new(crate::clock::ManualClock::new(), Duration::ZERO);
        assert_eq!(dog.min_left, SHORTEST, "never shorter than 100 ms");
        let t0 = Instant::now();
        let woken = std::sync::Arc::new(AtomicUsize::new(0));
        let waker = counting_waker(std::sync::Arc::clone(&woken));
        let mut slots = dog.shards[0].lock();
        for ms in [10, 20, 30] {
            slots.insert(Entry {
                deadline: t0 + Duration::from_millis(ms),
                waker: Some(waker.clone()),
                expired: false,
            });
        }
        drop(slots);
        assert_eq!(
            dog.expire(t0 + Duration::from_millis(20)),
            Some(t0 + Duration::from_millis(30))
        );
        assert_eq!(woken.load(Ordering::SeqCst), 2);
        // Woken once: an expired call is not woken again.
        assert_eq!(
            dog.expire(t0 + Duration::from_millis(25)),
            Some(t0 + Duration::from_millis(30))
        );
        assert_eq!(woken.load(Ordering::SeqCst), 2);
        assert_eq!(dog.expire(t0 + Duration::from_millis(30)), None);
        assert_eq!(woken.load(Ordering::SeqCst), 3);
        assert_eq!(
            dog.watched(),
            3,
            "slots are freed by their calls, not the sweep"
        );
    }

    #[test]
    fn the_shard_count_is_a_power_of_two_so_a_mask_finds_a_shard() {
        let dog = Watchdog::new(crate::clock::ManualClock::new(), Duration::ZERO);
        let n = dog.shards.len();
        assert!(n.is_power_of_two() && n <= MAX_SHARDS, "{n} shards");
        // The mask is the modulo: threads numbered in turn take every shard in turn.
        assert_eq!(dog.shard(), thread_index() % n);
    }

    fn counting_waker(count: std::sync::Arc<AtomicUsize>) -> Waker {
        struct Count(std::sync::Arc<AtomicUsize>);
        impl std::task::Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        Waker::from(Arc::new(Count(count)))
    }
}
