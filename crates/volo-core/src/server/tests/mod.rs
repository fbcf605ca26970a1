//! The server end to end over real sockets, with a hand-written dispatcher (generated
//! ones are tested where codegen's output is compiled) and a blocking std client that
//! writes exactly the bytes each case needs.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use thrift_wire::{
    ApplicationException, ApplicationExceptionKind, Binary, Codec, Compact, Decoder, Json,
    LinkBuffer, Message, MessageHeader, MessageType, Utf8Bytes,
};

use super::conn_core::{DRAIN_LINGER, Expired};
use super::harness::{Closed, Harness, SharedTest};
use super::*;
use crate::client::ConnectionPool;
use crate::codec::Protocol;
use crate::codec::theader;
use crate::codec::ttheader::{Header, HeaderLimits, int_key};
use crate::config::{TransportConfig, WireLimits};
use crate::context::{Address, ServerContext};
use crate::test_support::*;

fn connect(addr: std::net::SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Reads until the server closes the connection; fails if it is still open after the
/// client's read timeout (a close the test waits for must come from the server).
fn read_until_closed(s: &mut impl Read) -> Vec<u8> {
    let mut rest = Vec::new();
    match s.read_to_end(&mut rest) {
        Ok(_) => rest,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => rest,
        Err(e) => panic!("the server did not close the connection: {e}"),
    }
}

/// A call message in protocol `P` (the text is argument 1).
fn call<P: thrift_wire::Protocol>(ty: MessageType, method: &str, seq: i32, t: &str) -> Vec<u8> {
    message::<P>(ty, method, seq, 1, t)
}

/// The unframed reply to an `echo` of `t` (the text is the result's field 0): what a
/// Buffered call gets back, to read exactly that many bytes of.
fn echo_reply<P: thrift_wire::Protocol>(seq: i32, t: &str) -> Vec<u8> {
    message::<P>(MessageType::Reply, "echo", seq, 0, t)
}

/// A server with a 1 MiB input budget and a read timeout far beyond the test.
fn budget_config() -> ServerConfig {
    ServerConfig {
        capacity: ServerCapacity {
            max_buffered_input: 1 << 20,
            ..Default::default()
        },
        timeouts: ServerTimeouts {
            read: Duration::from_secs(60),
            ..Default::default()
        },
        ..ServerConfig::default()
    }
}

fn read_framed(s: &mut impl Read) -> Vec<u8> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut msg = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut msg).unwrap();
    msg
}

/// The server's rules for one connection, on the connection core with a fake clock
/// (see `harness.rs`): `f` gets the connection and the service's state.
fn on_harness(config: ServerConfig, f: impl FnOnce(TestHarness, &SharedTest)) {
    on_limited_harness(config, LimitConfig::default(), f);
}

/// [`on_harness`], the server refusing calls over `limit`.
fn on_limited_harness(
    config: ServerConfig,
    limit: LimitConfig,
    f: impl FnOnce(TestHarness, &SharedTest),
) {
    let (c, t) = Harness::test_service(config, limit);
    f(c, &t);
}

type TestHarness = Harness<deadline::Deadline<TestService>>;

/// A decoded reply: its header and either the result text or the exception.
#[derive(Debug, PartialEq)]
enum Answer {
    Ok(String),
    Exception(ApplicationExceptionKind, String),
}

fn answer<P: thrift_wire::Protocol>(msg: Vec<u8>) -> (MessageHeader, Answer) {
    let codec = Codec::<P>::new();
    let mut d = codec.decoder(Bytes::from(msg)).unwrap();
    let h = d.read_message_begin().unwrap();
    let a = match h.ty {
        MessageType::Reply => Answer::Ok(Text::decode(&mut d).unwrap().text.unwrap().to_string()),
        MessageType::Exception => {
            let e = ApplicationException::decode(&mut d).unwrap();
            Answer::Exception(e.kind, e.message.to_string())
        }
        other => panic!("a {other:?} message from the server"),
    };
    (h, a)
}

#[test]
fn framed_binary_calls_are_answered_in_order() {
    on_harness(ServerConfig::default(), |mut c, _| {
        for seq in 1..=20 {
            c.write_all(&framed(&call::<Binary>(
                MessageType::Call,
                "echo",
                seq,
                &format!("hello {seq}"),
            )))
            .unwrap();
            let (h, a) = answer::<Binary>(read_framed(&mut c));
            assert_eq!(
                (h.name.as_str(), h.ty, h.seq_id),
                ("echo", MessageType::Reply, seq)
            );
            assert_eq!(a, Answer::Ok(format!("hello {seq}")));
        }
    });
}

/// What the core hands its driver for a call is what makes the call, a fraction of
/// the call's size: only that is moved around before the call is made where it stays.
#[test]
fn a_call_is_made_where_it_stays_from_a_fraction_of_its_size() {
    on_harness(ServerConfig::default(), |mut c, _| {
        c.write_all(&framed(&call::<Binary>(MessageType::Call, "echo", 1, "hi")))
            .unwrap();
        assert_eq!(
            answer::<Binary>(read_framed(&mut c)).1,
            Answer::Ok("hi".into())
        );
        let (made_from, call) = c.sizes.expect("a call was started");
        assert!(
            made_from * 2 < call,
            "{made_from} bytes make a call of {call} bytes"
        );
    });
}

#[test]
fn buffered_compact_calls_are_answered_unframed() {
    on_harness(ServerConfig::default(), |mut c, _| {
        // Two calls in one write, the second split over two more.
        let one = call::<Compact>(MessageType::Call, "echo", 1, "first");
        let two = call::<Compact>(MessageType::Call, "echo", 2, "second");
        let mut bytes = one.clone();
        bytes.extend_from_slice(&two[..3]);
        c.write_all(&bytes).unwrap();
        c.write_all(&two[3..]).unwrap();
        for (seq, want) in [(1, "first"), (2, "second")] {
            // A buffered reply has no length: read exactly what the expected one takes.
            let expected = echo_reply::<Compact>(seq, want);
            let mut got = vec![0u8; expected.len()];
            c.read_exact(&mut got).unwrap();
            assert_eq!(got, expected, "reply {seq}");
        }
    });
}

/// JSON (Apache's `TJSONProtocol`) over Framed and over Buffered, on both server
/// layouts: calls answered in kind and byte for byte as the JSON encoder writes them
/// (texts with brackets, quotes and escapes, which a Buffered message's end must not
/// be taken from), a oneway call unanswered, an unknown method answered with an
/// exception, and on Buffered two calls in one write and one split across writes.
#[test]
fn json_calls_are_answered_framed_and_buffered() {
    on_harness(ServerConfig::default(), |mut c, s| {
        let text = |seq: i32| format!("[json] {{\"{seq}\"}} \\ ]");
        for seq in 1..=3 {
            c.write_all(&framed(&call::<Json>(
                MessageType::Call,
                "echo",
                seq,
                &text(seq),
            )))
            .unwrap();
            assert_eq!(read_framed(&mut c), echo_reply::<Json>(seq, &text(seq)));
        }
        c.write_all(&framed(&call::<Json>(
            MessageType::Oneway,
            "notify",
            4,
            "e",
        )))
        .unwrap();
        c.write_all(&framed(&call::<Json>(MessageType::Call, "nope", 5, "x")))
            .unwrap();
        let (h, a) = answer::<Json>(read_framed(&mut c));
        assert_eq!(
            (h.seq_id, a),
            (
                5,
                Answer::Exception(
                    ApplicationExceptionKind::UnknownMethod,
                    "unknown method nope".into()
                )
            ),
            "the first reply is the call's: the oneway got none"
        );

        let mut b = c.sibling();
        let one = call::<Json>(MessageType::Call, "echo", 1, &text(1));
        let two = call::<Json>(MessageType::Call, "echo", 2, &text(2));
        let mut bytes = call::<Json>(MessageType::Oneway, "notify", 0, "e");
        bytes.extend_from_slice(&one);
        bytes.extend_from_slice(&two[..7]);
        b.write_all(&bytes).unwrap();
        b.write_all(&two[7..]).unwrap();
        for seq in [1, 2] {
            let expected = echo_reply::<Json>(seq, &text(seq));
            let mut got = vec![0u8; expected.len()];
            b.read_exact(&mut got).unwrap();
            assert_eq!(got, expected, "reply {seq}");
        }
        assert_eq!(s.notified.load(Ordering::SeqCst), 2);
    });
}

