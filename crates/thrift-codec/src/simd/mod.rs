//! Bulk big-endian copies of numeric list bodies.
//!
//! The Thrift Binary protocol writes a `list<i32>`, `list<i64>` or `list<double>` as a header
//! followed by every element in big-endian order, back to back. On a little-endian machine
//! that body is a byte-swapping copy, and for the large lists RPC payloads carry it should run
//! at close to the speed of a plain `memcpy`. The functions here do exactly that copy:
//!
//! - the top-level functions pick an implementation at run time: [`avx2`] when the CPU
//!   supports it, [`scalar`] otherwise (and on every target other than `x86_64`);
//! - [`scalar`] is plain Rust (`to_be_bytes` / `from_be_bytes`), the reference that the
//!   property tests compare every other path against;
//! - [`avx2`] byte-swaps 32 bytes per instruction with `vpshufb`.
//!
//! All of them append: `put_*` append to a [`BytesMut`], `get_*` append to a `Vec`, and both
//! reserve once and write straight into the spare capacity. The list header (element type and
//! count) is the caller's business.
//!
//! # Example
//!
//! ```
//! use bytes::BytesMut;
//! use thrift_wire::simd;
//!
//! let mut buf = BytesMut::new();
//! simd::put_i64s_be(&mut buf, &[1, -2]);
//! assert_eq!(&buf[..], &[0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]);
//!
//! let mut values = Vec::new();
//! simd::get_i64s_be(&buf, &mut values);
//! assert_eq!(values, [1, -2]);
//! ```

use bytes::BytesMut;

pub mod avx2;
pub mod scalar;

/// Appends every value of `src` to `dst` as 4 big-endian bytes (`src.len() * 4` bytes in all).
///
/// Uses [`avx2::put_i32s_be`] when the CPU supports AVX2, [`scalar::put_i32s_be`] otherwise.
#[inline]
pub fn put_i32s_be(dst: &mut BytesMut, src: &[i32]) {
    if avx2::is_available() {
        avx2::put_i32s_be(dst, src);
    } else {
        scalar::put_i32s_be(dst, src);
    }
}

/// Appends every value of `src` to `dst` as 8 big-endian bytes (`src.len() * 8` bytes in all).
///
/// Uses [`avx2::put_i64s_be`] when the CPU supports AVX2, [`scalar::put_i64s_be`] otherwise.
#[inline]
pub fn put_i64s_be(dst: &mut BytesMut, src: &[i64]) {
    if avx2::is_available() {
        avx2::put_i64s_be(dst, src);
    } else {
        scalar::put_i64s_be(dst, src);
    }
}

/// Appends every value of `src` to `dst` as the 8 big-endian bytes of its bit pattern
/// ([`f64::to_bits`]); NaN payloads, infinities and `-0.0` are kept exactly.
///
/// Uses [`avx2::put_f64s_be`] when the CPU supports AVX2, [`scalar::put_f64s_be`] otherwise.
#[inline]
pub fn put_f64s_be(dst: &mut BytesMut, src: &[f64]) {
    if avx2::is_available() {
        avx2::put_f64s_be(dst, src);
    } else {
        scalar::put_f64s_be(dst, src);
    }
}

/// Reads `src` as big-endian 4-byte values and appends them to `dst` (`src.len() / 4` values).
///
/// `src.len()` should be a multiple of 4; this is checked in debug builds only. In release
/// builds a trailing partial value is ignored (and never read).
///
/// Uses [`avx2::get_i32s_be`] when the CPU supports AVX2, [`scalar::get_i32s_be`] otherwise.
#[inline]
pub fn get_i32s_be(src: &[u8], dst: &mut Vec<i32>) {
    if avx2::is_available() {
        avx2::get_i32s_be(src, dst);
    } else {
        scalar::get_i32s_be(src, dst);
    }
}

/// Reads `src` as big-endian 8-byte values and appends them to `dst` (`src.len() / 8` values).
///
/// `src.len()` should be a multiple of 8; this is checked in debug builds only. In release
/// builds a trailing partial value is ignored (and never read).
///
/// Uses [`avx2::get_i64s_be`] when the CPU supports AVX2, [`scalar::get_i64s_be`] otherwise.
#[inline]
pub fn get_i64s_be(src: &[u8], dst: &mut Vec<i64>) {
    if avx2::is_available() {
        avx2::get_i64s_be(src, dst);
    } else {
        scalar::get_i64s_be(src, dst);
    }
}

/// Reads `src` as big-endian 8-byte bit patterns and appends them to `dst` as `f64`s
/// ([`f64::from_bits`]; NaN payloads are kept exactly). `src.len() / 8` values are appended.
///
/// `src.len()` should be a multiple of 8; this is checked in debug builds only. In release
/// builds a trailing partial value is ignored (and never read).
///
/// Uses [`avx2::get_f64s_be`] when the CPU supports AVX2, [`scalar::get_f64s_be`] otherwise.
#[inline]
pub fn get_f64s_be(src: &[u8], dst: &mut Vec<f64>) {
    if avx2::is_available() {
        avx2::get_f64s_be(src, dst);
    } else {
        scalar::get_f64s_be(src, dst);
    }
}

