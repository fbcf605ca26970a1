//! Each kind of stream from opening to end, resets both ways, frames for streams
//! that are not open, limits, and how long the core keeps a stream.

use std::task::Poll;

use thrift_wire::{ApplicationException, ApplicationExceptionKind, Utf8Bytes};

use super::{End, Pair, data, ended, kitex_header, message};
use crate::stream::core::{Event, Side};
use crate::stream::error::{Metadata, StreamError};
use crate::stream::frame::{BizStatus, Frame, FrameKind, read_exception};
use crate::stream::{HandlerError, StreamConfig};

#[test]
fn a_server_stream_runs_from_header_to_trailers() {
    let mut p = Pair::new();
    let id = p.open("Watch");
    p.send(Side::Client, id, b"subscribe");
    p.client.close(id, None).expect("closed");
    p.drive();
    assert_eq!(p.server.recv(id), message(b"subscribe"));
    assert_eq!(p.server.recv(id), ended());
    // The server's header goes with its first message.
    let mut header = Metadata::new();
    header.insert("k", "v");
    p.server.core.set_header(id, header.clone());
    for m in [&b"a"[..], b"b", b"c"] {
        p.send(Side::Server, id, m);
    }
    let mut trailer = Metadata::new();
    trailer.insert("t", "1");
    p.server.core.set_trailer(id, trailer.clone());
    p.server.close(id, None).expect("closed");
    p.drive();
    assert_eq!(p.client.core.peer_header(id), Poll::Ready(Ok(header)));
    for m in [&b"a"[..], b"b", b"c"] {
        assert_eq!(p.client.recv(id), Poll::Ready(Ok(Some(m.to_vec().into()))));
    }
    assert_eq!(p.client.recv(id), ended());
    assert_eq!(p.client.core.peer_trailer(id), Some(trailer));
    // Over both ways: out of both tables, ended cleanly.
    assert_eq!(
        (p.client.core.open_streams(), p.server.core.open_streams()),
        (0, 0)
    );
    assert_eq!(p.client.outcome(id), Some("ok"));
    assert_eq!(p.server.outcome(id), Some("ok"));
    p.client.core.release(id);
    p.server.core.release(id);
    assert_eq!(
        p.client.core.kept_streams() + p.server.core.kept_streams(),
        0
    );
}

#[test]
fn a_client_stream_is_answered_once_its_requests_end() {
    let mut p = Pair::new();
    let id = p.open("Sum");
    for _ in 0..5 {
        p.send(Side::Client, id, b"n");
    }
    assert_eq!(p.server.recv(id), message(b"n"));
    // The server has not answered: the client's receiver waits.
    assert_eq!(p.client.recv(id), Poll::Pending);
    p.client.close(id, None).expect("closed");
    assert_eq!(
        p.client.send(id, b"late", p.now),
        Poll::Ready(Err(StreamError::SendClosed))
    );
    p.drive();
    let mut taken = 1;
    while let Poll::Ready(Ok(Some(_))) = p.server.recv(id) {
        taken += 1;
    }
    assert_eq!(taken, 5);
    p.send(Side::Server, id, b"5");
    p.server.close(id, None).expect("closed");
    p.drive();
    assert_eq!(p.client.recv(id), message(b"5"));
    assert_eq!(p.client.recv(id), ended());
    assert_eq!(p.client.core.open_streams(), 0);
}

#[test]
fn a_bidi_stream_ping_pongs_and_a_handler_error_reaches_the_client() {
    let mut p = Pair::new();
    let id = p.open("Chat");
    for _ in 0..10 {
        p.send(Side::Client, id, b"ping");
        assert_eq!(p.server.recv(id), message(b"ping"));
        p.send(Side::Server, id, b"pong");
        assert_eq!(p.client.recv(id), message(b"pong"));
    }
    let failed = ApplicationException::new(ApplicationExceptionKind::InternalError, "boom");
    p.server
        .close(id, Some(&HandlerError::Exception(failed.clone())))
        .expect("closed");
    p.drive();
    assert_eq!(
        p.client.recv(id),
        Poll::Ready(Err(StreamError::Application(failed)))
    );
    // Ended with an error: over for both sides, the client may send no more.
    assert!(p.client.core.is_over(id));
    assert_eq!(
        p.server.outcome(id),
        None,
        "the server still reads until it finishes"
    );
    p.server.core.forget(id);
    p.server.collect();
    assert_eq!(p.server.outcome(id), Some("application_error"));
    assert_eq!(p.client.outcome(id), Some("application_error"));
}

