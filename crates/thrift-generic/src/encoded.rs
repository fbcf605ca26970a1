//! [`EncodedStruct`]: a struct kept as its encoded bytes, for the places that want a
//! [`Message`] without knowing its type (a stream's messages, made from JSON and
//! turned back into JSON).

use bytes::Bytes;
use thrift_wire::{DecodeError, Decoder, Encoder, Message, Sizer, TType};

/// One struct as its encoded bytes, in the protocol of the codec that carries it: a
/// [`Message`] whose encoding writes the bytes as they are (a buffer node of their
/// own, without a copy, from the codec's zero-copy threshold up) and whose decoding
/// checks that the input is one struct and keeps its bytes (a slice of the input, no
/// copy; [`Decoder::read_encoded`]).
///
/// Nothing checks the bytes against a type: they must be one whole struct in the
/// codec's protocol. A generic stream makes them from JSON and the IDL
/// ([`thrift_dynamic::json_to_thrift`]) and reads them back the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedStruct(pub Bytes);

impl Message for EncodedStruct {
    fn size<S: Sizer>(&self, s: &mut S) -> usize {
        s.encoded_len(&self.0)
    }

    fn encode<E: Encoder>(&self, e: &mut E) {
        e.write_encoded(&self.0)
    }

    fn decode<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
        d.read_encoded(TType::Struct).map(EncodedStruct)
    }
}

#[cfg(test)]
mod tests {
    use thrift_wire::fixtures::echo::Request;
    use thrift_wire::{Binary, Codec, LinkBuffer};

    use super::*;

    #[test]
    fn a_struct_goes_out_and_comes_back_byte_for_byte() {
        let codec = Codec::<Binary>::new().zero_copy_threshold(64);
        for len in [1, 100] {
            let req = Request {
                action: "a".into(),
                msg: "m".repeat(len).into(),
            };
            let mut buf = LinkBuffer::new();
            let n = codec.encode(&req, &mut buf).unwrap();
            let bytes = buf.next(n);

            let back: EncodedStruct = codec.decode(bytes.clone()).unwrap();
            assert_eq!(back.0, bytes, "decoding keeps the bytes");
            let mut out = LinkBuffer::new();
            let written = codec.encode(&back, &mut out).unwrap();
            assert_eq!(out.next(written), bytes, "encoding writes them as they are");
            let typed: Request = codec.decode(bytes.clone()).unwrap();
            assert_eq!(typed, req);
        }
    }

    #[test]
    fn bytes_that_are_not_one_struct_do_not_decode() {
        let codec = Codec::<Binary>::new();
        let mut buf = LinkBuffer::new();
        let req = Request {
            action: "a".into(),
            msg: "b".into(),
        };
        let n = codec.encode(&req, &mut buf).unwrap();
        let bytes = buf.next(n);
        assert!(codec.decode::<EncodedStruct>(bytes.slice(..n - 1)).is_err());
        let mut two = bytes.to_vec();
        two.extend_from_slice(&bytes);
        assert!(
            codec.decode::<EncodedStruct>(Bytes::from(two)).is_err(),
            "trailing bytes"
        );
    }
}
