//! AVX2 implementations: 32 bytes per `vpshufb`, four vectors per loop iteration.
//!
//! Encoding and decoding are the same operation on a little-endian machine, a copy that
//! reverses the bytes of every 4- or 8-byte word, so all six functions share one kernel.
//! Every function here panics when the CPU lacks AVX2; check [`is_available`] first, or use
//! the dispatching functions in [`crate::simd`], which do.
//!
//! The module exists on every target so that callers and tests need no `cfg`, but off
//! `x86_64` [`is_available`] is always `false`.

use std::mem::{self, MaybeUninit};
use std::slice;

use bytes::BytesMut;

/// Whether the running CPU supports AVX2, i.e. whether the other functions of this module can
/// be called without panicking. Always `false` off `x86_64`.
///
/// The detection runs once per process; later calls are a relaxed atomic load.
#[inline]
pub fn is_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // `std` caches the CPUID result in a static after the first call.
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Appends every value of `src` to `dst` as 4 big-endian bytes (`src.len() * 4` bytes in all).
///
/// # Panics
///
/// If the CPU does not support AVX2 (`!is_available()`).
pub fn put_i32s_be(dst: &mut BytesMut, src: &[i32]) {
    put_swapped::<4>(dst, bytes_of(src));
}

/// Appends every value of `src` to `dst` as 8 big-endian bytes (`src.len() * 8` bytes in all).
///
/// # Panics
///
/// If the CPU does not support AVX2 (`!is_available()`).
pub fn put_i64s_be(dst: &mut BytesMut, src: &[i64]) {
    put_swapped::<8>(dst, bytes_of(src));
}

/// Appends every value of `src` to `dst` as the 8 big-endian bytes of [`f64::to_bits`].
///
/// # Panics
///
/// If the CPU does not support AVX2 (`!is_available()`).
pub fn put_f64s_be(dst: &mut BytesMut, src: &[f64]) {
    put_swapped::<8>(dst, bytes_of(src));
}

/// Reads `src` as big-endian 4-byte values and appends them to `dst` (`src.len() / 4` values).
///
/// `src.len()` should be a multiple of 4 (checked in debug builds only); in release builds a
/// trailing partial value is ignored and never read.
///
/// # Panics
///
/// If the CPU does not support AVX2 (`!is_available()`).
pub fn get_i32s_be(src: &[u8], dst: &mut Vec<i32>) {
    get_swapped::<i32, 4>(src, dst);
}

/// Reads `src` as big-endian 8-byte values and appends them to `dst` (`src.len() / 8` values).
///
/// `src.len()` should be a multiple of 8 (checked in debug builds only); in release builds a
/// trailing partial value is ignored and never read.
///
/// # Panics
///
/// If the CPU does not support AVX2 (`!is_available()`).
pub fn get_i64s_be(src: &[u8], dst: &mut Vec<i64>) {
    get_swapped::<i64, 8>(src, dst);
}

/// Reads `src` as big-endian 8-byte bit patterns and appends them to `dst` via
/// [`f64::from_bits`] (`src.len() / 8` values; NaN payloads are kept exactly).
///
/// `src.len()` should be a multiple of 8 (checked in debug builds only); in release builds a
/// trailing partial value is ignored and never read.
///
/// # Panics
///
/// If the CPU does not support AVX2 (`!is_available()`).
pub fn get_f64s_be(src: &[u8], dst: &mut Vec<f64>) {
    get_swapped::<f64, 8>(src, dst);
}

/// Element types whose every bit pattern of their size is a valid value (no padding, no
/// invalid values), so bytes written through a byte view of their storage make values.
///
/// # Safety
///
/// Implement only for such types.
unsafe trait Plain: Copy {}

// SAFETY: integers and floats of these widths have no padding and accept every bit pattern
// (for `f64`, every pattern is some number, infinity or NaN, as `from_bits` documents).
unsafe impl Plain for i32 {}
// SAFETY: as above.
unsafe impl Plain for i64 {}
// SAFETY: as above.
unsafe impl Plain for f64 {}

