//! What Kitex's TTHeader ([`super::ttheader`]) and Apache's THeader
//! ([`super::theader`]) share: the fixed part of a frame (length, magic, flags,
//! sequence id, header size, in that order), the limits on a header, the errors of
//! both, and bounds-checked reads over a frame.

use bytes::Bytes;
use thrift_wire::{Utf8Bytes, encoding};

/// Bytes before a header's variable part: length, magic, flags, sequence id, size.
pub(crate) const FIXED_LEN: usize = 14;

/// Transforms a THeader frame may declare at most. One is all any Apache client
/// sends; each may cost an inflation up to the frame limit.
pub const MAX_TRANSFORMS: usize = 2;

/// Limits on a received header (TTHeader or THeader).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderLimits {
    /// Most header bytes (from offset 14, padding included). Default 64 KiB, the
    /// TTHeader description's maximum and the bound of Apache's C++ THeader.
    pub max_header: usize,
}

impl Default for HeaderLimits {
    fn default() -> Self {
        HeaderLimits {
            max_header: 64 * 1024,
        }
    }
}

/// A malformed or unsupported header frame (TTHeader or THeader; some errors belong
/// to one format only, as said).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeaderError {
    /// Fewer bytes than the fixed part, or than the header size or a field claims.
    #[error("truncated: {what} needs {needed} bytes, {remaining} remain")]
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Bytes it needed.
        needed: usize,
        /// Bytes there were.
        remaining: usize,
    },
    /// Bytes 4-5 are not the format's magic (`0x1000` TTHeader, `0x0FFF` THeader).
    #[error("bad magic {0:#06x}")]
    BadMagic(u16),
    /// A LENGTH field disagrees with the frame.
    #[error("LENGTH says {claimed} bytes follow, the frame has {actual}")]
    LengthMismatch {
        /// What LENGTH says.
        claimed: usize,
        /// What the frame holds after it.
        actual: usize,
    },
    /// A header above the limit.
    #[error("header of {size} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A header too short to hold the protocol id and transform count.
    #[error("header size {0} is below the 2 bytes every header has")]
    TooSmall(usize),
    /// A protocol id this crate does not speak (0 Binary and 2 Compact in both
    /// formats, and THeader's 1, JSON, are spoken).
    #[error("unknown or unsupported protocol id {0}")]
    UnknownProtocol(u32),
    /// TTHeader: a protocol the format has no id for (JSON), when writing.
    #[error("TTHeader has no protocol id for {0:?}")]
    NoProtocolId(super::Protocol),
    /// A transform this crate cannot undo: any, in TTHeader; any but zlib, in THeader.
    #[error("transform {0} is not supported")]
    UnsupportedTransform(u32),
    /// TTHeader: an info block id the format does not define.
    #[error("unknown info id {0:#04x}")]
    UnknownInfo(u8),
    /// A key or value that is not UTF-8.
    #[error("a {0} is not UTF-8")]
    InvalidUtf8(&'static str),
    /// A string, count or frame too long for its field (when encoding).
    #[error("{what} of {len} exceeds the format's limit")]
    TooLong {
        /// What it was.
        what: &'static str,
        /// Its length.
        len: usize,
    },
    /// THeader: a varint longer than 5 bytes or beyond 32 bits.
    #[error("{0}: malformed varint")]
    BadVarint(&'static str),
    /// THeader: more transforms than [`MAX_TRANSFORMS`].
    #[error("{0} transforms, above the {max} accepted", max = MAX_TRANSFORMS)]
    TooManyTransforms(u32),
    /// THeader: a zlib payload that is not a valid zlib stream (bad header, bad data,
    /// a wrong checksum, or an early end).
    #[error("zlib payload: {0}")]
    Zlib(String),
    /// THeader: bytes after the end of a zlib stream.
    #[error("{0} bytes after the end of the zlib stream")]
    TrailingBytes(usize),
    /// THeader: a zlib payload that inflates beyond the limit: stopped there.
    #[error("the zlib payload inflates beyond the limit of {0} bytes")]
    InflatesBeyond(usize),
}

/// The fixed part of a header frame.
#[derive(Debug)]
pub(crate) struct Fixed {
    pub(crate) flags: u16,
    pub(crate) seq_id: i32,
    /// Where the header ends and the payload begins (`14 + 4 × HEADER SIZE`).
    pub(crate) end: usize,
}

/// Reads and checks the fixed part of `frame` (a whole frame, its LENGTH included):
/// LENGTH matches the frame, the magic is `magic`, the header fits the frame and the
/// limits and holds at least 2 bytes.
pub(crate) fn read_fixed(
    frame: &Bytes,
    magic: u16,
    limits: &HeaderLimits,
) -> Result<Fixed, HeaderError> {
    let mut r = Reader::new(frame, 0, frame.len());
    let length = r.u32("LENGTH")? as usize;
    if length != frame.len() - 4 {
        return Err(HeaderError::LengthMismatch {
            claimed: length,
            actual: frame.len() - 4,
        });
    }
    let found = r.u16("magic")?;
    if found != magic {
        return Err(HeaderError::BadMagic(found));
    }
    let flags = r.u16("flags")?;
    let seq_id = r.u32("sequence id")? as i32;
    let header_len = usize::from(r.u16("header size")?) * 4;
    if header_len > limits.max_header {
        return Err(HeaderError::TooLarge {
            size: header_len,
            limit: limits.max_header,
        });
    }
    if header_len < 2 {
        return Err(HeaderError::TooSmall(header_len));
    }
    let end = FIXED_LEN + header_len;
    if end > frame.len() {
        return Err(HeaderError::Truncated {
            what: "header",
            needed: header_len,
            remaining: frame.len() - FIXED_LEN,
        });
    }
    Ok(Fixed { flags, seq_id, end })
}

/// The big-endian u32 at `at` (`b` holds at least `at + 4` bytes).
pub(crate) fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Bounds-checked reads over part of a frame (`at..end`): big-endian integers, varints,
/// and strings that are slices of the frame.
pub(crate) struct Reader<'a> {
    bytes: &'a Bytes,
    at: usize,
    end: usize,
}

