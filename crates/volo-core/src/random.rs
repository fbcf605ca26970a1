//! The randomness both sides draw from: a balancer's picks, a retry's jitter, a trace's
//! ids. None needs more than a fast, well-spread sequence, so no dependency is taken.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

/// A number that differs between calls and between processes (std's hash keys are
/// random per process and move on per call): the seed of a sequence nobody chose.
pub(crate) fn random_seed() -> u64 {
    RandomState::new().hash_one(0x5EED_u64)
}

/// A xorshift64* sequence that many callers may share: a lost update under contention
/// only repeats a number, which a balancer or a jitter can afford.
#[derive(Debug)]
pub(crate) struct Xorshift {
    state: AtomicU64,
}

impl Xorshift {
    /// The sequence that follows from `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Xorshift {
            // Xorshift never leaves zero.
            state: AtomicU64::new(seed | 1),
        }
    }

    /// The next number.
    pub(crate) fn next(&self) -> u64 {
        let mut x = self.state.load(Ordering::Relaxed);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state.store(x, Ordering::Relaxed);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}
