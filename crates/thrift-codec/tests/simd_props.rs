//! Property tests for `thrift_wire::simd`: every path (dispatching, scalar, AVX2 when the CPU
//! has it) produces the obvious big-endian encoding, appends after existing content, and
//! decodes back to the original values, for any length and any alignment of the input.

use bytes::BytesMut;
use proptest::prelude::*;
use thrift_wire::simd::{self, avx2, scalar};

/// Longest list generated.
const MAX_LEN: usize = 10_000;
/// Extra elements / bytes generated in front of the slice under test, so that it starts at a
/// random offset (and, for byte slices, a random alignment) within a larger buffer.
const MAX_OFFSET: usize = 32;

type Put<T> = fn(&mut BytesMut, &[T]);
type Get<T> = fn(&[u8], &mut Vec<T>);

/// A random list together with a random start offset within it: the values under test are
/// `values[offset..]`, so neither their address nor their length is special.
fn list<T: std::fmt::Debug>(
    element: impl Strategy<Value = T>,
) -> impl Strategy<Value = (Vec<T>, usize)> {
    (
        prop::collection::vec(element, 0..MAX_LEN + MAX_OFFSET),
        0..MAX_OFFSET,
    )
        .prop_map(|(values, offset)| {
            let offset = offset.min(values.len());
            (values, offset)
        })
}

/// Random bytes to put in `dst` before encoding, and in front of the encoded body before
/// decoding (which makes the body start at any alignment).
fn prefix() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..MAX_OFFSET)
}

/// Every implementation of one `put_*`: the dispatcher, the scalar twin, and AVX2 if present.
fn puts<T>(dispatch: Put<T>, scalar: Put<T>, avx2: Put<T>) -> Vec<(&'static str, Put<T>)> {
    let mut all = vec![("dispatch", dispatch), ("scalar", scalar)];
    if avx2::is_available() {
        all.push(("avx2", avx2));
    }
    all
}

/// Every implementation of one `get_*`, as [`puts`].
fn gets<T>(dispatch: Get<T>, scalar: Get<T>, avx2: Get<T>) -> Vec<(&'static str, Get<T>)> {
    let mut all = vec![("dispatch", dispatch), ("scalar", scalar)];
    if avx2::is_available() {
        all.push(("avx2", avx2));
    }
    all
}

/// Checks every `put` against `reference` (after `prefix`), then every `get` on the encoded
/// body placed after `prefix` in a larger buffer, comparing the decoded values with `key`
/// (the identity, or the bit pattern for floats). Decoding appends to a non-empty `Vec`.
fn check<T: Copy, K: PartialEq + std::fmt::Debug, const W: usize>(
    values: &[T],
    prefix: &[u8],
    to_be: fn(T) -> [u8; W],
    key: fn(T) -> K,
    puts: &[(&str, Put<T>)],
    gets: &[(&str, Get<T>)],
) -> Result<(), TestCaseError> {
    let reference: Vec<u8> = values.iter().flat_map(|&x| to_be(x)).collect();

    for (name, put) in puts {
        let mut dst = BytesMut::from(prefix);
        put(&mut dst, values);
        prop_assert_eq!(
            &dst[..prefix.len()],
            prefix,
            "{} overwrote existing content",
            name
        );
        prop_assert!(
            dst[prefix.len()..] == reference[..],
            "{} encoded wrongly",
            name
        );
    }

    // The body at a random offset (hence random alignment) of a larger buffer.
    let mut framed = prefix.to_vec();
    framed.extend_from_slice(&reference);
    let body = &framed[prefix.len()..];
    let want: Vec<K> = values.iter().map(|&x| key(x)).collect();

    for (name, get) in gets {
        let mut out: Vec<T> = values.iter().take(1).copied().collect();
        let kept = out.len();
        get(body, &mut out);
        prop_assert_eq!(
            out.len(),
            kept + values.len(),
            "{} decoded a wrong count",
            name
        );
        let got: Vec<K> = out[kept..].iter().map(|&x| key(x)).collect();
        prop_assert!(got == want, "{} decoded wrongly", name);
        if let Some(&first) = values.first() {
            prop_assert_eq!(
                key(out[0]),
                key(first),
                "{} overwrote existing content",
                name
            );
        }
    }
    Ok(())
}

/// Decodes `body` with every `get`, checks that they all agree (by bit pattern, so that NaNs
/// compare equal to themselves), and returns the common result.
fn decode_all<T: Copy + Bits>(
    body: &[u8],
    gets: &[(&str, Get<T>)],
) -> Result<Vec<T>, TestCaseError> {
    let mut first: Option<Vec<T>> = None;
    for (name, get) in gets {
        let mut out = Vec::new();
        get(body, &mut out);
        match &first {
            None => first = Some(out),
            Some(want) => {
                let same = out.len() == want.len()
                    && out.iter().zip(want).all(|(a, b)| a.bits() == b.bits());
                prop_assert!(same, "{} disagrees with {}", name, gets[0].0);
            }
        }
    }
    Ok(first.unwrap_or_default())
}

