//! THeader, Apache Thrift's header transport (`THeaderTransport`/`THeaderProtocol`):
//! the frame layout, its transforms (zlib), its key-value info headers, and their
//! limits. Not to be confused with Kitex's TTHeader ([`super::ttheader`], magic
//! `0x1000`): the fixed part looks alike, the variable part does not.
//!
//! Written from Apache Thrift's description (`doc/specs/HeaderFormat.md`) and checked
//! against what its Python, C++ and Go libraries put on the wire. Integers of the fixed
//! part are big-endian; everything in the variable part is an unsigned LEB128 varint
//! (7 bits a byte, least significant first), and a string is a varint length and its
//! bytes:
//!
//! ```text
//! offset  size  field
//! 0       4     LENGTH        bytes after this field, at most 0x3FFF_FFFF
//! 4       2     MAGIC         0x0FFF
//! 6       2     FLAGS         echoed in the reply, 0 when sending
//! 8       4     SEQUENCE ID   the message's sequence id
//! 12      2     HEADER SIZE   header bytes from offset 14, divided by 4
//! 14      ..    PROTOCOL ID   varint: 0 Binary, 1 JSON, 2 Compact
//! ..      ..    TRANSFORMS    varint count, then one varint id each:
//!                 1  zlib (the payload is a zlib stream, RFC 1950)
//!                 2  HMAC, 3 snappy (not supported)
//! ..      ..    INFO          an id varint, then its data, until the header ends:
//!                 0  padding: the rest of the header is skipped
//!                 1  key-value headers: a varint count, then key and value strings
//! ..            padding       zeros up to a multiple of 4 bytes from offset 14
//! 14+4*HS       PAYLOAD       the Thrift message, after the transforms
//! ```
//!
//! Choices where the description leaves room:
//! - **What a reply echoes.** A server answers a THeader request with a THeader frame
//!   carrying the request's protocol, FLAGS and sequence id (as every Apache server
//!   does) and the request's transforms: a zlib request gets a zlib reply, as Apache's
//!   Go server answers (its Python and C++ servers answer uncompressed; every Apache
//!   client reads both). Info headers are not echoed (no Apache server does): a reply
//!   carries the key-values the handler set ([`crate::context::MetaInfo`]).
//! - **Info ids.** Only key-value headers (1) are defined. Reading stops at padding (0)
//!   or at an id it does not know, and the payload starts at `14 + 4 × HEADER SIZE`
//!   whatever was left unread, as the description prescribes (info ids are listed
//!   oldest first, so nothing after an unknown one can be known either). That includes
//!   the "persistent" key-values (2) of Facebook's fork, which no Apache library reads.
//! - **Keys and values** must be UTF-8 (as Apache's Java library decodes them);
//!   others are an error ([`HeaderError::InvalidUtf8`]).
//! - **Transforms.** zlib only; any other id is an error, and a server answers it with
//!   a `TApplicationException` of type `INVALID_TRANSFORM`, as the description requires
//!   ("an error MUST be returned"). At most [`MAX_TRANSFORMS`] per frame.
//! - **Limits.** The header is bounded by [`HeaderLimits::max_header`] (64 KiB by
//!   default, as Apache's C++ library bounds it); a zlib payload inflates to at most
//!   the frame limit the caller gives ([`Header::untransform`], the server's and the
//!   client's [`Limits::max_frame`](super::Limits::max_frame)): a stream that would
//!   inflate beyond it is an error ([`HeaderError::InflatesBeyond`]) once that many
//!   bytes are out, so a decompression bomb costs at most the limit in memory.
//! - **Framed THeader.** Apache's test programs run THeader over a `TFramedTransport`
//!   when asked for `--transport=framed`: the whole frame, LENGTH included, inside one
//!   more 4-byte length. That is read too, and [`Header::framed`] records it so a reply
//!   takes the same form.
//! - **Padding** is written the least that makes a multiple of 4 (as Python and Go
//!   write it; C++ writes 1 to 4 bytes); any amount is read.

use std::io::Write as _;

use bytes::{Buf, BufMut, Bytes};
use flate2::{Compression, Decompress, FlushDecompress, Status, write::ZlibEncoder};
use thrift_wire::{LinkBuffer, Utf8Bytes, encoding};

use super::Protocol;
pub use super::header::{HeaderError, HeaderLimits, MAX_TRANSFORMS};
use super::header::{Reader, be_u32, read_fixed};

/// The magic in bytes 4-5 of a THeader frame.
pub const MAGIC: u16 = 0x0FFF;

/// Bytes before the header's variable part: length, magic, flags, sequence id, size.
pub const FIXED_LEN: usize = super::header::FIXED_LEN;

/// The largest LENGTH the format allows (its two high bits are reserved, which tells a
/// THeader frame from older transports).
pub const MAX_LENGTH: usize = 0x3FFF_FFFF;

