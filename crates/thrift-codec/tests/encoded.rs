//! `Encoder::write_encoded` puts a value encoded elsewhere into a message as it is: the
//! output equals encoding the value in place, in every protocol, and the sizer counts
//! exactly what is written (the large value as a zero-copy node). `Decoder::read_encoded`
//! is its reverse: a value read out of a message is the bytes it has encoded alone.

use bytes::Bytes;
use thrift_wire::fixtures::echo::Request;
use thrift_wire::{
    Binary, Codec, Compact, DecodeErrorKind, Decoder, Encoder, Json, LinkBuffer, Message, Protocol,
    Sizer, TType,
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

/// `req` encoded alone.
fn alone<P: Protocol>(codec: &Codec<P>, req: &Request) -> Bytes {
    let mut buf = LinkBuffer::new();
    let n = codec.encode(req, &mut buf).unwrap();
    buf.next(n)
}

fn request(msg_len: usize) -> Request {
    Request {
        action: "echo".into(),
        msg: "m".repeat(msg_len).into(),
    }
}

/// A struct field, then list elements (JSON's separators and closers around them),
/// then a whole top-level value: each read is the value's bytes as encoded alone.
fn read_back<P: Protocol>(msg_len: usize) {
    let codec = Codec::<P>::new();
    let req = request(msg_len);
    let raw = alone(&codec, &req);

    let (_, _, outer) = outer(&codec, |s| req.size(s), |e| req.encode(e));
    let mut d = codec.decoder(outer).unwrap();
    let saved = d.read_struct_begin().unwrap();
    let f = d.read_field_begin().unwrap();
    assert_eq!((f.ty, f.id), (TType::Struct, 1));
    assert_eq!(
        d.read_encoded(TType::Struct).unwrap(),
        raw,
        "a field's value"
    );
    let f = d.read_field_begin().unwrap();
    assert_eq!((f.ty, f.id), (TType::I32, 2));
    assert_eq!(d.read_i32().unwrap(), 7, "the field after it reads on");
    assert_eq!(d.read_field_begin().unwrap().ty, TType::Stop);
    d.read_struct_end(saved);
    assert_eq!(d.remaining(), 0);

    let other = request(3);
    let mut list = LinkBuffer::new();
    let mut s = codec.sizer();
    let len = s.list_begin_len(TType::Struct, 2) + req.size(&mut s) + other.size(&mut s);
    list.reserve(len);
    {
        let mut e = codec.encoder(&mut list);
        e.write_list_begin(TType::Struct, 2);
        req.encode(&mut e);
        other.encode(&mut e);
    }
    let n = list.len();
    let mut d = codec.decoder(list.next(n)).unwrap();
    let header = d.read_list_begin().unwrap();
    assert_eq!((header.elem, header.len), (TType::Struct, 2));
    assert_eq!(
        d.read_encoded(TType::Struct).unwrap(),
        raw,
        "the first element"
    );
    let second = d.read_encoded(TType::Struct).unwrap();
    assert_eq!(second, alone(&codec, &other), "the last element");
    d.read_container_end();
    assert_eq!(d.remaining(), 0, "the list's closer is read too");

    let mut d = codec.decoder(raw.clone()).unwrap();
    assert_eq!(d.read_encoded(TType::Struct).unwrap(), raw, "a whole value");
    assert_eq!(d.remaining(), 0);
}

#[test]
fn a_value_read_encoded_is_its_bytes_as_encoded_alone() {
    for msg_len in [0, 10, 1000] {
        read_back::<Binary>(msg_len);
        read_back::<Compact>(msg_len);
        read_back::<Json>(msg_len);
    }
}

/// A value cut short is the error skipping it gives, not a shorter slice.
fn refused<P: Protocol>() {
    let codec = Codec::<P>::new();
    let raw = alone(&codec, &request(10));
    let mut d = codec.decoder(raw.slice(..raw.len() - 1)).unwrap();
    let e = d.read_encoded(TType::Struct).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            DecodeErrorKind::UnexpectedEof { .. } | DecodeErrorKind::InvalidJson { .. }
        ),
        "{e}"
    );
}

#[test]
fn a_value_cut_short_is_not_read_encoded() {
    refused::<Binary>();
    refused::<Compact>();
    refused::<Json>();
}
