//! Unsigned LEB128 varints and zigzag, as the Compact protocol and TTHeader write
//! integers.

/// The most bytes a varint of a `u64` takes.
pub const MAX_VARINT_LEN: usize = 10;

/// The most bytes a varint of a `u32` takes (Compact's `i16`, `i32`, lengths, counts).
pub const MAX_VARINT32_LEN: usize = 5;

/// Why a varint could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarintError {
    /// The input ended inside the varint.
    Truncated,
    /// The varint runs past the most bytes allowed.
    TooLong,
}

/// Writes `v` as an unsigned LEB128 varint (seven bits a byte, low first, the high bit
/// set on all but the last) at the start of `buf`; returns the bytes used (1 to 10).
#[inline]
pub fn encode_varint(mut v: u64, buf: &mut [u8; MAX_VARINT_LEN]) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        buf[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    buf[n] = v as u8;
    n + 1
}

/// Appends `v` as an unsigned LEB128 varint to `out`.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; MAX_VARINT_LEN];
    let n = encode_varint(v, &mut buf);
    out.extend_from_slice(&buf[..n]);
}

/// Bytes of `v` as an unsigned LEB128 varint.
#[inline]
pub fn varint_len(v: u64) -> usize {
    // 1 byte per started group of 7 significant bits; 0 takes one byte.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Reads an unsigned LEB128 varint of at most `max` bytes (at most
/// [`MAX_VARINT_LEN`]) from the start of `buf`: its value and the bytes it took. Bits
/// past the 64th are dropped; a caller that wants 32 bits truncates or checks the
/// value, as its format says.
#[inline]
pub fn decode_varint(buf: &[u8], max: usize) -> Result<(u64, usize), VarintError> {
    // The common case: one byte.
    match buf.first() {
        Some(&b) if b < 0x80 => return Ok((u64::from(b), 1)),
        Some(_) => {}
        None => return Err(VarintError::Truncated),
    }
    let mut value = 0u64;
    for i in 0..max.min(MAX_VARINT_LEN) {
        let Some(&b) = buf.get(i) else {
            return Err(VarintError::Truncated);
        };
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(VarintError::TooLong)
}

/// Zigzag encoding of an `i32` (0, -1, 1, -2... to 0, 1, 2, 3...), as Compact writes
/// `i16` and `i32` values and field ids before their varint.
#[inline]
pub fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

/// Zigzag encoding of an `i64`, as Compact writes `i64` values.
#[inline]
pub fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag32`].
#[inline]
pub fn unzigzag32(v: u32) -> i32 {
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

/// The inverse of [`zigzag64`].
#[inline]
pub fn unzigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(not(miri))]
    use proptest::prelude::*;

    /// The bytes of `v`'s varint, one at a time: the definition the others are held to.
    #[cfg(not(miri))]
    fn by_definition(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let low = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(low);
                return out;
            }
            out.push(low | 0x80);
        }
    }

    // Not under Miri, where the plain tests run: proptest needs the file system (its
    // failure records) and hundreds of cases, and this code has no unsafe.
    #[cfg(not(miri))]
    proptest! {
        #[test]
        fn a_varint_reads_back_from_what_was_written(v in any::<u64>(), tail in prop::collection::vec(any::<u8>(), 0..4)) {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            prop_assert_eq!(&out, &by_definition(v));
            prop_assert_eq!(out.len(), varint_len(v));
            let n = out.len();
            out.extend_from_slice(&tail);
            prop_assert_eq!(decode_varint(&out, MAX_VARINT_LEN), Ok((v, n)));
            // Cut anywhere inside, it is truncated; allowed fewer bytes, too long.
            prop_assert_eq!(decode_varint(&out[..n - 1], MAX_VARINT_LEN), Err(VarintError::Truncated));
            if n > 1 {
                prop_assert_eq!(decode_varint(&out, n - 1), Err(VarintError::TooLong));
            }
        }

        #[test]
        fn zigzag_maps_small_magnitudes_to_small_numbers_and_back(v in any::<i64>(), w in any::<i32>()) {
            prop_assert_eq!(unzigzag64(zigzag64(v)), v);
            prop_assert_eq!(unzigzag32(zigzag32(w)), w);
            prop_assert_eq!(zigzag64(v), if v >= 0 { (v as u64) << 1 } else { ((!v as u64) << 1) | 1 });
        }
    }

    #[test]
    fn eleven_continuation_bytes_are_too_long_at_any_allowance() {
        let bytes = [0xff; 12];
        assert_eq!(decode_varint(&bytes, 64), Err(VarintError::TooLong));
        assert_eq!(decode_varint(&bytes, 5), Err(VarintError::TooLong));
        assert_eq!(decode_varint(&[], 5), Err(VarintError::Truncated));
        assert_eq!(zigzag32(-1), 1);
        assert_eq!(zigzag32(1), 2);
    }
}