#[test]
fn a_business_status_in_a_trailer_is_the_clients_error() {
    let mut p = Pair::new();
    let id = p.open("Chat");
    let status = BizStatus {
        code: 1234,
        message: "no".into(),
        extra: None,
    };
    p.server
        .close(id, Some(&HandlerError::Biz(status.clone())))
        .expect("closed");
    p.drive();
    assert_eq!(
        p.client.recv(id),
        Poll::Ready(Err(StreamError::Biz(status)))
    );
}

#[test]
fn a_client_rst_fails_the_servers_halves_and_the_handlers_answer_is_dropped() {
    let mut p = Pair::new();
    let id = p.open("Chat");
    p.client.reset(
        id,
        StreamError::Cancelled("the caller dropped the stream".into()),
    );
    p.drive();
    assert!(matches!(
        p.server.recv(id),
        Poll::Ready(Err(StreamError::Cancelled(_)))
    ));
    assert!(matches!(
        p.server.core.reset_reason(id),
        Some(StreamError::Cancelled(_))
    ));
    assert_eq!(p.server.outcome(id), Some("cancelled"));
    // The handler returns after the rst: its trailer goes all the same, as Kitex's
    // server sends it, and the client, its stream gone, drops it.
    assert_eq!(
        p.server.send(id, b"x", p.now),
        Poll::Ready(Err(p.server.core.reset_reason(id).expect("reset")))
    );
    assert!(
        p.server.close(id, None).is_err(),
        "a plain close sends nothing"
    );
    p.server
        .core
        .close_send(&mut p.server.out, id, None, true)
        .expect("answered after the rst");
    let answer = p.server.written();
    assert_eq!(
        answer.iter().map(|f| f.kind).collect::<Vec<_>>(),
        [FrameKind::Header, FrameKind::Trailer]
    );
    for frame in &answer {
        p.client.feed(frame);
    }
    assert!(p.client.written().is_empty(), "dropped without an answer");
    assert!(matches!(
        p.client.recv(id),
        Poll::Ready(Err(StreamError::Cancelled(_)))
    ));
}

#[test]
fn a_server_rst_reaches_the_client_with_its_error() {
    let mut p = Pair::new();
    let id = p.open("Chat");
    p.server.reset(
        id,
        StreamError::Protocol("a message that does not decode".into()),
    );
    p.drive();
    let Poll::Ready(Err(StreamError::Reset(e))) = p.client.recv(id) else {
        panic!("the client's stream was not reset");
    };
    assert!(e.message.contains("does not decode"), "{e}");
    assert!(p.client.core.is_over(id));
    assert_eq!(p.client.core.open_streams(), 0);
    // Nothing more goes on a stream reset here.
    assert!(p.server.close(id, None).is_err());
    assert!(p.server.written().is_empty());
}

#[test]
fn an_unknown_method_is_reset_at_once_and_the_client_says_which() {
    let mut p = Pair::new();
    let id = p.open("Nope");
    // The server's driver decides it serves no such method.
    p.server.reset(
        id,
        StreamError::UnknownMethod("unknown streaming method Nope".into()),
    );
    p.drive();
    assert_eq!(
        p.client.recv(id),
        Poll::Ready(Err(StreamError::UnknownMethod(
            "unknown streaming method Nope".into()
        )))
    );
}

#[test]
fn frames_for_streams_never_opened_get_an_rst_and_those_for_ended_ones_are_dropped() {
    let mut server = End::new(Side::Server, StreamConfig::default());
    server.feed(&data(7, 3));
    let rst = server.written();
    assert_eq!(rst.len(), 1);
    assert_eq!((rst[0].kind, rst[0].stream_id), (FrameKind::Rst, 7));
    let e = read_exception(rst[0].payload.clone()).expect("an exception");
    assert!(e.message.contains("before the stream's header"), "{e}");
    // An rst for a stream never opened is not answered.
    server.feed(&Frame::new(FrameKind::Rst, 9));
    assert!(server.written().is_empty());
    // A stream that ended: what was in flight is dropped, silently.
    server.feed(&kitex_header(3, "Echo"));
    assert_eq!(server.opened().len(), 1);
    server.reset(3, StreamError::Cancelled("gone".into()));
    server.written();
    server.feed(&data(3, 3));
    server.feed(&Frame::new(FrameKind::Trailer, 3));
    assert!(server.written().is_empty());
    // The same at a client, for any id.
    let mut client = End::new(Side::Client, StreamConfig::default());
    client.feed(&data(5, 3));
    client.feed(&kitex_header(5, "Echo"));
    assert!(client.written().is_empty());
    assert_eq!(client.core.kept_streams(), 0);
}

