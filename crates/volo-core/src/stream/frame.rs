//! The frames of Thrift streaming over TTHeader, as Kitex (v0.12 on, "StreamX") writes
//! and reads them.
//!
//! Each frame is one whole TTHeader frame ([`crate::codec::ttheader`]) with:
//!
//! - FLAGS carrying the streaming flag [`FLAG_STREAMING`] (0x0002);
//! - the stream id in the SEQUENCE ID;
//! - protocol id [`PROTOCOL_STRUCT`] (0x10, "a bare Thrift struct"), no transforms;
//! - the frame type in integer key [`int_key::FRAME_TYPE`] (27) as a decimal digit,
//!   `"1"` meta to `"5"` rst ([`FrameKind`]), and the method in integer key 9
//!   ([`int_key::METHOD`]);
//! - metadata in the string pairs: the service name (`isn`), metainfo
//!   (`RPC_PERSIST_*`, `RPC_TRANSIT_*`), user headers and trailers, the business
//!   status of a trailer ([`str_key`]);
//! - a payload that is, for a data frame, one Thrift Binary struct with no message
//!   header and no args or result wrapper (the method's argument one way, its result
//!   type the other); for a trailer or an rst, nothing or a Binary EXCEPTION message
//!   carrying a `TApplicationException` ([`exception_payload`], [`read_exception`]).
//!
//! Choices where Kitex leaves room, each so that what Kitex writes is read:
//! - Integer pairs are written frame type first, then the method, then any others.
//!   Kitex writes its pairs in Go's map order, which varies; any order is read.
//! - A protocol id of 0 (Binary) is read as 0x10 is: the payload is the same bare
//!   Binary struct. Compact (2) and other ids are refused: Kitex streams Binary only.
//! - An ACL token block (0x11), which Kitex reads into the string key
//!   `RPC_TRANSIT_gdpr-token`, is read into that key too; it is never written.
//! - A frame longer than [`FrameLimits::max_frame`] (16 MiB by default) is refused
//!   before it is read. Kitex sets no limit; a peer that sends more would make this
//!   side hold it whole.

use bytes::{BufMut, Bytes};
use thrift_wire::{
    ApplicationException, Binary, Codec, DecodeError, EncodeError, LinkBuffer, MessageHeader,
    MessageType, Utf8Bytes,
};

use crate::codec::header::{FIXED_LEN, HeaderError, HeaderLimits, Reader, be_u32, read_fixed};
use crate::codec::ttheader::{Info, MAGIC, VecInfo, int_slice, read_info, str_slice};

/// The FLAGS bit that marks a TTHeader frame as a stream frame.
pub const FLAG_STREAMING: u16 = 0x0002;

/// The protocol id of a stream frame's payload: one bare Thrift struct (Binary).
pub const PROTOCOL_STRUCT: u8 = 0x10;

/// The protocol id of Binary, also read as a bare struct.
const PROTOCOL_BINARY: u8 = 0x00;

/// Integer keys of stream frames.
pub mod int_key {
    /// The method, in every frame Kitex writes (read from header frames).
    pub const METHOD: u16 = crate::codec::ttheader::int_key::TO_METHOD;
    /// The frame type, `"1"` to `"5"`.
    pub const FRAME_TYPE: u16 = 27;
}

/// String keys of stream frames with a meaning of their own.
pub mod str_key {
    /// The IDL service name, in the client's header frame.
    pub const SERVICE: &str = crate::codec::ttheader::str_key::IDL_SERVICE_NAME;
    /// A trailer's business status code, in decimal (absent or 0: none).
    pub const BIZ_STATUS: &str = "biz-status";
    /// A trailer's business status message.
    pub const BIZ_MESSAGE: &str = "biz-message";
    /// A trailer's business status extras, a JSON object.
    pub const BIZ_EXTRA: &str = "biz-extra";
    /// An rst's cancel path: the callers' service names, comma-separated.
    pub const CANCEL_PATH: &str = "ttscp";
    /// Where Kitex puts an ACL token block's value.
    pub const ACL_TOKEN: &str = "RPC_TRANSIT_gdpr-token";
}

/// What a frame does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// 1: connection or stream metadata (Kitex's servers ignore it).
    Meta,
    /// 2: opens a stream (client) or answers its opening (server), with headers.
    Header,
    /// 3: one message.
    Data,
    /// 4: ends the sender's direction, with trailers and perhaps an error.
    Trailer,
    /// 5: cancels the stream, perhaps with an error.
    Rst,
}

