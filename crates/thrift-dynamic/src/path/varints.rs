//! Stepping over runs of Compact varints (the integers of a list, a set or a map)
//! sixty-four bytes at a time, without decoding them.
//!
//! A varint ends at each byte below 0x80. The high bits of 64 bytes are gathered into
//! one mask; its zero bits are the ends, counted in one step, and the chunk where the
//! last wanted varint ends is found by comparing that count with the varints still to
//! step over. Nothing branches per varint or per byte, so a walk over 128 `i64`s costs
//! about as much as one over their 1.2 KiB of bytes. Over-long varints (a run of `max`
//! continuation bytes) are found in the same mask, as thrift-wire reports them.
//!
//! Three ways to gather the mask, chosen by what the CPU has: AVX2 (two 32-byte
//! `vpmovmskb`, with the POPCNT and BMI1 instructions for counting), found at run time;
//! SSE2 (four 16-byte `pmovmskb`), which every x86_64 has; and plain integer
//! arithmetic elsewhere. All three give the same mask (tested against each other and
//! a bit-by-bit reference); under Miri, whose CPU detection finds no AVX2, the SSE2
//! way runs and is checked.

/// The high bit of each byte of a word.
pub(super) const HIGH: u64 = 0x8080_8080_8080_8080;

/// How a scan of whole 64-byte chunks ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scan {
    /// The wanted varints end this many bytes into the input.
    Ended(usize),
    /// A varint ran over its `max` bytes.
    TooLong,
    /// Fewer than 64 bytes remain at `end`, with `left` varints still to step over
    /// and `run` continuation bytes since the last end: the caller goes on from there.
    Short {
        /// Bytes stepped over.
        end: usize,
        /// Varints still to step over.
        left: usize,
        /// Continuation bytes at the end of what was stepped over.
        run: usize,
    },
}

/// Steps over `left` (at least one) varints of at most `max` bytes at the start of
/// `input`, in whole 64-byte chunks.
#[inline]
pub(super) fn scan(input: &[u8], left: usize, max: usize) -> Scan {
    #[cfg(target_arch = "x86_64")]
    if avx2_is_available() {
        // SAFETY: the CPU has AVX2, POPCNT and BMI1, which is all `scan_avx2` needs.
        return unsafe { scan_avx2(input, left, max) };
    }
    scan_with(input, left, max, continuation_mask)
}

/// Whether [`scan`] takes the AVX2 way (`std` caches the CPUID answer after the
/// first call, so this is an atomic load).
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2_is_available() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("popcnt")
        && std::arch::is_x86_feature_detected!("bmi1")
}

/// [`scan_with`] compiled for AVX2, POPCNT and BMI1, with [`avx2_mask`].
///
/// # Safety
///
/// The CPU must support AVX2, POPCNT and BMI1.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt,bmi1")]
unsafe fn scan_avx2(input: &[u8], left: usize, max: usize) -> Scan {
    // SAFETY: this function's own contract is that the CPU supports AVX2.
    scan_with(input, left, max, |chunk| unsafe { avx2_mask(chunk) })
}

/// [`continuation_mask`] with AVX2: two 32-byte loads and `vpmovmskb`.
///
/// # Safety
///
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn avx2_mask(chunk: &[u8]) -> u64 {
    use std::arch::x86_64::{_mm256_movemask_epi8, _mm256_set_epi64x};
    let word = |at: usize| {
        chunk
            .get(at..at + 8)
            .and_then(|w| w.try_into().ok())
            .map_or(0, u64::from_le_bytes) as i64
    };
    let mut mask = 0;
    for half in 0..2 {
        let at = 32 * half;
        // SAFETY: the caller promises AVX2; these are plain register operations (the
        // four adjacent loads above are fused into one unaligned 32-byte load).
        let bits = unsafe {
            let v = _mm256_set_epi64x(word(at + 24), word(at + 16), word(at + 8), word(at));
            _mm256_movemask_epi8(v) as u32
        };
        mask |= u64::from(bits) << (32 * half);
    }
    mask
}

