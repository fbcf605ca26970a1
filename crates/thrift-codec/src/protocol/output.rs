//! Straight writes into the reserved tail of a buffer.
//!
//! `BytesMut::put_slice` is not inlined and copies through `memmove` whatever the length,
//! which dominated the profile of encoding many small fields. These helpers copy fixed-size
//! arrays with constant-size stores instead. Each keeps the `BytesMut` invariant by
//! reserving first (a no-op after `Codec` reserved the exact size) and extending the
//! length only over bytes it has just written.

use std::mem::MaybeUninit;

use bytes::BytesMut;

/// Appends `bytes`, an array of constant size.
#[inline(always)]
pub(crate) fn put_array<const N: usize>(buf: &mut BytesMut, bytes: [u8; N]) {
    buf.reserve(N);
    let spare = &mut buf.spare_capacity_mut()[..N];
    let spare: &mut [MaybeUninit<u8>; N] = match spare.try_into() {
        Ok(array) => array,
        Err(_) => unreachable!("a slice of N elements converts to [_; N]"),
    };
    *spare = bytes.map(MaybeUninit::new);
    // SAFETY: `reserve(N)` guaranteed `N` bytes of spare capacity, and the line above
    // initialised exactly the first `N` of them.
    unsafe { buf.set_len(buf.len() + N) };
}

/// Appends the first `len` bytes of `bytes` (`len <= N`): a varint built in a fixed
/// scratch array. When the spare capacity has room for all `N`, the whole array is stored
/// with one constant-size copy and only `len` bytes are kept; near the end of an exact
/// reservation it falls back to copying `len` bytes, so it never makes the buffer grow.
#[inline(always)]
pub(crate) fn put_prefix<const N: usize>(buf: &mut BytesMut, bytes: [u8; N], len: usize) {
    debug_assert!(len <= N);
    let len = len.min(N);
    let spare = buf.spare_capacity_mut();
    if let Some(spare) = spare.first_chunk_mut::<N>() {
        *spare = bytes.map(MaybeUninit::new);
        // SAFETY: the first `N >= len` bytes of the spare capacity were just initialised.
        unsafe { buf.set_len(buf.len() + len) };
    } else {
        buf.extend_from_slice(&bytes[..len]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_and_prefixes_append_exactly_what_was_asked() {
        let mut buf = BytesMut::with_capacity(4);
        put_array(&mut buf, [1, 2, 3]);
        // One byte of capacity left: the prefix of 1 of 10 bytes takes the slow path.
        put_prefix(&mut buf, [9; 10], 1);
        assert_eq!(&buf[..], &[1, 2, 3, 9]);
        assert_eq!(buf.capacity(), 4, "no growth within an exact reservation");
        // Plenty of room: the whole scratch array is stored, only 2 bytes are kept.
        buf.reserve(64);
        put_prefix(&mut buf, [7, 8, 0, 0, 0, 0, 0, 0, 0, 0], 2);
        put_array(&mut buf, [5u8; 0]);
        assert_eq!(&buf[..], &[1, 2, 3, 9, 7, 8]);
    }
}