impl FrameKind {
    /// The frame type's value in integer key 27.
    pub fn wire(self) -> &'static str {
        match self {
            FrameKind::Meta => "1",
            FrameKind::Header => "2",
            FrameKind::Data => "3",
            FrameKind::Trailer => "4",
            FrameKind::Rst => "5",
        }
    }

    /// The kind whose value in integer key 27 is `value`.
    pub fn from_wire(value: &str) -> Option<FrameKind> {
        Some(match value {
            "1" => FrameKind::Meta,
            "2" => FrameKind::Header,
            "3" => FrameKind::Data,
            "4" => FrameKind::Trailer,
            "5" => FrameKind::Rst,
            _ => return None,
        })
    }
}

/// Limits on received frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLimits {
    /// Most bytes in one frame, its LENGTH field included. Default 16 MiB.
    pub max_frame: usize,
    /// Limits on the header.
    pub header: HeaderLimits,
}

impl Default for FrameLimits {
    fn default() -> Self {
        FrameLimits {
            max_frame: 16 * 1024 * 1024,
            header: HeaderLimits::default(),
        }
    }
}

/// A stream frame that could not be read or written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// The TTHeader frame itself is malformed or unsupported.
    #[error("stream frame header: {0}")]
    Header(#[from] HeaderError),
    /// FLAGS lack [`FLAG_STREAMING`]: a ping-pong TTHeader frame.
    #[error("flags {0:#06x} lack the streaming flag 0x0002")]
    NotStreaming(u16),
    /// No integer key 27.
    #[error("no frame type (integer key 27)")]
    NoFrameType,
    /// Integer key 27 is not `"1"` to `"5"`.
    #[error("frame type {0:?} is not one of \"1\" to \"5\"")]
    BadFrameType(String),
    /// A frame longer than [`FrameLimits::max_frame`].
    #[error("a frame of {len} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// Its length, LENGTH field included.
        len: usize,
        /// The limit.
        limit: usize,
    },
}

/// One stream frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// What the frame does.
    pub kind: FrameKind,
    /// The stream it belongs to.
    pub stream_id: i32,
    /// The method (integer key 9), if present.
    pub method: Option<Utf8Bytes>,
    /// The string pairs (headers, trailers, metainfo), in order.
    pub meta: Vec<(Utf8Bytes, Utf8Bytes)>,
    /// Integer pairs other than the frame type and the method, in order.
    pub int_kv: Vec<(u16, Utf8Bytes)>,
    /// The payload: a bare struct (data), an EXCEPTION message or nothing (trailer,
    /// rst), opaque (meta).
    pub payload: Bytes,
}

impl Frame {
    /// A frame of `kind` for `stream_id`, with no method, metadata or payload.
    pub fn new(kind: FrameKind, stream_id: i32) -> Self {
        Frame {
            kind,
            stream_id,
            method: None,
            meta: Vec::new(),
            int_kv: Vec::new(),
            payload: Bytes::new(),
        }
    }

    /// This frame with method `method`.
    pub fn with_method(mut self, method: impl Into<Utf8Bytes>) -> Self {
        self.method = Some(method.into());
        self
    }

    /// This frame with `payload`.
    pub fn with_payload(mut self, payload: Bytes) -> Self {
        self.payload = payload;
        self
    }

    /// The value of string key `key`, if present (the last, if repeated).
    pub fn meta_value(&self, key: &str) -> Option<&str> {
        last_value(&self.meta, key)
    }

    /// The integer pairs as written: frame type, method, then the others.
    fn int_pairs(&self) -> Vec<(u16, Utf8Bytes)> {
        let mut pairs = Vec::with_capacity(2 + self.int_kv.len());
        pairs.push((
            int_key::FRAME_TYPE,
            Utf8Bytes::from_static(self.kind.wire()),
        ));
        if let Some(method) = &self.method {
            pairs.push((int_key::METHOD, method.clone()));
        }
        pairs.extend(self.int_kv.iter().cloned());
        pairs
    }

