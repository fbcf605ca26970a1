//! Wake-ups through the shared region: a parked reader waits on its `parked` word
//! itself, and a writer that finds the word raised wakes it with `FUTEX_WAKE`, instead
//! of a byte on the socket.
//!
//! A tokio task cannot block in `futex(2)`, so the wait goes through a small io_uring
//! of the reader's own (`IORING_OP_FUTEX_WAIT`, Linux 6.7 and later) whose file
//! descriptor tokio watches: the kernel posts a completion when the word is woken, and
//! the ring's descriptor turns readable. The wait is keyed by the shared mapping (not
//! a private futex), so the peer's `FUTEX_WAKE` on the same word of its mapping
//! reaches it.
//!
//! Why a futex and not an eventfd, though an eventfd write is as cheap: the peer holds
//! the same open eventfd, so it can clear `O_NONBLOCK` on it and fill its counter, and
//! then our write blocks a runtime thread until the peer reads. `RWF_NOWAIT` would make
//! that write fail instead, but eventfd does not support it (`EOPNOTSUPP`, Linux 6.18).
//! A `FUTEX_WAKE` never blocks and never touches the word: the worst a peer can do
//! with it is wake us for nothing, as a wake byte can.
//!
//! Cost, one thread doing both halves without sleeping (this project's 2-core VM): a
//! wake byte sent and received on the Unix socket 2.7 µs; `FUTEX_WAKE` 0.6 µs plus the
//! reader's re-armed wait 1.0 µs. The ring is set up with `IORING_SETUP_COOP_TASKRUN`
//! (the kernel posts the completion when the reader's thread next enters the kernel,
//! without forcing it there by an interrupt): without it an echo server over `shm:`
//! at 2,000 and 5,000 calls a second spent 25-40% more CPU per call than with wake
//! bytes; with it, one system call fewer per call and about 11% less CPU (see
//! docs/performance.md).

use std::io;
use std::ptr;

use io_uring::{IoUring, Probe, opcode};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::sync::AtomicU32;

/// `futex2` flag: the futex is 32 bits (private is not set: the word is shared).
const FUTEX2_SIZE_U32: u32 = 0x02;
/// Wake any waiter, whatever its bitset.
const MATCH_ANY: u64 = 0xffff_ffff;
/// The value a parked reader's word holds while it waits (see [`crate::park`]).
const PARKED: u64 = 1;

/// A reader's futex wait: one io_uring, watched by tokio, with at most one wait in it.
pub(crate) struct Waiter {
    ring: AsyncFd<IoUring>,
    armed: bool,
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiter")
            .field("armed", &self.armed)
            .finish()
    }
}

impl Waiter {
    /// A waiter, if the kernel's io_uring can wait on a futex (and a ring can be made:
    /// seccomp profiles often refuse io_uring). Needs a tokio runtime.
    pub(crate) fn new() -> io::Result<Waiter> {
        let ring = IoUring::builder().setup_coop_taskrun().build(2)?;
        let mut probe = Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        if !probe.is_supported(opcode::FutexWait::CODE) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the kernel's io_uring cannot wait on a futex",
            ));
        }
        // SAFETY: the ring owns its descriptor and lives inside the AsyncFd, so the
        // descriptor stays open and the same until the AsyncFd is dropped.
        let ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
            .map_err(io::Error::from)?;
        Ok(Waiter { ring, armed: false })
    }

    /// Starts a wait on `word` for as long as it holds 1 (parked), unless one is
    /// pending already (a wait left from a park the reader got up from by other means
    /// stays armed and serves this one).
    pub(crate) fn arm(&mut self, word: &AtomicU32) -> io::Result<()> {
        if self.armed {
            return Ok(());
        }
        let entry = opcode::FutexWait::new(
            word.as_ptr().cast_const(),
            PARKED,
            MATCH_ANY,
            FUTEX2_SIZE_U32,
        )
        .build();
        let ring = self.ring.get_mut();
        // SAFETY: the entry names `word`, a u32 in a mapping of this process. The
        // kernel reads it once, while `submit` below runs (when it is not 1 the wait
        // completes at once), and keys the wait by the mapping's file and offset; it
        // keeps no pointer into our memory, and never writes it, so nothing is read or
        // written after this call whether the wait is woken, cancelled when the ring is
        // dropped, or outlives the mapping. The ring has room: at most one entry is
        // ever in it (`armed`), and it is submitted before this returns.
        unsafe { ring.submission().push(&entry) }
            .map_err(|_| io::Error::other("the futex ring is full"))?;
        ring.submit()?;
        self.armed = true;
        Ok(())
    }

    /// Waits until the armed wait ends: the word was woken, or did not hold 1 when the
    /// wait was armed. Returns at once when no wait is armed.
    pub(crate) async fn done(&mut self) -> io::Result<()> {
        loop {
            if !self.armed || reap(self.ring.get_mut(), &mut self.armed) {
                return Ok(());
            }
            let mut ready = self.ring.readable_mut().await?;
            if reap(ready.get_inner_mut(), &mut self.armed) {
                return Ok(());
            }
            ready.clear_ready();
        }
    }
}

