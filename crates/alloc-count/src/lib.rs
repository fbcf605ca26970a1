//! Counts heap allocations, so a test or benchmark can check that steady-state traffic
//! allocates nothing per message.
//!
//! Install [`CountingAlloc`] as the binary's global allocator and read [`allocations`]
//! before and after the work:
//!
//! ```
//! use alloc_count::{CountingAlloc, allocations};
//!
//! #[global_allocator]
//! static GLOBAL: CountingAlloc = CountingAlloc;
//!
//! let before = allocations();
//! let v = std::hint::black_box(vec![1u8; 64]);
//! assert!(allocations() > before);
//! drop(v);
//! ```
//!
//! The count is process-wide: every thread's `alloc`, `alloc_zeroed` and `realloc`
//! calls (frees are not counted). A test that counts should keep other threads quiet
//! while it does.
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// Heap allocations made so far through [`CountingAlloc`].
static ALLOCS: AtomicU64 = AtomicU64::new(0);

/// Bytes handed out through [`CountingAlloc`] and not yet freed.
static LIVE: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting every `alloc`, `alloc_zeroed` and `realloc`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

/// Allocations made so far by every thread (0 unless [`CountingAlloc`] is the global
/// allocator).
pub fn allocations() -> u64 {
    ALLOCS.load(Ordering::Relaxed)
}

/// Bytes allocated and not yet freed, by every thread (as requested: the allocator's
/// own overhead per block is not in it; 0 unless [`CountingAlloc`] is the global
/// allocator). What a structure holds is the difference across building it.
pub fn live_bytes() -> u64 {
    LIVE.load(Ordering::Relaxed)
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so
// `System`'s guarantees are this allocator's; the counter touches no memory it hands out.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` with `layout`; the caller upholds the rest.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            // The old block is freed (or grown in place) only when realloc succeeds.
            LIVE.fetch_add(new_size as u64, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size() as u64, Ordering::Relaxed);
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static GLOBAL: CountingAlloc = CountingAlloc;

    /// Every entry point is counted, and memory handed out is usable (Miri checks the
    /// forwarding for leaks and misuse).
    #[test]
    fn counts_alloc_zeroed_and_realloc() {
        let before = allocations();
        let mut v: Vec<u8> = Vec::with_capacity(16);
        v.extend_from_slice(&[1; 16]);
        let after_alloc = allocations();
        assert!(after_alloc > before);
        v.reserve_exact(4096);
        assert!(allocations() > after_alloc, "the realloc counts");
        let zeroed = allocations();
        let z = vec![0u64; 512];
        assert!(allocations() > zeroed, "the zeroed allocation counts");
        assert!(z.iter().all(|&x| x == 0));
        assert_eq!(&v[..16], &[1; 16]);
    }

    /// Live bytes follow what is held: up by a block's size when it is made or grown,
    /// back down when it is freed. (The other test's thread allocates and frees too,
    /// a few KiB, at any moment: every check is on a block far larger, with a margin
    /// either way.)
    #[test]
    fn live_bytes_follow_what_is_held() {
        // Under Miri, which tracks every byte, blocks of a few MiB at most.
        const BIG: u64 = if cfg!(miri) { 1 << 20 } else { 64 << 20 };
        const MARGIN: u64 = if cfg!(miri) { 64 << 10 } else { 1 << 20 };
        let before = live_bytes();
        let mut v: Vec<u8> = Vec::with_capacity(BIG as usize);
        v.push(1);
        let held = live_bytes();
        assert!(held + MARGIN >= before + BIG, "{before} -> {held}");
        v.reserve_exact(2 * BIG as usize);
        let grown = live_bytes();
        assert!(
            grown + MARGIN >= held + BIG,
            "the realloc grew it: {held} -> {grown}"
        );
        drop(v);
        let after = live_bytes();
        assert!(after < before + MARGIN, "freed: {before} -> {after}");
    }
}
