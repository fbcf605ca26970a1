//! The control socket after the handshake: its frames, and the two loops that move them
//! over a [`Control`] socket.
//!
//! ```text
//! 1                          wake: the sender published something, look (to a
//!                            reader parked on the socket, not on its futex)
//! 2  len u32 (LE)  len bytes data: the message a `Socket` descriptor promised
//! 3                          goodbye: the sender closes the session cleanly
//! ```
//!
//! Nothing here owns a socket or keeps state beyond its arguments: the reader keeps its
//! buffer and the data frame it waits for, the session serialises writers.

use std::future::poll_fn;
use std::io::{self, IoSlice};

use bytes::{Buf, Bytes, BytesMut};

use crate::error::{Error, Violation};
use crate::sys::Control;

/// Frame type: a wake-up, nothing else.
pub(crate) const FRAME_WAKE: u8 = 1;
/// Frame type: `u32` length (LE) and that many bytes, the payload of a `Socket`
/// descriptor.
pub(crate) const FRAME_DATA: u8 = 2;
/// Frame type: the sender closes the session cleanly.
pub(crate) const FRAME_GOODBYE: u8 = 3;
/// Bytes of a data frame before its payload: the type and the length.
pub(crate) const DATA_HEAD: usize = 5;

/// The header of a data frame of `len` bytes.
pub(crate) fn data_head(len: u32) -> [u8; DATA_HEAD] {
    let mut head = [0u8; DATA_HEAD];
    head[0] = FRAME_DATA;
    head[1..].copy_from_slice(&len.to_le_bytes());
    head
}