/// Transform ids.
pub mod transform {
    /// zlib (RFC 1950): the payload is deflated, with the zlib header and checksum.
    pub const ZLIB: u32 = 0x01;
    /// HMAC: not supported.
    pub const HMAC: u32 = 0x02;
    /// Snappy: not supported.
    pub const SNAPPY: u32 = 0x03;
}

/// Info ids.
pub mod info {
    /// Padding: the header's remaining bytes are skipped.
    pub const PADDING: u32 = 0x00;
    /// Key-value headers (`INFO_KEYVALUE`).
    pub const KEY_VALUE: u32 = 0x01;
}

/// Protocol ids.
pub mod protocol_id {
    /// Thrift Binary.
    pub const BINARY: u32 = 0;
    /// Apache Thrift's JSON protocol.
    pub const JSON: u32 = 1;
    /// Thrift Compact.
    pub const COMPACT: u32 = 2;
}

/// The protocol of protocol id `id`, when this crate speaks it.
pub(crate) fn protocol_of(id: u32) -> Option<Protocol> {
    match id {
        protocol_id::BINARY => Some(Protocol::Binary),
        protocol_id::COMPACT => Some(Protocol::Compact),
        protocol_id::JSON => Some(Protocol::Json),
        _ => None,
    }
}

/// The protocol id of `protocol`.
fn id_of(protocol: Protocol) -> u32 {
    match protocol {
        Protocol::Binary => protocol_id::BINARY,
        Protocol::Compact => protocol_id::COMPACT,
        Protocol::Json => protocol_id::JSON,
    }
}

/// How a client writes its THeader requests (`WireFormat::theader`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Compress each request with the zlib transform. Default off.
    pub zlib: bool,
    /// Put each frame inside a Framed length: THeader over `TFramedTransport`, what
    /// Apache's test servers expect with `--transport=framed`. Default off.
    pub framed: bool,
}

/// A THeader: everything of a frame but its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// FLAGS, as received (0 by default).
    pub flags: u16,
    /// The sequence id.
    pub seq_id: i32,
    /// The payload's protocol.
    pub protocol: Protocol,
    /// Transform ids ([`transform`]), in the order the writer applied them (a reader
    /// undoes them last first). Writing supports [`transform::ZLIB`] only.
    pub transforms: Vec<u32>,
    /// Key-value info headers, in order.
    pub info: Vec<(Utf8Bytes, Utf8Bytes)>,
    /// The frame travels inside one more 4-byte length (THeader over Framed).
    pub framed: bool,
}

impl Header {
    /// A header for `seq_id` and `protocol`: no flags, transforms or info.
    pub fn new(seq_id: i32, protocol: Protocol) -> Self {
        Header {
            flags: 0,
            seq_id,
            protocol,
            transforms: Vec::new(),
            info: Vec::new(),
            framed: false,
        }
    }