#[cfg(test)]
mod tests {
    //! Small exhaustive-length checks, cheap enough for Miri. The property tests in
    //! `tests/simd_props.rs` cover long lists and random alignments.
    //!
    //! Under Miri, run-time detection reports only the features enabled at compile time, so
    //! the AVX2 path runs only with `RUSTFLAGS="-C target-feature=+avx2" cargo +nightly miri
    //! test` (Miri implements the intrinsics used); otherwise these tests cover the scalar
    //! path alone.

    use super::*;

    /// Lengths around every loop boundary of the AVX2 kernel (32-byte vectors, 128-byte
    /// unrolled iterations) for both element widths.
    const LENGTHS: &[usize] = &[
        0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 63, 64, 65,
    ];

    fn values_i64(n: usize) -> Vec<i64> {
        (0..n as i64)
            .map(|i| i.wrapping_mul(0x0102_0304_0506_0708).wrapping_add(i << 56))
            .collect()
    }

    fn reference_be<const W: usize, T: Copy>(v: &[T], f: impl Fn(T) -> [u8; W]) -> Vec<u8> {
        v.iter().flat_map(|&x| f(x)).collect()
    }

    type Put<T> = fn(&mut BytesMut, &[T]);
    type Get<T> = fn(&[u8], &mut Vec<T>);

    /// Encodes `v` with `put` after a prefix, at every source offset 0..4 within a larger
    /// buffer, checks against `want`, then decodes (at an odd byte offset) and compares.
    fn check<T: Copy + PartialEq + std::fmt::Debug>(
        put: Put<T>,
        get: Get<T>,
        v: &[T],
        want: &[u8],
    ) {
        let mut dst = BytesMut::from(&b"hdr"[..]);
        put(&mut dst, v);
        assert_eq!(&dst[..3], b"hdr");
        assert_eq!(&dst[3..], want);

        // Decode from a misaligned start (offset 3) into a Vec that already holds a value.
        let mut out: Vec<T> = v.iter().take(1).copied().collect();
        let prefix = out.len();
        get(&dst[3..], &mut out);
        assert_eq!(&out[prefix..], v);
    }

    fn check_i64s(put: Put<i64>, get: Get<i64>) {
        for &n in LENGTHS {
            let v = values_i64(n);
            check(put, get, &v, &reference_be(&v, i64::to_be_bytes));
        }
    }

    fn check_i32s(put: Put<i32>, get: Get<i32>) {
        for &n in LENGTHS {
            let v: Vec<i32> = values_i64(n)
                .into_iter()
                .map(|x| (x >> 17) as i32)
                .collect();
            check(put, get, &v, &reference_be(&v, i32::to_be_bytes));
        }
    }

    fn check_f64s(put: Put<f64>, get: Get<f64>) {
        for &n in LENGTHS {
            let specials = [f64::NAN, -0.0, f64::INFINITY, f64::NEG_INFINITY, 1.5];
            let v: Vec<f64> = values_i64(n)
                .into_iter()
                .enumerate()
                .map(|(i, x)| {
                    if i % 3 == 0 {
                        specials[i % 5]
                    } else {
                        f64::from_bits(x as u64)
                    }
                })
                .collect();
            let want = reference_be(&v, |x: f64| x.to_bits().to_be_bytes());
            let mut dst = BytesMut::new();
            put(&mut dst, &v);
            assert_eq!(&dst[..], &want[..]);
            let mut out = Vec::new();
            get(&dst, &mut out);
            let bits = |s: &[f64]| s.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&out), bits(&v));
        }
    }

    #[test]
    fn scalar_round_trips() {
        check_i32s(scalar::put_i32s_be, scalar::get_i32s_be);
        check_i64s(scalar::put_i64s_be, scalar::get_i64s_be);
        check_f64s(scalar::put_f64s_be, scalar::get_f64s_be);
    }

    #[test]
    fn dispatch_round_trips() {
        check_i32s(put_i32s_be, get_i32s_be);
        check_i64s(put_i64s_be, get_i64s_be);
        check_f64s(put_f64s_be, get_f64s_be);
    }

    #[test]
    fn avx2_round_trips() {
        if !avx2::is_available() {
            return;
        }
        check_i32s(avx2::put_i32s_be, avx2::get_i32s_be);
        check_i64s(avx2::put_i64s_be, avx2::get_i64s_be);
        check_f64s(avx2::put_f64s_be, avx2::get_f64s_be);
    }

    /// Release builds ignore a trailing partial value; debug builds reject it.
    #[test]
    #[cfg_attr(debug_assertions, should_panic(expected = "multiple of"))]
    fn trailing_partial_value_is_ignored() {
        let bytes = [0, 0, 0, 1, 0, 0, 0, 2, 9, 9, 9];
        let mut out = Vec::new();
        scalar::get_i32s_be(&bytes, &mut out);
        if avx2::is_available() {
            avx2::get_i32s_be(&bytes, &mut out);
        }
        get_i32s_be(&bytes, &mut out);
        assert!(out.chunks(2).all(|c| c == [1, 2]));
    }

    #[test]
    #[cfg(not(target_arch = "x86_64"))]
    fn avx2_unavailable_off_x86_64() {
        assert!(!avx2::is_available());
    }
}
