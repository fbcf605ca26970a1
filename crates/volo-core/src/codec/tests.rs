use bytes::{BufMut, BytesMut};
use thrift_codec::{
    ApplicationException, ApplicationExceptionKind, Codec, MessageHeader, MessageType,
};

use super::*;

/// An exception message, as a server would send it: any struct will do.
fn message<P: thrift_codec::Protocol>(text: &str) -> Vec<u8> {
    let header = MessageHeader {
        name: "echo".into(),
        ty: MessageType::Exception,
        seq_id: 7,
    };
    let body = ApplicationException::new(ApplicationExceptionKind::InternalError, text.to_string());
    let mut buf = LinkBuffer::new();
    let n = Codec::<P>::new()
        .encode_message(&header, &body, &mut buf)
        .unwrap();
    buf.next(n).to_vec()
}

fn framed(msg: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_u32(msg.len() as u32);
    b.put_slice(msg);
    b.to_vec()
}

fn link(bytes: &[u8]) -> LinkBuffer {
    let mut b = LinkBuffer::new();
    b.write(bytes);
    b
}

#[test]
fn detect_tells_every_framing_and_protocol() {
    let binary = message::<Binary>("x");
    let compact = message::<Compact>("x");
    let cases = [
        (binary.clone(), Framing::Buffered, Protocol::Binary),
        (compact.clone(), Framing::Buffered, Protocol::Compact),
        (framed(&binary), Framing::Framed, Protocol::Binary),
        (framed(&compact), Framing::Framed, Protocol::Compact),
    ];
    for (bytes, framing, protocol) in cases {
        assert_eq!(
            detect(&bytes).unwrap(),
            Some((framing, protocol)),
            "{bytes:02x?}"
        );
        // Fewer bytes than it takes to tell: wait, never guess.
        let needed = if framing == Framing::Buffered { 2 } else { 8 };
        for cut in 0..needed {
            assert_eq!(detect(&bytes[..cut]).unwrap(), None, "{cut} bytes");
        }
    }
}

#[test]
fn detect_rejects_what_no_client_sends() {
    for garbage in [
        &b"GET / HTTP/1.1\r\n"[..],
        &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01][..],
        &[0xff, 0xff][..],
        &[0, 0, 0, 9, 0x80, 0x02, 0, 1][..],
    ] {
        assert!(
            matches!(detect(garbage), Err(FrameError::UnknownFraming(_))),
            "{garbage:02x?}"
        );
    }
}

#[test]
fn framed_lengths_are_checked_before_anything_is_buffered() {
    let limits = Limits { max_frame: 1000 };
    let mut s = FrameSplitter::new(Framing::Framed, Protocol::Binary, limits);
    assert_eq!(s.frame_len(&mut link(&[0, 0, 0])), Ok(None));
    assert_eq!(s.frame_len(&mut link(&[0, 0, 3, 0xe8])), Ok(Some(1004)));
    assert_eq!(
        s.frame_len(&mut link(&[0, 0, 3, 0xe9])),
        Err(FrameError::TooLarge {
            size: 1001,
            limit: 1000
        })
    );
    assert_eq!(
        s.frame_len(&mut link(&[0xff, 0xff, 0xff, 0xfe])),
        Err(FrameError::NegativeLength(-2))
    );
    assert_eq!(Limits::default().max_frame, 16_384_000);
}

#[test]
fn a_buffered_message_is_found_whole_however_it_arrives() {
    for (protocol, msg) in [
        (Protocol::Binary, message::<Binary>("hello, buffered")),
        (Protocol::Compact, message::<Compact>("hello, buffered")),
    ] {
        let mut stream = msg.clone();
        stream.extend_from_slice(&msg[..5]); // the next message's first bytes
        let mut s = FrameSplitter::new(Framing::Buffered, protocol, Limits::default());
        let mut input = LinkBuffer::new();
        for (i, b) in stream.iter().enumerate() {
            input.write(&[*b]);
            let got = s.frame_len(&mut input).unwrap();
            if i + 1 < msg.len() {
                assert_eq!(got, None, "{protocol:?}: {} bytes in", i + 1);
            } else {
                assert_eq!(got, Some(msg.len()), "{protocol:?}: {} bytes in", i + 1);
            }
        }
    }
}