impl<'a> Reader<'a> {
    /// Reads `bytes[at..end]` (`at <= end <= bytes.len()`).
    pub(crate) fn new(bytes: &'a Bytes, at: usize, end: usize) -> Self {
        Reader { bytes, at, end }
    }

    /// Bytes left to read.
    pub(crate) fn left(&self) -> usize {
        self.end - self.at
    }

    fn take(&mut self, what: &'static str, n: usize) -> Result<usize, HeaderError> {
        if self.left() < n {
            return Err(HeaderError::Truncated {
                what,
                needed: n,
                remaining: self.left(),
            });
        }
        let at = self.at;
        self.at += n;
        Ok(at)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, HeaderError> {
        let at = self.take(what, 1)?;
        Ok(self.bytes[at])
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, HeaderError> {
        let at = self.take(what, 2)?;
        Ok(u16::from_be_bytes([self.bytes[at], self.bytes[at + 1]]))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, HeaderError> {
        let at = self.take(what, 4)?;
        Ok(be_u32(self.bytes, at))
    }

    /// An unsigned LEB128 varint of at most 5 bytes and 32 bits.
    pub(crate) fn varint(&mut self, what: &'static str) -> Result<u32, HeaderError> {
        let rest = &self.bytes[self.at..self.end];
        match encoding::decode_varint(rest, encoding::MAX_VARINT32_LEN) {
            Ok((v, len)) => {
                self.at += len;
                u32::try_from(v).map_err(|_| HeaderError::BadVarint(what))
            }
            Err(encoding::VarintError::Truncated) => {
                // Every byte left was part of it.
                self.at = self.end;
                Err(HeaderError::Truncated {
                    what,
                    needed: 1,
                    remaining: 0,
                })
            }
            Err(encoding::VarintError::TooLong) => Err(HeaderError::BadVarint(what)),
        }
    }

    /// A string after a u16 length.
    pub(crate) fn string_u16(&mut self, what: &'static str) -> Result<Utf8Bytes, HeaderError> {
        let len = usize::from(self.u16(what)?);
        self.utf8(what, len)
    }

    /// A string after a varint length.
    pub(crate) fn string_varint(&mut self, what: &'static str) -> Result<Utf8Bytes, HeaderError> {
        let len = self.varint(what)? as usize;
        self.utf8(what, len)
    }

    /// The offset and length of a u16-length string, checked as UTF-8 but not sliced.
    pub(crate) fn utf8_span_u16(
        &mut self,
        what: &'static str,
    ) -> Result<(usize, usize), HeaderError> {
        let len = usize::from(self.u16(what)?);
        let at = self.take(what, len)?;
        std::str::from_utf8(&self.bytes[at..at + len])
            .map_err(|_| HeaderError::InvalidUtf8(what))?;
        Ok((at, len))
    }

    fn utf8(&mut self, what: &'static str, len: usize) -> Result<Utf8Bytes, HeaderError> {
        let at = self.take(what, len)?;
        Utf8Bytes::try_from_bytes(self.bytes.slice(at..at + len))
            .map_err(|_| HeaderError::InvalidUtf8(what))
    }
}