    /// The value of info key `key`, if present (the first, if repeated).
    pub fn info_value(&self, key: &str) -> Option<&str> {
        self.info
            .iter()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v.as_str())
    }

    /// The header's variable part (from offset 14), padding included.
    fn variable_part(&self) -> Result<Vec<u8>, HeaderError> {
        if self.transforms.len() > MAX_TRANSFORMS {
            return Err(HeaderError::TooManyTransforms(
                u32::try_from(self.transforms.len()).unwrap_or(u32::MAX),
            ));
        }
        if let Some(&id) = self.transforms.iter().find(|&&t| t != transform::ZLIB) {
            return Err(HeaderError::UnsupportedTransform(id));
        }
        let mut h = Vec::with_capacity(
            8 + self
                .info
                .iter()
                .map(|(k, v)| 10 + k.len() + v.len())
                .sum::<usize>(),
        );
        put_varint(&mut h, id_of(self.protocol));
        put_varint(&mut h, self.transforms.len() as u32);
        for &t in &self.transforms {
            put_varint(&mut h, t);
        }
        if !self.info.is_empty() {
            put_varint(&mut h, info::KEY_VALUE);
            put_varint(&mut h, varint_len("info count", self.info.len())?);
            for (k, v) in &self.info {
                put_varint(&mut h, varint_len("info key", k.len())?);
                h.extend_from_slice(k.as_bytes());
                put_varint(&mut h, varint_len("info value", v.len())?);
                h.extend_from_slice(v.as_bytes());
            }
        }
        h.resize(h.len().next_multiple_of(4), 0);
        if h.len() / 4 > usize::from(u16::MAX) {
            return Err(HeaderError::TooLong {
                what: "header",
                len: h.len(),
            });
        }
        Ok(h)
    }

    /// Writes a frame around `message` (a whole Thrift message, unframed) into `out`:
    /// the transforms applied to it, then the header before it, and the outer length
    /// when [`framed`](Self::framed). `Ok(Err(len))` when the frame (after the
    /// transforms, its LENGTH) would be `len` bytes, above `max_frame` or the format's
    /// limit: nothing is written. Without transforms the message's bytes move into
    /// `out` without a copy.
    pub fn write_frame(
        &self,
        mut message: LinkBuffer,
        out: &mut LinkBuffer,
        max_frame: usize,
    ) -> Result<Result<(), usize>, HeaderError> {
        let header = self.variable_part()?;
        for _ in &self.transforms {
            // Every transform is zlib (checked above).
            let deflated = deflate(&mut message);
            message.insert(deflated);
        }
        let length = FIXED_LEN - 4 + header.len() + message.len();
        let limit = max_frame.min(MAX_LENGTH);
        let outer = if self.framed { 4 } else { 0 };
        if length + outer > limit {
            return Ok(Err(length + outer));
        }
        out.reserve(outer + FIXED_LEN + header.len());
        let tail = out.tail_mut();
        if self.framed {
            tail.put_u32((length + 4) as u32);
        }
        tail.put_u32(length as u32);
        tail.put_u16(MAGIC);
        tail.put_u16(self.flags);
        tail.put_i32(self.seq_id);
        tail.put_u16((header.len() / 4) as u16);
        tail.put_slice(&header);
        // The message's nodes follow as they are (the encoder's large strings included).
        while message.has_remaining() {
            let n = message.chunk().len();
            out.insert(message.next(n));
        }
        Ok(Ok(()))
    }

    /// Reads a whole frame (its 4-byte LENGTH included, and the outer length of a
    /// framed one): the header, and the payload still transformed, as a slice of
    /// `frame` (no copy; so are the header's strings). Undo the transforms with
    /// [`untransform`](Self::untransform).
    pub fn decode(frame: &Bytes, limits: &HeaderLimits) -> Result<(Header, Bytes), HeaderError> {
        let framed = is_framed(frame);
        let frame = if framed {
            let inner = frame.slice(4..);
            let outer = be_u32(frame, 0) as usize;
            if outer != inner.len() {
                return Err(HeaderError::LengthMismatch {
                    claimed: outer,
                    actual: inner.len(),
                });
            }
            inner
        } else {
            frame.clone()
        };
        let fixed = read_fixed(&frame, MAGIC, limits)?;
        if frame.len() - 4 > MAX_LENGTH {
            return Err(HeaderError::TooLong {
                what: "LENGTH",
                len: frame.len() - 4,
            });
        }
        let (flags, seq_id, end) = (fixed.flags, fixed.seq_id, fixed.end);
        let mut h = Reader::new(&frame, FIXED_LEN, end);
        let id = h.varint("protocol id")?;
        let protocol = protocol_of(id).ok_or(HeaderError::UnknownProtocol(id))?;
        let mut header = Header::new(seq_id, protocol);
        header.flags = flags;
        header.framed = framed;
        let count = h.varint("transform count")?;
        if count as usize > MAX_TRANSFORMS {
            return Err(HeaderError::TooManyTransforms(count));
        }
        for _ in 0..count {
            header.transforms.push(h.varint("transform id")?);
        }
        while h.left() > 0 {
            match h.varint("info id")? {
                info::KEY_VALUE => {
                    let n = h.varint("info count")?;
                    // Each pair takes two bytes at least: no more room than that.
                    header.info.reserve((n as usize).min(h.left() / 2));
                    for _ in 0..n {
                        let k = h.string_varint("info key")?;
                        let v = h.string_varint("info value")?;
                        header.info.push((k, v));
                    }
                }
                // Padding, or an id defined after the ones known here: the rest of
                // the header is skipped.
                _ => break,
            }
        }
        Ok((header, frame.slice(end..)))
    }

    /// Undoes the transforms on `payload` (as [`decode`](Self::decode) gave it), last
    /// first, each inflating to at most `max_payload` bytes.
    pub fn untransform(&self, payload: Bytes, max_payload: usize) -> Result<Bytes, HeaderError> {
        let mut payload = payload;
        for &t in self.transforms.iter().rev() {
            if t != transform::ZLIB {
                return Err(HeaderError::UnsupportedTransform(t));
            }
            payload = inflate(&payload, max_payload)?;
        }
        Ok(payload)
    }

    /// The first transform this crate cannot undo, if any.
    pub fn unsupported_transform(&self) -> Option<u32> {
        self.transforms
            .iter()
            .copied()
            .find(|&t| t != transform::ZLIB)
    }
}