/// The loop of [`scan`], with `mask` gathering a chunk's high bits.
#[inline(always)]
fn scan_with(input: &[u8], mut left: usize, max: usize, mask: impl Fn(&[u8]) -> u64) -> Scan {
    // Continuation bytes since the last end of a varint.
    let mut run = 0;
    let mut end = 0;
    while let Some(chunk) = input.get(end..end + 64) {
        let cont = mask(chunk);
        let ends = !cont;
        let n = ends.count_ones() as usize;
        // Where the last varint ends, if in this chunk: the bits after it do not
        // count (a run of continuation bytes there is the next value's business).
        let (last, cont) = if n >= left {
            let at = select(ends, left - 1);
            (Some(at), cont & ((1 << at) - 1))
        } else {
            (None, cont)
        };
        // A run of `max` continuation bytes: begun before this chunk, or inside it
        // (shifts bring in zeros, so a run reaching past the chunk is left to the
        // carried count).
        if run + ends.trailing_zeros() as usize >= max || has_run(cont, max) {
            return Scan::TooLong;
        }
        if let Some(at) = last {
            return Scan::Ended(end + at as usize + 1);
        }
        run = ends.leading_zeros() as usize;
        left -= n;
        end += 64;
    }
    Scan::Short { end, left, run }
}

/// One bit per byte of `chunk` (64 bytes), bit `i` set where byte `i` has its high bit
/// set (a varint continues past it). SSE2's byte mask where the target has it (every
/// x86_64), else [`continuation_mask_swar`].
#[inline]
pub(super) fn continuation_mask(chunk: &[u8]) -> u64 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        // SAFETY: `sse2_mask` only needs the `sse2` target feature, which the `cfg`
        // above makes sure the whole build is compiled for (it is part of the x86_64
        // baseline); it reads `chunk` through safe slice indexing.
        unsafe { sse2_mask(chunk) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        continuation_mask_swar(chunk)
    }
}

/// [`continuation_mask`] with SSE2: four 16-byte loads and `pmovmskb`, which gathers
/// the high bit of each byte.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
#[inline]
fn sse2_mask(chunk: &[u8]) -> u64 {
    use std::arch::x86_64::{_mm_movemask_epi8, _mm_set_epi64x};
    let mut mask = 0;
    for (i, lane) in chunk.chunks_exact(16).take(4).enumerate() {
        let word =
            |at: usize| u64::from_le_bytes(lane[at..at + 8].try_into().unwrap_or_default()) as i64;
        // Two adjacent loads, which the compiler fuses into one unaligned load.
        let v = _mm_set_epi64x(word(8), word(0));
        mask |= u64::from(_mm_movemask_epi8(v) as u16) << (16 * i);
    }
    mask
}

/// [`continuation_mask`] in plain integer arithmetic, for targets without SSE2 (and
/// tested on all). Each word's high bits are moved to the bottom of their bytes and
/// gathered into its top byte by one multiplication: the product's terms land on
/// distinct bits, so nothing carries, and byte `i`'s bit lands on bit `56 + i`.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
#[inline]
fn continuation_mask_swar(chunk: &[u8]) -> u64 {
    const GATHER: u64 = 0x0102_0408_1020_4080;
    let mut mask = 0;
    for (i, word) in chunk.chunks_exact(8).take(8).enumerate() {
        let word = u64::from_le_bytes(word.try_into().unwrap_or_default());
        mask |= (((word & HIGH) >> 7).wrapping_mul(GATHER) >> 56) << (8 * i);
    }
    mask
}