/// The bit pattern of a value, for comparisons in which a NaN equals itself.
trait Bits {
    /// The value's bits, widened to 64.
    fn bits(self) -> u64;
}

impl Bits for i32 {
    fn bits(self) -> u64 {
        u64::from(self as u32)
    }
}

impl Bits for i64 {
    fn bits(self) -> u64 {
        self as u64
    }
}

impl Bits for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn i32s_match_reference_and_round_trip(
        (values, offset) in list(any::<i32>()),
        prefix in prefix(),
    ) {
        check(
            &values[offset..],
            &prefix,
            i32::to_be_bytes,
            |x| x,
            &puts(simd::put_i32s_be, scalar::put_i32s_be, avx2::put_i32s_be),
            &gets(simd::get_i32s_be, scalar::get_i32s_be, avx2::get_i32s_be),
        )?;
    }

    #[test]
    fn i64s_match_reference_and_round_trip(
        (values, offset) in list(any::<i64>()),
        prefix in prefix(),
    ) {
        check(
            &values[offset..],
            &prefix,
            i64::to_be_bytes,
            |x| x,
            &puts(simd::put_i64s_be, scalar::put_i64s_be, avx2::put_i64s_be),
            &gets(simd::get_i64s_be, scalar::get_i64s_be, avx2::get_i64s_be),
        )?;
    }

    /// Arbitrary bit patterns cover NaNs (with payloads), infinities and `-0.0`; values are
    /// compared by bits, since `NaN != NaN`.
    #[test]
    fn f64s_match_reference_and_round_trip(
        (bits, offset) in list(prop_oneof![
            4 => any::<u64>(),
            1 => prop::sample::select(vec![
                f64::NAN.to_bits(),
                (-f64::NAN).to_bits(),
                f64::INFINITY.to_bits(),
                f64::NEG_INFINITY.to_bits(),
                (-0.0f64).to_bits(),
                0x7ff0_0000_0000_0001, // signalling NaN
            ]),
        ]),
        prefix in prefix(),
    ) {
        let values: Vec<f64> = bits.into_iter().map(f64::from_bits).collect();
        check(
            &values[offset..],
            &prefix,
            |x: f64| x.to_bits().to_be_bytes(),
            f64::to_bits,
            &puts(simd::put_f64s_be, scalar::put_f64s_be, avx2::put_f64s_be),
            &gets(simd::get_f64s_be, scalar::get_f64s_be, avx2::get_f64s_be),
        )?;
    }

    /// A byte slice at any offset of a random buffer decodes to the same values on every path,
    /// and those values re-encode to the same bytes.
    #[test]
    fn random_bytes_decode_identically(
        bytes in prop::collection::vec(any::<u8>(), 0..8 * MAX_LEN),
        start in 0..MAX_OFFSET,
    ) {
        let body = &bytes[start.min(bytes.len())..];
        let body4 = &body[..body.len() / 4 * 4];
        let body8 = &body[..body.len() / 8 * 8];

        let i32_gets = gets(simd::get_i32s_be, scalar::get_i32s_be, avx2::get_i32s_be);
        let i32s = decode_all(body4, &i32_gets)?;
        let mut again = BytesMut::new();
        simd::put_i32s_be(&mut again, &i32s);
        prop_assert!(again[..] == body4[..]);

        let i64_gets = gets(simd::get_i64s_be, scalar::get_i64s_be, avx2::get_i64s_be);
        let i64s = decode_all(body8, &i64_gets)?;
        let mut again = BytesMut::new();
        simd::put_i64s_be(&mut again, &i64s);
        prop_assert!(again[..] == body8[..]);

        let f64_gets = gets(simd::get_f64s_be, scalar::get_f64s_be, avx2::get_f64s_be);
        let f64s = decode_all(body8, &f64_gets)?;
        let f64_bits: Vec<u64> = f64s.iter().map(|x| x.to_bits()).collect();
        let i64_bits: Vec<u64> = i64s.iter().map(|&x| x as u64).collect();
        prop_assert!(f64_bits == i64_bits);
    }
}

/// Appending twice to the same buffer: the second call must not disturb the first's output,
/// including when it has to grow the buffer.
#[test]
fn consecutive_puts_append() {
    for (name, put) in puts(simd::put_i64s_be, scalar::put_i64s_be, avx2::put_i64s_be) {
        let a: Vec<i64> = (0..37).collect();
        let b: Vec<i64> = (100..1100).collect();
        let mut dst = BytesMut::with_capacity(8);
        put(&mut dst, &a);
        put(&mut dst, &b);
        let want: Vec<u8> = a.iter().chain(&b).flat_map(|x| x.to_be_bytes()).collect();
        assert!(dst[..] == want[..], "{name}");
    }
}