    /// Appends the encoded frame to `out`; returns its length. Fails, writing
    /// nothing, for strings, counts or a header beyond what TTHeader can hold.
    pub fn encode(&self, out: &mut impl BufMut) -> Result<usize, FrameError> {
        let len = if self.int_kv.is_empty() {
            // The frames streams write: no allocation for the integer pairs.
            write_head(
                self.kind,
                self.stream_id,
                self.method.as_ref(),
                &self.meta,
                self.payload.len(),
                out,
            )?
        } else {
            let int_kv = self.int_pairs();
            let info = Info {
                acl_token: None,
                str_kv: str_slice(&self.meta),
                int_kv: int_slice(&int_kv),
            };
            head(&info, self.stream_id, self.payload.len(), out)?
        };
        out.put_slice(&self.payload);
        Ok(len)
    }

    /// Reads one whole frame (its LENGTH field included). Strings and the payload are
    /// slices of `frame`.
    pub fn decode(frame: &Bytes, limits: &FrameLimits) -> Result<Frame, FrameError> {
        if frame.len() > limits.max_frame {
            return Err(FrameError::TooLarge {
                len: frame.len(),
                limit: limits.max_frame,
            });
        }
        let fixed = read_fixed(frame, MAGIC, &limits.header)?;
        if fixed.flags & FLAG_STREAMING == 0 {
            return Err(FrameError::NotStreaming(fixed.flags));
        }
        let mut h = Reader::new(frame, FIXED_LEN, fixed.end);
        match h.u8("protocol id")? {
            PROTOCOL_STRUCT | PROTOCOL_BINARY => {}
            p => return Err(HeaderError::UnknownProtocol(u32::from(p)).into()),
        }
        if h.u8("transform count")? > 0 {
            let id = h.u8("transform id")?;
            return Err(HeaderError::UnsupportedTransform(u32::from(id)).into());
        }
        let mut meta = Vec::new();
        let mut int_kv = Vec::new();
        let mut acl_token = None;
        read_info(
            &mut h,
            &mut VecInfo {
                str_kv: &mut meta,
                int_kv: &mut int_kv,
                acl_token: &mut acl_token,
            },
        )?;
        if let Some(token) = acl_token {
            meta.push((Utf8Bytes::from_static(str_key::ACL_TOKEN), token));
        }
        let mut kind = None;
        let mut method = None;
        let mut bad_kind = None;
        int_kv.retain(|(k, v)| match *k {
            int_key::FRAME_TYPE => {
                kind = FrameKind::from_wire(v.as_str());
                bad_kind = kind.is_none().then(|| v.as_str().to_owned());
                false
            }
            int_key::METHOD => {
                method = Some(v.clone());
                false
            }
            _ => true,
        });
        if let Some(value) = bad_kind {
            return Err(FrameError::BadFrameType(value));
        }
        Ok(Frame {
            kind: kind.ok_or(FrameError::NoFrameType)?,
            stream_id: fixed.seq_id,
            method,
            meta,
            int_kv,
            payload: frame.slice(fixed.end..),
        })
    }
}

/// The value of `key` among `pairs` (the last, if repeated).
pub(crate) fn last_value<'a>(pairs: &'a [(Utf8Bytes, Utf8Bytes)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| k.as_str() == key)
        .map(|(_, v)| v.as_str())
}

/// Writes the fixed part and the header of a frame of `kind` with `meta` and no other
/// integer pairs, for a payload of `payload_len` bytes that the caller writes next;
/// returns the whole frame's length. Fails, writing nothing, for strings or counts
/// beyond what TTHeader can hold.
pub(crate) fn write_head(
    kind: FrameKind,
    stream_id: i32,
    method: Option<&Utf8Bytes>,
    meta: &[(Utf8Bytes, Utf8Bytes)],
    payload_len: usize,
    out: &mut impl BufMut,
) -> Result<usize, FrameError> {
    let pairs = [
        (int_key::FRAME_TYPE, Utf8Bytes::from_static(kind.wire())),
        (int_key::METHOD, method.cloned().unwrap_or_default()),
    ];
    let info = Info {
        acl_token: None,
        str_kv: str_slice(meta),
        int_kv: int_slice(&pairs[..if method.is_some() { 2 } else { 1 }]),
    };
    head(&info, stream_id, payload_len, out)
}