#[test]
fn a_buffered_message_claiming_too_much_fails_before_it_arrives() {
    // A message whose string field claims 100 MB: its header and the claim are enough.
    let mut msg = message::<Binary>("");
    // After the 16-byte message header (version, name "echo", seq id) comes field 1,
    // the exception's message, a string: its length follows the field header.
    assert_eq!(msg[16..19], [0x0b, 0, 1], "field 1 is a string");
    let at = 19;
    msg[at..at + 4].copy_from_slice(&100_000_000u32.to_be_bytes());
    let mut s = FrameSplitter::new(Framing::Buffered, Protocol::Binary, Limits::default());
    let err = s.frame_len(&mut link(&msg[..at + 4])).unwrap_err();
    assert!(
        matches!(err, FrameError::TooLarge { size, .. } if size > 100_000_000),
        "{err}"
    );
}

#[test]
fn a_buffered_splitter_waits_for_a_long_value_without_looking_again() {
    let text = "z".repeat(50_000);
    let msg = message::<Binary>(&text);
    let mut s = FrameSplitter::new(Framing::Buffered, Protocol::Binary, Limits::default());
    let mut input = link(&msg[..100]);
    assert_eq!(s.frame_len(&mut input), Ok(None));
    assert!(
        s.at_least > 50_000,
        "the string's length was learnt: {}",
        s.at_least
    );
    input.write(&msg[100..]);
    assert_eq!(s.frame_len(&mut input), Ok(Some(msg.len())));
}

#[test]
fn a_malformed_buffered_message_is_an_error() {
    let mut msg = message::<Binary>("x");
    let type_at = 4 + 4 + 4 + 4; // version word, name length + "echo", seq id
    msg[type_at] = 0xEE; // not a type id
    let mut s = FrameSplitter::new(Framing::Buffered, Protocol::Binary, Limits::default());
    assert!(matches!(
        s.frame_len(&mut link(&msg)),
        Err(FrameError::Message(_))
    ));
}

// ------------------------------------------------------------------ TTHeader

mod ttheader_golden {
    use bytes::Bytes;
    use thrift_codec::Utf8Bytes;

    use crate::codec::Protocol;
    use crate::codec::ttheader::{Header, HeaderError, HeaderLimits, int_key};

