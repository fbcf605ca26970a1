//! `Encoder::write_encoded` puts a value encoded elsewhere into a message as it is: the
//! output equals encoding the value in place, in every protocol, and the sizer counts
//! exactly what is written (the large value as a zero-copy node).

use bytes::Bytes;
use thrift_codec::fixtures::echo::Request;
use thrift_codec::{
    Binary, Codec, Compact, Encoder, Json, LinkBuffer, Message, Protocol, Sizer, TType,
};

/// A struct `{1: Request, 2: i32}`, the request written by `inner`, sized by `size`.
fn outer<P: Protocol>(
    codec: &Codec<P>,
    size: impl Fn(&mut P::Sizer) -> usize,
    inner: impl Fn(&mut P::Encoder<'_>),
) -> (usize, usize, Bytes) {
    let mut s = codec.sizer();
    let saved = s.struct_begin();
    let len = s.field_begin_len(TType::Struct, 1)
        + size(&mut s)
        + s.field_begin_len(TType::I32, 2)
        + s.i32_len(7)
        + s.struct_end_len(saved);
    let zero_copy = s.zero_copy_len();
    let mut buf = LinkBuffer::new();
    buf.reserve(len - zero_copy);
    {
        let mut e = codec.encoder(&mut buf);
        let saved = e.write_struct_begin();
        e.write_field_begin(TType::Struct, 1);
        inner(&mut e);
        e.write_field_begin(TType::I32, 2);
        e.write_i32(7);
        e.write_struct_end(saved);
    }
    let n = buf.len();
    (len, zero_copy, buf.next(n))
}

fn check<P: Protocol>(msg_len: usize) {
    let codec = Codec::<P>::new().zero_copy_threshold(256);
    let req = Request {
        action: "echo".into(),
        msg: "m".repeat(msg_len).into(),
    };
    let mut raw = LinkBuffer::new();
    let n = codec.encode(&req, &mut raw).unwrap();
    let raw = raw.next(n);

    let (plain_len, _, plain) = outer(&codec, |s| req.size(s), |e| req.encode(e));
    let (len, zero_copy, bytes) = outer(&codec, |s| s.encoded_len(&raw), |e| e.write_encoded(&raw));
    assert_eq!(bytes, plain, "{msg_len}-byte msg");
    assert_eq!((len, plain_len), (bytes.len(), bytes.len()));
    if raw.len() >= 256 {
        assert_eq!(
            zero_copy,
            raw.len(),
            "the large value goes in without a copy"
        );
    } else {
        assert_eq!(zero_copy, 0);
    }
}

#[test]
fn an_encoded_value_is_written_as_if_encoded_in_place() {
    for msg_len in [0, 10, 1000] {
        check::<Binary>(msg_len);
        check::<Compact>(msg_len);
        check::<Json>(msg_len);
    }
}
