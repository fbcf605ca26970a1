//! The control socket after the handshake: its frames, and the two loops that move them
//! over a [`Control`] socket.
//!
//! ```text
//! 1                          wake: the sender published something, look
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
