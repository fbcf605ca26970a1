//! Credit windows with a peer that counts and one that does not (Kitex), the wait
//! for a server's window, deadlines on the manual clock, and a broken connection.

use std::io;
use std::task::Poll;
use std::time::Duration;

use thrift_wire::Utf8Bytes;

use super::{End, Pair, data, kitex_header};
use crate::stream::StreamConfig;
use crate::stream::core::{Event, Side};
use crate::stream::error::StreamError;
use crate::stream::flow::{CREDIT_KEY, INITIAL_CREDIT, MESSAGE_COST, UNCOUNTED_KEY, WINDOW_KEY};
use crate::stream::frame::{Frame, FrameKind};

const KIB: usize = 1024;

/// A window of 64 KiB both ways.
fn small() -> StreamConfig {
    StreamConfig {
        window: INITIAL_CREDIT,
        ..StreamConfig::default()
    }
}

#[test]
fn a_counting_sender_waits_for_credit_and_the_receiver_grants_it_as_it_takes() {
    let mut p = Pair::with(small(), small());
    let id = p.open("Upload");
    // The server told its window before anything else.
    let mut sent = 0;
    while p.client.send(id, &[0; 4 * KIB], p.now) == Poll::Ready(Ok(())) {
        sent += 1;
        p.drive();
    }
    let cost = (4 * KIB) as u64 + MESSAGE_COST;
    // The window, and the one message that may overdraw it.
    assert_eq!(sent, INITIAL_CREDIT.div_ceil(cost));
    assert!(p.server.core.queued(id) <= INITIAL_CREDIT + cost);
    assert_eq!(
        p.server.core.reset_reason(id),
        None,
        "never beyond its credit"
    );
    // Taking half the window grants it back in one meta frame.
    let before = p.client.events.len();
    for _ in 0..(INITIAL_CREDIT / 2).div_ceil(cost) {
        assert!(matches!(p.server.recv(id), Poll::Ready(Ok(Some(_)))));
    }
    let grants = p.server.written();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].kind, FrameKind::Meta);
    assert!(grants[0].meta_value(CREDIT_KEY).is_some());
    for g in &grants {
        p.client.feed(g);
    }
    assert!(p.client.events[before..].contains(&Event::Writable(id)));
    assert!(p.client.send(id, &[0; 4 * KIB], p.now).is_ready());
}

#[test]
fn a_counting_peer_beyond_its_credit_gets_its_stream_reset() {
    let mut server = End::new(Side::Server, small());
    let mut header = kitex_header(1, "Upload");
    header.meta.push((
        Utf8Bytes::from_static(WINDOW_KEY),
        Utf8Bytes::from(INITIAL_CREDIT.to_string()),
    ));
    server.feed(&header);
    server.written();
    // 32 KiB messages: one within the window, a second overdraws it, a third
    // breaks it.
    for _ in 0..2 {
        server.feed(&data(1, 32 * KIB));
    }
    assert!(server.written().is_empty());
    server.feed(&data(1, 32 * KIB));
    let rst = server.written();
    assert_eq!(
        rst.iter().map(|f| f.kind).collect::<Vec<_>>(),
        [FrameKind::Rst]
    );
    assert!(
        matches!(server.core.reset_reason(1), Some(StreamError::Protocol(m)) if m.contains("beyond its window"))
    );
    // What was queued before can still be taken.
    assert!(matches!(server.recv(1), Poll::Ready(Ok(Some(_)))));
}

#[test]
fn a_kitex_client_that_does_not_count_holds_the_reader_when_its_queue_is_full() {
    let mut server = End::new(Side::Server, small());
    server.feed(&kitex_header(1, "Upload"));
    assert!(
        server.written().is_empty(),
        "no window for a peer that did not grant one"
    );
    let mut fed = 0;
    while server.core.wants_frame() {
        server.feed(&data(1, 8 * KIB));
        fed += 1;
    }
    assert_eq!(
        fed,
        INITIAL_CREDIT.div_ceil((8 * KIB) as u64 + MESSAGE_COST)
    );
    // Taking one message lets the reader go on; no grant goes to such a peer.
    assert!(matches!(server.recv(1), Poll::Ready(Ok(Some(_)))));
    assert!(server.core.wants_frame());
    assert!(server.saw(&Event::Room));
    assert!(server.written().is_empty());
    // So does the stream's end.
    server.feed(&data(1, 8 * KIB));
    assert!(!server.core.wants_frame());
    server.reset(1, StreamError::Cancelled("done".into()));
    assert!(server.core.wants_frame());
}