    /// Hex with spaces and `|` as separators, for vectors laid out field by field.
    fn hex(s: &str) -> Vec<u8> {
        let digits: String = s.chars().filter(char::is_ascii_hexdigit).collect();
        assert_eq!(digits.len() % 2, 0, "odd hex digits in {s:?}");
        (0..digits.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
            .collect()
    }

    fn s(v: &'static str) -> Utf8Bytes {
        Utf8Bytes::from(v)
    }

    /// A Binary call `ping`, sequence id 1, empty arguments (17 bytes).
    const PING_CALL: &str = "80 01 00 01 | 00 00 00 04 70 69 6e 67 | 00 00 00 01 | 00";

    struct Golden {
        name: &'static str,
        frame: Vec<u8>,
        header: Header,
        payload: Vec<u8>,
    }

    /// Vectors written by hand from the published layout (see the module docs of
    /// `ttheader`), each field on its own: they do not come from this crate's encoder.
    fn goldens() -> Vec<Golden> {
        let ping = hex(PING_CALL);
        let mut one_int = Header::new(1, Protocol::Binary);
        one_int.int_kv.push((int_key::TO_METHOD, s("ping")));

        let mut everything = Header::new(0x0102_0304, Protocol::Compact);
        everything.acl_token = Some(s("tok"));
        everything.str_kv = vec![
            (s("RPC_PERSIST_logid"), s("42")),
            (s("RPC_TRANSIT_tag"), s("blue")),
        ];
        everything.int_kv = vec![
            (int_key::TO_SERVICE, s("echo")),
            (int_key::RPC_TIMEOUT, s("500")),
        ];
        // Compact call `echo`, sequence id 0x01020304 (varint 84 86 88 08), no fields.
        let compact_call = hex("82 21 | 84 86 88 08 | 04 65 63 68 6f | 00");

        let mut inner = Header::new(1, Protocol::Binary);
        inner.inner_framed = true;

        let mut reply = Header::new(1, Protocol::Binary);
        reply.flags = 0x0001;
        reply.int_kv.push((int_key::MSG_TYPE, s("2")));
        let ping_reply = hex("80 01 00 02 | 00 00 00 04 70 69 6e 67 | 00 00 00 01 | 00");

        vec![
            Golden {
                name: "one integer pair, three bytes of padding",
                frame: hex(&format!(
                    "00 00 00 2b | 10 00 | 00 00 | 00 00 00 01 | 00 04 \
                     | 00 | 00 | 10 00 01 00 09 00 04 70 69 6e 67 | 00 00 00 | {PING_CALL}"
                )),
                header: one_int,
                payload: ping.clone(),
            },
            Golden {
                name: "ACL token, string pairs, integer pairs, one byte of padding",
                frame: hex("00 00 00 62 | 10 00 | 00 00 | 01 02 03 04 | 00 13 \
                     | 02 | 00 \
                     | 11 00 03 74 6f 6b \
                     | 01 00 02 \
                     |   00 11 52 50 43 5f 50 45 52 53 49 53 54 5f 6c 6f 67 69 64 00 02 34 32 \
                     |   00 0f 52 50 43 5f 54 52 41 4e 53 49 54 5f 74 61 67 00 04 62 6c 75 65 \
                     | 10 00 02 \
                     |   00 06 00 04 65 63 68 6f \
                     |   00 0c 00 03 35 30 30 \
                     | 00 \
                     | 82 21 84 86 88 08 04 65 63 68 6f 00"),
                header: everything,
                payload: compact_call,
            },
            Golden {
                name: "a Framed payload inside (TTHeaderFramed), no info",
                frame: hex(&format!(
                    "00 00 00 23 | 10 00 | 00 00 | 00 00 00 01 | 00 01 | 00 00 00 00 \
                     | 00 00 00 11 | {PING_CALL}"
                )),
                header: inner,
                payload: ping,
            },
            Golden {
                name: "flags kept, message type as an integer pair",
                frame: hex("00 00 00 27 | 10 00 | 00 01 | 00 00 00 01 | 00 03 \
                     | 00 00 | 10 00 01 00 16 00 01 32 | 00 00 \
                     | 80 01 00 02 00 00 00 04 70 69 6e 67 00 00 00 01 00"),
                header: reply,
                payload: ping_reply,
            },
        ]
    }

    #[test]
    fn golden_frames_decode_and_encode_back_byte_for_byte() {
        for g in goldens() {
            let frame = Bytes::from(g.frame.clone());
            let (header, payload) = Header::decode(&frame, &HeaderLimits::default())
                .unwrap_or_else(|e| panic!("{}: {e}", g.name));
            assert_eq!(header, g.header, "{}", g.name);
            assert_eq!(&payload[..], &g.payload[..], "{}", g.name);
            assert_eq!(
                header.prefix_len() + payload.len(),
                frame.len(),
                "{}",
                g.name
            );
            let mut out = Vec::new();
            header.write(payload.len(), &mut out).unwrap();
            out.extend_from_slice(&payload);
            assert_eq!(out, g.frame, "{}: re-encoded", g.name);
        }
    }

    #[test]
    fn padding_between_blocks_is_skipped() {
        // Padding bytes may sit anywhere among the blocks; the payload starts where
        // HEADER SIZE says.
        let frame = hex(&format!(
            "00 00 00 2b | 10 00 | 00 00 | 00 00 00 01 | 00 04 \
             | 00 00 | 00 00 | 10 00 01 00 09 00 04 70 69 6e 67 | 00 | {PING_CALL}"
        ));
        let (header, payload) =
            Header::decode(&Bytes::from(frame), &HeaderLimits::default()).unwrap();
        assert_eq!(header.int_value(int_key::TO_METHOD), Some("ping"));
        assert_eq!(&payload[..], &hex(PING_CALL)[..]);
    }

    /// The first golden frame with `f` applied (the LENGTH field follows the size).
    fn mutated(f: impl FnOnce(&mut Vec<u8>)) -> Result<(Header, Bytes), HeaderError> {
        let mut frame = goldens().remove(0).frame;
        f(&mut frame);
        let len = (frame.len() - 4) as u32;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        Header::decode(&Bytes::from(frame), &HeaderLimits::default())
    }

    #[test]
    fn malformed_headers_are_typed_errors() {
        assert_eq!(
            mutated(|f| f[4] = 0x0f).unwrap_err(),
            HeaderError::BadMagic(0x0f00)
        );
        assert_eq!(
            mutated(|f| f[14] = 3).unwrap_err(),
            HeaderError::UnknownProtocol(3)
        );
        assert_eq!(
            mutated(|f| {
                f[15] = 1;
                f[16] = 0x01; // zlib
            })
            .unwrap_err(),
            HeaderError::UnsupportedTransform(1)
        );
        assert_eq!(
            mutated(|f| f[16] = 0x7f).unwrap_err(),
            HeaderError::UnknownInfo(0x7f)
        );
        assert_eq!(
            mutated(|f| f[12..14].copy_from_slice(&[0, 0])).unwrap_err(),
            HeaderError::TooSmall(0)
        );
        assert!(matches!(
            mutated(|f| f[12..14].copy_from_slice(&[0, 0x40])).unwrap_err(),
            HeaderError::Truncated { what: "header", .. }
        ));
        // The value "ping" becomes invalid UTF-8.
        assert_eq!(
            mutated(|f| f[23] = 0xff).unwrap_err(),
            HeaderError::InvalidUtf8("integer-key value")
        );
        // A count of 0x7fff pairs in a 16-byte header.
        assert!(matches!(
            mutated(|f| f[17..19].copy_from_slice(&[0x7f, 0xff])).unwrap_err(),
            HeaderError::Truncated { .. }
        ));
        // A value length that runs past the header into the payload.
        assert!(matches!(
            mutated(|f| f[21..23].copy_from_slice(&[0, 0x20])).unwrap_err(),
            HeaderError::Truncated { .. }
        ));
    }

    #[test]
    fn lengths_and_limits_are_enforced() {
        let frame = Bytes::from(goldens().remove(0).frame);
        let short = frame.slice(..frame.len() - 1);
        assert!(matches!(
            Header::decode(&short, &HeaderLimits::default()),
            Err(HeaderError::LengthMismatch { .. })
        ));
        for cut in 0..14 {
            let mut f = frame[..cut].to_vec();
            if cut >= 4 {
                f[..4].copy_from_slice(&((cut - 4) as u32).to_be_bytes());
            }
            assert!(
                Header::decode(&Bytes::from(f), &HeaderLimits::default()).is_err(),
                "{cut} bytes"
            );
        }
        let tight = HeaderLimits { max_header: 12 };
        assert_eq!(
            Header::decode(&frame, &tight).unwrap_err(),
            HeaderError::TooLarge {
                size: 16,
                limit: 12
            }
        );
        let mut big = Header::new(1, Protocol::Binary);
        big.str_kv
            .push((s("k"), Utf8Bytes::from("v".repeat(70_000))));
        assert!(matches!(
            big.write(0, &mut Vec::new()),
            Err(HeaderError::TooLong {
                what: "string value",
                ..
            })
        ));
    }

    proptest::proptest! {
        /// Any bytes: an error or a header, never a panic; what decodes encodes back to
        /// a frame that decodes to the same header and payload.
        #[test]
        fn arbitrary_frames_never_panic(tail in proptest::collection::vec(proptest::num::u8::ANY, 0..120),
                                        hs in 0u16..40, flip in 0usize..200, to in proptest::num::u8::ANY) {
            let mut frame = hex("00 00 00 00 10 00 00 00 00 00 00 07");
            frame.extend_from_slice(&hs.to_be_bytes());
            frame.extend_from_slice(&tail);
            let n = frame.len();
            if flip < n { frame[flip] = to; }
            frame[..4].copy_from_slice(&((n - 4) as u32).to_be_bytes());
            if let Ok((h, payload)) = Header::decode(&Bytes::from(frame), &HeaderLimits::default()) {
                let mut out = Vec::new();
                h.write(payload.len(), &mut out).unwrap();
                out.extend_from_slice(&payload);
                let (again, p2) = Header::decode(&Bytes::from(out), &HeaderLimits::default()).unwrap();
                proptest::prop_assert_eq!(again, h);
                proptest::prop_assert_eq!(p2, payload);
            }
        }
    }
}
