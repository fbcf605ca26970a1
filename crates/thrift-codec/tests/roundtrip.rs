//! Property tests: every reference type round-trips in every protocol, `size()` is
//! exact, and re-encoding a decoded value gives the same bytes.

mod util;

use bytes::Bytes;
use proptest::collection::{btree_map, btree_set, vec};
use proptest::prelude::*;
use thrift_wire::fixtures::echo::{Ano, EchoError, Ids, MyTest, Request};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::{
    ApplicationException, ApplicationExceptionKind, Binary, Codec, Compact, Json, LinkBuffer,
    Message, MessageHeader, MessageType, Protocol, Sizer, Utf8Bytes,
};
use util::{decode, encode};

fn utf8() -> impl Strategy<Value = Utf8Bytes> {
    any::<String>().prop_map(Utf8Bytes::from)
}

fn binary() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..64).prop_map(Bytes::from)
}

fn finite() -> impl Strategy<Value = f64> {
    -1e300..1e300f64
}

fn request() -> impl Strategy<Value = Request> {
    (utf8(), utf8()).prop_map(|(action, msg)| Request { action, msg })
}

fn my_test() -> impl Strategy<Value = MyTest> {
    (any::<i64>(), any::<i64>(), vec(any::<i64>(), 0..300)).prop_map(|(num, ano, nums)| MyTest {
        num,
        ano: Ano { num: ano },
        nums,
    })
}

fn ids() -> impl Strategy<Value = Ids> {
    (
        vec(any::<i32>(), 0..100),
        vec(any::<i64>(), 0..100),
        vec(finite(), 0..100),
        binary(),
    )
        .prop_map(|(ids32, ids64, scores, blob)| Ids {
            ids32,
            ids64,
            scores,
            blob,
        })
}

fn mixed() -> impl Strategy<Value = Mixed> {
    (
        (
            any::<i64>(),
            utf8(),
            any::<bool>(),
            any::<i8>(),
            any::<i16>(),
            any::<i32>(),
        ),
        (
            finite(),
            vec(request(), 0..5),
            btree_map(utf8(), any::<i64>(), 0..8),
        ),
        (
            btree_set(any::<i32>(), 0..20),
            vec(utf8(), 0..5),
            proptest::option::of(binary()),
            ids(),
        ),
    )
        .prop_map(
            |(
                (id, name, flag, tiny, small, count),
                (ratio, requests, counters),
                (tags, labels, payload, ids),
            )| Mixed {
                id,
                name,
                flag,
                tiny,
                small,
                count,
                ratio,
                requests,
                counters,
                tags,
                labels,
                payload,
                ids,
            },
        )
}

/// decode(encode(v)) == v, and encoding the result gives the same bytes.
fn round_trip<P: Protocol, M: Message + PartialEq + std::fmt::Debug>(v: &M) {
    let bytes = encode::<P, M>(v);
    let back: M = decode::<P, M>(bytes.clone()).expect("decodes what it encoded");
    assert_eq!(&back, v);
    assert_eq!(encode::<P, M>(&back), bytes);
}

fn all<M: Message + PartialEq + std::fmt::Debug>(v: &M) {
    round_trip::<Binary, M>(v);
    round_trip::<Compact, M>(v);
    round_trip::<Json, M>(v);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn request_round_trips(v in request()) { all(&v) }

    #[test]
    fn my_test_round_trips(v in my_test()) { all(&v) }

    #[test]
    fn ids_round_trip(v in ids()) { all(&v) }

    #[test]
    fn mixed_round_trips(v in mixed()) { all(&v) }

    #[test]
    fn echo_error_round_trips(code in any::<i32>(), message in utf8()) {
        all(&EchoError { code, message })
    }

    #[test]
    fn application_exception_round_trips(kind in any::<i32>(), message in utf8()) {
        all(&ApplicationException::new(ApplicationExceptionKind::from_id(kind), message))
    }

    #[test]
    fn message_envelopes_round_trip(name in utf8(), ty in 1u8..=4, seq_id in any::<i32>(), v in request()) {
        let ty = match ty { 1 => MessageType::Call, 2 => MessageType::Reply, 3 => MessageType::Exception, _ => MessageType::Oneway };
        let header = MessageHeader { name, ty, seq_id };
        envelope::<Binary>(&header, &v);
        envelope::<Compact>(&header, &v);
        envelope::<Json>(&header, &v);
    }

    #[test]
    fn zero_copy_threshold_changes_nodes_not_bytes(blob in vec(any::<u8>(), 0..2000), threshold in 0usize..2100) {
        let v = Ids { blob: Bytes::from(blob), ..Ids::default() };
        let mut copied = LinkBuffer::new();
        Codec::<Binary>::new().zero_copy_threshold(usize::MAX).encode(&v, &mut copied).unwrap();
        let mut linked = LinkBuffer::new();
        Codec::<Binary>::new().zero_copy_threshold(threshold).encode(&v, &mut linked).unwrap();
        let n = copied.len();
        prop_assert_eq!(copied.next(n), linked.next(n));
    }
}