#[test]
fn a_kitex_servers_header_without_a_window_lifts_the_clients_limit() {
    let mut client = End::new(Side::Client, small());
    let now = std::time::Instant::now();
    let id = client.open_stream("Chat", None).expect("opened");
    let header = client.written();
    assert!(
        header[0].meta_value(WINDOW_KEY).is_some(),
        "the client asks"
    );
    client.feed(&Frame::new(FrameKind::Header, id));
    for _ in 0..100 {
        assert_eq!(client.send(id, &[0; 4 * KIB], now), Poll::Ready(Ok(())));
    }
    // Its messages hold the reader at a window's worth, with no grant.
    let mut fed = 0;
    while client.core.wants_frame() {
        client.feed(&data(id, 8 * KIB));
        fed += 1;
    }
    assert_eq!(
        fed,
        INITIAL_CREDIT.div_ceil((8 * KIB) as u64 + MESSAGE_COST)
    );
    // The next stream on the connection does not ask.
    client.written();
    client.open_stream("Chat", None).expect("opened");
    assert_eq!(client.written()[0].meta_value(WINDOW_KEY), None);
}

#[test]
fn a_client_stops_counting_when_a_silent_server_grants_no_window_in_time() {
    let config = small();
    let mut client = End::new(Side::Client, config);
    let start = std::time::Instant::now();
    let id = client.open_stream("Sum", None).expect("opened");
    client.written();
    while client.send(id, &[0; 4 * KIB], start) == Poll::Ready(Ok(())) {}
    client.written();
    assert_eq!(
        client.core.poll_timeout(),
        Some(start + config.decision_wait)
    );
    // Not yet.
    client
        .core
        .handle_timeout(&mut client.out, start + config.decision_wait / 2);
    assert!(client.written().is_empty());
    assert!(client.send(id, &[0; 4 * KIB], start).is_pending());
    let at = start + config.decision_wait;
    client.core.handle_timeout(&mut client.out, at);
    client.collect();
    let told = client.written();
    assert_eq!(told.len(), 1);
    assert!(told[0].meta_value(UNCOUNTED_KEY).is_some());
    assert!(client.saw(&Event::Writable(id)));
    assert_eq!(client.send(id, &[0; 4 * KIB], at), Poll::Ready(Ok(())));
    assert_eq!(client.core.poll_timeout(), None);
}

#[test]
fn a_server_that_hears_the_client_stopped_counting_holds_its_messages_as_kitexs() {
    let mut p = Pair::with(small(), small());
    let id = p.open("Sum");
    let mut told = Frame::new(FrameKind::Meta, id);
    told.meta
        .push((Utf8Bytes::from_static(UNCOUNTED_KEY), Utf8Bytes::new()));
    p.server.feed(&told);
    let mut fed = 0;
    while p.server.core.wants_frame() {
        p.server.feed(&data(id, 8 * KIB));
        fed += 1;
    }
    assert!(fed > 1);
    assert_eq!(
        p.server.core.reset_reason(id),
        None,
        "nothing beyond a credit"
    );
}

#[test]
fn a_window_that_comes_in_time_counts_what_was_sent_before_it() {
    let mut p = Pair::with(small(), StreamConfig::default());
    let id = p.client.open_stream("Up", None).expect("opened");
    // Sent before the server's window arrives.
    for _ in 0..4 {
        assert!(p.client.send(id, &[0; 4 * KIB], p.now).is_ready());
    }
    p.drive();
    let spent = 4 * ((4 * KIB) as u64 + MESSAGE_COST);
    let window = StreamConfig::default().window;
    let left = p.client.core.streams[&id].send.credit();
    assert_eq!(left, Some(window as i64 - spent as i64));
    assert_eq!(p.client.core.poll_timeout(), None);
}

