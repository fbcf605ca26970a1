//! `Input`: the bounds-checked read cursor the decoders stand on.

use bytes::Bytes;

use crate::error::{DecodeError, DecodeErrorKind};

/// One frame and a read position. Every read checks the bytes that remain first, so the
/// decoders built on it cannot read out of bounds or panic, whatever the input.
#[derive(Debug, Clone)]
pub(crate) struct Input {
    bytes: Bytes,
    pos: usize,
}

impl Input {
    pub(crate) fn new(bytes: Bytes) -> Self {
        Input { bytes, pos: 0 }
    }

    /// Bytes not yet read.
    #[inline(always)]
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The next `N` bytes, consumed.
    #[inline(always)]
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        match self
            .bytes
            .get(self.pos..)
            .and_then(|rest| rest.first_chunk::<N>())
        {
            Some(bytes) => {
                self.pos += N;
                Ok(*bytes)
            }
            None => Err(self.eof(N)),
        }
    }

    /// The next byte, consumed.
    #[inline(always)]
    pub(crate) fn byte(&mut self) -> Result<u8, DecodeError> {
        let [b] = self.array()?;
        Ok(b)
    }

    /// The next `len` bytes as a borrowed slice, consumed.
    #[inline]
    pub(crate) fn take(&mut self, len: usize) -> Result<&[u8], DecodeError> {
        if len > self.remaining() {
            return Err(self.eof(len));
        }
        let start = self.pos;
        self.pos += len;
        Ok(&self.bytes[start..self.pos])
    }

    /// The next `len` elements of `width` bytes each as a borrowed slice, consumed.
    #[inline]
    pub(crate) fn take_elements(&mut self, len: usize, width: usize) -> Result<&[u8], DecodeError> {
        match len.checked_mul(width) {
            Some(bytes) => self.take(bytes),
            None => Err(self.eof(usize::MAX)),
        }
    }

    /// The next `len` bytes as a slice of the frame (no copy), consumed.
    #[inline]
    pub(crate) fn slice(&mut self, len: usize) -> Result<Bytes, DecodeError> {
        if len > self.remaining() {
            return Err(self.eof(len));
        }
        let start = self.pos;
        self.pos += len;
        Ok(self.bytes.slice(start..self.pos))
    }

    /// The next byte, not consumed.
    #[inline(always)]
    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Bytes read so far: the offset of the next byte in the frame.
    #[inline(always)]
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// The bytes not yet read, not consumed.
    #[inline(always)]
    pub(crate) fn rest(&self) -> &[u8] {
        self.bytes.get(self.pos..).unwrap_or_default()
    }

    /// Consumes `n` bytes, or all that remain if fewer do.
    #[inline(always)]
    pub(crate) fn advance(&mut self, n: usize) {
        self.pos += n.min(self.remaining());
    }

    /// Bytes `start..end` of the frame (offsets from its start) as a slice of it, no
    /// copy; empty where the range is not inside the frame.
    #[inline]
    pub(crate) fn slice_of(&self, start: usize, end: usize) -> Bytes {
        if start <= end && end <= self.bytes.len() {
            self.bytes.slice(start..end)
        } else {
            Bytes::new()
        }
    }

    #[cold]
    pub(crate) fn eof(&self, needed: usize) -> DecodeError {
        DecodeError::new(DecodeErrorKind::UnexpectedEof {
            needed,
            remaining: self.remaining(),
        })
    }
}