/// Checks and writes `info` as a stream frame's header; returns the frame's length.
fn head<'a>(
    info: &Info<
        'a,
        impl ExactSizeIterator<Item = (&'a str, &'a str)> + Clone,
        impl ExactSizeIterator<Item = (u16, &'a str)> + Clone,
    >,
    stream_id: i32,
    payload_len: usize,
    out: &mut impl BufMut,
) -> Result<usize, FrameError> {
    info.check()?;
    info.write(FLAG_STREAMING, stream_id, PROTOCOL_STRUCT, payload_len, out)?;
    Ok(FIXED_LEN + info.header_len() + payload_len)
}

/// The length of the frame that starts `head` (its LENGTH field included), once
/// four bytes have arrived; refused beyond the limit, before any of it is read.
pub fn frame_len(head: &[u8], limits: &FrameLimits) -> Result<Option<usize>, FrameError> {
    if head.len() < 4 {
        return Ok(None);
    }
    let len = be_u32(head, 0) as usize + 4;
    if len > limits.max_frame {
        return Err(FrameError::TooLarge {
            len,
            limit: limits.max_frame,
        });
    }
    Ok(Some(len))
}

/// Whether a connection whose first bytes are `head` speaks streaming: the TTHeader
/// magic and the streaming flag, as Kitex's server decides once per connection.
/// `None` until eight bytes have arrived.
pub fn is_streaming(head: &[u8]) -> Option<bool> {
    let head = head.get(..8)?;
    let magic = u16::from_be_bytes([head[4], head[5]]);
    let flags = u16::from_be_bytes([head[6], head[7]]);
    Some(magic == MAGIC && flags & FLAG_STREAMING != 0)
}

/// The payload of a trailer or rst that carries `error`: a Binary EXCEPTION message
/// named `method`, with the stream id as its sequence id, as Kitex writes it. Fails
/// only for a message beyond the codec's size limit.
pub fn exception_payload(
    error: &ApplicationException,
    method: &str,
    stream_id: i32,
) -> Result<Bytes, EncodeError> {
    let header = MessageHeader {
        name: Utf8Bytes::from(method.to_owned()),
        ty: MessageType::Exception,
        seq_id: stream_id,
    };
    let mut buf = LinkBuffer::new();
    let n = Codec::<Binary>::new().encode_message(&header, error, &mut buf)?;
    Ok(buf.next(n))
}

/// The exception a trailer's or rst's payload carries; the message's name and
/// sequence id are not checked (Kitex does not check them either).
pub fn read_exception(payload: Bytes) -> Result<ApplicationException, ExceptionError> {
    let (header, error) = Codec::<Binary>::new().decode_message::<ApplicationException>(payload)?;
    if header.ty != MessageType::Exception {
        return Err(ExceptionError::NotAnException(header.ty));
    }
    Ok(error)
}

/// A trailer's or rst's payload that is not an exception.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum ExceptionError {
    /// It does not decode as a Binary message holding a `TApplicationException`.
    #[error("the payload is not a Binary exception message: {0}")]
    Decode(#[from] DecodeError),
    /// A message of another type.
    #[error("a {0:?} message where an exception belongs")]
    NotAnException(MessageType),
}

/// A business status error carried in a trailer's string keys, as Kitex's
/// `BizStatusError` travels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BizStatus {
    /// The status code (never 0).
    pub code: i32,
    /// The message.
    pub message: String,
    /// Extras, a JSON object, if any.
    pub extra: Option<String>,
}

impl BizStatus {
    /// The status `frame` carries: `None` when `biz-status` is absent or 0, as Kitex
    /// reads it, and when it is not a decimal `i32` (a choice of this crate).
    pub fn of(frame: &Frame) -> Option<BizStatus> {
        let code: i32 = frame.meta_value(str_key::BIZ_STATUS)?.parse().ok()?;
        (code != 0).then(|| BizStatus {
            code,
            message: frame
                .meta_value(str_key::BIZ_MESSAGE)
                .unwrap_or_default()
                .to_owned(),
            extra: frame.meta_value(str_key::BIZ_EXTRA).map(str::to_owned),
        })
    }