#[test]
fn a_deadline_resets_the_stream_both_sides_on_the_manual_clock() {
    let mut p = Pair::new();
    let deadline = p.now + Duration::from_secs(1);
    let id = p
        .client
        .open_stream("Slow", Some(deadline))
        .expect("opened");
    p.drive();
    assert_eq!(p.server.opened().len(), 1);
    assert_eq!(p.client.core.poll_timeout(), Some(deadline));
    p.advance(Duration::from_millis(999));
    assert_eq!(p.client.core.reset_reason(id), None);
    p.advance(Duration::from_millis(1));
    assert_eq!(
        p.client.recv(id),
        Poll::Ready(Err(StreamError::DeadlineExceeded))
    );
    assert_eq!(
        p.server.recv(id),
        Poll::Ready(Err(StreamError::DeadlineExceeded))
    );
    assert_eq!(p.client.outcome(id), Some("deadline_exceeded"));
    assert_eq!(p.client.core.poll_timeout(), None);
}

#[test]
fn a_stream_that_ends_first_leaves_no_timer_behind() {
    let mut p = Pair::new();
    let mut ids = Vec::new();
    for _ in 0..100 {
        let deadline = Some(p.now + Duration::from_secs(3600));
        let id = p.client.open_stream("Quick", deadline).expect("opened");
        ids.push(id);
    }
    p.drive();
    for id in ids {
        p.server.close(id, None).expect("closed");
        p.client.close(id, None).expect("closed");
        p.drive();
        p.client.core.release(id);
    }
    assert_eq!(p.client.core.timers.len(), 0);
    assert_eq!(p.client.core.poll_timeout(), None);
}

#[test]
fn a_broken_connection_fails_every_stream_and_is_told_once() {
    let mut p = Pair::new();
    let a = p.open("A");
    let b = p.open("B");
    p.client.reset(b, StreamError::Cancelled("dropped".into()));
    let eof = StreamError::Connection {
        kind: io::ErrorKind::UnexpectedEof,
        message: "the peer closed the connection".into(),
    };
    p.client.core.connection_lost(eof.clone());
    p.client.core.connection_lost(eof.clone());
    p.client.collect();
    assert_eq!(
        p.client
            .events
            .iter()
            .filter(|e| **e == Event::Broken)
            .count(),
        1
    );
    assert_eq!(p.client.recv(a), Poll::Ready(Err(eof.clone())));
    assert!(
        matches!(
            p.client.recv(b),
            Poll::Ready(Err(StreamError::Cancelled(_)))
        ),
        "keeps its own"
    );
    assert_eq!(p.client.outcome(a), Some("connection_error"));
    assert!(!p.client.core.wants_frame());
    let opened = p.client.open_stream("C", None);
    assert_eq!(opened, Err(eof));
}

#[test]
fn a_connection_closed_here_or_with_no_stream_is_not_a_break() {
    let mut p = Pair::new();
    p.open("A");
    p.client.core.connection_lost(StreamError::Connection {
        kind: io::ErrorKind::ConnectionAborted,
        message: "closed here".into(),
    });
    p.client.collect();
    assert!(!p.client.saw(&Event::Broken));
    let mut idle = End::new(Side::Client, StreamConfig::default());
    idle.core.connection_lost(StreamError::Connection {
        kind: io::ErrorKind::UnexpectedEof,
        message: "gone".into(),
    });
    idle.collect();
    assert!(!idle.saw(&Event::Broken));
}

#[test]
fn a_frame_that_cannot_be_read_fails_the_connection() {
    let mut p = Pair::new();
    let id = p.open("A");
    let garbage = bytes::Bytes::from_static(b"\x00\x00\x00\x04nope");
    let error = p
        .server
        .core
        .handle_input(&mut p.server.out, &garbage)
        .expect_err("not a frame");
    assert!(matches!(
        error,
        StreamError::Connection {
            kind: io::ErrorKind::InvalidData,
            ..
        }
    ));
    assert_eq!(p.server.recv(id), Poll::Ready(Err(error)));
    assert_eq!(p.server.core.open_streams(), 0);
}
