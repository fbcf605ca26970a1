//! Counts of the process's socket reads and writes, for benchmarks that ask how many
//! messages one system call (or one io_uring completion) carried.

use std::sync::atomic::{AtomicU64, Ordering};

static READS: AtomicU64 = AtomicU64::new(0);
static WRITES: AtomicU64 = AtomicU64::new(0);

/// Reads and writes that moved data, over every reactor of the process since it
/// started: under epoll a `recv` or `sendmsg` that took or gave bytes, under io_uring
/// a receive or send completion that did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounts {
    /// Reads that brought bytes.
    pub reads: u64,
    /// Writes that sent bytes.
    pub writes: u64,
}

/// The counts so far.
pub fn io_counts() -> IoCounts {
    IoCounts {
        reads: READS.load(Ordering::Relaxed),
        writes: WRITES.load(Ordering::Relaxed),
    }
}

pub(crate) fn count_read() {
    READS.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn count_write() {
    WRITES.fetch_add(1, Ordering::Relaxed);
}
