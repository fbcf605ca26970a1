use thrift_wire::{
    ApplicationException, ApplicationExceptionKind, Codec, Json, MessageHeader, MessageType,
};

use super::*;
use crate::test_support::{framed, hex};

/// An exception message, as a server would send it: any struct will do.
fn message<P: thrift_wire::Protocol>(text: &str) -> Vec<u8> {
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

/// A Binary call `ping`, sequence id 1, empty arguments (17 bytes).
const PING_CALL: &str = "80 01 00 01 | 00 00 00 04 70 69 6e 67 | 00 00 00 01 | 00";

/// Sets a header frame's LENGTH (its first 4 bytes) to the bytes after it.
fn set_length(frame: &mut [u8]) {
    let len = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&len.to_be_bytes());
}

/// `frame` cut at every length inside its 14-byte fixed part, LENGTH following the cut
/// where it is whole.
fn cut_in_fixed_part(frame: &[u8]) -> impl Iterator<Item = Vec<u8>> + '_ {
    (0..14).map(|cut| {
        let mut f = frame[..cut].to_vec();
        if cut >= 4 {
            set_length(&mut f);
        }
        f
    })
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
    let json = message::<Json>("x");
    assert_eq!(json[0], b'[', "{:?}", String::from_utf8_lossy(&json));
    let cases = [
        (binary.clone(), Framing::Buffered, Protocol::Binary),
        (compact.clone(), Framing::Buffered, Protocol::Compact),
        (json.clone(), Framing::Buffered, Protocol::Json),
        (framed(&binary), Framing::Framed, Protocol::Binary),
        (framed(&compact), Framing::Framed, Protocol::Compact),
        (framed(&json), Framing::Framed, Protocol::Json),
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
    // Brackets and escaped quotes inside a string do not end a JSON message.
    let text = r#"hello, buffered ]} "[ \"#;
    for (protocol, msg) in [
        (Protocol::Binary, message::<Binary>(text)),
        (Protocol::Compact, message::<Compact>(text)),
        (Protocol::Json, message::<Json>(text)),
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

// ------------------------------------------------------------------ JSON

/// A buffered JSON message's end is found by matching brackets: the scanner goes on
/// from where the last look stopped instead of reading the message again from its
/// start. Shown by changing a byte it has already passed, so that a scan from the
/// start would reject the message: the next look still finds its end.
#[test]
fn a_buffered_json_splitter_goes_on_where_it_stopped() {
    let msg = message::<Json>("resumed");
    let splitter = || FrameSplitter::new(Framing::Buffered, Protocol::Json, Limits::default());
    let mut s = splitter();
    assert_eq!(s.frame_len(&mut link(&msg[..msg.len() / 2])), Ok(None));
    let mut changed = msg.clone();
    changed[0] = b' '; // the opening `[` gone
    assert!(matches!(
        splitter().frame_len(&mut link(&changed)),
        Err(FrameError::Message(_))
    ));
    assert_eq!(s.frame_len(&mut link(&changed)), Ok(Some(msg.len())));
    // After a whole message it starts over, from the start of the next.
    assert_eq!(s.frame_len(&mut link(&msg)), Ok(Some(msg.len())));
}

/// A buffered JSON message that never closes its bracket fails once it is longer than
/// the frame limit, however it arrives: it is never buffered beyond that.
#[test]
fn an_unclosed_buffered_json_message_fails_at_the_frame_limit() {
    let limits = Limits { max_frame: 1000 };
    let mut s = FrameSplitter::new(Framing::Buffered, Protocol::Json, limits);
    let mut input = LinkBuffer::new();
    input.write(br#"[1,"echo",1,0,{"1":{"str":""#);
    let err = loop {
        match s.frame_len(&mut input) {
            Ok(None) => {
                assert!(input.len() <= 1000, "{} bytes buffered", input.len());
                input.write(b"]}x"); // inside the string: closes nothing
            }
            other => break other.unwrap_err(),
        }
    };
    assert_eq!(
        err,
        FrameError::TooLarge {
            size: 1001,
            limit: 1000
        }
    );
    // Whole at exactly the limit is fine.
    let msg = message::<Json>(&"y".repeat(1000 - message::<Json>("").len()));
    assert_eq!(msg.len(), 1000);
    let mut s = FrameSplitter::new(Framing::Buffered, Protocol::Json, limits);
    assert_eq!(s.frame_len(&mut link(&msg)), Ok(Some(1000)));
}

/// Brackets nested deeper than any message within the decoder's depth limit, and
/// input that is not a JSON message, are errors of the message, not a wait for more.
#[test]
fn deep_or_malformed_buffered_json_is_an_error() {
    let deep = "[".repeat(500);
    let mut s = FrameSplitter::new(Framing::Buffered, Protocol::Json, Limits::default());
    let err = s.frame_len(&mut link(deep.as_bytes())).unwrap_err();
    assert!(
        matches!(&err, FrameError::Message(e)
            if matches!(e.kind(), DecodeErrorKind::DepthLimitExceeded(_))),
        "{err}"
    );
    for bad in [&br#"[1,"echo",1,0,{]"#[..], b"[1]x"] {
        let mut s = FrameSplitter::new(Framing::Buffered, Protocol::Json, Limits::default());
        let got = s.frame_len(&mut link(bad));
        if bad.ends_with(b"x") {
            // `[1]` is a whole array (the decoder will refuse it); `x` begins the next
            // message, which is where the error is found.
            assert_eq!(got, Ok(Some(3)));
            let mut rest = link(b"x");
            assert!(matches!(
                s.frame_len(&mut rest),
                Err(FrameError::Message(_))
            ));
        } else {
            assert!(matches!(got, Err(FrameError::Message(_))), "{got:?}");
        }
    }
}

/// JSON in the header transports: Apache's THeader numbers it 1 (detected, and
/// written), Kitex's TTHeader has no id for it (refused when read and when written).
#[test]
fn json_travels_in_theader_but_not_in_ttheader() {
    let frame_of = |h: &theader::Header| {
        let (mut msg, mut out) = (LinkBuffer::new(), LinkBuffer::new());
        msg.write(&message::<Json>("in THeader"));
        h.write_frame(msg, &mut out, DEFAULT_MAX_FRAME)
            .unwrap()
            .unwrap();
        out.next(out.len())
    };
    let mut h = theader::Header::new(3, Protocol::Json);
    let frame = frame_of(&h);
    assert_eq!(frame[14], 1, "THeader's protocol id for JSON");
    assert_eq!(
        detect(&frame).unwrap(),
        Some((Framing::THeader, Protocol::Json))
    );
    let (back, payload) =
        theader::Header::decode(&frame, &ttheader::HeaderLimits::default()).unwrap();
    assert_eq!(back.protocol, Protocol::Json);
    assert_eq!(&payload[..], &message::<Json>("in THeader")[..]);
    // Inside a Framed length too (THeader over `TFramedTransport`).
    h.framed = true;
    let framed_frame = frame_of(&h);
    assert_eq!(
        detect(&framed_frame[..DETECT_LEN]).unwrap(),
        Some((Framing::THeader, Protocol::Json))
    );

    let tt = ttheader::Header::new(1, Protocol::Json);
    let nothing = || ttheader::HeaderError::NoProtocolId(Protocol::Json);
    assert_eq!(tt.check(), Err(nothing()));
    let mut written = Vec::new();
    assert_eq!(tt.write(0, &mut written), Err(nothing()));
    assert!(written.is_empty(), "nothing is written");
    // A TTHeader frame declaring id 1 is refused, at detection and when decoded.
    let mut frame = Vec::new();
    ttheader::Header::new(1, Protocol::Binary)
        .write(0, &mut frame)
        .unwrap();
    frame[14] = 1;
    assert_eq!(
        detect(&frame),
        Err(FrameError::TTHeader(
            ttheader::HeaderError::UnknownProtocol(1)
        ))
    );
    assert_eq!(
        ttheader::Header::decode(&Bytes::from(frame), &ttheader::HeaderLimits::default())
            .unwrap_err(),
        ttheader::HeaderError::UnknownProtocol(1)
    );
}

// ------------------------------------------------------------------ TTHeader

mod ttheader_golden {
    use bytes::Bytes;
    use thrift_wire::Utf8Bytes;

    use super::{PING_CALL, cut_in_fixed_part, hex, set_length};

    use crate::codec::Protocol;
    use crate::codec::ttheader::{Header, HeaderError, HeaderLimits, int_key};

    fn s(v: &'static str) -> Utf8Bytes {
        Utf8Bytes::from(v)
    }

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
        ]
        .into();
        everything.int_kv = vec![
            (int_key::TO_SERVICE, s("echo")),
            (int_key::RPC_TIMEOUT, s("500")),
        ]
        .into();
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

    /// One header decoded into again and again, in every order of the goldens, ends as
    /// each frame's own: nothing of the frame before stays.
    #[test]
    fn decoding_into_a_used_header_leaves_nothing_of_the_last_frame() {
        let goldens = goldens();
        let mut reused = Header::new(99, Protocol::Compact);
        for before in &goldens {
            for g in &goldens {
                let first = Bytes::from(before.frame.clone());
                reused
                    .decode_into(&first, &HeaderLimits::default())
                    .unwrap();
                let frame = Bytes::from(g.frame.clone());
                let payload = reused
                    .decode_into(&frame, &HeaderLimits::default())
                    .unwrap();
                assert_eq!(reused, g.header, "{} after {}", g.name, before.name);
                assert_eq!(&payload[..], &g.payload[..], "{}", g.name);
            }
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
        set_length(&mut frame);
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
        for f in cut_in_fixed_part(&frame) {
            let n = f.len();
            let decoded = Header::decode(&Bytes::from(f), &HeaderLimits::default());
            assert!(decoded.is_err(), "{n} bytes");
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
            set_length(&mut frame);
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

// ------------------------------------------------------------------ THeader

mod theader_golden {
    use bytes::Bytes;
    use thrift_wire::{LinkBuffer, Utf8Bytes};

    use super::{PING_CALL, cut_in_fixed_part, hex, set_length};
    use crate::codec::theader::{Header, HeaderError, HeaderLimits, transform};
    use crate::codec::{FrameError, Framing, Protocol, detect};

    fn s(v: &'static str) -> Utf8Bytes {
        Utf8Bytes::from(v)
    }

    /// A Compact call `echo`, sequence id 0x01020304, no fields (12 bytes).
    const COMPACT_CALL: &str = "82 21 | 84 86 88 08 | 04 65 63 68 6f | 00";

    struct Golden {
        name: &'static str,
        frame: Vec<u8>,
        header: Header,
        payload: Vec<u8>,
    }

    /// Vectors written by hand from Apache's `HeaderFormat.md`, field by field; Apache's
    /// Python `THeaderTransport` writes the same bytes for the same header and payload.
    fn goldens() -> Vec<Golden> {
        let plain = Header::new(1, Protocol::Binary);
        let mut kv = Header::new(0x0102_0304, Protocol::Compact);
        kv.flags = 0x0001;
        kv.info = vec![(s("client"), s("py")), (s("RPC_PERSIST_logid"), s("42"))];
        let mut framed = Header::new(1, Protocol::Binary);
        framed.framed = true;
        vec![
            Golden {
                name: "Binary, no transform, no info, two bytes of padding",
                frame: hex(&format!(
                    "00 00 00 1f | 0f ff | 00 00 | 00 00 00 01 | 00 01 \
                     | 00 | 00 | 00 00 | {PING_CALL}"
                )),
                header: plain,
                payload: hex(PING_CALL),
            },
            Golden {
                name: "Compact, flags, two key-value pairs, one byte of padding",
                frame: hex(&format!(
                    "00 00 00 3a | 0f ff | 00 01 | 01 02 03 04 | 00 09 \
                     | 02 | 00 | 01 02 \
                     |   06 63 6c 69 65 6e 74 02 70 79 \
                     |   11 52 50 43 5f 50 45 52 53 49 53 54 5f 6c 6f 67 69 64 02 34 32 \
                     | 00 | {COMPACT_CALL}"
                )),
                header: kv,
                payload: hex(COMPACT_CALL),
            },
            Golden {
                name: "inside a Framed length (THeader over TFramedTransport)",
                frame: hex(&format!(
                    "00 00 00 23 | 00 00 00 1f | 0f ff | 00 00 | 00 00 00 01 | 00 01 \
                     | 00 | 00 | 00 00 | {PING_CALL}"
                )),
                header: framed,
                payload: hex(PING_CALL),
            },
        ]
    }

    fn decode(frame: &[u8]) -> Result<(Header, Bytes), HeaderError> {
        Header::decode(&Bytes::copy_from_slice(frame), &HeaderLimits::default())
    }

    fn encode(
        h: &Header,
        message: &[u8],
        max: usize,
    ) -> Result<Result<Vec<u8>, usize>, HeaderError> {
        let mut m = LinkBuffer::new();
        m.write(message);
        let mut out = LinkBuffer::new();
        Ok(h.write_frame(m, &mut out, max)?.map(|()| {
            let n = out.len();
            out.next(n).to_vec()
        }))
    }

    fn frame_bytes(h: &Header, message: &[u8]) -> Vec<u8> {
        encode(h, message, usize::MAX).unwrap().unwrap()
    }

    #[test]
    fn golden_frames_decode_and_encode_back_byte_for_byte() {
        for g in goldens() {
            let (header, payload) = decode(&g.frame).unwrap_or_else(|e| panic!("{}: {e}", g.name));
            assert_eq!(header, g.header, "{}", g.name);
            assert_eq!(&payload[..], &g.payload[..], "{}", g.name);
            assert_eq!(
                header.untransform(payload, 1000).unwrap(),
                g.payload,
                "{}",
                g.name
            );
            let out = encode(&header, &g.payload, 1000).unwrap().unwrap();
            assert_eq!(out, g.frame, "{}: re-encoded", g.name);
            let head = &g.frame[..g.frame.len().min(crate::codec::DETECT_LEN)];
            assert_eq!(
                detect(head).unwrap(),
                Some((Framing::THeader, g.header.protocol)),
                "{}: detected",
                g.name
            );
        }
    }

    /// A zlib frame as Apache's Python library writes it (`zlib.compress` of the call):
    /// the transform id in the header, the payload a zlib stream.
    #[test]
    fn a_zlib_frame_from_apache_inflates_and_ours_round_trips() {
        let frame = hex(
            "00 00 00 25 | 0f ff | 00 00 | 00 00 00 01 | 00 01 | 00 | 01 01 | 00 \
             | 78 9c 6b 60 64 60 64 60 60 60 29 c8 cc 4b 07 d2 8c 0c 00 15 7d 02 36",
        );
        let (header, raw) = decode(&frame).unwrap();
        assert_eq!(header.transforms, vec![transform::ZLIB]);
        assert_eq!(header.untransform(raw, 1000).unwrap(), hex(PING_CALL));

        // Ours: the same header, a zlib stream of our own that inflates to the call.
        let ours = frame_bytes(&header, &hex(PING_CALL));
        assert_eq!(ours[4..18], frame[4..18], "fixed part and header");
        let (again, raw) = decode(&ours).unwrap();
        assert_eq!(again, header);
        assert_eq!(again.untransform(raw, 1000).unwrap(), hex(PING_CALL));

        // A large, compressible message: much smaller on the wire, the same inflated.
        let big: Vec<u8> = (0..100_000u32).map(|i| (i % 7) as u8).collect();
        let wire = frame_bytes(&header, &big);
        assert!(wire.len() < big.len() / 10, "{} bytes", wire.len());
        let (h, raw) = decode(&wire).unwrap();
        assert_eq!(h.untransform(raw, 1 << 20).unwrap(), big);
    }

    #[test]
    fn padding_and_unknown_info_ids_end_the_info_headers() {
        // C++ pads with four bytes when the header is already a multiple of 4.
        let padded = hex(&format!(
            "00 00 00 23 | 0f ff | 00 00 | 00 00 00 01 | 00 02 | 00 00 00 00 00 00 00 00 | {PING_CALL}"
        ));
        let (h, payload) = decode(&padded).unwrap();
        assert_eq!((h.info.len(), &payload[..]), (0, &hex(PING_CALL)[..]));
        // An info id defined after key-values (2, Facebook's persistent headers): the
        // pair before it is read, everything after it is skipped to the payload.
        let unknown = hex(&format!(
            "00 00 00 27 | 0f ff | 00 00 | 00 00 00 01 | 00 03 \
             | 00 00 | 01 01 01 6b 01 76 | 02 01 ff ff | {PING_CALL}"
        ));
        let (h, payload) = decode(&unknown).unwrap();
        assert_eq!(h.info, vec![(s("k"), s("v"))]);
        assert_eq!(h.info_value("k"), Some("v"));
        assert_eq!(&payload[..], &hex(PING_CALL)[..]);
    }

    /// The second golden frame (with info) with `f` applied (the LENGTH field follows
    /// the size).
    fn mutated(f: impl FnOnce(&mut Vec<u8>)) -> Result<(Header, Bytes), HeaderError> {
        let mut frame = goldens().remove(1).frame;
        f(&mut frame);
        set_length(&mut frame);
        decode(&frame)
    }

    #[test]
    fn malformed_headers_are_typed_errors() {
        assert_eq!(
            mutated(|f| f[5] = 0xfe).unwrap_err(),
            HeaderError::BadMagic(0x0ffe)
        );
        // Ids no one defines (JSON's 1 is spoken).
        assert_eq!(
            mutated(|f| f[14] = 3).unwrap_err(),
            HeaderError::UnknownProtocol(3)
        );
        assert_eq!(
            mutated(|f| f[14] = 0x7f).unwrap_err(),
            HeaderError::UnknownProtocol(0x7f)
        );
        assert_eq!(
            mutated(|f| f[15] = 3).unwrap_err(),
            HeaderError::TooManyTransforms(3)
        );
        // A varint of six bytes, and one beyond 32 bits, as the info count.
        assert_eq!(
            mutated(|f| f[17..23].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]))
                .unwrap_err(),
            HeaderError::BadVarint("info count")
        );
        assert_eq!(
            mutated(|f| f[17..22].copy_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x10])).unwrap_err(),
            HeaderError::BadVarint("info count")
        );
        // A count of 2^21 pairs in a 36-byte header: stops where the header does.
        assert!(matches!(
            mutated(|f| f[17..21].copy_from_slice(&[0x80, 0x80, 0x80, 0x01])).unwrap_err(),
            HeaderError::Truncated { .. }
        ));
        // A key length that runs past the header into the payload.
        assert!(matches!(
            mutated(|f| f[18] = 0x30).unwrap_err(),
            HeaderError::Truncated {
                what: "info key",
                ..
            }
        ));
        // "client" becomes invalid UTF-8.
        assert_eq!(
            mutated(|f| f[19] = 0xff).unwrap_err(),
            HeaderError::InvalidUtf8("info key")
        );
        assert_eq!(
            mutated(|f| f[12..14].copy_from_slice(&[0, 0])).unwrap_err(),
            HeaderError::TooSmall(0)
        );
        assert!(matches!(
            mutated(|f| f[12..14].copy_from_slice(&[0, 0x40])).unwrap_err(),
            HeaderError::Truncated { what: "header", .. }
        ));
        // A protocol id of more than five bytes.
        assert!(matches!(
            mutated(|f| f[14..19].copy_from_slice(&[0x80; 5])).unwrap_err(),
            HeaderError::BadVarint("protocol id")
        ));
    }

    #[test]
    fn lengths_and_limits_are_enforced() {
        let frame = goldens().remove(1).frame;
        assert!(matches!(
            decode(&frame[..frame.len() - 1]),
            Err(HeaderError::LengthMismatch { .. })
        ));
        for f in cut_in_fixed_part(&frame) {
            assert!(decode(&f).is_err(), "{} bytes", f.len());
        }
        let tight = HeaderLimits { max_header: 32 };
        assert_eq!(
            Header::decode(&Bytes::from(frame.clone()), &tight).unwrap_err(),
            HeaderError::TooLarge {
                size: 36,
                limit: 32
            }
        );
        // A framed frame whose outer length is off by one is not taken as framed.
        let mut framed = goldens().remove(2).frame;
        framed[3] += 1;
        assert_eq!(
            decode(&framed).unwrap_err(),
            HeaderError::LengthMismatch {
                claimed: 0x24,
                actual: 0x23
            }
        );

        // Writing: above the frame limit nothing is written; transforms other than zlib,
        // or too many, are refused.
        let h = Header::new(1, Protocol::Binary);
        let ping = hex(PING_CALL);
        assert_eq!(encode(&h, &ping, 31).unwrap(), Ok(frame_bytes(&h, &ping)));
        assert_eq!(encode(&h, &ping, 30).unwrap(), Err(31));
        let mut snappy = h.clone();
        snappy.transforms.push(transform::SNAPPY);
        assert_eq!(
            encode(&snappy, &ping, 1000).unwrap_err(),
            HeaderError::UnsupportedTransform(3)
        );
        let mut three = h;
        three.transforms = vec![transform::ZLIB; 3];
        assert_eq!(
            encode(&three, &ping, 1000).unwrap_err(),
            HeaderError::TooManyTransforms(3)
        );
    }

    /// A zlib frame's header with `payload` as its (compressed) payload.
    fn zlib_frame(payload: &[u8]) -> Vec<u8> {
        let mut f = hex("00 00 00 00 | 0f ff | 00 00 | 00 00 00 01 | 00 01 | 00 01 01 00");
        f.extend_from_slice(payload);
        set_length(&mut f);
        f
    }

    fn zlib(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(data).unwrap();
        z.finish().unwrap()
    }

    fn inflate(payload: &[u8], max: usize) -> Result<Bytes, HeaderError> {
        let (h, raw) = decode(&zlib_frame(payload))?;
        h.untransform(raw, max)
    }

    #[test]
    fn zlib_is_bounded_by_the_frame_limit() {
        // 64 MiB of zeros deflate to about 64 KiB: refused at the default frame limit,
        // once that many bytes are out.
        let bomb = zlib(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 100_000, "{} bytes", bomb.len());
        assert_eq!(
            inflate(&bomb, crate::codec::DEFAULT_MAX_FRAME).unwrap_err(),
            HeaderError::InflatesBeyond(crate::codec::DEFAULT_MAX_FRAME)
        );
        // Exactly at the limit is fine; one byte more is not.
        let data = vec![7u8; 1000];
        assert_eq!(inflate(&zlib(&data), 1000).unwrap(), data);
        assert_eq!(
            inflate(&zlib(&data), 999).unwrap_err(),
            HeaderError::InflatesBeyond(999)
        );
        // Nested zlib (the two transforms allowed) is bounded at each step.
        let mut h = Header::new(1, Protocol::Binary);
        h.transforms = vec![transform::ZLIB, transform::ZLIB];
        let wire = frame_bytes(&h, &vec![0u8; 5000]);
        let (h, raw) = decode(&wire).unwrap();
        assert_eq!(h.untransform(raw.clone(), 5000).unwrap().len(), 5000);
        assert_eq!(
            h.untransform(raw, 4999).unwrap_err(),
            HeaderError::InflatesBeyond(4999)
        );
    }

    #[test]
    fn broken_zlib_streams_are_typed_errors() {
        let good = zlib(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert!(inflate(&good, 100).is_ok());
        // A wrong checksum (the Adler-32 at the end).
        let mut bad_sum = good.clone();
        *bad_sum.last_mut().unwrap() ^= 1;
        assert!(matches!(inflate(&bad_sum, 100), Err(HeaderError::Zlib(_))));
        // Cut short, at every length.
        for cut in 0..good.len() {
            assert!(
                matches!(inflate(&good[..cut], 100), Err(HeaderError::Zlib(_))),
                "{cut} bytes"
            );
        }
        // Not zlib at all, and bytes after the stream.
        assert!(matches!(
            inflate(b"not zlib", 100),
            Err(HeaderError::Zlib(_))
        ));
        let mut trailing = good;
        trailing.extend_from_slice(b"xyz");
        assert_eq!(
            inflate(&trailing, 100).unwrap_err(),
            HeaderError::TrailingBytes(3)
        );
        // An unknown transform is read (a server answers it), but not undone.
        let mut f = zlib_frame(&[]);
        f[16] = 0x03;
        let (h, raw) = decode(&f).unwrap();
        assert_eq!(h.unsupported_transform(), Some(3));
        assert_eq!(
            h.untransform(raw, 100).unwrap_err(),
            HeaderError::UnsupportedTransform(3)
        );
    }

    #[test]
    fn detect_tells_theader_bare_and_framed_and_waits_for_its_protocol() {
        for g in goldens() {
            let id_at = if g.header.framed { 18 } else { 14 };
            for cut in 0..=id_at {
                assert_eq!(
                    detect(&g.frame[..cut]).unwrap(),
                    None,
                    "{}: {cut} bytes",
                    g.name
                );
            }
            assert_eq!(
                detect(&g.frame[..id_at + 1]).unwrap(),
                Some((Framing::THeader, g.header.protocol)),
                "{}",
                g.name
            );
        }
        // A protocol id this crate does not speak fails at once.
        let mut unknown = goldens().remove(0).frame;
        unknown[14] = 3;
        assert!(matches!(
            detect(&unknown[..16]),
            Err(FrameError::THeader(HeaderError::UnknownProtocol(3)))
        ));
        // A length inside a length that is not 4 less: no framed THeader.
        assert!(matches!(
            detect(&hex("00 00 00 23 | 00 00 00 1e | 0f ff")),
            Err(FrameError::UnknownFraming(_))
        ));
    }

    /// Every golden frame, and a zlib one with info: the bases the property test
    /// mutates.
    fn bases() -> Vec<Vec<u8>> {
        let mut all: Vec<Vec<u8>> = goldens().into_iter().map(|g| g.frame).collect();
        let mut h = Header::new(9, Protocol::Binary);
        h.transforms.push(transform::ZLIB);
        h.info.push((s("k"), s("v")));
        all.push(frame_bytes(&h, &hex(PING_CALL)));
        all
    }

    proptest::proptest! {
        /// A valid frame with bytes changed, cut or added: an error or a header, never a
        /// panic; what decodes (and inflates) encodes back to a frame that decodes to
        /// the same header and payload.
        #[test]
        fn mutated_frames_never_panic(base in 0usize..4,
                                      flips in proptest::collection::vec((0usize..80, proptest::num::u8::ANY), 0..4),
                                      cut in 0usize..8,
                                      extra in proptest::collection::vec(proptest::num::u8::ANY, 0..8)) {
            let mut frame = bases().swap_remove(base);
            for (at, to) in flips {
                if at < frame.len() { frame[at] = to; }
            }
            frame.truncate(frame.len().saturating_sub(cut));
            frame.extend_from_slice(&extra);
            if frame.len() >= 4 {
                set_length(&mut frame);
            }
            let Ok((h, raw)) = decode(&frame) else {
                return Ok(());
            };
            let Ok(payload) = h.untransform(raw, 1 << 16) else {
                return Ok(());
            };
            let out = frame_bytes(&h, &payload);
            let (again, raw2) = decode(&out).unwrap();
            proptest::prop_assert_eq!(&again, &h);
            proptest::prop_assert_eq!(again.untransform(raw2, 1 << 16).unwrap(), payload);
        }
    }
}