/// Takes the wait's completion, if it came (and then nothing is armed).
fn reap(ring: &mut IoUring, armed: &mut bool) -> bool {
    let mut came = false;
    for _ in ring.completion() {
        came = true;
    }
    if came {
        *armed = false;
    }
    came
}

/// Wakes a reader waiting on `word` (in a mapping shared with it). Never blocks.
pub(crate) fn wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE looks up the waiters keyed by the mapping of `word`'s address
    // and wakes one; it neither reads nor writes the word (an address that is not
    // mapped is EFAULT, nothing more). The other arguments are unused by FUTEX_WAKE.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            1,
            ptr::null::<libc::timespec>(),
            ptr::null::<u32>(),
            0,
        );
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::Ordering;
    use std::sync::Arc;
    use std::time::Duration;

    /// A word in memory shared between mappings, as a region's `parked` is.
    fn shared_word() -> memmap2::MmapMut {
        memmap2::MmapOptions::new()
            .len(4096)
            .map_anon()
            .expect("an anonymous mapping")
    }

    fn word(map: &memmap2::MmapMut) -> &AtomicU32 {
        // SAFETY: the mapping is page-aligned, 4096 bytes, and lives as long as the
        // borrow; an AtomicU32 over its first 4 bytes is aligned and in bounds.
        unsafe { &*map.as_ptr().cast::<AtomicU32>() }
    }

    #[tokio::test]
    async fn a_parked_word_waits_until_woken() {
        let map = Arc::new(shared_word());
        let mut waiter = Waiter::new().expect("io_uring futex waits (Linux 6.7+)");
        word(&map).store(1, Ordering::SeqCst);
        waiter.arm(word(&map)).expect("armed");
        let early = tokio::time::timeout(Duration::from_millis(20), waiter.done()).await;
        assert!(early.is_err(), "nobody woke it yet");
        let m = map.clone();
        let waker = std::thread::spawn(move || {
            word(&m).store(0, Ordering::SeqCst);
            wake(word(&m));
        });
        tokio::time::timeout(Duration::from_secs(5), waiter.done())
            .await
            .expect("woken")
            .expect("no error");
        waker.join().unwrap();
        assert!(!waiter.armed);
    }

    #[tokio::test]
    async fn a_word_already_down_ends_the_wait_at_once_and_rearming_works() {
        let map = shared_word();
        let mut waiter = Waiter::new().expect("io_uring futex waits (Linux 6.7+)");
        word(&map).store(0, Ordering::SeqCst);
        waiter.arm(word(&map)).expect("armed");
        tokio::time::timeout(Duration::from_secs(5), waiter.done())
            .await
            .expect("the word was not 1: no wait")
            .expect("no error");
        // Armed again while armed: one wait, one completion.
        word(&map).store(1, Ordering::SeqCst);
        waiter.arm(word(&map)).expect("armed");
        waiter.arm(word(&map)).expect("still the one wait");
        word(&map).store(0, Ordering::SeqCst);
        wake(word(&map));
        tokio::time::timeout(Duration::from_secs(5), waiter.done())
            .await
            .expect("woken")
            .expect("no error");
        // Nothing armed: done returns at once.
        tokio::time::timeout(Duration::from_millis(100), waiter.done())
            .await
            .expect("nothing to wait for")
            .expect("no error");
    }

    #[test]
    fn waking_a_word_nobody_waits_on_is_harmless() {
        let map = shared_word();
        word(&map).store(7, Ordering::SeqCst);
        wake(word(&map));
        assert_eq!(
            word(&map).load(Ordering::SeqCst),
            7,
            "the word is not touched"
        );
    }
}