/// The memory of `src` as bytes.
#[inline(always)]
fn bytes_of<T: Plain>(src: &[T]) -> &[u8] {
    // SAFETY: `src.as_ptr()` is non-null and valid for reads of `size_of_val(src)` bytes, all
    // initialized (`T: Plain` has no padding), and any alignment satisfies `u8`; the byte
    // view borrows `src` immutably for its whole life.
    unsafe { slice::from_raw_parts(src.as_ptr().cast::<u8>(), mem::size_of_val(src)) }
}

/// Reserves `src.len() / W` values in `dst` once, byte-swap-copies the whole words of `src`
/// into the spare capacity, then extends the length once.
#[inline(always)]
fn get_swapped<T: Plain, const W: usize>(src: &[u8], dst: &mut Vec<T>) {
    const { assert!(mem::size_of::<T>() == W) };
    let n = whole_words::<W>(src);
    dst.reserve(n);
    let spare = &mut dst.spare_capacity_mut()[..n];
    // SAFETY: `MaybeUninit<u8>` has alignment 1 and accepts any (or no) byte value, and the
    // `n` slots of `MaybeUninit<T>` are exactly `n * W` bytes (`size_of::<T>() == W`, checked
    // at compile time above); the view reborrows `spare` mutably, so nothing else aliases it.
    let bytes =
        unsafe { slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<MaybeUninit<u8>>(), n * W) };
    swap_copy::<W>(&src[..n * W], bytes);
    // SAFETY: `swap_copy` initialized all `n * W` bytes of the first `n` spare slots (it
    // writes every byte of `dst` when both slices have the same length, a multiple of `W`),
    // every bit pattern is a valid `T` (`T: Plain`), and `reserve(n)` guarantees the capacity.
    unsafe { dst.set_len(dst.len() + n) };
}

/// The number of whole `W`-byte words in `src`, after the debug-build check that there is no
/// partial one.
#[inline(always)]
fn whole_words<const W: usize>(src: &[u8]) -> usize {
    debug_assert!(
        src.len().is_multiple_of(W),
        "list body length {} is not a multiple of {W}",
        src.len()
    );
    src.len() / W
}

/// Reserves `src.len()` bytes in `dst` once, byte-swap-copies `src` into the spare capacity,
/// then extends the length once. `src.len()` is a multiple of `W` (a whole slice of values).
#[inline(always)]
fn put_swapped<const W: usize>(dst: &mut BytesMut, src: &[u8]) {
    let len = src.len();
    dst.reserve(len);
    swap_copy::<W>(src, &mut dst.spare_capacity_mut()[..len]);
    // SAFETY: `reserve(len)` made the spare capacity at least `len` bytes long, and
    // `swap_copy` initialized its first `len` bytes (it writes every byte of its destination
    // when both slices have the same length, a multiple of `W`, as here).
    unsafe { dst.set_len(dst.len() + len) };
}

/// Copies `src` into `dst`, reversing the byte order of every `W`-byte word (`W` is 4 or 8).
///
/// Writes the first `min(src.len(), dst.len())` bytes of `dst`, rounded down to a multiple of
/// `W`; callers pass slices of equal length, a multiple of `W`, so every byte of `dst` is
/// written.
///
/// # Panics
///
/// If the CPU does not support AVX2.
#[inline(always)]
fn swap_copy<const W: usize>(src: &[u8], dst: &mut [MaybeUninit<u8>]) {
    assert!(
        is_available(),
        "thrift_wire::simd::avx2 called on a CPU without AVX2"
    );
    debug_assert_eq!(src.len(), dst.len());
    debug_assert!(src.len().is_multiple_of(W));
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the assertion above established that the CPU supports AVX2, the only
        // requirement of `x86_64::swap_copy`.
        unsafe { x86_64::swap_copy::<W>(src, dst) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (src, dst);
        unreachable!("is_available() is false off x86_64");
    }
}

#[cfg(target_arch = "x86_64")]
mod x86_64 {
    //! The AVX2 kernel itself.

