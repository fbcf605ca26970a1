//! TTHeader, Kitex's header transport: the frame layout, its key-value info blocks, and
//! their limits.
//!
//! Written from the published description
//! (<https://www.cloudwego.io/docs/kitex/reference/transport_protocol_ttheader/>).
//! All integers are big-endian:
//!
//! ```text
//! offset  size  field
//! 0       4     LENGTH        bytes after this field (the whole frame minus 4)
//! 4       2     MAGIC         0x1000
//! 6       2     FLAGS         kept as received, 0 when sending
//! 8       4     SEQUENCE ID   the message's sequence id
//! 12      2     HEADER SIZE   header bytes from offset 14, divided by 4
//! 14      1     PROTOCOL ID   0 Binary, 2 Compact (Kitex defines no id for JSON)
//! 15      1     TRANSFORMS    how many transform ids follow (1 byte each)
//! ..            INFO blocks   an id byte, then the block:
//!                 0x00  padding (one byte, skipped)
//!                 0x01  string pairs: u16 count, then u16-length key and value
//!                 0x10  integer-key pairs: u16 count, then u16 key, u16-length value
//!                 0x11  ACL token: one u16-length string
//! ..            padding       zeros up to a multiple of 4 bytes from offset 14
//! 14+4*HS       PAYLOAD       the Thrift message
//! ```
//!
//! Choices where the description leaves room (the behaviour of Kitex and Volo):
//! - Protocols: Binary and Compact. Kitex numbers no other Thrift protocol (its other
//!   ids are Protobuf's), so Apache's JSON is not carried: a frame that declares an id
//!   other than 0 or 2 is refused ([`HeaderError::UnknownProtocol`]), and a header for
//!   [`Protocol::Json`] is not written ([`HeaderError::NoProtocolId`]). JSON travels
//!   Framed, Buffered or in Apache's THeader ([`super::theader`]).
//! - Transforms (zlib, snappy) are not supported: a frame that declares one is an
//!   error ([`HeaderError::UnsupportedTransform`]) rather than a payload misread.
//! - An info id other than the four above is an error; the payload always starts at
//!   `14 + 4 × HEADER SIZE`, wherever the info blocks ended.
//! - The ACL token is one string, as every implementation writes it (the description
//!   draws a key-value pair).
//! - A payload may itself be Framed (a 4-byte length before the message: Kitex's
//!   "TTHeaderFramed"); [`Header::inner_framed`] records it so an answer takes the same
//!   form.
//! - Blocks are written in the order ACL token, string pairs, integer pairs (each only
//!   when not empty), then the least padding; a frame in that form decodes and encodes
//!   back to the same bytes.

use bytes::{BufMut, Bytes};
use thrift_wire::Utf8Bytes;

use super::Protocol;
pub use super::header::{HeaderError, HeaderLimits};
use super::header::{Reader, be_u32, read_fixed};
pub use super::pairs::{IntPairs, Pairs, StrPair, StrPairs, Text};

/// The magic in bytes 4-5 of a TTHeader frame.
pub const MAGIC: u16 = 0x1000;

/// Bytes before the header's variable part: length, magic, flags, sequence id, size.
pub const FIXED_LEN: usize = super::header::FIXED_LEN;

/// Info block ids.
pub mod info {
    /// One byte of padding.
    pub const PADDING: u8 = 0x00;
    /// String key-value pairs.
    pub const KEY_VALUE: u8 = 0x01;
    /// Integer-key pairs.
    pub const INT_KEY_VALUE: u8 = 0x10;
    /// The ACL token.
    pub const ACL_TOKEN: u8 = 0x11;
}

/// Integer keys of the `0x10` block that this crate reads or writes (Kitex's numbering).
pub mod int_key {
    /// `framed` or `unframed`: how the payload is framed.
    pub const TRANSPORT_TYPE: u16 = 1;
    /// A log id for tracing the call.
    pub const LOG_ID: u16 = 2;
    /// The caller's service name.
    pub const FROM_SERVICE: u16 = 3;
    /// The callee's service name.
    pub const TO_SERVICE: u16 = 6;
    /// The method called.
    pub const TO_METHOD: u16 = 9;
    /// The call's timeout in milliseconds, as decimal digits.
    pub const RPC_TIMEOUT: u16 = 12;
    /// The connect timeout in milliseconds, as decimal digits.
    pub const CONNECT_TIMEOUT: u16 = 17;
    /// The caller's method.
    pub const FROM_METHOD: u16 = 20;
    /// The message type, as decimal digits.
    pub const MSG_TYPE: u16 = 22;
}

