//! What the hostile-input tests share (`hostile.rs` for every protocol's hand-written
//! shapes, `hostile_json.rs` for JSON's): a global allocator that records the largest
//! single allocation, a fixed-seed random generator, mutation of valid encodings, and
//! assertions on the errors of decodes that must fail.
#![allow(dead_code, unreachable_pub)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use thrift_wire::{DecodeError, DecodeErrorKind};

// ---------------------------------------------------------------------------------------
// Allocation tracking
// ---------------------------------------------------------------------------------------

/// The system allocator, recording the largest single request made on a thread while
/// that thread has tracking on (see [`largest_allocation`]).
struct LargestAllocation;

thread_local! {
    // `const` thread-locals without destructors never allocate, so the allocator may use them.
    static TRACKING: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note_allocation(size: usize) {
    // `try_with`: during thread teardown the slots may be gone; then there is nothing to track.
    let _ = TRACKING.try_with(|tracking| {
        if tracking.get() {
            let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
        }
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; the only addition
// is a write to a `const` thread-local `Cell`, which neither allocates nor unwinds.
unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size());
        // SAFETY: our caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size());
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation(new_size);
        // SAFETY: `ptr` was allocated by `System` (every allocation goes through us to it)
        // with `layout`; the rest of the contract is our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: LargestAllocation = LargestAllocation;

/// Runs `f` and returns its result with the size of the largest single allocation it
/// requested on this thread (the result is dropped by the caller, outside the window).
pub fn largest_allocation<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LARGEST.set(0);
    TRACKING.set(true);
    let out = f();
    TRACKING.set(false);
    (out, LARGEST.get())
}

/// What a decode of `input_len` hostile bytes may allocate at once: the 64 KiB that
/// `initial_capacity` allows up front, plus the input itself.
pub fn allocation_budget(input_len: usize) -> usize {
    64 * 1024 + input_len
}

/// xorshift64*: a fixed-seed generator, so every run decodes the same mutants.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A random byte, one of `interesting` half of the time.
    pub fn byte(&mut self, interesting: &[u8]) -> u8 {
        if self.next_u64() & 1 == 0 && !interesting.is_empty() {
            interesting[self.below(interesting.len())]
        } else {
            self.next_u64() as u8
        }
    }
}

/// Applies one to four random edits to `input`: bit flips, byte changes, truncation,
/// insertions and copies of its own bytes, deletions, and big-endian `i32` lengths.
pub fn mutate(rng: &mut Rng, input: &mut Vec<u8>, interesting: &[u8]) {
    for _ in 0..1 + rng.below(4) {
        let len = input.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = rng.byte(interesting);
            }
            2 if len > 0 => input.truncate(rng.below(len)),
            3 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.byte(interesting)).collect();
                input.splice(at..at, bytes);
            }
            4 if len > 0 => {
                let start = rng.below(len);
                let end = start + 1 + rng.below((len - start).min(64));
                let at = rng.below(len + 1);
                let copy = input[start..end].to_vec();
                input.splice(at..at, copy);
            }
            5 if len > 0 => {
                let start = rng.below(len);
                let end = start + 1 + rng.below((len - start).min(16));
                input.drain(start..end);
            }
            6 if len >= 4 => {
                // A big-endian i32 length-like value somewhere.
                let i = rng.below(len - 3);
                let v: i32 = match rng.below(4) {
                    0 => -1,
                    1 => i32::MAX,
                    2 => i32::MIN,
                    _ => rng.next_u64() as i32,
                };
                input[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------
// Asserting failures
// ---------------------------------------------------------------------------------------

/// The error of a decode that must fail.
#[track_caller]
pub fn err<T>(result: Result<T, DecodeError>) -> DecodeError {
    match result {
        Ok(_) => panic!("decoded successfully; expected an error"),
        Err(e) => e,
    }
}

/// Asserts the exact kind and path of a decode that must fail.
#[track_caller]
pub fn assert_fails<T>(
    result: Result<T, DecodeError>,
    kind: DecodeErrorKind,
    path: &str,
    ctx: &str,
) {
    let e = err(result);
    assert_eq!(e.kind(), &kind, "{ctx}: {e}");
    assert_eq!(e.path(), path, "{ctx}: {e}");
}

/// Asserts that a decode fails with a kind matching a pattern, at a path.
macro_rules! assert_fails_with {
    ($result:expr, $kind:pat, $path:expr, $ctx:expr) => {{
        let e = err($result);
        assert!(
            matches!(e.kind(), $kind),
            "{}: expected {}, got {e}",
            $ctx,
            stringify!($kind)
        );
        assert_eq!(e.path(), $path, "{}: {e}", $ctx);
    }};
}

/// Asserts that `decode` fails on a length the input cannot hold (`LengthExceedsInput`)
/// at `path`, without allocating more at once than the budget for `input_len` bytes.
#[track_caller]
pub fn assert_length_refused<T>(
    decode: impl FnOnce() -> Result<T, DecodeError>,
    input_len: usize,
    path: &str,
    ctx: &str,
) {
    let (result, largest) = largest_allocation(decode);
    let e = err(result);
    assert!(
        matches!(e.kind(), DecodeErrorKind::LengthExceedsInput { .. }),
        "{ctx}: expected a length the input cannot hold, got {e}"
    );
    assert_eq!(e.path(), path, "{ctx}: {e}");
    assert!(
        largest <= allocation_budget(input_len),
        "{ctx}: allocated {largest} bytes at once for {input_len} bytes of input"
    );
}