/// A JSON message whose arguments nest deeper than the decoder allows: over Framed,
/// a `PROTOCOL_ERROR` for that call, and the connection goes on; over Buffered,
/// brackets nested deeper than any message within that limit close the connection
/// before the message is buffered whole.
#[test]
fn deeply_nested_json_is_refused() {
    on_harness(ServerConfig::default(), |mut c, _| {
        let nested = |depth: usize| {
            let mut m = String::from(r#"[1,"echo",1,7,{"2":{"lst":"#);
            m.push_str(&r#"["lst",1,"#.repeat(depth));
            m.push_str(r#"["i32",0]"#);
            m.push_str(&"]".repeat(depth));
            m.push_str("}}]");
            m.into_bytes()
        };
        c.write_all(&framed(&nested(100))).unwrap();
        let (h, a) = answer::<Json>(read_framed(&mut c));
        assert_eq!(h.seq_id, 7);
        assert!(
            matches!(&a, Answer::Exception(ApplicationExceptionKind::ProtocolError, m)
                if m.contains("nesting deeper than the limit")),
            "{a:?}"
        );
        c.write_all(&framed(&call::<Json>(MessageType::Call, "echo", 8, "on")))
            .unwrap();
        assert_eq!(read_framed(&mut c), echo_reply::<Json>(8, "on"));

        let mut b = c.sibling();
        let deep = nested(1000);
        // Only the opening brackets: the server stops reading at the nesting limit.
        b.write_all(&deep[..deep.len() / 2]).unwrap();
        assert!(read_until_closed(&mut b).is_empty());
    });
}

/// A Buffered JSON message that never closes its bracket: the connection is closed
/// once it is longer than the frame limit (with a warning that says so), not buffered
/// without bound, and not left until the read timeout; other connections go on.
#[test]
fn an_unclosed_buffered_json_message_closes_its_connection_at_the_frame_limit() {
    let log = captured_log();
    let config = ServerConfig {
        wire: WireLimits {
            frame: crate::codec::Limits { max_frame: 4096 },
            ..Default::default()
        },
        timeouts: ServerTimeouts {
            // Far beyond the client's read timeout: a close must come from the limit.
            read: Duration::from_secs(120),
            ..Default::default()
        },
        ..ServerConfig::default()
    };
    with_server(config, move |s| {
        let mut good = connect(s.addr);
        let mut bad = connect(s.addr);
        let from = bad.local_addr().unwrap().to_string();
        let mut writer = bad.try_clone().unwrap();
        // Written from another thread: the server closes before taking it all.
        let write = std::thread::spawn(move || {
            let _ = writer.write_all(br#"[1,"echo",1,1,{"1":{"str":""#);
            let chunk = "]}x".repeat(1000);
            for _ in 0..1000 {
                if writer.write_all(chunk.as_bytes()).is_err() {
                    break;
                }
            }
        });
        assert!(read_until_closed(&mut bad).is_empty());
        write.join().unwrap();
        let text = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
        assert!(
            text.lines().any(|l| l.contains(&format!("peer={from} "))
                && l.contains("WARN")
                && l.contains("exceeds the limit of 4096")),
            "no warning for {from} in {text:?}"
        );
        good.write_all(&call::<Json>(MessageType::Call, "echo", 1, "fine"))
            .unwrap();
        let expected = echo_reply::<Json>(1, "fine");
        let mut got = vec![0u8; expected.len()];
        good.read_exact(&mut got).unwrap();
        assert_eq!(got, expected);
    });
}

/// A Buffered call larger than the reactor's input high-water mark (its length is
/// unknown until all of it is there, so reading must go on past the mark) is answered.
#[test]
fn a_buffered_call_above_the_high_water_mark_is_answered() {
    let config = ServerConfig {
        transport: TransportConfig {
            reactor: netpoll_rs::Config {
                read_chunk: 16 * 1024,
                input_high_water: 32 * 1024,
                ..netpoll_rs::Config::default()
            },
            ..Default::default()
        },
        ..ServerConfig::default()
    };
    with_server(config, |s| {
        let mut c = connect(s.addr);
        let big = "b".repeat(200 * 1024);
        c.write_all(&call::<Binary>(MessageType::Call, "echo", 7, &big))
            .unwrap();
        let expected = echo_reply::<Binary>(7, &big);
        let mut got = vec![0u8; expected.len()];
        c.read_exact(&mut got).unwrap();
        assert!(got == expected, "the reply differs");
    });
}

/// A TTHeader call with metainfo: the handler sees the persistent value, the reply's
/// header carries the backward value and the message type, framed the same way.
#[test]
fn ttheader_calls_carry_metainfo_both_ways() {
    on_harness(ServerConfig::default(), |mut c, _| {
        let msg = call::<Binary>(MessageType::Call, "echo", 9, "tt");
        let mut h = Header::new(9, Protocol::Binary);
        h.str_kv.push(("RPC_PERSIST_logid".into(), "L-42".into()));
        h.int_kv.push((int_key::TO_METHOD, "echo".into()));
        h.int_kv.push((int_key::RPC_TIMEOUT, "1000".into()));
        let mut frame = BytesMut::new();
        h.write(msg.len(), &mut frame).unwrap();
        frame.put_slice(&msg);
        c.write_all(&frame).unwrap();

        let reply = Bytes::from(framed(&read_framed(&mut c)));
        let (rh, payload) = Header::decode(&reply, &HeaderLimits::default()).unwrap();
        assert_eq!(rh.seq_id, 9);
        assert_eq!(rh.protocol, Protocol::Binary);
        assert_eq!(rh.int_value(int_key::MSG_TYPE), Some("2"));
        // Both forms: Volo's prefix, Kitex's plain key.
        assert_eq!(rh.str_value("RPC_BACKWARD_seen"), Some("L-42"));
        assert_eq!(rh.str_value("seen"), Some("L-42"));
        assert_eq!(rh.str_value(crate::refusal::HEADER_KEY), None, "no refusal");
        let (mh, a) = answer::<Binary>(payload.to_vec());
        assert_eq!(mh.seq_id, 9);
        assert_eq!(a, Answer::Ok("tt".into()));
    });
}

/// A THeader frame around `msg`, as `h` describes it.
fn theader_frame(h: &theader::Header, msg: &[u8]) -> Vec<u8> {
    let mut m = LinkBuffer::new();
    m.write(msg);
    let mut out = LinkBuffer::new();
    h.write_frame(m, &mut out, usize::MAX).unwrap().unwrap();
    let n = out.len();
    out.next(n).to_vec()
}

/// Reads a THeader reply (bare, or inside one more length: the first length covers
/// either): its header and message, the transforms undone.
fn read_theader(c: &mut impl Read) -> (theader::Header, Vec<u8>) {
    let frame = framed(&read_framed(c));
    let (h, raw) = theader::Header::decode(&Bytes::from(frame), &HeaderLimits::default()).unwrap();
    let payload = h.untransform(raw, 1 << 20).unwrap();
    (h, payload.to_vec())
}

/// THeader calls, bare and inside a Framed length, Binary, Compact and JSON, plain and zlib:
/// each answered in a THeader frame with the request's sequence id, flags, protocol,
/// transforms and framing; the handler reads the request's info headers (metainfo and
/// a plain header) and its reply's info carries what it set, not the request's.
#[test]
fn theader_calls_are_answered_in_kind() {
    on_harness(ServerConfig::default(), |c0, _| {
        for protocol in [Protocol::Binary, Protocol::Compact, Protocol::Json] {
            for zlib in [false, true] {
                for framed_too in [false, true] {
                    let what = format!("{protocol:?} zlib={zlib} framed={framed_too}");
                    let mut c = c0.sibling();
                    for seq in [11, 12] {
                        let mut h = theader::Header::new(seq, protocol);
                        h.flags = 0x0005;
                        h.framed = framed_too;
                        if zlib {
                            h.transforms.push(theader::transform::ZLIB);
                        }
                        h.info.push(("RPC_PERSIST_logid".into(), "L-1".into()));
                        h.info.push(("echo-me".into(), format!("hi {seq}").into()));
                        let text = format!("{what} #{seq}");
                        let msg = match protocol {
                            Protocol::Binary => {
                                call::<Binary>(MessageType::Call, "echo", seq, &text)
                            }
                            Protocol::Compact => {
                                call::<Compact>(MessageType::Call, "echo", seq, &text)
                            }
                            Protocol::Json => call::<Json>(MessageType::Call, "echo", seq, &text),
                        };
                        c.write_all(&theader_frame(&h, &msg)).unwrap();
                        let (rh, payload) = read_theader(&mut c);
                        assert_eq!(
                            (rh.seq_id, rh.flags, rh.protocol, rh.framed),
                            (seq, 0x0005, protocol, framed_too),
                            "{what}"
                        );
                        assert_eq!(rh.transforms, h.transforms, "{what}");
                        assert_eq!(rh.info_value("RPC_BACKWARD_seen"), Some("L-1"), "{what}");
                        assert_eq!(
                            rh.info_value("echoed"),
                            Some(&*format!("hi {seq}")),
                            "{what}"
                        );
                        assert_eq!(rh.info_value("echo-me"), None, "{what}: not echoed");
                        let (mh, a) = match protocol {
                            Protocol::Binary => answer::<Binary>(payload),
                            Protocol::Compact => answer::<Compact>(payload),
                            Protocol::Json => answer::<Json>(payload),
                        };
                        assert_eq!((mh.seq_id, a), (seq, Answer::Ok(text)), "{what}");
                    }
                }
            }
        }
    });
}

/// A THeader call with a transform the server cannot undo (snappy) is answered with an
/// `INVALID_TRANSFORM` exception, as the format requires; the connection goes on.
#[test]
fn an_unknown_theader_transform_is_answered_with_invalid_transform() {
    on_harness(ServerConfig::default(), |mut c, _| {
        let msg = call::<Binary>(MessageType::Call, "echo", 3, "x");
        // Written by hand: our writer refuses transforms it cannot apply.
        let mut frame = theader_frame(&theader::Header::new(3, Protocol::Binary), &msg);
        assert_eq!(
            frame[14..18],
            [0, 0, 0, 0],
            "protocol, no transforms, padding"
        );
        frame[15..17].copy_from_slice(&[1, theader::transform::SNAPPY as u8]);
        c.write_all(&frame).unwrap();
        let (rh, payload) = read_theader(&mut c);
        assert_eq!((rh.seq_id, rh.transforms.len()), (3, 0));
        let (mh, a) = answer::<Binary>(payload);
        assert_eq!((mh.seq_id, mh.name.as_str()), (3, ""));
        assert!(
            matches!(a, Answer::Exception(ApplicationExceptionKind::InvalidTransform, ref m) if m.contains("transform 3")),
            "{a:?}"
        );
        let ok = call::<Binary>(MessageType::Call, "echo", 4, "after");
        c.write_all(&theader_frame(
            &theader::Header::new(4, Protocol::Binary),
            &ok,
        ))
        .unwrap();
        let (_, payload) = read_theader(&mut c);
        assert_eq!(answer::<Binary>(payload).1, Answer::Ok("after".into()));
    });
}

/// A TTHeader frame around `msg`.
fn ttheader(seq: i32, msg: &[u8]) -> Vec<u8> {
    let mut frame = BytesMut::new();
    Header::new(seq, Protocol::Binary)
        .write(msg.len(), &mut frame)
        .unwrap();
    frame.put_slice(msg);
    frame.to_vec()
}

/// The sequence id and answer of a TTHeader reply.
fn read_ttheader(c: &mut impl Read) -> (i32, Answer) {
    let reply = Bytes::from(framed(&read_framed(c)));
    let (rh, payload) = Header::decode(&reply, &HeaderLimits::default()).unwrap();
    let (mh, a) = answer::<Binary>(payload.to_vec());
    assert_eq!(rh.seq_id, mh.seq_id);
    (mh.seq_id, a)
}

/// Several calls sent before any reply on one TTHeader connection (what a mux
/// client does) run at once: a slow call does not hold back the quick ones behind it,
/// whose replies come first, each with its own sequence id.
#[test]
fn ttheader_calls_on_one_connection_run_concurrently() {
    on_harness(ServerConfig::default(), |mut c, s| {
        let mut bytes = ttheader(1, &call::<Binary>(MessageType::Call, "wait", 1, "late"));
        for seq in 2..=4 {
            bytes.extend(ttheader(
                seq,
                &call::<Binary>(MessageType::Call, "echo", seq, &format!("quick {seq}")),
            ));
        }
        c.write_all(&bytes).unwrap();
        let mut order: Vec<(i32, Answer)> = (0..3).map(|_| read_ttheader(&mut c)).collect();
        assert_eq!(c.in_progress(), 1, "the first call waits");
        s.gate.add_permits(1);
        c.poll_calls();
        order.push(read_ttheader(&mut c));
        let mut quick: Vec<_> = order[..3].iter().map(|(seq, _)| *seq).collect();
        quick.sort();
        assert_eq!(
            quick,
            [2, 3, 4],
            "the quick calls answered first: {order:?}"
        );
        for (seq, a) in &order[..3] {
            assert_eq!(*a, Answer::Ok(format!("quick {seq}")));
        }
        assert_eq!(order[3], (1, Answer::Ok("late".into())));
    });
}

/// With `max_inflight_per_connection` at 1, a TTHeader connection is served in order.
#[test]
fn the_per_connection_limit_serialises_calls() {
    let config = ServerConfig {
        capacity: ServerCapacity {
            max_inflight_per_connection: 1,
            ..Default::default()
        },
        ..ServerConfig::default()
    };
    on_harness(config, |mut c, s| {
        let mut bytes = ttheader(1, &call::<Binary>(MessageType::Call, "wait", 1, "first"));
        bytes.extend(ttheader(
            2,
            &call::<Binary>(MessageType::Call, "echo", 2, "second"),
        ));
        c.write_all(&bytes).unwrap();
        assert_eq!(c.in_progress(), 1, "the second call waits for the first");
        assert!(c.take_output().is_empty());
        assert!(c.buffered() > 0, "the second frame is not taken yet");
        s.gate.add_permits(1);
        c.poll_calls();
        assert_eq!(read_ttheader(&mut c), (1, Answer::Ok("first".into())));
        assert_eq!(read_ttheader(&mut c), (2, Answer::Ok("second".into())));
    });
}

/// Framed calls pipelined on one connection are answered in the order they came, a
/// slow one first: Apache Thrift clients match replies by order. Whole frames held
/// back meanwhile are not a frame that has begun: the read timeout spares them.
#[test]
fn pipelined_framed_calls_are_answered_in_request_order() {
    let config = ServerConfig {
        timeouts: ServerTimeouts {
            read: Duration::from_millis(50),
            ..Default::default()
        },
        ..ServerConfig::default()
    };
    on_harness(config, |mut c, s| {
        let mut bytes = framed(&call::<Binary>(MessageType::Call, "wait", 1, "first"));
        bytes.extend(framed(&call::<Binary>(
            MessageType::Call,
            "echo",
            2,
            "second",
        )));
        c.write_all(&bytes).unwrap();
        assert!(c.take_output().is_empty(), "nothing before the first reply");
        assert_eq!(c.in_progress(), 1, "one call at a time");
        assert_eq!(c.deadline(), None, "the second frame is whole");
        c.advance(Duration::from_secs(10));
        assert_eq!(c.closed, None);
        s.gate.add_permits(1);
        c.poll_calls();
        for (seq, want) in [(1, "first"), (2, "second")] {
            let (h, a) = answer::<Binary>(read_framed(&mut c));
            assert_eq!((h.seq_id, a), (seq, Answer::Ok(want.into())));
        }
    });
}

#[test]
fn failures_become_application_exceptions_and_the_connection_lives_on() {
    on_harness(ServerConfig::default(), |mut c, _| {
        let cases = [
            (
                "nope",
                ApplicationExceptionKind::UnknownMethod,
                "unknown method nope",
            ),
            (
                "fail",
                ApplicationExceptionKind::InternalError,
                "failed on purpose",
            ),
            (
                "panic",
                ApplicationExceptionKind::InternalError,
                "the handler panicked: the handler gave up on x",
            ),
        ];
        for (seq, (method, kind, message)) in cases.into_iter().enumerate() {
            let seq = seq as i32;
            c.write_all(&framed(&call::<Binary>(
                MessageType::Call,
                method,
                seq,
                "x",
            )))
            .unwrap();
            let (h, a) = answer::<Binary>(read_framed(&mut c));
            assert_eq!((h.ty, h.seq_id), (MessageType::Exception, seq), "{method}");
            assert_eq!(a, Answer::Exception(kind, message.into()), "{method}");
        }
        // Arguments that do not decode: a protocol error for that call only.
        let mut bad = call::<Binary>(MessageType::Call, "echo", 7, "x");
        let field_type_at = 4 + 4 + 4 + 4;
        bad[field_type_at] = 0xEE;
        c.write_all(&framed(&bad)).unwrap();
        let (_, a) = answer::<Binary>(read_framed(&mut c));
        assert!(
            matches!(
                a,
                Answer::Exception(ApplicationExceptionKind::ProtocolError, _)
            ),
            "{a:?}"
        );
        // A reply-type message sent to a server.
        c.write_all(&framed(&call::<Binary>(MessageType::Reply, "echo", 8, "x")))
            .unwrap();
        let (_, a) = answer::<Binary>(read_framed(&mut c));
        assert!(matches!(
            a,
            Answer::Exception(ApplicationExceptionKind::InvalidMessageType, _)
        ));
        c.write_all(&framed(&call::<Binary>(
            MessageType::Call,
            "echo",
            9,
            "still here",
        )))
        .unwrap();
        assert_eq!(
            answer::<Binary>(read_framed(&mut c)).1,
            Answer::Ok("still here".into())
        );
    });
}

#[test]
fn oneway_calls_get_no_reply() {
    on_harness(ServerConfig::default(), |mut c, s| {
        for seq in 0..3 {
            c.write_all(&framed(&call::<Binary>(
                MessageType::Oneway,
                "notify",
                seq,
                "e",
            )))
            .unwrap();
        }
        c.write_all(&framed(&call::<Binary>(
            MessageType::Call,
            "echo",
            3,
            "after",
        )))
        .unwrap();
        let (h, a) = answer::<Binary>(read_framed(&mut c));
        assert_eq!(
            h.seq_id, 3,
            "the first reply is the call's: oneways got none"
        );
        assert_eq!(a, Answer::Ok("after".into()));
        assert_eq!(s.notified.load(Ordering::SeqCst), 3);
    });
}

/// Hostile bytes close their own connection only.
#[test]
fn garbage_and_oversized_frames_close_only_their_connection() {
    let config = ServerConfig {
        wire: WireLimits {
            frame: crate::codec::Limits { max_frame: 4096 },
            ..Default::default()
        },
        ..ServerConfig::default()
    };
    on_harness(config, |mut good, _| {
        for hostile in [
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            framed(&call::<Binary>(
                MessageType::Call,
                "echo",
                1,
                &"x".repeat(5000),
            ))[..8]
                .to_vec(), // a length above the limit
            vec![0xff, 0xff, 0xff, 0xf0, 0x80, 0x01, 0, 1], // a negative length
            // A TTHeader with an unknown info id.
            vec![
                0, 0, 0, 0x0e, 0x10, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0x7f, 0,
            ],
            // A THeader in a protocol no one defines, and one whose zlib payload inflates
            // beyond the frame limit (1 MiB of zeros, about 1 KiB on the wire).
            {
                let mut f = theader_frame(&theader::Header::new(1, Protocol::Binary), &[0; 8]);
                f[14] = 3; // no protocol has this id
                f
            },
            {
                let mut h = theader::Header::new(1, Protocol::Binary);
                h.transforms.push(theader::transform::ZLIB);
                let f = theader_frame(&h, &vec![0; 1 << 20]);
                assert!(f.len() < 4096, "{} bytes", f.len());
                f
            },
        ] {
            let mut bad = good.sibling();
            bad.write_all(&hostile).unwrap();
            let rest = read_until_closed(&mut bad);
            assert!(
                rest.len() < 200,
                "{hostile:02x?}: {} bytes back",
                rest.len()
            );
            good.write_all(&framed(&call::<Binary>(MessageType::Call, "echo", 1, "ok")))
                .unwrap();
            assert_eq!(
                answer::<Binary>(read_framed(&mut good)).1,
                Answer::Ok("ok".into())
            );
        }
    });
}

/// A connection whose first bytes match no protocol leaves a line saying what came
/// and from where (on both layouts: a task per connection, and inline dispatch).
#[test]
fn a_connection_that_speaks_no_protocol_is_logged_with_its_bytes_and_peer() {
    let log = captured_log();
    with_server(ServerConfig::default(), move |s| {
        let mut bad = connect(s.addr);
        let from = bad.local_addr().unwrap().to_string();
        bad.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        read_until_closed(&mut bad);
        let text = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
        // Other tests of this process log too, from other ports (one may even have had
        // this port before): look for the whole line, not the first with the port.
        // "474554..." is "GET / HTTP/1.1\r\n", the first 16 of the 20 bytes the server
        // looked at (`codec::DETECT_LEN`).
        let hex = "first_bytes=474554202f20485454502f312e310d0a";
        assert!(
            text.lines().any(|l| l.contains(&format!("peer={from} "))
                && l.contains(hex)
                && l.contains("WARN")
                && l.contains("match no protocol")),
            "no warning for {from} in {text:?}"
        );
    });
}

/// A THeader frame that cannot be read (here a zlib bomb) closes its connection with a
/// warning that says why and from where.
#[test]
fn a_bad_theader_frame_is_logged_with_its_error_and_peer() {
    let log = captured_log();
    with_server(ServerConfig::default(), move |s| {
        let mut bad = connect(s.addr);
        let from = bad.local_addr().unwrap().to_string();
        let mut h = theader::Header::new(1, Protocol::Binary);
        h.transforms.push(theader::transform::ZLIB);
        let limit = crate::codec::DEFAULT_MAX_FRAME;
        bad.write_all(&theader_frame(&h, &vec![0; limit + 1]))
            .unwrap();
        read_until_closed(&mut bad);
        let text = String::from_utf8_lossy(&log.lock().unwrap()).into_owned();
        let why = format!("inflates beyond the limit of {limit} bytes");
        assert!(
            text.lines().any(|l| l.contains(&format!("peer={from} "))
                && l.contains(&why)
                && l.contains("WARN")
                && l.contains("bad THeader frame")),
            "no warning for {from} in {text:?}"
        );
    });
}

#[test]
fn a_stalled_frame_is_closed_after_the_read_timeout() {
    let config = ServerConfig {
        timeouts: ServerTimeouts {
            read: Duration::from_millis(200),
            ..Default::default()
        },
        ..ServerConfig::default()
    };
    with_server(config, |s| {
        let mut c = connect(s.addr);
        let msg = framed(&call::<Binary>(MessageType::Call, "echo", 1, "x"));
        c.write_all(&msg[..10]).unwrap();
        assert!(read_until_closed(&mut c).is_empty());
        // An idle connection is not closed by the read timeout.
        let mut idle = connect(s.addr);
        std::thread::sleep(Duration::from_millis(500));
        idle.write_all(&msg).unwrap();
        assert_eq!(
            answer::<Binary>(read_framed(&mut idle)).1,
            Answer::Ok("x".into())
        );
    });
}

/// A connection with nothing to do is closed after the idle timeout; one whose call is
/// in progress for longer than that is not: its call is answered, and it is served
/// again after.
///
/// The idle timeout is long enough that the client, held up for a while between its
/// connect and its call (or between a reply and its next call), is not idle for that
/// long; the call lasts until the test lets it end, after the idle connection, opened
/// after the busy one's call was sent, was closed.
#[test]
fn an_idle_connection_is_closed_but_not_one_with_a_call_in_progress() {
    let config = ServerConfig {
        timeouts: ServerTimeouts {
            read: Duration::from_millis(50),
            idle: Some(Duration::from_millis(600)),
            ..Default::default()
        },
        ..ServerConfig::default()
    };
    with_server(config, |s| {
        let mut busy = connect(s.addr);
        let held = framed(&call::<Binary>(MessageType::Call, "wait", 1, "late"));
        busy.write_all(&held).unwrap();
        tokio::runtime::Handle::current().block_on(s.gauge.reaches(1));
        let mut idle = connect(s.addr);
        assert!(read_until_closed(&mut idle).is_empty());
        // The busy connection's call has been in progress for longer than the idle
        // timeout by now.
        s.gate.add_permits(1);
        assert_eq!(
            answer::<Binary>(read_framed(&mut busy)).1,
            Answer::Ok("late".into())
        );
        let echo = framed(&call::<Binary>(MessageType::Call, "echo", 2, "again"));
        busy.write_all(&echo).unwrap();
        assert_eq!(
            answer::<Binary>(read_framed(&mut busy)).1,
            Answer::Ok("again".into())
        );
    });
}

/// The input budget across connections: a stalled sender holds what its frame claims,
/// a connection whose frame does not fit the rest is closed at once (not at the read
/// timeout), small calls that fit go on, and the budget comes back when the stalled
/// connection goes.
#[test]
fn frames_over_the_input_budget_close_their_connection() {
    on_harness(budget_config(), |mut stalled, _| {
        let claim = |len: u32| {
            let mut head = len.to_be_bytes().to_vec();
            head.extend_from_slice(&call::<Binary>(MessageType::Call, "echo", 1, "x")[..8]);
            head
        };
        stalled.write_all(&claim(900 << 10)).unwrap();
        let mut over = stalled.sibling();
        over.write_all(&claim(200 << 10)).unwrap();
        assert!(read_until_closed(&mut over).is_empty());
        let mut good = stalled.sibling();
        for seq in 1..=3 {
            good.write_all(&framed(&call::<Binary>(
                MessageType::Call,
                "echo",
                seq,
                "small",
            )))
            .unwrap();
            assert_eq!(
                answer::<Binary>(read_framed(&mut good)).1,
                Answer::Ok("small".into())
            );
        }
        drop(stalled);
        let big = "b".repeat(200 << 10);
        // The stalled connection's budget comes back when it goes.
        let mut c = good.sibling();
        c.write_all(&framed(&call::<Binary>(MessageType::Call, "echo", 9, &big)))
            .unwrap();
        assert_eq!(answer::<Binary>(read_framed(&mut c)).1, Answer::Ok(big));
    });
}

/// A Buffered message counts against the input budget while it arrives: a stalled
/// one holds what it sent, one that grows past what is left is closed, and the budget
/// comes back when the stalled connection goes.
#[test]
fn buffered_messages_count_against_the_input_budget_as_they_arrive() {
    on_harness(budget_config(), |mut stalled, _| {
        let message = call::<Binary>(MessageType::Call, "echo", 1, &"s".repeat(700 << 10));
        // Everything but the end of the struct: the server cannot tell the length yet.
        let part = &message[..message.len() - 1];
        stalled.write_all(part).unwrap();
        let mut over = stalled.sibling();
        over.write_all(part).unwrap();
        assert!(read_until_closed(&mut over).is_empty());
        // The stalled message ends: it is answered, and its budget comes back.
        stalled.write_all(&message[message.len() - 1..]).unwrap();
        let expected = echo_reply::<Binary>(1, &"s".repeat(700 << 10));
        let mut got = vec![0u8; expected.len()];
        stalled.read_exact(&mut got).unwrap();
        assert!(got == expected, "the reply differs");
        let mut again = stalled.sibling();
        again.write_all(&message).unwrap();
        again.read_exact(&mut got).unwrap();
        assert!(got == expected, "the reply differs");
    });
}

/// A call in progress when the shutdown starts is still answered; the listener is
/// closed; idle connections are closed.
#[test]
fn graceful_shutdown_answers_the_call_in_progress() {
    for config in layouts(ServerConfig::default()) {
        graceful_shutdown_answers_the_call_in_progress_in(config);
    }
}

/// Sends the shutdown once `calls` calls are in progress; returns once `idle` (a
/// connection with nothing to do) is closed, the sign that the shutdown has begun;
/// then lets the calls end.
async fn shut_down_during(s: &mut Running, calls: usize, mut idle: TcpStream) {
    s.gauge.reaches(calls).await;
    let _ = s.stop.take().map(|t| t.send(()));
    let idle_rest = tokio::task::spawn_blocking(move || read_until_closed(&mut idle))
        .await
        .unwrap();
    assert!(
        idle_rest.is_empty(),
        "the idle connection got {idle_rest:?}"
    );
    assert_eq!(s.gauge.now(), calls, "the calls wait for the test");
    s.gate.add_permits(calls);
}

fn graceful_shutdown_answers_the_call_in_progress_in(config: ServerConfig) {
    runtime().block_on(async {
        let mut s = start(config).await;
        let addr = s.addr;
        let (idle, mut c) = tokio::task::spawn_blocking(move || {
            let idle = connect(addr);
            let mut c = connect(addr);
            c.write_all(&framed(&call::<Binary>(
                MessageType::Call,
                "wait",
                5,
                "late",
            )))
            .unwrap();
            (idle, c)
        })
        .await
        .unwrap();
        shut_down_during(&mut s, 1, idle).await;
        let client = tokio::task::spawn_blocking(move || {
            let reply = answer::<Binary>(read_framed(&mut c));
            (reply, read_until_closed(&mut c))
        });
        let ((h, a), rest) = tokio::time::timeout(Duration::from_secs(20), client)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((h.seq_id, a), (5, Answer::Ok("late".into())));
        assert!(rest.is_empty());
        tokio::time::timeout(Duration::from_secs(20), s.done)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(TcpStream::connect(addr).is_err(), "the listener is closed");
    });
}

/// A shutdown while several calls of one TTHeader connection are in progress answers
/// every one of them, then closes the connection.
#[test]
fn graceful_shutdown_answers_every_call_of_a_mux_connection() {
    for config in layouts(ServerConfig::default()) {
        graceful_shutdown_answers_every_call_of_a_mux_connection_in(config);
    }
}

fn graceful_shutdown_answers_every_call_of_a_mux_connection_in(config: ServerConfig) {
    runtime().block_on(async {
        let mut s = start(config).await;
        let addr = s.addr;
        let (idle, mut c) = tokio::task::spawn_blocking(move || {
            let idle = connect(addr);
            let mut c = connect(addr);
            let mut bytes = Vec::new();
            for seq in 1..=3 {
                bytes.extend(ttheader(
                    seq,
                    &call::<Binary>(MessageType::Call, "wait", seq, &format!("late {seq}")),
                ));
            }
            c.write_all(&bytes).unwrap();
            (idle, c)
        })
        .await
        .unwrap();
        shut_down_during(&mut s, 3, idle).await;
        let client = tokio::task::spawn_blocking(move || {
            // Three replies, then the control frame (sequence id 0) that tells the
            // client the connection is closing.
            let mut replies: Vec<(i32, Answer)> = (0..3).map(|_| read_ttheader(&mut c)).collect();
            replies.sort_by_key(|(seq, _)| *seq);
            let reply = Bytes::from(framed(&read_framed(&mut c)));
            let (told, _) = Header::decode(&reply, &HeaderLimits::default()).unwrap();
            let told = (told.seq_id, told.str_value("crrst").map(str::to_string));
            (replies, told, read_until_closed(&mut c))
        });
        let (replies, told, rest) = tokio::time::timeout(Duration::from_secs(20), client)
            .await
            .unwrap()
            .unwrap();
        let want: Vec<(i32, Answer)> = (1..=3)
            .map(|seq| (seq, Answer::Ok(format!("late {seq}"))))
            .collect();
        assert_eq!(replies, want);
        assert_eq!(told, (0, Some("1".to_string())));
        assert!(rest.is_empty());
        tokio::time::timeout(Duration::from_secs(20), s.done)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    });
}

/// Hundreds of connections dribbling partial frames: each is closed when its frame
/// takes longer than the read timeout, and a well-behaved client is served throughout.
#[test]
fn hundreds_of_slow_partial_frames_do_not_disturb_a_good_client() {
    let config = ServerConfig {
        timeouts: ServerTimeouts {
            read: Duration::from_millis(500),
            ..Default::default()
        },
        ..ServerConfig::default()
    };
    with_server(config, |s| {
        let msg = framed(&call::<Binary>(MessageType::Call, "echo", 1, "x"));
        let mut slow: Vec<TcpStream> = (0..300).map(|_| connect(s.addr)).collect();
        for c in &mut slow {
            c.write_all(&msg[..6]).unwrap();
        }
        let mut good = connect(s.addr);
        for round in 0..10 {
            for c in &mut slow {
                // One more byte each round; never the whole frame. A write to a
                // connection the server already closed may fail: that is the point.
                let _ = c.write_all(&msg[6 + round..7 + round]);
            }
            good.write_all(&framed(&call::<Binary>(
                MessageType::Call,
                "echo",
                round as i32,
                "ok",
            )))
            .unwrap();
            assert_eq!(
                answer::<Binary>(read_framed(&mut good)).1,
                Answer::Ok("ok".into())
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        for c in &mut slow {
            assert!(
                read_until_closed(c).is_empty(),
                "a slow frame got an answer"
            );
        }
    });
}

#[test]
fn connections_over_the_limit_are_closed_at_once() {
    let config = ServerConfig {
        capacity: ServerCapacity {
            max_connections: 2,
            ..Default::default()
        },
        ..ServerConfig::default()
    };
    with_server(config, |s| {
        let msg = framed(&call::<Binary>(MessageType::Call, "echo", 1, "x"));
        let mut first = connect(s.addr);
        let mut second = connect(s.addr);
        for c in [&mut first, &mut second] {
            c.write_all(&msg).unwrap();
            assert_eq!(answer::<Binary>(read_framed(c)).1, Answer::Ok("x".into()));
        }
        let mut third = connect(s.addr);
        let _ = third.write_all(&msg);
        assert!(
            read_until_closed(&mut third).is_empty(),
            "the third was served"
        );
        // A slot frees when one closes.
        drop(first);
        let mut again = None;
        for _ in 0..100 {
            let mut c = connect(s.addr);
            let _ = c.write_all(&msg);
            let mut len = [0u8; 4];
            if c.read_exact(&mut len).is_ok() {
                again = Some(len);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(again.is_some(), "no connection was served after one closed");
    });
}

/// A server-side layer: counts calls by method and refuses `fail` before the handler
/// runs.
struct Guard<S> {
    inner: S,
    calls: Arc<std::sync::Mutex<Vec<String>>>,
}

impl<S> Service<ServerContext, ServerRequest> for Guard<S>
where
    S: Service<ServerContext, ServerRequest, Error = DispatchError> + Sync,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<S::Response, DispatchError> {
        let method = cx.rpc.method.as_str();
        self.calls.lock().unwrap().push(method.to_string());
        if method == "fail" {
            return Err(DispatchError::Application(ApplicationException::new(
                ApplicationExceptionKind::Unknown,
                "refused by the guard layer",
            )));
        }
        self.inner.call(cx, req).await
    }
}

#[test]
fn a_layer_sees_every_call_and_may_answer_it() {
    runtime().block_on(async {
        let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = Arc::clone(&calls);
        let server =
            Server::new(TestService::default()).layer(crate::service::layer_fn(move |inner| {
                Guard {
                    inner,
                    calls: Arc::clone(&seen),
                }
            }));
        let bound = server.bind(&"127.0.0.1:0".parse().unwrap()).await.unwrap();
        let Address::Tcp(addr) = bound.local_addr().clone() else {
            panic!("a TCP address")
        };
        let serving = tokio::spawn(bound.serve());
        let answers = tokio::task::spawn_blocking(move || {
            let mut c = connect(addr);
            let mut out = Vec::new();
            for (seq, method) in ["echo", "fail"].into_iter().enumerate() {
                c.write_all(&framed(&call::<Binary>(
                    MessageType::Call,
                    method,
                    seq as i32,
                    "g",
                )))
                .unwrap();
                out.push(answer::<Binary>(read_framed(&mut c)).1);
            }
            out
        })
        .await
        .unwrap();
        assert_eq!(
            answers,
            [
                Answer::Ok("g".into()),
                Answer::Exception(
                    ApplicationExceptionKind::Unknown,
                    "refused by the guard layer".into()
                )
            ]
        );
        assert_eq!(*calls.lock().unwrap(), ["echo", "fail"]);
        serving.abort();
    });
}

/// With calls started on the pollers, the server runs one poller per worker thread
/// (here 2, though the reactor's setting says 1); with a task per connection it keeps
/// the setting.
#[test]
fn inline_dispatch_runs_a_poller_per_worker_thread() {
    runtime().block_on(async {
        for (inline_dispatch, want) in [(true, 2), (false, 1)] {
            let config = ServerConfig {
                inline_dispatch,
                transport: TransportConfig {
                    reactor: netpoll_rs::Config {
                        pollers: 1,
                        ..netpoll_rs::Config::default()
                    },
                    ..Default::default()
                },
                ..ServerConfig::default()
            };
            let bound = Server::new(TestService::default())
                .config(config)
                .bind(&"127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            let pollers = bound.reactor.as_ref().map(netpoll_rs::Reactor::pollers);
            assert_eq!(pollers, Some(want), "inline_dispatch {inline_dispatch}");
        }
    });
}

/// How a test frames a message and reads a reply from `C`: Framed or TTHeader.
struct Wire<C> {
    name: &'static str,
    frame: fn(i32, &[u8]) -> Vec<u8>,
    read: fn(&mut C) -> (i32, Answer),
}

/// Both wires, read from `C`.
fn wires<C: Read>() -> [Wire<C>; 2] {
    [
        Wire {
            name: "Framed",
            frame: |_, msg| framed(msg),
            read: |c| {
                let (h, a) = answer::<Binary>(read_framed(c));
                (h.seq_id, a)
            },
        },
        Wire {
            name: "TTHeader",
            frame: ttheader,
            read: read_ttheader,
        },
    ]
}

/// A call of `method` whose arguments do not decode (the first field's type is not a
/// type).
fn undecodable(method: &str, seq: i32) -> Vec<u8> {
    let mut msg = call::<Binary>(MessageType::Call, method, seq, "x");
    // Version, name length, name, sequence id: then the first field's type.
    msg[4 + 4 + method.len() + 4] = 0xEE;
    msg
}

/// A method the IDL makes oneway is not answered even when its call comes as a CALL
/// message (as Apache's Go library sends it), whether it succeeds, fails, or has
/// arguments that do not decode; neither is a ONEWAY message of an unknown method.
/// The reply to the call behind them is the first thing the connection reads.
#[test]
fn a_oneway_method_sent_as_call_gets_no_reply() {
    on_harness(ServerConfig::default(), |c0, s| {
        for wire in wires() {
            let mut c = c0.sibling();
            let messages = [
                call::<Binary>(MessageType::Call, "notify", 1, "e"),
                call::<Binary>(MessageType::Call, "notify", 2, "fail"),
                undecodable("notify", 3),
                call::<Binary>(MessageType::Oneway, "nope", 4, "e"),
                call::<Binary>(MessageType::Call, "echo", 5, "after"),
            ];
            let mut bytes = Vec::new();
            for (seq, msg) in (1..).zip(&messages) {
                bytes.extend((wire.frame)(seq, msg));
            }
            c.write_all(&bytes).unwrap();
            assert_eq!(
                (wire.read)(&mut c),
                (5, Answer::Ok("after".into())),
                "{}: the first reply is the call's",
                wire.name
            );
            // A Framed connection runs its calls in order: both oneways that decoded
            // ran before the call behind them.
            if wire.name == "Framed" {
                assert_eq!(s.notified.load(Ordering::SeqCst), 2);
            }
            // Nothing else came: the next reply is the next call's.
            c.write_all(&(wire.frame)(
                6,
                &call::<Binary>(MessageType::Call, "echo", 6, "again"),
            ))
            .unwrap();
            assert_eq!(
                (wire.read)(&mut c),
                (6, Answer::Ok("again".into())),
                "{}",
                wire.name
            );
        }
    });
}

/// A TTHeader frame around `msg` whose header carries the caller's timeout.
fn ttheader_with_timeout(seq: i32, msg: &[u8], timeout: Duration) -> Vec<u8> {
    let mut h = Header::new(seq, Protocol::Binary);
    h.int_kv
        .push((int_key::RPC_TIMEOUT, timeout.as_millis().to_string().into()));
    let mut frame = BytesMut::new();
    h.write(msg.len(), &mut frame).unwrap();
    frame.put_slice(msg);
    frame.to_vec()
}

/// A TTHeader call whose caller's timeout (`RPC_TIMEOUT`) passes while its handler
/// waits for ever is dropped and answered with the deadline exception, and the
/// connection goes on serving.
#[test]
fn a_call_past_the_callers_timeout_is_answered_and_the_connection_lives_on() {
    with_server(ServerConfig::default(), |s| {
        let mut c = connect(s.addr);
        let hang = call::<Binary>(MessageType::Call, "hang", 1, "x");
        // Long enough for the handler to start on a loaded machine (with 5 ms, CI
        // once saw the deadline pass first: "not started"); the handler never ends,
        // so it is dropped at the deadline all the same.
        c.write_all(&ttheader_with_timeout(1, &hang, Duration::from_millis(500)))
            .unwrap();
        match read_ttheader(&mut c) {
            (1, Answer::Exception(ApplicationExceptionKind::InternalError, message)) => {
                assert_eq!(
                    message,
                    format!(
                        "{}hang was dropped unfinished",
                        crate::refusal::DEADLINE_PREFIX
                    )
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(s.gauge.now(), 0, "the handler's future is gone");
        let echo = call::<Binary>(MessageType::Call, "echo", 2, "still here");
        c.write_all(&ttheader_with_timeout(2, &echo, Duration::from_secs(10)))
            .unwrap();
        assert_eq!(read_ttheader(&mut c), (2, Answer::Ok("still here".into())));
    });
}

/// tower's own middleware around a real server's dispatcher, called by a real client:
/// `timeout` cuts off a handler that never answers (an application exception reaches
/// the caller), `concurrency_limit(1)` makes two concurrent calls run one at a time,
/// and errors from below come through tower as themselves.
///
/// The timeout is inside the limit: it times each call's run (300 ms of `slow`, with
/// 700 ms to spare), not its wait for the one before.
#[test]
fn tower_timeout_and_concurrency_limit_wrap_a_real_server() {
    use crate::client::{Client, ClientContext, ErrorKind};
    use crate::tower_compat::{FromTower, IntoTower};

    runtime().block_on(async {
        let service = TestService::default();
        let gauge = Arc::clone(&service.gauge);
        let server = Server::new(service).layer(crate::service::layer_fn(|inner| {
            FromTower::new(
                tower::ServiceBuilder::new()
                    .map_err(DispatchError::from)
                    .concurrency_limit(1)
                    .timeout(Duration::from_secs(1))
                    .service(IntoTower::new(inner)),
            )
        }));
        let bound = server.bind(&"127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = bound.local_addr().clone();
        let serving = tokio::spawn(bound.serve());
        let client = Client::builder("Test").address(addr).build().unwrap();
        let test = async {
            // Two slow calls at once: the limit lets one in at a time.
            let calls: Vec<_> = (0..2)
                .map(|i| {
                    let client = client.clone();
                    tokio::spawn(async move {
                        let mut cx = ClientContext::new();
                        client
                            .call::<Text, Text>(&mut cx, "slow", text(1, &i.to_string()))
                            .await
                    })
                })
                .collect();
            for (i, call) in calls.into_iter().enumerate() {
                assert_eq!(call.await.unwrap().unwrap(), text(0, &i.to_string()));
            }
            assert_eq!(gauge.peak.load(Ordering::SeqCst), 1, "calls overlapped");

            let mut cx = ClientContext::new();
            match client
                .call::<Text, Text>(&mut cx, "hang", text(1, "x"))
                .await
            {
                Err(e) if e.kind() == ErrorKind::Application => {
                    let e = e.application_exception().unwrap();
                    assert_eq!(e.kind, ApplicationExceptionKind::InternalError);
                    assert_eq!(e.message.as_str(), "request timed out");
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(gauge.now(), 0, "the timed-out handler's future is gone");
            // A dispatcher's own error went into tower boxed and came out as itself.
            match client
                .call::<Text, Text>(&mut cx, "nope", text(1, "x"))
                .await
            {
                Err(e) if e.kind() == ErrorKind::Application => {
                    let e = e.application_exception().unwrap();
                    assert_eq!(e.kind, ApplicationExceptionKind::UnknownMethod);
                }
                other => panic!("{other:?}"),
            }
        };
        tokio::time::timeout(Duration::from_secs(60), test)
            .await
            .expect("the test ran out of time");
        serving.abort();
    });
}

/// tower boxes the errors of the services it wraps: a `DispatchError` comes back out
/// of the box as itself, anything else as an `INTERNAL_ERROR` with its message.
#[test]
fn dispatch_errors_come_back_out_of_tower_boxes() {
    let boxed: tower::BoxError = Box::new(DispatchError::UnknownMethod);
    assert!(matches!(
        DispatchError::from(boxed),
        DispatchError::UnknownMethod
    ));
    let boxed: tower::BoxError = Box::new(tower::timeout::error::Elapsed::new());
    match DispatchError::from(boxed) {
        DispatchError::Application(e) => {
            assert_eq!(e.kind, ApplicationExceptionKind::InternalError);
            assert_eq!(e.message.as_str(), "request timed out");
        }
        other => panic!("{other:?}"),
    }
}

/// The limiter refuses over-limit calls before decoding them, at once, and lets the
/// connection go on: with a concurrency limit of one, a call sent while a slow one
/// runs gets the overload exception (its arguments, which do not decode, are never
/// looked at), and the next call after the slow one is answered.
#[test]
fn over_the_concurrency_limit_a_call_is_refused_before_decoding() {
    let limit = crate::server::LimitConfig {
        max_concurrency: Some(1),
        max_qps: None,
    };
    on_limited_harness(ServerConfig::default(), limit, |mut slow, s| {
        slow.write_all(&framed(&call::<Binary>(MessageType::Call, "wait", 1, "s")))
            .unwrap();
        assert_eq!(s.gauge.now(), 1, "the first call runs");
        let mut other = slow.sibling();
        other.write_all(&framed(&undecodable("echo", 2))).unwrap();
        let (h, a) = answer::<Binary>(read_framed(&mut other));
        assert_eq!(h.seq_id, 2);
        match a {
            Answer::Exception(kind, msg) => {
                assert_eq!(kind, ApplicationExceptionKind::InternalError);
                assert!(msg.starts_with(crate::refusal::OVERLOAD_PREFIX), "{msg}");
            }
            other => panic!("{other:?}"),
        }
        // Over TTHeader, the reply's header names the refusal too.
        let mut third = slow.sibling();
        third
            .write_all(&ttheader(4, &undecodable("echo", 4)))
            .unwrap();
        let reply = Bytes::from(framed(&read_framed(&mut third)));
        let (rh, _) = Header::decode(&reply, &HeaderLimits::default()).unwrap();
        assert_eq!(rh.str_value(crate::refusal::HEADER_KEY), Some("overloaded"));
        s.gate.add_permits(1);
        slow.poll_calls();
        assert_eq!(
            answer::<Binary>(read_framed(&mut slow)).1,
            Answer::Ok("s".into())
        );
        // The slot is free again: the refused connection's next call is answered.
        other
            .write_all(&framed(&call::<Binary>(MessageType::Call, "echo", 3, "e")))
            .unwrap();
        assert_eq!(
            answer::<Binary>(read_framed(&mut other)).1,
            Answer::Ok("e".into())
        );
    });
}

/// A QPS limit of one call a second (a burst of one) through a real client: the first
/// call passes, the next one at once is refused as `Overloaded`, which the client
/// knows did not run.
#[test]
fn over_the_qps_limit_the_client_sees_an_overload() {
    use crate::client::{Client, ClientContext, ErrorKind, RetryPolicy};
    let limit = crate::server::LimitConfig {
        max_concurrency: None,
        max_qps: Some(1),
    };
    with_limited_server(ServerConfig::default(), limit, |s| {
        runtime().block_on(async {
            let client = Client::builder("Test")
                .address(s.address.clone())
                .retry(RetryPolicy::new().max_retries(0))
                .build()
                .unwrap();
            let mut cx = ClientContext::new();
            let first = client
                .call::<Text, Text>(&mut cx, "echo", text(1, "a"))
                .await;
            assert_eq!(first.unwrap(), text(0, "a"));
            let err = client
                .call::<Text, Text>(&mut cx, "echo", text(1, "b"))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Overloaded, "{err}");
            assert!(!err.may_have_run() && err.is_retryable());
        });
    });
}

/// A server following a governance takes up its limits while it runs: a QPS limit
/// refuses the second call at once, its removal lets calls through again, and a
/// connection limit closes a connection over it as it is accepted. The limits in
/// force are in the metrics.
#[test]
fn a_server_takes_up_governed_limits_while_running() {
    use crate::client::{Client, ClientContext, ErrorKind, RetryPolicy};
    use crate::governance::ServerGovernance;
    let metrics = crate::metrics::Metrics::new();
    let mut config = ServerConfig::default();
    config.observability.metrics = Some(metrics.clone());
    runtime().block_on(async {
        let gov = ServerGovernance::new("Test");
        let given = gov.clone();
        let at = "127.0.0.1:0".parse().unwrap();
        let s = start_with(config, &at, move |srv| srv.governance(given)).await;
        let client = Client::builder("Test")
            .address(s.address.clone())
            .retry(RetryPolicy::new().max_retries(0))
            .build()
            .unwrap();
        let mut cx = ClientContext::new();
        let mut echo = async |body: &str| {
            client
                .call::<Text, Text>(&mut cx, "echo", text(1, body))
                .await
        };
        for _ in 0..3 {
            echo("free").await.unwrap();
        }
        gov.apply_kitex(Some(r#"{"qps_limit": 1}"#)).unwrap();
        echo("first").await.unwrap();
        let err = echo("second").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Overloaded, "{err}");
        let text = metrics.encode();
        let line = r#"rpc_governance_value{side="server",service="Test",method="",setting="qps_limit"} 1"#;
        assert!(text.contains(line), "{text}");

        gov.apply_kitex(None).unwrap();
        for _ in 0..3 {
            echo("free again").await.unwrap();
        }

        // The client's connection is open: one more is over a limit of one.
        gov.apply_kitex(Some(r#"{"connection_limit": 1}"#)).unwrap();
        let addr = s.addr;
        let msg = framed(&call::<Binary>(MessageType::Call, "echo", 1, "x"));
        let closed = tokio::task::spawn_blocking(move || {
            let mut c = connect(addr);
            let _ = c.write_all(&msg);
            read_until_closed(&mut c)
        });
        assert!(closed.await.unwrap().is_empty(), "served over the limit");
        echo("still served").await.unwrap();
        assert!(gov.apply_kitex(Some(r#"{"connection_limit": -1}"#)).is_err());
        assert_eq!(gov.limit().unwrap().connections, Some(1), "the last good kept");
        let text = metrics.encode();
        let refused = r#"rpc_governance_updates_total{side="server",service="Test",category="limit",result="refused"} 1"#;
        assert!(text.contains(refused), "{text}");
    });
}

mod multiplex;
mod registry;
mod rules;
mod streams;
mod trace;

/// A mux client whose server begins to drain: the control frame retires the
/// connection, the calls in progress on it are still answered, and the next call does
/// not go on it (it would be refused unrun in the linger): it opens a new connection,
/// which the closed listener refuses.
#[test]
fn a_mux_client_leaves_a_connection_its_server_is_closing() {
    use crate::client::{Client, ClientConfig, ClientContext, ErrorKind, RetryPolicy};
    runtime().block_on(async {
        let mut s = start(ServerConfig {
            timeouts: ServerTimeouts {
                drain: Duration::from_secs(30),
                ..Default::default()
            },
            ..ServerConfig::default()
        })
        .await;
        let client = Client::builder("Test")
            .address(s.address.clone())
            .config(ClientConfig {
                pool: ConnectionPool {
                    mux: true,
                    mux_per_instance: 1,
                    ..Default::default()
                },
                ..ClientConfig::default()
            })
            .retry(RetryPolicy::new().max_retries(0))
            .build()
            .unwrap();
        let slow = |t: &'static str| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .call::<Text, Text>(&mut ClientContext::new(), "slow", text(1, t))
                    .await
            })
        };
        let (one, two) = (slow("one"), slow("two"));
        let give_up = std::time::Instant::now() + Duration::from_secs(20);
        while s.gauge.now() < 2 && std::time::Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(s.gauge.now(), 2, "both calls in progress on one connection");
        let _ = s.stop.take().map(|t| t.send(()));
        assert_eq!(one.await.unwrap().unwrap(), text(0, "one"));
        assert_eq!(two.await.unwrap().unwrap(), text(0, "two"));
        let give_up = std::time::Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(s.addr).is_ok() && std::time::Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let e = client
            .call::<Text, Text>(&mut ClientContext::new(), "echo", text(1, "next"))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Connect, "{e}");
        tokio::time::timeout(Duration::from_secs(20), s.done)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    });
}

/// The QPS limit counts from the time the connection took each frame, not from a clock
/// of its own: with one call a second, a second call at the same moment is refused,
/// and one a (harness) second later is admitted, though hardly any real time passed.
#[test]
fn the_limiter_counts_from_the_time_the_core_took_the_frame() {
    let limit = crate::server::LimitConfig {
        max_concurrency: None,
        max_qps: Some(1),
    };
    on_limited_harness(ServerConfig::default(), limit, |mut c, _| {
        let ask = |c: &mut TestHarness, seq: i32| {
            c.write_all(&framed(&call::<Binary>(
                MessageType::Call,
                "echo",
                seq,
                "q",
            )))
            .unwrap();
            answer::<Binary>(read_framed(c)).1
        };
        assert_eq!(ask(&mut c, 1), Answer::Ok("q".into()));
        match ask(&mut c, 2) {
            Answer::Exception(_, msg) => {
                assert!(msg.starts_with(crate::refusal::OVERLOAD_PREFIX), "{msg}")
            }
            other => panic!("{other:?}"),
        }
        c.advance(Duration::from_secs(1));
        assert_eq!(
            ask(&mut c, 3),
            Answer::Ok("q".into()),
            "a token a second later"
        );
    });
}

/// The server's layers follow the client's convention: the first added is the
/// outermost, so a call meets the layers in the order they were added.
#[test]
fn the_first_server_layer_added_is_the_outermost() {
    use std::sync::Mutex;

    /// Notes its name when a call comes through it, then passes the call on.
    #[derive(Clone)]
    struct Note<S> {
        inner: S,
        name: &'static str,
        seen: Arc<Mutex<Vec<&'static str>>>,
    }

    impl<S> Service<ServerContext, ServerRequest> for Note<S>
    where
        S: Service<ServerContext, ServerRequest, Error = DispatchError> + Sync,
    {
        type Response = S::Response;
        type Error = DispatchError;

        async fn call(
            &self,
            cx: &mut ServerContext,
            req: ServerRequest,
        ) -> Result<S::Response, DispatchError> {
            self.seen.lock().unwrap().push(self.name);
            self.inner.call(cx, req).await
        }
    }

    /// Makes [`Note`]s of one name.
    struct NoteLayer(&'static str, Arc<Mutex<Vec<&'static str>>>);

    impl<S> crate::service::Layer<S> for NoteLayer {
        type Service = Note<S>;

        fn layer(self, inner: S) -> Note<S> {
            Note {
                inner,
                name: self.0,
                seen: self.1,
            }
        }
    }

    let seen: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let note = |name| NoteLayer(name, Arc::clone(&seen));
    let server = Server::new(TestService::default())
        .layer(note("first"))
        .layer(note("second"));
    let mut c = Harness::new(Arc::new(server.into_shared()));
    c.write_all(&framed(&call::<Binary>(MessageType::Call, "echo", 1, "o")))
        .unwrap();
    assert_eq!(
        answer::<Binary>(read_framed(&mut c)).1,
        Answer::Ok("o".into())
    );
    assert_eq!(*seen.lock().unwrap(), ["first", "second"]);
}
