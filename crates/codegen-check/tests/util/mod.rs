//! Helpers shared by the tests of generated types.

use thrift_wire::bytes::Bytes;
use thrift_wire::{Binary, Codec, Compact, LinkBuffer, Message, Protocol};

/// `m` encoded in protocol `P`, checking that `size()` is exact.
pub(crate) fn encode<P: Protocol, M: Message>(m: &M) -> Bytes {
    let codec = Codec::<P>::new();
    let mut buf = LinkBuffer::new();
    let n = codec.encode(m, &mut buf).unwrap();
    assert_eq!(n, codec.size(m), "size() is exact");
    buf.next(n)
}

/// Checks that `m` decodes back to itself in both protocols.
pub(crate) fn round_trip<M: Message + PartialEq + std::fmt::Debug>(m: &M) {
    let bytes = encode::<Binary, _>(m);
    assert_eq!(&Codec::<Binary>::new().decode::<M>(bytes).unwrap(), m);
    let bytes = encode::<Compact, _>(m);
    assert_eq!(&Codec::<Compact>::new().decode::<M>(bytes).unwrap(), m);
}

/// A set of a generated module's `OrderedF64` holding what `f64`'s partial order cannot
/// order: NaN (given twice, kept once), both zeros (kept apart) and an infinity; checks
/// that they are kept in total order. Its elements compare by bits, so a value holding
/// it can be checked with [`round_trip`].
#[allow(dead_code)] // Not every test that shares this module has doubles.
pub(crate) fn odd_doubles<O>() -> std::collections::BTreeSet<O>
where
    O: Ord + Copy + From<f64>,
    f64: From<O>,
{
    let set: std::collections::BTreeSet<O> = [f64::NAN, 0.0, -0.0, f64::NAN, f64::NEG_INFINITY]
        .into_iter()
        .map(O::from)
        .collect();
    let order: Vec<u64> = set.iter().map(|&d| f64::from(d).to_bits()).collect();
    let want = [f64::NEG_INFINITY, -0.0, 0.0, f64::NAN].map(f64::to_bits);
    assert_eq!(order, want, "in total order, NaN last");
    set
}