fn envelope<P: Protocol>(header: &MessageHeader, body: &Request) {
    let codec = Codec::<P>::new();
    let mut buf = LinkBuffer::new();
    let n = codec.encode_message(header, body, &mut buf).unwrap();
    assert_eq!(n, buf.len());
    let mut sizer = codec.sizer();
    assert_eq!(sizer.message_begin_len(header) + body.size(&mut sizer), n);
    let (h, b): (MessageHeader, Request) = codec.decode_message(buf.next(n)).unwrap();
    assert_eq!(&h, header);
    assert_eq!(&b, body);
}

#[test]
fn decoded_strings_and_binaries_borrow_the_input_frame() {
    let v = Ids {
        blob: Bytes::from(vec![9u8; 100]),
        ..Ids::default()
    };
    let bytes = encode::<Binary, _>(&v);
    let back: Ids = decode::<Binary, _>(bytes.clone()).unwrap();
    assert!(
        bytes.as_ptr_range().contains(&back.blob.as_ptr()),
        "blob was copied"
    );
    let bytes = encode::<Compact, _>(&v);
    let back: Ids = decode::<Compact, _>(bytes.clone()).unwrap();
    assert!(
        bytes.as_ptr_range().contains(&back.blob.as_ptr()),
        "blob was copied"
    );
    let req = util::request_1k();
    let bytes = encode::<Binary, _>(&req);
    let back: Request = decode::<Binary, _>(bytes.clone()).unwrap();
    assert!(
        bytes.as_ptr_range().contains(&back.msg.as_ptr()),
        "string was copied"
    );
}

#[test]
fn large_bytes_are_inserted_as_their_own_node_without_copying() {
    let blob = Bytes::from(vec![5u8; 8192]);
    let v = Ids {
        ids32: vec![1, 2, 3],
        blob: blob.clone(),
        ..Ids::default()
    };
    for threshold in [4096, 8192] {
        let mut buf = LinkBuffer::new();
        Codec::<Binary>::new()
            .zero_copy_threshold(threshold)
            .encode(&v, &mut buf)
            .unwrap();
        // [fields before the blob, length prefix] [blob] [stop byte]
        assert_eq!(buf.node_count(), 3);
        let head = buf.len() - 8192 - 1;
        buf.skip(head);
        assert_eq!(buf.next(8192).as_ptr(), blob.as_ptr());
    }
    let mut buf = LinkBuffer::new();
    Codec::<Binary>::new()
        .zero_copy_threshold(8193)
        .encode(&v, &mut buf)
        .unwrap();
    assert_eq!(
        buf.node_count(),
        1,
        "below the threshold the blob is copied"
    );
}

#[test]
fn encoding_too_large_a_value_is_refused_before_writing() {
    let v = util::my_test(1000);
    let mut buf = LinkBuffer::new();
    let err = Codec::<Binary>::new()
        .max_size(100)
        .encode(&v, &mut buf)
        .unwrap_err();
    assert!(matches!(
        err,
        thrift_wire::EncodeError::SizeLimitExceeded { limit: 100, .. }
    ));
    assert!(buf.is_empty());
}