/// String keys of the `0x01` block that this crate reads or writes, besides metainfo
/// (Kitex's names).
pub mod str_key {
    /// The IDL name of the service called (`isn`), by which Kitex and Volo route the
    /// calls of a server that serves several services.
    pub const IDL_SERVICE_NAME: &str = "isn";
    /// Kitex's mark that the connection is closing (`crrst`, any non-empty value): a
    /// server shutting down puts it in its replies and in the control frame it sends
    /// a mux client; the client sends no more calls on that connection.
    pub const CONNECTION_RESET: &str = "crrst";
}

/// Protocol ids.
const PROTOCOL_BINARY: u8 = 0;
const PROTOCOL_COMPACT: u8 = 2;

/// The protocol id of `protocol`, if TTHeader has one.
fn id_of(protocol: Protocol) -> Result<u8, HeaderError> {
    match protocol {
        Protocol::Binary => Ok(PROTOCOL_BINARY),
        Protocol::Compact => Ok(PROTOCOL_COMPACT),
        Protocol::Json => Err(HeaderError::NoProtocolId(protocol)),
    }
}

/// A TTHeader: everything before the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// FLAGS, as received (0 by default).
    pub flags: u16,
    /// The sequence id.
    pub seq_id: i32,
    /// The payload's protocol.
    pub protocol: Protocol,
    /// The payload carries its own 4-byte length (TTHeader over Framed).
    pub inner_framed: bool,
    /// String key-value pairs, in order (decoded ones are spans of the frame).
    pub str_kv: StrPairs,
    /// Integer-key pairs, in order (decoded ones are spans of the frame).
    pub int_kv: IntPairs,
    /// The ACL token, if any.
    pub acl_token: Option<Utf8Bytes>,
}

impl Header {
    /// An empty header for `seq_id` and `protocol`.
    pub fn new(seq_id: i32, protocol: Protocol) -> Self {
        Header {
            flags: 0,
            seq_id,
            protocol,
            inner_framed: false,
            str_kv: StrPairs::new(),
            int_kv: IntPairs::new(),
            acl_token: None,
        }
    }

    /// The value of integer key `key`, if present.
    pub fn int_value(&self, key: u16) -> Option<&str> {
        self.int_kv.get(key)
    }

    /// The value of string key `key`, if present.
    pub fn str_value(&self, key: &str) -> Option<&str> {
        self.str_kv.get(key)
    }

    /// Whether the sender marks the connection as closing ([`str_key::CONNECTION_RESET`]
    /// with a non-empty value).
    pub fn says_closing(&self) -> bool {
        self.str_value(str_key::CONNECTION_RESET)
            .is_some_and(|v| !v.is_empty())
    }

    /// Header bytes from offset 14, padding included (a multiple of 4).
    pub fn header_len(&self) -> usize {
        self.info().header_len()
    }

    /// The info blocks, for the functions TTHeader shares with stream frames.
    fn info(
        &self,
    ) -> Info<
        '_,
        impl ExactSizeIterator<Item = (&str, &str)> + Clone,
        impl ExactSizeIterator<Item = (u16, &str)> + Clone,
    > {
        Info {
            acl_token: self.acl_token.as_deref(),
            str_kv: self.str_kv.iter(),
            int_kv: self.int_kv.iter(),
        }
    }

    /// Bytes [`write`](Self::write) puts before the payload: the fixed part, the header,
    /// and the inner frame length when [`inner_framed`](Self::inner_framed).
    pub fn prefix_len(&self) -> usize {
        FIXED_LEN + self.header_len() + if self.inner_framed { 4 } else { 0 }
    }

    /// Checks what [`write`](Self::write) would reject: a protocol without a TTHeader
    /// id (JSON), strings and counts beyond u16, a header beyond `u16::MAX` words.
    pub fn check(&self) -> Result<(), HeaderError> {
        id_of(self.protocol)?;
        self.info().check()
    }