/// The length a data frame's header at the front of `rbuf` announces, if the whole
/// header is there.
fn data_len(rbuf: &[u8]) -> Option<u32> {
    match rbuf {
        [FRAME_DATA, a, b, c, d, ..] => Some(u32::from_le_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// Bytes that a data frame begun at the front of `rbuf` still needs (0 if none is).
pub(crate) fn frame_need(rbuf: &[u8]) -> usize {
    data_len(rbuf).map_or(0, |len| {
        (DATA_HEAD + len as usize).saturating_sub(rbuf.len())
    })
}

/// A frame taken off the front of what was read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// The peer closes the session cleanly.
    Goodbye,
    /// The payload of a data frame.
    Data(Bytes),
}

/// Takes the next frame off the front of `rbuf`, skipping wake frames; `Ok(None)` when
/// no whole frame is there yet. `promised` is the length of the data frame that a
/// `Socket` descriptor announced and that the ring waits for, if any: a data frame
/// without one, of another length, or a goodbye before it, is a lie.
pub(crate) fn next_frame(
    rbuf: &mut BytesMut,
    promised: Option<u32>,
) -> Result<Option<Frame>, Violation> {
    while let Some(&kind) = rbuf.first() {
        match kind {
            FRAME_WAKE => rbuf.advance(1),
            FRAME_GOODBYE => {
                if promised.is_some() {
                    return Err(Violation::Frame("goodbye before a promised data frame"));
                }
                rbuf.advance(1);
                return Ok(Some(Frame::Goodbye));
            }
            FRAME_DATA => {
                let Some(len) = data_len(rbuf) else {
                    break;
                };
                let Some(want) = promised else {
                    return Err(Violation::Frame("data frame without a descriptor"));
                };
                if len != want {
                    return Err(Violation::Frame(
                        "data frame length differs from its descriptor",
                    ));
                }
                if rbuf.len() < DATA_HEAD + len as usize {
                    break;
                }
                rbuf.advance(DATA_HEAD);
                return Ok(Some(Frame::Data(rbuf.split_to(len as usize).freeze())));
            }
            _ => return Err(Violation::Frame("unknown frame type")),
        }
    }
    Ok(None)
}

/// Reads what the socket has into `rbuf` (after reserving `reserve` bytes), waiting
/// for it; `WouldBlock` and `Interrupted` are retried. `Ok(true)`: end of stream (the
/// peer hung up or reset the connection).
pub(crate) async fn read_some(
    sock: &dyn Control,
    rbuf: &mut BytesMut,
    reserve: usize,
) -> Result<bool, Error> {
    loop {
        poll_fn(|cx| sock.poll_read_ready(cx)).await?;
        rbuf.reserve(reserve);
        match sock.try_read(rbuf) {
            Ok(0) => return Ok(true),
            Ok(_) => return Ok(false),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(true),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Writes `head` and then `msg`, all of them, across short writes; `WouldBlock` and
/// `Interrupted` are retried. A peer that is gone (a write of nothing, a broken pipe, a
/// reset) is [`Error::PeerClosed`]. The caller holds the socket for writing, so the
/// bytes of one frame are not interleaved with another's.
pub(crate) async fn write_all(
    sock: &dyn Control,
    head: &[u8],
    msg: &mut impl Buf,
) -> Result<(), Error> {
    let mut head = head;
    while !head.is_empty() || msg.has_remaining() {
        poll_fn(|cx| sock.poll_write_ready(cx)).await?;
        let r = if head.is_empty() {
            sock.try_write(&[IoSlice::new(msg.chunk())])
        } else {
            sock.try_write(&[IoSlice::new(head), IoSlice::new(msg.chunk())])
        };
        match r {
            Ok(0) => return Err(Error::PeerClosed),
            Ok(mut n) => {
                let h = n.min(head.len());
                head = &head[h..];
                n -= h;
                msg.advance(n);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
                ) =>
            {
                return Err(Error::PeerClosed);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::fake::{Script, Step, block_on};
    use proptest::prelude::*;
    use std::io::ErrorKind::{
        BrokenPipe, ConnectionReset, Interrupted, PermissionDenied, WouldBlock,
    };

    fn buf(bytes: &[u8]) -> BytesMut {
        BytesMut::from(bytes)
    }

    fn io_kind(e: Error) -> io::ErrorKind {
        match e {
            Error::Io(e) => e.kind(),
            other => panic!("not an i/o error: {other:?}"),
        }
    }

    #[test]
    fn frames_are_taken_whole_and_wakes_skipped() {
        let mut b = buf(&[FRAME_WAKE, FRAME_WAKE]);
        assert_eq!(next_frame(&mut b, None), Ok(None));
        assert!(b.is_empty(), "wakes are consumed");

        // A data frame's header and payload in pieces: nothing is taken until it is whole.
        let mut b = buf(&[FRAME_WAKE, FRAME_DATA, 3, 0]);
        assert_eq!(next_frame(&mut b, Some(3)), Ok(None));
        assert_eq!(&b[..], [FRAME_DATA, 3, 0], "the wake went, the part stays");
        b.extend_from_slice(&[0, 0, b'a', b'b']);
        assert_eq!(next_frame(&mut b, Some(3)), Ok(None));
        b.extend_from_slice(&[b'c', FRAME_GOODBYE]);
        let data = Frame::Data(Bytes::from_static(b"abc"));
        assert_eq!(next_frame(&mut b, Some(3)), Ok(Some(data)));
        assert_eq!(next_frame(&mut b, None), Ok(Some(Frame::Goodbye)));
        assert!(b.is_empty());

        let mut b = buf(&data_head(0));
        let empty = Frame::Data(Bytes::new());
        assert_eq!(next_frame(&mut b, Some(0)), Ok(Some(empty)));
    }

    #[test]
    fn frame_lies_are_violations() {
        let lie = |bytes: &[u8], promised| next_frame(&mut buf(bytes), promised).unwrap_err();
        assert_eq!(lie(&[0x7f], None), Violation::Frame("unknown frame type"));
        assert_eq!(lie(&[0], None), Violation::Frame("unknown frame type"));
        assert_eq!(
            lie(&data_head(3), None),
            Violation::Frame("data frame without a descriptor")
        );
        // A header claiming 4 GiB is refused before its payload is waited for.
        assert_eq!(
            lie(&data_head(u32::MAX), Some(4)),
            Violation::Frame("data frame length differs from its descriptor")
        );
        assert_eq!(
            lie(&[FRAME_WAKE, FRAME_GOODBYE], Some(4)),
            Violation::Frame("goodbye before a promised data frame")
        );
    }

    #[test]
    fn frame_need_is_what_the_begun_data_frame_lacks() {
        assert_eq!(frame_need(&[]), 0);
        assert_eq!(frame_need(&[FRAME_DATA, 9, 0, 0]), 0, "header not whole");
        assert_eq!(frame_need(&data_head(9)), 9);
        let mut b = data_head(9).to_vec();
        b.extend_from_slice(&[0; 4]);
        assert_eq!(frame_need(&b), 5);
        b.extend_from_slice(&[0; 7]);
        assert_eq!(frame_need(&b), 0, "whole, and more behind it");
        assert_eq!(frame_need(&[FRAME_WAKE, FRAME_DATA, 9, 0, 0, 0]), 0);
        assert_eq!(frame_need(&data_head(u32::MAX)), u32::MAX as usize);
    }

    #[test]
    fn a_read_retries_would_block_and_interrupted() {
        let s = Script::new([
            Step::Fail(WouldBlock),
            Step::NotReady,
            Step::Fail(Interrupted),
            Step::Read(b"ab".to_vec()),
            Step::Read(b"c".to_vec()),
        ]);
        let mut b = BytesMut::new();
        assert!(!block_on(read_some(&s, &mut b, 16)).unwrap());
        assert_eq!(&b[..], b"ab", "one read per call: a short read returns");
        assert!(b.capacity() >= 16, "reserved first");
        assert_eq!(s.left(), 1);
    }

    #[test]
    fn a_read_at_end_of_stream_or_reset_says_so() {
        for end in [Step::Eof, Step::Fail(ConnectionReset)] {
            let s = Script::new([Step::Fail(Interrupted), end, Step::Read(vec![1])]);
            let mut b = BytesMut::new();
            assert!(block_on(read_some(&s, &mut b, 16)).unwrap());
            assert!(b.is_empty());
            assert_eq!(s.left(), 1, "nothing read past the end");
        }
    }

    #[test]
    fn a_read_error_is_returned() {
        let s = Script::new([Step::Fail(PermissionDenied), Step::Read(vec![1])]);
        let mut b = BytesMut::new();
        let e = block_on(read_some(&s, &mut b, 16)).unwrap_err();
        assert_eq!(io_kind(e), PermissionDenied);
        assert_eq!(s.left(), 1);
    }

    #[test]
    fn a_write_goes_whole_across_short_writes() {
        let s = Script::new([
            Step::Write(3),
            Step::Fail(WouldBlock),
            Step::Write(4),
            Step::Fail(Interrupted),
            Step::NotReady,
            Step::Write(1),
            Step::Write(100),
            Step::Write(100),
        ]);
        let mut msg = Bytes::from_static(b"0123456789");
        block_on(write_all(&s, &data_head(10), &mut msg)).unwrap();
        let mut want = data_head(10).to_vec();
        want.extend_from_slice(b"0123456789");
        assert_eq!(s.written(), want);
        assert!(msg.is_empty());
        assert_eq!(s.left(), 1, "no write once all went");
    }

    #[test]
    fn a_peer_that_is_gone_is_peer_closed() {
        for gone in [
            Step::Write(0),
            Step::Fail(BrokenPipe),
            Step::Fail(ConnectionReset),
        ] {
            let s = Script::new([Step::Write(2), gone]);
            let mut msg = Bytes::from_static(b"xyz");
            let e = block_on(write_all(&s, &[FRAME_WAKE], &mut msg)).unwrap_err();
            assert!(matches!(e, Error::PeerClosed), "{e:?}");
            assert_eq!(s.written(), [FRAME_WAKE, b'x']);
        }
        let s = Script::new([Step::Fail(PermissionDenied)]);
        let e = block_on(write_all(&s, &[], &mut Bytes::from_static(b"x"))).unwrap_err();
        assert_eq!(io_kind(e), PermissionDenied);
    }

    /// What the socket may do between two pieces: nothing, `WouldBlock`, `Interrupted`,
    /// or not be ready, by `code` modulo 4.
    fn hiccup(code: u8) -> Option<Step> {
        match code % 4 {
            0 => None,
            1 => Some(Step::Fail(WouldBlock)),
            2 => Some(Step::Fail(Interrupted)),
            _ => Some(Step::NotReady),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { 64 },
            // Under Miri's isolation there is no working directory for the file that
            // keeps failing cases.
            failure_persistence: if cfg!(miri) {
                None
            } else {
                ProptestConfig::default().failure_persistence
            },
            ..ProptestConfig::default()
        })]

        /// Wakes, data frames and a goodbye, cut into reads anywhere with hiccups
        /// between them: the reader's loop (read, then take whole frames) gets every
        /// data frame and the goodbye, in order, and reads nothing after the goodbye.
        #[test]
        fn frames_survive_any_cutting(
            payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..5),
            cuts in prop::collection::vec((1usize..30, any::<u8>()), 1..40),
        ) {
            let mut wire = Vec::new();
            for p in &payloads {
                wire.push(FRAME_WAKE);
                wire.extend_from_slice(&data_head(p.len() as u32));
                wire.extend_from_slice(p);
            }
            wire.push(FRAME_GOODBYE);
            let s = Script::default();
            let mut rest = &wire[..];
            for (n, h) in cuts.into_iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (piece, tail) = rest.split_at(n.min(rest.len()));
                s.push(Step::Read(piece.to_vec()));
                rest = tail;
                if let Some(h) = hiccup(h) {
                    s.push(h);
                }
            }
            s.push(Step::Read(vec![0x7f]));

            let mut b = BytesMut::new();
            let mut got = Vec::new();
            loop {
                let promised = payloads.get(got.len()).map(|p| p.len() as u32);
                match next_frame(&mut b, promised).unwrap() {
                    Some(Frame::Data(d)) => got.push(d.to_vec()),
                    Some(Frame::Goodbye) => break,
                    None => prop_assert!(!block_on(read_some(&s, &mut b, 8)).unwrap()),
                }
            }
            prop_assert_eq!(got, payloads);
            prop_assert!(s.left() <= 2, "read on past the goodbye");
        }

        /// Any schedule of short writes and hiccups puts the header and the payload on
        /// the socket once each, in order.
        #[test]
        fn writes_survive_any_schedule(
            payload in prop::collection::vec(any::<u8>(), 0..100),
            schedule in prop::collection::vec((1usize..20, any::<u8>()), 1..30),
        ) {
            let s = Script::default();
            for &(n, h) in schedule.iter().cycle().take(200) {
                s.push(Step::Write(n));
                if let Some(h) = hiccup(h) {
                    s.push(h);
                }
            }
            let head = data_head(payload.len() as u32);
            let mut msg = Bytes::from(payload.clone());
            block_on(write_all(&s, &head, &mut msg)).unwrap();
            let mut want = head.to_vec();
            want.extend_from_slice(&payload);
            prop_assert_eq!(s.written(), want);
        }
    }
}