/// Whether `frame` is a THeader frame inside an outer 4-byte length: the inner LENGTH
/// at bytes 4-7 is the outer one less 4, and the magic is at 8-9.
/// A bare frame (the magic at bytes 4-5) is never taken for a framed one.
fn is_framed(frame: &[u8]) -> bool {
    frame.len() >= 10
        && frame[4..6] != MAGIC.to_be_bytes()
        && frame[8..10] == MAGIC.to_be_bytes()
        && u64::from(be_u32(frame, 4)) + 4 == u64::from(be_u32(frame, 0))
}

/// The framing facts of a connection's first bytes, when they begin a THeader frame
/// (bare or framed): `Ok(None)` while too few have arrived to read the protocol id;
/// the protocol, or an error for an id this crate does not speak.
pub(crate) fn peek_protocol(head: &[u8]) -> Result<Option<Protocol>, HeaderError> {
    let at = if head.len() >= 6 && head[4..6] == MAGIC.to_be_bytes() {
        FIXED_LEN
    } else {
        FIXED_LEN + 4
    };
    let Some(rest) = head.get(at..) else {
        return Ok(None);
    };
    // A protocol id is one byte (two at most for any id below 16384).
    match encoding::decode_varint(rest, 2) {
        Ok((id, _)) => {
            let id = id as u32;
            protocol_of(id)
                .map(Some)
                .ok_or(HeaderError::UnknownProtocol(id))
        }
        Err(encoding::VarintError::Truncated) => Ok(None),
        Err(encoding::VarintError::TooLong) => Err(HeaderError::BadVarint("protocol id")),
    }
}

/// Whether `head` begins a THeader frame: `Some(true)` when it does, `Some(false)` when it does not, `None` when more
/// bytes are needed to tell.
pub(crate) fn begins(head: &[u8]) -> Option<bool> {
    if head.len() < 6 {
        return None;
    }
    if head[4..6] == MAGIC.to_be_bytes() {
        return Some(true);
    }
    // Framed: an inner LENGTH first (below 2^30), 4 less than the outer one.
    if head[4] & 0xc0 != 0 {
        return Some(false);
    }
    if head.len() < 8 {
        return None;
    }
    if u64::from(be_u32(head, 4)) + 4 != u64::from(be_u32(head, 0)) {
        return Some(false);
    }
    if head.len() < 10 {
        return None;
    }
    Some(is_framed(head))
}

fn varint_len(what: &'static str, len: usize) -> Result<u32, HeaderError> {
    u32::try_from(len).map_err(|_| HeaderError::TooLong { what, len })
}

/// Writes `v` as an unsigned LEB128 varint.
fn put_varint(out: &mut Vec<u8>, v: u32) {
    encoding::put_varint(out, u64::from(v));
}

/// Deflates (zlib) the bytes of `message`, consuming them.
fn deflate(message: &mut LinkBuffer) -> Bytes {
    let mut z = ZlibEncoder::new(
        Vec::with_capacity(message.len() / 2 + 64),
        Compression::default(),
    );
    while message.has_remaining() {
        let chunk = message.chunk();
        let n = chunk.len();
        // Writing into a Vec cannot fail.
        let _ = z.write_all(chunk);
        message.advance(n);
    }
    Bytes::from(z.finish().unwrap_or_default())
}

/// Inflates the zlib stream `input`, to at most `max` bytes: the output grows with
/// what comes out (doubling), never past `max + 1` bytes, the one byte over telling a
/// stream that goes beyond.
fn inflate(input: &[u8], max: usize) -> Result<Bytes, HeaderError> {
    let cap = max.saturating_add(1);
    let mut out = Vec::with_capacity(cap.min(input.len().saturating_mul(4).max(256)));
    let mut z = Decompress::new(true);
    loop {
        if out.len() == out.capacity() {
            if out.len() >= cap {
                return Err(HeaderError::InflatesBeyond(max));
            }
            let grown = out.capacity().saturating_mul(2).min(cap);
            out.reserve_exact(grown - out.len());
        }
        let (read, wrote) = (z.total_in(), z.total_out());
        let rest = &input[read as usize..];
        let status = z
            // Not `Finish`: that asks for the whole output in one call.
            .decompress_vec(rest, &mut out, FlushDecompress::None)
            .map_err(|e| HeaderError::Zlib(e.to_string()))?;
        match status {
            Status::StreamEnd => break,
            Status::Ok | Status::BufError => {
                let stuck = z.total_in() == read && z.total_out() == wrote;
                if stuck && out.len() < out.capacity() {
                    return Err(HeaderError::Zlib("the stream ends early".into()));
                }
            }
        }
    }
    if out.len() > max {
        return Err(HeaderError::InflatesBeyond(max));
    }
    let trailing = input.len() - z.total_in() as usize;
    if trailing > 0 {
        return Err(HeaderError::TrailingBytes(trailing));
    }
    Ok(Bytes::from(out))
}