    /// Writes everything before a payload of `payload_len` bytes: [`prefix_len`] bytes.
    /// Call [`check`](Self::check) first for a header built from untrusted values; here
    /// lengths beyond u16 are an error too.
    ///
    /// [`prefix_len`]: Self::prefix_len
    pub fn write(&self, payload_len: usize, out: &mut impl BufMut) -> Result<(), HeaderError> {
        self.check()?;
        let protocol = id_of(self.protocol)?;
        let inner = if self.inner_framed { 4 } else { 0 };
        self.info()
            .write(self.flags, self.seq_id, protocol, inner + payload_len, out)?;
        if self.inner_framed {
            out.put_u32(payload_len as u32);
        }
        Ok(())
    }

    /// Reads a whole frame (its 4-byte LENGTH included): the header, and the payload as
    /// a slice of `frame` (no copy; so are the header's strings).
    pub fn decode(frame: &Bytes, limits: &HeaderLimits) -> Result<(Header, Bytes), HeaderError> {
        let mut header = Header::new(0, Protocol::Binary);
        let payload = header.decode_into(frame, limits)?;
        Ok((header, payload))
    }

    /// [`decode`](Self::decode) into this header, whose lists keep their capacity: a
    /// server that decodes every request of a connection into the same header
    /// allocates for none of them once the lists are large enough. On an error the
    /// header holds part of the frame's.
    pub fn decode_into(
        &mut self,
        frame: &Bytes,
        limits: &HeaderLimits,
    ) -> Result<Bytes, HeaderError> {
        let fixed = read_fixed(frame, MAGIC, limits)?;
        let (flags, seq_id, end) = (fixed.flags, fixed.seq_id, fixed.end);
        let mut h = Reader::new(frame, FIXED_LEN, end);
        let protocol = match h.u8("protocol id")? {
            PROTOCOL_BINARY => Protocol::Binary,
            PROTOCOL_COMPACT => Protocol::Compact,
            p => return Err(HeaderError::UnknownProtocol(u32::from(p))),
        };
        let transforms = h.u8("transform count")?;
        if transforms > 0 {
            let id = h.u8("transform id")?;
            return Err(HeaderError::UnsupportedTransform(u32::from(id)));
        }
        let header = self;
        header.flags = flags;
        header.seq_id = seq_id;
        header.protocol = protocol;
        header.inner_framed = false;
        header.str_kv.reset(frame);
        header.int_kv.reset(frame);
        header.acl_token = None;
        read_info(
            &mut h,
            &mut HeaderInfo {
                str_kv: &mut header.str_kv,
                int_kv: &mut header.int_kv,
                acl_token: &mut header.acl_token,
            },
        )?;
        let mut payload = frame.slice(end..);
        if is_inner_frame(&payload) {
            header.inner_framed = true;
            payload = payload.slice(4..);
        }
        Ok(payload)
    }
}

/// The info blocks of a header, borrowed: what [`Header`] and the frames of
/// [`crate::stream`] (TTHeader frames too) share. `S` and `I` walk the string and
/// integer pairs ([`str_slice`] and [`int_slice`] walk lists of `Utf8Bytes`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Info<'a, S, I> {
    pub(crate) acl_token: Option<&'a str>,
    pub(crate) str_kv: S,
    pub(crate) int_kv: I,
}

/// The string pairs of a list of `Utf8Bytes`, as [`Info`] walks them.
pub(crate) fn str_slice(
    pairs: &[(Utf8Bytes, Utf8Bytes)],
) -> impl ExactSizeIterator<Item = (&str, &str)> + Clone {
    pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
}

/// The integer pairs of a list of `Utf8Bytes`, as [`Info`] walks them.
pub(crate) fn int_slice(
    pairs: &[(u16, Utf8Bytes)],
) -> impl ExactSizeIterator<Item = (u16, &str)> + Clone {
    pairs.iter().map(|(k, v)| (*k, v.as_str()))
}