    /// Adds this status to `frame`'s string pairs.
    pub fn put(&self, frame: &mut Frame) {
        frame.meta.push((
            Utf8Bytes::from_static(str_key::BIZ_STATUS),
            Utf8Bytes::from(self.code.to_string()),
        ));
        frame.meta.push((
            Utf8Bytes::from_static(str_key::BIZ_MESSAGE),
            Utf8Bytes::from(self.message.clone()),
        ));
        if let Some(extra) = &self.extra {
            frame.meta.push((
                Utf8Bytes::from_static(str_key::BIZ_EXTRA),
                Utf8Bytes::from(extra.clone()),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use thrift_wire::ApplicationExceptionKind;

    use super::*;

    // Frames a Kitex v0.16.3 client and server wrote to each other, captured on a
    // loopback connection (wire facts, kept as hex).

    /// Client to server: data, stream 1, `Echo`, the bare struct `{1: "hello"}`.
    const DATA: &str = "0000002b100000020000000100051000100002001b000133000900044563686f00000b00010000000568656c6c6f00";
    /// Client header frame, stream 2, `EchoServer`, service `TestService`.
    const HEADER: &str = "0000003a1000000200000002000c1000010001000369736e000b5465737453657276696365100002001b0001320009000a4563686f536572766572000000";
    /// Client header frame with a transient and a persistent metainfo value.
    const HEADER_METAINFO: &str = "0000005a100000020000000100141000010003000369736e000b5465737453657276696365000e5250435f5452414e5349545f746b00027476000e5250435f504552534953545f706b00027076100002001b000132000900044563686f00";
    /// The client's trailer (it closes its direction), stream 1.
    const CLOSE_SEND: &str = "0000001e100000020000000100051000100002001b000134000900044563686f0000";
    /// The server's trailer with business status 1234 and a user trailer, stream 4.
    const BIZ_TRAILER: &str = "000000521000000200000004001210000100030002746b00027476000a62697a2d737461747573000431323334000b62697a2d6d657373616765000762697a206d7367100002001b000134000900044563686f000000";
    /// The server's trailer for a handler that failed, stream 5.
    const ERROR_TRAILER: &str = "0000005f1000000200000005000810000100010002746b00027476100002001b000134000900044563686f00000080010003000000044563686f000000050b00010000001662697a206572726f723a20706c61696e206572726f720800020000000600";
    /// The client's rst when its deadline passed, stream 7.
    const DEADLINE_RST: &str = "00000069100000020000000700051000100002001b000135000900044563686f000080010003000000044563686f000000070b00010000002c73747265616d2074696d656f75742c2074696d656f757420696e206374783a203239392e3930373139366d7308000200002eef00";

    fn hex(s: &str) -> Bytes {
        Bytes::from(crate::test_support::hex(s))
    }

    fn decode(s: &str) -> Frame {
        Frame::decode(&hex(s), &FrameLimits::default()).expect("decodes")
    }

    fn encode(frame: &Frame) -> Bytes {
        let mut out = Vec::new();
        let n = frame.encode(&mut out).expect("encodes");
        assert_eq!(n, out.len());
        Bytes::from(out)
    }

    fn pair(k: &str, v: &str) -> (Utf8Bytes, Utf8Bytes) {
        (Utf8Bytes::from(k.to_owned()), Utf8Bytes::from(v.to_owned()))
    }

    #[test]
    fn kitex_frames_decode_and_encode_back_to_the_same_bytes() {
        for captured in [DATA, HEADER, HEADER_METAINFO, CLOSE_SEND, BIZ_TRAILER] {
            let frame = decode(captured);
            assert_eq!(encode(&frame), hex(captured), "{frame:?}");
        }
    }

    #[test]
    fn a_data_frame_carries_the_bare_struct() {
        let frame = decode(DATA);
        assert_eq!(frame.kind, FrameKind::Data);
        assert_eq!(frame.stream_id, 1);
        assert_eq!(frame.method.as_deref(), Some("Echo"));
        assert!(frame.meta.is_empty() && frame.int_kv.is_empty());
        assert_eq!(
            frame.payload,
            hex("0b00010000000568656c6c6f00"),
            "field 1, string \"hello\", stop"
        );
    }

    #[test]
    fn a_header_frame_carries_the_service_and_metainfo() {
        let frame = decode(HEADER);
        assert_eq!(frame.kind, FrameKind::Header);
        assert_eq!(frame.stream_id, 2);
        assert_eq!(frame.method.as_deref(), Some("EchoServer"));
        assert_eq!(frame.meta_value(str_key::SERVICE), Some("TestService"));
        assert!(frame.payload.is_empty());

        let frame = decode(HEADER_METAINFO);
        assert_eq!(
            frame.meta,
            vec![
                pair("isn", "TestService"),
                pair("RPC_TRANSIT_tk", "tv"),
                pair("RPC_PERSIST_pk", "pv"),
            ]
        );
    }

    #[test]
    fn a_trailer_carries_a_business_status() {
        let frame = decode(BIZ_TRAILER);
        assert_eq!(frame.kind, FrameKind::Trailer);
        assert_eq!(frame.meta_value("tk"), Some("tv"));
        let status = BizStatus::of(&frame).expect("a status");
        assert_eq!(
            status,
            BizStatus {
                code: 1234,
                message: "biz msg".into(),
                extra: None,
            }
        );
        // Written back in the same order after the user trailer.
        let mut rebuilt = Frame::new(FrameKind::Trailer, 4).with_method("Echo");
        rebuilt.meta.push(pair("tk", "tv"));
        status.put(&mut rebuilt);
        assert_eq!(encode(&rebuilt), hex(BIZ_TRAILER));
        assert_eq!(BizStatus::of(&decode(CLOSE_SEND)), None);
    }

    #[test]
    fn a_trailer_and_an_rst_carry_exceptions_as_kitex_writes_them() {
        let frame = decode(ERROR_TRAILER);
        assert_eq!(frame.kind, FrameKind::Trailer);
        let error = read_exception(frame.payload.clone()).expect("an exception");
        assert_eq!(error.kind, ApplicationExceptionKind::InternalError);
        assert_eq!(error.message.as_str(), "biz error: plain error");
        let payload = exception_payload(&error, "Echo", 5).expect("encodes");
        assert_eq!(payload, frame.payload);

        let rst = decode(DEADLINE_RST);
        assert_eq!(rst.kind, FrameKind::Rst);
        let error = read_exception(rst.payload).expect("an exception");
        assert_eq!(error.kind, ApplicationExceptionKind::Other(12015));
        assert!(error.message.as_str().starts_with("stream timeout"));
    }

    #[test]
    fn a_payload_that_is_not_an_exception_message_is_an_error() {
        assert!(matches!(
            read_exception(hex("0b00010000000568656c6c6f00")),
            Err(ExceptionError::Decode(_))
        ));
        let reply = {
            let header = MessageHeader {
                name: Utf8Bytes::from_static("Echo"),
                ty: MessageType::Reply,
                seq_id: 1,
            };
            let mut buf = LinkBuffer::new();
            let n = Codec::<Binary>::new()
                .encode_message(&header, &ApplicationException::default(), &mut buf)
                .expect("encodes");
            buf.next(n)
        };
        assert_eq!(
            read_exception(reply),
            Err(ExceptionError::NotAnException(MessageType::Reply))
        );
    }

    #[test]
    fn integer_pairs_are_read_in_any_order() {
        // The data frame with the method before the frame type, as Kitex's map order
        // sometimes writes it, and another integer key after them.
        let mut frame = Frame::new(FrameKind::Data, 9).with_payload(Bytes::from_static(b"\x00"));
        frame.int_kv.push((3, Utf8Bytes::from_static("caller")));
        let info_pairs = vec![
            (int_key::METHOD, Utf8Bytes::from_static("Echo")),
            (3, Utf8Bytes::from_static("caller")),
            (int_key::FRAME_TYPE, Utf8Bytes::from_static("3")),
        ];
        let mut out = Vec::new();
        let info = Info {
            acl_token: None,
            str_kv: str_slice(&[]),
            int_kv: int_slice(&info_pairs),
        };
        info.write(FLAG_STREAMING, 9, PROTOCOL_STRUCT, 1, &mut out)
            .expect("writes");
        out.push(0);
        let read = Frame::decode(&Bytes::from(out), &FrameLimits::default()).expect("decodes");
        assert_eq!(read, frame.with_method("Echo"));
    }

    /// `DATA` with bytes `at..` replaced by `with`.
    fn patched(at: usize, with: &[u8]) -> Bytes {
        let mut b = hex(DATA).to_vec();
        b[at..at + with.len()].copy_from_slice(with);
        Bytes::from(b)
    }

    #[test]
    fn malformed_frames_get_typed_errors() {
        let limits = FrameLimits::default();
        // A ping-pong TTHeader frame: no streaming flag.
        assert_eq!(
            Frame::decode(&patched(6, &[0, 0]), &limits),
            Err(FrameError::NotStreaming(0))
        );
        // Frame type "9", and no frame type at all (key 27 renamed to 28).
        assert_eq!(
            Frame::decode(&patched(23, b"9"), &limits),
            Err(FrameError::BadFrameType("9".into()))
        );
        assert_eq!(
            Frame::decode(&patched(19, &[0, 28]), &limits),
            Err(FrameError::NoFrameType)
        );
        // Compact's protocol id.
        assert_eq!(
            Frame::decode(&patched(14, &[2]), &limits),
            Err(FrameError::Header(HeaderError::UnknownProtocol(2)))
        );
        // A LENGTH that disagrees, and a cut frame.
        assert!(matches!(
            Frame::decode(&patched(0, &[0, 0, 0, 0x2c]), &limits),
            Err(FrameError::Header(HeaderError::LengthMismatch { .. }))
        ));
        assert!(Frame::decode(&hex(DATA).slice(..20), &limits).is_err());
        // Above the frame limit, refused before reading.
        let small = FrameLimits {
            max_frame: 40,
            ..limits
        };
        assert_eq!(
            Frame::decode(&hex(DATA), &small),
            Err(FrameError::TooLarge { len: 47, limit: 40 })
        );
        assert_eq!(
            frame_len(&hex(DATA), &small),
            Err(FrameError::TooLarge { len: 47, limit: 40 })
        );
    }

    #[test]
    fn frame_len_and_detection_wait_for_their_bytes() {
        let data = hex(DATA);
        let limits = FrameLimits::default();
        assert_eq!(frame_len(&data[..3], &limits), Ok(None));
        assert_eq!(frame_len(&data[..4], &limits), Ok(Some(47)));
        assert_eq!(is_streaming(&data[..7]), None);
        assert_eq!(is_streaming(&data), Some(true));
        assert_eq!(is_streaming(&patched(6, &[0, 0])), Some(false));
        assert_eq!(is_streaming(&patched(4, &[0x0f, 0xff])), Some(false));
    }

    #[test]
    fn strings_beyond_u16_are_refused_when_encoding() {
        let mut frame = Frame::new(FrameKind::Header, 1);
        frame.meta.push(pair("big", &"x".repeat(70_000)));
        let mut out = Vec::new();
        assert!(matches!(
            frame.encode(&mut out),
            Err(FrameError::Header(HeaderError::TooLong { .. }))
        ));
        assert!(out.is_empty(), "nothing written");
    }

    fn any_frame() -> impl Strategy<Value = Frame> {
        let kind = prop::sample::select(vec![
            FrameKind::Meta,
            FrameKind::Header,
            FrameKind::Data,
            FrameKind::Trailer,
            FrameKind::Rst,
        ]);
        let text = "[a-zA-Z0-9_-]{0,12}";
        (
            kind,
            any::<i32>(),
            prop::option::of(text),
            prop::collection::vec((text, text), 0..4),
            prop::collection::vec((28u16.., text), 0..3),
            prop::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(kind, stream_id, method, meta, ints, payload)| Frame {
                kind,
                stream_id,
                method: method.map(Utf8Bytes::from),
                meta: meta
                    .into_iter()
                    .map(|(k, v)| (Utf8Bytes::from(k), Utf8Bytes::from(v)))
                    .collect(),
                int_kv: ints
                    .into_iter()
                    .map(|(k, v)| (k, Utf8Bytes::from(v)))
                    .collect(),
                payload: Bytes::from(payload),
            })
    }

    proptest! {
        #[test]
        fn every_frame_decodes_as_it_was_encoded(frame in any_frame()) {
            let bytes = encode(&frame);
            prop_assert_eq!(frame_len(&bytes, &FrameLimits::default()), Ok(Some(bytes.len())));
            prop_assert_eq!(Frame::decode(&bytes, &FrameLimits::default()), Ok(frame));
        }

        #[test]
        fn damaged_frames_never_panic(
            frame in any_frame(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let mut bytes = encode(&frame).to_vec();
            let i = at.index(bytes.len());
            bytes[i] = byte;
            let _ = Frame::decode(&Bytes::from(bytes), &FrameLimits::default());
        }
    }
}
