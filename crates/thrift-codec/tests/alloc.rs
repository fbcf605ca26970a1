//! Counts heap allocations around encode and decode (a test binary of its own, because
//! it installs a counting global allocator).
//!
//! Size first means one allocation per encode into an empty buffer, none into a reused
//! one; decoding a `Request` allocates nothing (its strings are slices of the frame).

mod util;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use thrift_wire::fixtures::echo::Request;
use thrift_wire::{Binary, Codec, Compact, LinkBuffer, Message, Protocol};

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; only counts calls on
// the current thread (a `const` thread-local `Cell`, which itself never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours, passed through.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours, passed through.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCS.with(Cell::get);
    f();
    ALLOCS.with(Cell::get) - before
}

fn encode_allocations<P: Protocol, M: Message>(v: &M) -> (usize, usize) {
    let codec = Codec::<P>::new();
    let mut buf = LinkBuffer::new();
    let first = allocations(|| {
        codec.encode(v, &mut buf).unwrap();
    });
    buf.clear();
    let reused = allocations(|| {
        codec.encode(v, &mut buf).unwrap();
    });
    (first, reused)
}

#[test]
fn encoding_reserves_once_and_reuses_the_buffer() {
    let cases = [
        encode_allocations::<Binary, _>(&util::request_1k()),
        encode_allocations::<Binary, _>(&util::my_test(131_072)),
        encode_allocations::<Binary, _>(&util::ids(10_000, 256)),
        encode_allocations::<Binary, _>(&util::mixed(8)),
        encode_allocations::<Compact, _>(&util::request_1k()),
        encode_allocations::<Compact, _>(&util::my_test(131_072)),
        encode_allocations::<Compact, _>(&util::mixed(8)),
    ];
    for (i, (first, reused)) in cases.into_iter().enumerate() {
        assert_eq!(first, 1, "case {i}: one allocation into an empty buffer");
        assert_eq!(reused, 0, "case {i}: none into a reused buffer");
    }
}

fn decode_allocations<P: Protocol>() -> usize {
    let bytes = util::encode::<P, _>(&util::request_1k());
    let codec = Codec::<P>::new();
    allocations(|| {
        let r: Request = codec.decode(bytes.clone()).unwrap();
        std::hint::black_box(r);
    })
}

#[test]
fn decoding_a_request_allocates_nothing() {
    assert_eq!(decode_allocations::<Binary>(), 0);
    assert_eq!(decode_allocations::<Compact>(), 0);
}