impl<'a, S, I> Info<'a, S, I>
where
    S: ExactSizeIterator<Item = (&'a str, &'a str)> + Clone,
    I: ExactSizeIterator<Item = (u16, &'a str)> + Clone,
{
    /// Header bytes from offset 14 (protocol id and transform count, the blocks,
    /// padding): a multiple of 4.
    pub(crate) fn header_len(&self) -> usize {
        let mut n = 2; // protocol id, transform count
        if let Some(token) = self.acl_token {
            n += 1 + 2 + token.len();
        }
        if self.str_kv.len() > 0 {
            n += 1 + 2;
            n += self
                .str_kv
                .clone()
                .map(|(k, v)| 4 + k.len() + v.len())
                .sum::<usize>();
        }
        if self.int_kv.len() > 0 {
            n += 1 + 2;
            n += self.int_kv.clone().map(|(_, v)| 4 + v.len()).sum::<usize>();
        }
        n.next_multiple_of(4)
    }

    /// Fails for strings and counts beyond u16, or a header beyond `u16::MAX` words.
    pub(crate) fn check(&self) -> Result<(), HeaderError> {
        let u16_len = |what, len: usize| {
            if len > usize::from(u16::MAX) {
                Err(HeaderError::TooLong { what, len })
            } else {
                Ok(())
            }
        };
        if let Some(t) = self.acl_token {
            u16_len("ACL token", t.len())?;
        }
        u16_len("string pair count", self.str_kv.len())?;
        u16_len("integer pair count", self.int_kv.len())?;
        for (k, v) in self.str_kv.clone() {
            u16_len("string key", k.len())?;
            u16_len("string value", v.len())?;
        }
        for (_, v) in self.int_kv.clone() {
            u16_len("integer-key value", v.len())?;
        }
        u16_len("header size in words", self.header_len() / 4)
    }

    /// Writes a frame's fixed part and header (blocks in the order ACL token, string
    /// pairs, integer pairs, each only when not empty, then the least padding), for
    /// `after` bytes after the header. [`check`](Self::check) must have passed.
    pub(crate) fn write(
        &self,
        flags: u16,
        seq_id: i32,
        protocol: u8,
        after: usize,
        out: &mut impl BufMut,
    ) -> Result<(), HeaderError> {
        let header_len = self.header_len();
        let after_length = FIXED_LEN - 4 + header_len + after;
        let length = u32::try_from(after_length).map_err(|_| HeaderError::TooLong {
            what: "frame",
            len: after_length,
        })?;
        out.put_u32(length);
        out.put_u16(MAGIC);
        out.put_u16(flags);
        out.put_i32(seq_id);
        out.put_u16((header_len / 4) as u16);
        out.put_u8(protocol);
        out.put_u8(0); // no transforms
        let mut written = 2;
        if let Some(token) = self.acl_token {
            out.put_u8(info::ACL_TOKEN);
            written += 1 + put_str(out, token);
        }
        if self.str_kv.len() > 0 {
            out.put_u8(info::KEY_VALUE);
            out.put_u16(self.str_kv.len() as u16);
            written += 3;
            for (k, v) in self.str_kv.clone() {
                written += put_str(out, k) + put_str(out, v);
            }
        }
        if self.int_kv.len() > 0 {
            out.put_u8(info::INT_KEY_VALUE);
            out.put_u16(self.int_kv.len() as u16);
            written += 3;
            for (k, v) in self.int_kv.clone() {
                out.put_u16(k);
                written += 2 + put_str(out, v);
            }
        }
        out.put_bytes(info::PADDING, header_len - written);
        Ok(())
    }
}

/// Where [`read_info`] puts what it reads.
pub(crate) trait InfoSink {
    /// Room for `n` more string pairs.
    fn reserve_str(&mut self, n: usize);
    /// Reads one string pair at `h`.
    fn str_pair(&mut self, h: &mut Reader<'_>) -> Result<(), HeaderError>;
    /// Room for `n` more integer pairs.
    fn reserve_int(&mut self, n: usize);
    /// Reads one integer pair at `h`.
    fn int_pair(&mut self, h: &mut Reader<'_>) -> Result<(), HeaderError>;
    /// The ACL token.
    fn acl_token(&mut self, token: Utf8Bytes);
}

/// A [`Header`]'s lists: decoded strings stay spans of the frame.
struct HeaderInfo<'a> {
    str_kv: &'a mut StrPairs,
    int_kv: &'a mut IntPairs,
    acl_token: &'a mut Option<Utf8Bytes>,
}

impl InfoSink for HeaderInfo<'_> {
    fn reserve_str(&mut self, n: usize) {
        self.str_kv.reserve(n);
    }
    fn str_pair(&mut self, h: &mut Reader<'_>) -> Result<(), HeaderError> {
        self.str_kv.read_pair(h)
    }
    fn reserve_int(&mut self, n: usize) {
        self.int_kv.reserve(n);
    }
    fn int_pair(&mut self, h: &mut Reader<'_>) -> Result<(), HeaderError> {
        self.int_kv.read_pair(h)
    }
    fn acl_token(&mut self, token: Utf8Bytes) {
        *self.acl_token = Some(token);
    }
}

/// Lists of `Utf8Bytes` (a stream frame's): each decoded string a slice of the frame.
pub(crate) struct VecInfo<'a> {
    pub(crate) str_kv: &'a mut Vec<(Utf8Bytes, Utf8Bytes)>,
    pub(crate) int_kv: &'a mut Vec<(u16, Utf8Bytes)>,
    pub(crate) acl_token: &'a mut Option<Utf8Bytes>,
}

