//! The notify-only-when-idle protocol, as two small functions so the loom model below
//! checks the code the session runs.
//!
//! A reader about to block on the socket raises its `parked` flag, fences, and looks at
//! its rings once more ([`prepare_park`]); a writer publishes, fences, and sends a wake
//! only if it finds the flag raised, clearing it ([`take_wake`]). With a full fence on
//! both sides, at least one of them sees the other's store: either the reader sees the
//! new entry and does not block, or the writer sees the flag and wakes it. A busy
//! reader's flag is down, so writing to it costs no system call.

use crate::sync::{AtomicU32, Ordering, fence};

/// The reader's half: raises `parked` and checks for work once more. `Ok(true)`: it may
/// block (the flag stays up); `Ok(false)`: work arrived, the flag is down again.
pub(crate) fn prepare_park<E>(
    parked: &AtomicU32,
    has_work: impl FnOnce() -> Result<bool, E>,
) -> Result<bool, E> {
    parked.store(1, Ordering::SeqCst);
    fence(Ordering::SeqCst);
    if has_work()? {
        parked.store(0, Ordering::Relaxed);
        return Ok(false);
    }
    Ok(true)
}

/// The writer's half, after publishing: whether to send a wake (the flag was up; it is
/// now down, so other writers send none).
pub(crate) fn take_wake(flag: &AtomicU32) -> bool {
    fence(Ordering::SeqCst);
    flag.load(Ordering::Relaxed) != 0 && flag.swap(0, Ordering::AcqRel) != 0
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn flag_round_trip() {
        let f = AtomicU32::new(0);
        assert!(!take_wake(&f), "a busy reader is not woken");
        assert_eq!(prepare_park(&f, || Ok::<_, ()>(true)), Ok(false));
        assert!(!take_wake(&f), "work came in before it parked");
        assert_eq!(prepare_park(&f, || Ok::<_, ()>(false)), Ok(true));
        assert!(take_wake(&f));
        assert!(!take_wake(&f), "one wake per park");
        assert_eq!(prepare_park(&f, || Err("lie")), Err("lie"));
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::ring::RingRef;
    use crate::sync::AtomicU64;
    use loom::sync::Arc;
    use loom::sync::atomic::AtomicBool;

    struct Shared {
        parked: AtomicU32,
        head: AtomicU32,
        tail: AtomicU32,
        slots: Vec<AtomicU64>,
        woken: AtomicBool,
    }

    /// A reader that parks while a writer pushes: it either sees the entry or is woken.
    #[test]
    fn loom_no_lost_wake() {
        loom::model(|| {
            let s = Arc::new(Shared {
                parked: AtomicU32::new(0),
                head: AtomicU32::new(0),
                tail: AtomicU32::new(0),
                slots: (0..2).map(|_| AtomicU64::new(0)).collect(),
                woken: AtomicBool::new(false),
            });
            let w = s.clone();
            let writer = loom::thread::spawn(move || {
                let ring = RingRef::<1>::new("test", &w.head, &w.tail, &w.slots);
                assert!(ring.push(&mut 0, [7]).unwrap());
                if take_wake(&w.parked) {
                    w.woken.store(true, Ordering::SeqCst);
                }
            });
            let ring = RingRef::<1>::new("test", &s.head, &s.tail, &s.slots);
            let blocks = prepare_park(&s.parked, || ring.pending(0).map(|n| n > 0)).unwrap();
            writer.join().unwrap();
            if blocks {
                assert!(
                    s.woken.load(Ordering::SeqCst),
                    "parked without seeing the entry, and nobody woke it"
                );
            }
        });
    }
}