/// The position of set bit number `n` (from 0, counted from the bottom) of `x`, which
/// has more than `n` set bits: bits counted per byte, a running sum over the bytes by
/// one multiplication, the byte where the sum passes `n` found by one comparison over
/// all bytes at once, then at most seven steps inside that byte.
#[inline]
fn select(x: u64, n: usize) -> u32 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let pairs = x - ((x >> 1) & 0x5555_5555_5555_5555);
    let nibbles = (pairs & 0x3333_3333_3333_3333) + ((pairs >> 2) & 0x3333_3333_3333_3333);
    let bytes = (nibbles + (nibbles >> 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    // Byte `i` holds the set bits of bytes `0..=i`: at most 64, so no byte carries.
    let running = bytes.wrapping_mul(ONES);
    // Byte `i` gets its high bit where its sum exceeds `n` (sums up to 64 and `n` below
    // 64 keep every byte below 256).
    let n = n as u64 & 63;
    let past = running.wrapping_add((0x7f - n) * ONES) & HIGH;
    let byte = past.trailing_zeros() / 8;
    let before = if byte == 0 {
        0
    } else {
        (running >> (8 * byte - 8)) & 0xff
    };
    let mut bits = (x >> (8 * byte)) & 0xff;
    for _ in before..n {
        bits &= bits - 1;
    }
    8 * byte + bits.trailing_zeros()
}

/// Whether `cont` has a run of `max` set bits (continuation bytes), found by doubling:
/// runs of 2, then 4, then 8, then `max`.
#[inline]
fn has_run(cont: u64, max: usize) -> bool {
    let two = cont & cont >> 1;
    let four = two & two >> 2;
    match max {
        5 => four & cont >> 4 != 0,
        10 => {
            let eight = four & four >> 4;
            eight & two >> 8 != 0
        }
        _ => {
            let mut inside = cont;
            for shift in 1..max {
                inside &= cont >> shift;
            }
            inside != 0
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn the_continuation_mask_has_one_bit_per_high_bit(
            bytes in prop::collection::vec(any::<u8>(), 64),
        ) {
            let naive = bytes
                .iter()
                .enumerate()
                .fold(0u64, |m, (i, b)| m | (u64::from(b >> 7) << i));
            prop_assert_eq!(continuation_mask(&bytes), naive);
            prop_assert_eq!(continuation_mask_swar(&bytes), naive);
            #[cfg(target_arch = "x86_64")]
            if avx2_is_available() {
                // SAFETY: just checked.
                prop_assert_eq!(unsafe { avx2_mask(&bytes) }, naive);
            }
        }

        #[test]
        fn select_finds_the_nth_set_bit(x in any::<u64>().prop_filter("a set bit", |x| *x != 0), n in any::<prop::sample::Index>()) {
            let set: Vec<u32> = (0..64).filter(|i| x >> i & 1 == 1).collect();
            let n = n.index(set.len());
            prop_assert_eq!(select(x, n), set[n]);
        }

        #[test]
        fn a_run_is_found_by_doubling_as_by_counting(
            // Three bits in four set, so that runs of ten are common.
            cont in (any::<u64>(), any::<u64>()).prop_map(|(a, b)| a | b),
            max in 2usize..12,
        ) {
            let longest = (0..64).fold((0, 0), |(run, longest), i| {
                let run = if cont >> i & 1 == 1 { run + 1 } else { 0 };
                (run, longest.max(run))
            }).1;
            prop_assert_eq!(has_run(cont, max), longest >= max);
        }


        #[test]
        fn every_way_scans_alike(
            bytes in prop_oneof![
                prop::collection::vec(any::<u8>(), 0..400),
                prop::collection::vec(prop_oneof![1 => 0u8..0x80, 3 => 0x80u8..], 0..400),
            ],
            left in 1usize..200,
            wide in any::<bool>(),
        ) {
            let max = if wide { 10 } else { 5 };
            let portable = scan_with(&bytes, left, max, continuation_mask_swar);
            prop_assert_eq!(scan_with(&bytes, left, max, continuation_mask), portable);
            prop_assert_eq!(scan(&bytes, left, max), portable);
        }
    }
}