impl InfoSink for VecInfo<'_> {
    fn reserve_str(&mut self, n: usize) {
        self.str_kv.reserve(n);
    }
    fn str_pair(&mut self, h: &mut Reader<'_>) -> Result<(), HeaderError> {
        let k = h.string_u16("string key")?;
        let v = h.string_u16("string value")?;
        self.str_kv.push((k, v));
        Ok(())
    }
    fn reserve_int(&mut self, n: usize) {
        self.int_kv.reserve(n);
    }
    fn int_pair(&mut self, h: &mut Reader<'_>) -> Result<(), HeaderError> {
        let k = h.u16("integer key")?;
        let v = h.string_u16("integer-key value")?;
        self.int_kv.push((k, v));
        Ok(())
    }
    fn acl_token(&mut self, token: Utf8Bytes) {
        *self.acl_token = Some(token);
    }
}

/// Reads the info blocks up to the end of the header (`h`'s end) into `sink`
/// (appending; the caller empties it first): blocks in any order, repeated blocks
/// merged, padding bytes anywhere.
pub(crate) fn read_info(h: &mut Reader<'_>, sink: &mut impl InfoSink) -> Result<(), HeaderError> {
    while h.left() > 0 {
        match h.u8("info id")? {
            info::PADDING => {}
            info::KEY_VALUE => {
                let n = h.u16("string pair count")?;
                sink.reserve_str(usize::from(n).min(h.left() / 4));
                for _ in 0..n {
                    sink.str_pair(h)?;
                }
            }
            info::INT_KEY_VALUE => {
                let n = h.u16("integer pair count")?;
                sink.reserve_int(usize::from(n).min(h.left() / 4));
                for _ in 0..n {
                    sink.int_pair(h)?;
                }
            }
            info::ACL_TOKEN => sink.acl_token(h.string_u16("ACL token")?),
            id => return Err(HeaderError::UnknownInfo(id)),
        }
    }
    Ok(())
}

/// Writes a u16-length string (its length checked by `Header::check`); returns the
/// bytes written.
fn put_str(out: &mut impl BufMut, s: &str) -> usize {
    out.put_u16(s.len() as u16);
    out.put_slice(s.as_bytes());
    2 + s.len()
}

/// Whether `payload` is a 4-byte length that matches the rest, then a message.
fn is_inner_frame(payload: &[u8]) -> bool {
    payload.len() >= 6
        && be_u32(payload, 0) as usize == payload.len() - 4
        && super::message_protocol(&payload[4..]).is_some()
}

/// The protocol a TTHeader frame declares (byte 14), once 15 bytes have arrived.
pub(crate) fn peek_protocol(head: &[u8]) -> Result<Option<Protocol>, HeaderError> {
    match head.get(FIXED_LEN) {
        None => Ok(None),
        Some(&PROTOCOL_BINARY) => Ok(Some(Protocol::Binary)),
        Some(&PROTOCOL_COMPACT) => Ok(Some(Protocol::Compact)),
        Some(&p) => Err(HeaderError::UnknownProtocol(u32::from(p))),
    }
}