    use std::arch::x86_64::{
        __m256i, _mm256_loadu_si256, _mm256_setr_epi8, _mm256_shuffle_epi8, _mm256_storeu_si256,
    };
    use std::mem::MaybeUninit;

    /// Bytes per AVX2 vector.
    const VECTOR: usize = 32;
    /// Vectors per iteration of the main loop.
    const UNROLL: usize = 4;

    /// The `vpshufb` control that reverses every `W`-byte word of a 32-byte vector.
    /// `vpshufb` shuffles within each 16-byte lane; both lanes get the same pattern.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn reverse_words_mask<const W: usize>() -> __m256i {
        const { assert!(W == 4 || W == 8) };
        if W == 4 {
            #[rustfmt::skip]
            let m = _mm256_setr_epi8(
                3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,
                3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,
            );
            m
        } else {
            #[rustfmt::skip]
            let m = _mm256_setr_epi8(
                7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8,
                7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8,
            );
            m
        }
    }

    /// Byte-swap-copies one 32-byte vector from `src` to `dst`.
    ///
    /// # Safety
    ///
    /// `src` must be valid for reading 32 bytes and `dst` valid for writing 32 bytes (no
    /// alignment needed), and the CPU must support AVX2.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn swap_vector(src: *const u8, dst: *mut u8, mask: __m256i) {
        // SAFETY: the caller guarantees 32 readable bytes at `src`; `loadu` has no alignment
        // requirement.
        let v = unsafe { _mm256_loadu_si256(src.cast::<__m256i>()) };
        // SAFETY: the caller guarantees 32 writable bytes at `dst`; `storeu` has no alignment
        // requirement.
        unsafe { _mm256_storeu_si256(dst.cast::<__m256i>(), _mm256_shuffle_epi8(v, mask)) };
    }

    /// Copies `src` into `dst`, reversing the byte order of every `W`-byte word (`W` is 4 or
    /// 8). Writes the first `min(src.len(), dst.len())` bytes of `dst`, rounded down to a
    /// multiple of `W`; reads no byte of `src` beyond that count.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn swap_copy<const W: usize>(src: &[u8], dst: &mut [MaybeUninit<u8>]) {
        let mask = reverse_words_mask::<W>();
        let len = src.len().min(dst.len()) / W * W;
        let src = src.as_ptr();
        let dst = dst.as_mut_ptr().cast::<u8>();
        let mut i = 0;
        // Every offset below is at most `len`, which is at most the length of both slices, so
        // `i + k <= len` bounds each access; the comparisons cannot overflow since slice
        // lengths are at most `isize::MAX`.
        while len - i >= UNROLL * VECTOR {
            for k in 0..UNROLL {
                // SAFETY: `i + (k + 1) * VECTOR <= i + UNROLL * VECTOR <= len`, so both 32-byte
                // ranges starting at offset `i + k * VECTOR` lie inside `src` and `dst`; AVX2
                // support is this function's own precondition.
                unsafe { swap_vector(src.add(i + k * VECTOR), dst.add(i + k * VECTOR), mask) };
            }
            i += UNROLL * VECTOR;
        }
        while len - i >= VECTOR {
            // SAFETY: `i + VECTOR <= len`, so both 32-byte ranges at offset `i` lie inside
            // `src` and `dst`; AVX2 support is this function's own precondition.
            unsafe { swap_vector(src.add(i), dst.add(i), mask) };
            i += VECTOR;
        }
        // Fewer than 32 bytes left: a whole number of words, since `len` and `i` are both
        // multiples of `W`.
        while i < len {
            // SAFETY: `i + W <= len` because `i` and `len` are multiples of `W` and `i < len`,
            // so the `W` bytes at offset `i` lie inside `src` and `dst`; the unaligned read and
            // write accept any address.
            unsafe {
                if W == 4 {
                    let word = src.add(i).cast::<u32>().read_unaligned();
                    dst.add(i).cast::<u32>().write_unaligned(word.swap_bytes());
                } else {
                    let word = src.add(i).cast::<u64>().read_unaligned();
                    dst.add(i).cast::<u64>().write_unaligned(word.swap_bytes());
                }
            }
            i += W;
        }
    }
}
