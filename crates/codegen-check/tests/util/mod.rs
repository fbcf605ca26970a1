//! Helpers shared by the tests of generated types.

use thrift_codec::bytes::Bytes;
use thrift_codec::{Binary, Codec, Compact, LinkBuffer, Message, Protocol};

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