#[test]
fn data_after_the_peers_trailer_resets_that_stream_alone() {
    let mut server = End::new(Side::Server, StreamConfig::default());
    server.feed(&kitex_header(1, "Echo"));
    server.feed(&kitex_header(3, "Echo"));
    server.feed(&Frame::new(FrameKind::Trailer, 1));
    server.feed(&data(1, 3));
    let rst = server.written();
    assert_eq!(
        rst.iter()
            .map(|f| (f.kind, f.stream_id))
            .collect::<Vec<_>>(),
        [(FrameKind::Rst, 1)]
    );
    assert!(matches!(
        server.core.reset_reason(1),
        Some(StreamError::Protocol(_))
    ));
    assert_eq!(server.core.reset_reason(3), None);
    assert_eq!(server.core.open_streams(), 1);
}

#[test]
fn a_server_refuses_streams_beyond_its_limit_and_a_client_stops_at_its_own() {
    let limited = StreamConfig {
        max_streams: 2,
        ..StreamConfig::default()
    };
    let mut p = Pair::with(StreamConfig::default(), limited);
    let a = p.open("A");
    p.open("B");
    let c = p
        .client
        .open_stream("C", None)
        .expect("the client's own limit is higher");
    p.drive();
    assert!(p.server.opened().is_empty());
    assert!(p.server.saw(&Event::Refused(c)));
    let Poll::Ready(Err(StreamError::Application(e))) = p.client.recv(c) else {
        panic!("not refused");
    };
    assert!(e.message.contains("2 streams are open"), "{e}");
    // A stream that ends makes room.
    p.client.reset(a, StreamError::Cancelled("done".into()));
    p.drive();
    p.open("D");

    let mut client = End::new(Side::Client, limited);
    let open = |c: &mut End| c.open_stream("M", None);
    open(&mut client).expect("first");
    open(&mut client).expect("second");
    assert!(matches!(open(&mut client), Err(StreamError::Refused(_))));
}

#[test]
fn a_window_that_is_not_a_number_refuses_the_stream() {
    let mut server = End::new(Side::Server, StreamConfig::default());
    let mut header = kitex_header(1, "Echo");
    header.meta.push((
        Utf8Bytes::from_static(crate::stream::flow::WINDOW_KEY),
        Utf8Bytes::from_static("lots"),
    ));
    server.feed(&header);
    assert!(server.opened().is_empty());
    let refused = server.written();
    assert_eq!(refused[0].kind, FrameKind::Trailer);
    let e = read_exception(refused[0].payload.clone()).expect("an exception");
    assert!(e.message.contains("not a decimal number"), "{e}");
}

#[test]
fn a_closing_servers_refusal_stops_new_streams_on_the_connection() {
    let mut p = Pair::new();
    let id = p.open("A");
    let mut trailer = Metadata::new();
    trailer.insert(
        crate::refusal::HEADER_KEY,
        crate::refusal::Refusal::Closing.as_str(),
    );
    p.server.core.set_trailer(id, trailer);
    p.server
        .close(
            id,
            Some(&HandlerError::Exception(crate::refusal::closing())),
        )
        .expect("refused");
    p.drive();
    assert!(!p.client.core.is_open());
}

#[test]
fn an_orphaned_connection_goes_idle_with_its_last_stream_and_released_streams_leave_nothing() {
    let mut p = Pair::new();
    let a = p.open("A");
    let b = p.open("B");
    p.client.core.orphan();
    p.client.collect();
    assert!(!p.client.saw(&Event::Idle));
    p.client.reset(a, StreamError::Cancelled("dropped".into()));
    assert!(!p.client.saw(&Event::Idle));
    p.client.core.release(a);
    p.client.core.release(b);
    p.client.collect();
    assert!(p.client.saw(&Event::Idle));
    assert_eq!(p.client.core.kept_streams(), 0);
    // Ids are not reused while a stream is kept, and wrap to 1.
    let mut c = End::new(Side::Client, StreamConfig::default());
    c.core.next_id = i32::MAX;
    let open = |c: &mut End| c.open_stream("M", None).expect("opened");
    assert_eq!(open(&mut c), i32::MAX);
    assert_eq!(open(&mut c), 1);
    c.core.next_id = i32::MAX;
    assert_eq!(open(&mut c), 2, "both kept ones skipped");
}
