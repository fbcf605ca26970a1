//! A received message: `Bytes` over the peer's shared slices (no copy), or one buffer
//! read from the socket when the peer fell back to it.

use std::collections::VecDeque;

use bytes::{Buf, Bytes};

/// The bytes of one received message, in one or more chunks.
///
/// Chunks over shared memory keep the peer's slices lent to this side until they are
/// dropped (each chunk, and each `Bytes` cut from it, holds its slice); then the slice
/// goes back to the peer. Hold messages only as long as needed: the peer's region is
/// finite, and while it is full the peer's sends wait or go over the socket.
#[derive(Debug, Default)]
pub struct Message {
    chunks: VecDeque<Bytes>,
    len: usize,
}

impl Message {
    pub(crate) fn from_chunks(chunks: Vec<Bytes>) -> Message {
        let chunks: VecDeque<Bytes> = chunks.into_iter().filter(|c| !c.is_empty()).collect();
        let len = chunks.iter().map(Bytes::len).sum();
        Message { chunks, len }
    }

    /// Bytes left in the message.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no bytes are left.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunks, in order (none empty).
    pub fn into_chunks(self) -> Vec<Bytes> {
        self.chunks.into()
    }

    /// The whole message as one `Bytes`: no copy when it is one chunk, one copy
    /// otherwise.
    pub fn into_bytes(mut self) -> Bytes {
        let len = self.len;
        self.copy_to_bytes(len)
    }
}

impl Buf for Message {
    fn remaining(&self) -> usize {
        self.len
    }

    fn chunk(&self) -> &[u8] {
        self.chunks.front().map_or(&[], |c| c.as_ref())
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.len, "advance past the end of a Message");
        self.len -= cnt;
        while cnt > 0 {
            let front = self.chunks.front_mut().expect("len counts the chunks");
            if cnt < front.len() {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.chunks.pop_front();
        }
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        if let Some(front) = self.chunks.front_mut()
            && front.len() >= len
        {
            let out = front.split_to(len);
            if front.is_empty() {
                self.chunks.pop_front();
            }
            self.len -= len;
            return out;
        }
        let mut out = bytes::BytesMut::with_capacity(len);
        let mut left = len;
        assert!(len <= self.len, "copy_to_bytes past the end of a Message");
        while left > 0 {
            let c = self.chunk();
            let take = c.len().min(left);
            out.extend_from_slice(&c[..take]);
            self.advance(take);
            left -= take;
        }
        out.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buf_walks_chunks() {
        let mut m = Message::from_chunks(vec![
            Bytes::from_static(b"ab"),
            Bytes::new(),
            Bytes::from_static(b"cde"),
        ]);
        assert_eq!(m.len(), 5);
        assert_eq!(m.chunk(), b"ab");
        m.advance(1);
        assert_eq!(m.chunk(), b"b");
        assert_eq!(m.copy_to_bytes(3), Bytes::from_static(b"bcd"));
        assert_eq!(m.remaining(), 1);
        assert_eq!(m.copy_to_bytes(1), Bytes::from_static(b"e"));
        assert!(m.is_empty());
        assert_eq!(m.chunk(), b"");
        let m = Message::from_chunks(vec![Bytes::from_static(b"xy"), Bytes::from_static(b"z")]);
        assert_eq!(m.into_chunks().len(), 2);
        let m = Message::from_chunks(vec![Bytes::from_static(b"xy"), Bytes::from_static(b"z")]);
        assert_eq!(m.into_bytes(), Bytes::from_static(b"xyz"));
    }
}
