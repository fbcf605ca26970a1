//! Any sequence of frames a peer may send, mixed with what the application does:
//! the core never panics, keeps within its limits, and leaves nothing behind once
//! the application lets its streams go.

use std::task::Poll;

use bytes::Bytes;
use proptest::prelude::*;
use thrift_wire::Utf8Bytes;

use super::End;
use crate::stream::StreamConfig;
use crate::stream::core::{Event, Side};
use crate::stream::error::StreamError;
use crate::stream::flow::{CREDIT_KEY, INITIAL_CREDIT, MESSAGE_COST, UNCOUNTED_KEY, WINDOW_KEY};
use crate::stream::frame::{Frame, FrameKind};

/// One step: a frame from the peer, or something the application does.
#[derive(Debug, Clone)]
enum Step {
    Frame(Frame),
    Recv(i32),
    Send(i32, usize),
    Close(i32),
    Reset(i32),
    Release(i32),
}

fn kind() -> impl Strategy<Value = FrameKind> {
    prop_oneof![
        Just(FrameKind::Meta),
        Just(FrameKind::Header),
        Just(FrameKind::Data),
        Just(FrameKind::Trailer),
        Just(FrameKind::Rst),
    ]
}

/// A value for a window or credit key: numbers in and out of range, and junk.
fn amount() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..2 * INITIAL_CREDIT).prop_map(|n| n.to_string()),
        Just((1u64 << 31).to_string()),
        Just("-5".to_owned()),
        Just("lots".to_owned()),
    ]
}

fn frame() -> impl Strategy<Value = Frame> {
    (
        kind(),
        -1i32..6,
        0usize..300,
        prop::option::of(amount()),
        prop::option::of(amount()),
        any::<bool>(),
    )
        .prop_map(|(kind, id, len, window, credit, uncounted)| {
            let mut f = Frame::new(kind, id)
                .with_method("Echo")
                .with_payload(Bytes::from(vec![9u8; len]));
            if kind == FrameKind::Trailer || kind == FrameKind::Rst {
                // Mostly empty, as a clean end; otherwise a payload that is not an
                // exception.
                if len % 3 != 0 {
                    f.payload = Bytes::new();
                }
            }
            let mut push = |k: &'static str, v: String| {
                f.meta.push((Utf8Bytes::from_static(k), Utf8Bytes::from(v)));
            };
            if let Some(w) = window {
                push(WINDOW_KEY, w);
            }
            if let Some(c) = credit {
                push(CREDIT_KEY, c);
            }
            if uncounted {
                push(UNCOUNTED_KEY, String::new());
            }
            f
        })
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => frame().prop_map(Step::Frame),
        2 => (-1i32..6).prop_map(Step::Recv),
        1 => (-1i32..6, 0usize..5000).prop_map(|(id, n)| Step::Send(id, n)),
        1 => (-1i32..6).prop_map(Step::Close),
        1 => (-1i32..6).prop_map(Step::Reset),
        1 => (-1i32..6).prop_map(Step::Release),
    ]
}

/// Plays `steps` on an end of `side` with a small window and a limit of 3
/// streams, checking the limits after each.
fn play(side: Side, steps: &[Step]) -> End {
    let config = StreamConfig {
        window: INITIAL_CREDIT,
        max_streams: 3,
        ..StreamConfig::default()
    };
    let mut end = End::new(side, config);
    let now = std::time::Instant::now();
    if side == Side::Client {
        for _ in 0..3 {
            end.open_stream("Echo", None).expect("opened");
        }
    }
    for s in steps {
        match s {
            // A driver reads nothing while the core's reader is held.
            Step::Frame(f) if end.core.wants_frame() => end.feed(f),
            Step::Frame(_) => {}
            Step::Recv(id) => {
                let _ = end.recv(*id);
            }
            Step::Send(id, n) => {
                let _ = end.send(*id, &vec![1u8; *n], now);
            }
            Step::Close(id) => {
                let _ = end.close(*id, None);
            }
            Step::Reset(id) => end.reset(*id, StreamError::Cancelled("test".into())),
            Step::Release(id) => {
                end.core.release(*id);
                end.collect();
            }
        }
        assert!(end.core.open_streams() <= 3, "the stream limit holds");
        for id in -1..6 {
            // A counted peer's queue: its credit and one message; an uncounted
            // one's: the window and the message that crossed it.
            let bound = INITIAL_CREDIT + 300 + MESSAGE_COST;
            assert!(
                end.core.queued(id) <= bound,
                "stream {id}: {}",
                end.core.queued(id)
            );
        }
        end.written();
    }
    end
}

proptest! {
    #[test]
    fn a_server_core_takes_any_frames_within_its_limits(
        steps in prop::collection::vec(step(), 1..120),
    ) {
        let mut end = play(Side::Server, &steps);
        let lost = StreamError::Connection {
            kind: std::io::ErrorKind::UnexpectedEof,
            message: "gone".into(),
        };
        end.core.connection_lost(lost);
        for id in -1..6 {
            end.core.release(id);
        }
        prop_assert_eq!(end.core.kept_streams(), 0);
        prop_assert_eq!(end.core.open_streams(), 0);
        prop_assert_eq!(end.core.poll_timeout(), None);
        prop_assert!(end.core.recv(&mut end.out, 1).is_ready());
    }

    #[test]
    fn a_client_core_takes_any_frames_within_its_limits(
        steps in prop::collection::vec(step(), 1..120),
    ) {
        let mut end = play(Side::Client, &steps);
        end.collect();
        let opened = end.events.iter().filter(|e| matches!(e, Event::Opened(_))).count();
        prop_assert_eq!(opened, 0, "a client opens nothing for its peer");
        for id in -1..6 {
            end.core.release(id);
        }
        prop_assert_eq!(end.core.kept_streams(), 0);
        prop_assert_eq!(end.core.poll_timeout(), None);
        prop_assert!(matches!(end.core.recv(&mut end.out, 1), Poll::Ready(Err(_))));
    }
}
