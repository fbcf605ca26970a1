//! Portable implementations in plain Rust: the reference the other paths must match, and the
//! fallback on CPUs without AVX2 and on every other architecture.
//!
//! Each function is a loop of `to_be_bytes` / `from_be_bytes` over fixed-size chunks, which
//! the compiler vectorizes on its own (on baseline `x86_64`, into SSE2 unpack-and-shuffle
//! sequences). The only `unsafe` is the single `set_len` after the spare capacity has been
//! filled.

use std::mem::MaybeUninit;

use bytes::BytesMut;

/// Appends every value of `src` to `dst` as 4 big-endian bytes (`src.len() * 4` bytes in all).
pub fn put_i32s_be(dst: &mut BytesMut, src: &[i32]) {
    put_with(dst, src, i32::to_be_bytes);
}

/// Appends every value of `src` to `dst` as 8 big-endian bytes (`src.len() * 8` bytes in all).
pub fn put_i64s_be(dst: &mut BytesMut, src: &[i64]) {
    put_with(dst, src, i64::to_be_bytes);
}

/// Appends every value of `src` to `dst` as the 8 big-endian bytes of [`f64::to_bits`].
pub fn put_f64s_be(dst: &mut BytesMut, src: &[f64]) {
    put_with(dst, src, |x: f64| x.to_bits().to_be_bytes());
}

/// Reads `src` as big-endian 4-byte values and appends them to `dst` (`src.len() / 4` values).
///
/// `src.len()` should be a multiple of 4 (checked in debug builds only); in release builds a
/// trailing partial value is ignored.
pub fn get_i32s_be(src: &[u8], dst: &mut Vec<i32>) {
    get_with(src, dst, i32::from_be_bytes);
}

/// Reads `src` as big-endian 8-byte values and appends them to `dst` (`src.len() / 8` values).
///
/// `src.len()` should be a multiple of 8 (checked in debug builds only); in release builds a
/// trailing partial value is ignored.
pub fn get_i64s_be(src: &[u8], dst: &mut Vec<i64>) {
    get_with(src, dst, i64::from_be_bytes);
}

/// Reads `src` as big-endian 8-byte bit patterns and appends them to `dst` via
/// [`f64::from_bits`] (`src.len() / 8` values).
///
/// `src.len()` should be a multiple of 8 (checked in debug builds only); in release builds a
/// trailing partial value is ignored.
pub fn get_f64s_be(src: &[u8], dst: &mut Vec<f64>) {
    get_with(src, dst, |b: [u8; 8]| f64::from_bits(u64::from_be_bytes(b)));
}

/// Reserves `src.len() * W` bytes once, writes `encode(x)` for every element straight into
/// the spare capacity, then extends the length once.
#[inline(always)]
fn put_with<T: Copy, const W: usize>(dst: &mut BytesMut, src: &[T], encode: impl Fn(T) -> [u8; W]) {
    // Cannot overflow: `src` occupies `src.len() * size_of::<T>()` bytes of memory and every
    // caller has `size_of::<T>() == W`.
    let len = src.len() * W;
    dst.reserve(len);
    let (chunks, rest) = dst.spare_capacity_mut()[..len].as_chunks_mut::<W>();
    debug_assert!(rest.is_empty() && chunks.len() == src.len());
    for (out, &x) in chunks.iter_mut().zip(src) {
        *out = encode(x).map(MaybeUninit::new);
    }
    // SAFETY: `reserve(len)` made the spare capacity at least `len` bytes long, and its first
    // `len` bytes are exactly `chunks`: `len` is a multiple of `W`, so `rest` is empty, and
    // there are `src.len()` chunks, one per element, each fully written by the loop above.
    unsafe { dst.set_len(dst.len() + len) };
}

/// Appends `decode(chunk)` for every whole `W`-byte chunk of `src`, after reserving once.
#[inline(always)]
fn get_with<T, const W: usize>(src: &[u8], dst: &mut Vec<T>, decode: impl Fn([u8; W]) -> T) {
    debug_assert!(
        src.len().is_multiple_of(W),
        "list body length {} is not a multiple of {W}",
        src.len()
    );
    let (chunks, _partial) = src.as_chunks::<W>();
    // `Vec::extend` from a slice iterator knows the exact length up front: it reserves once
    // and writes every element in place without per-element capacity checks.
    dst.extend(chunks.iter().map(|&chunk| decode(chunk)));
}
