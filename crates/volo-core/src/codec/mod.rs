//! Framing and protocol: how RPC messages are cut out of a byte stream and put into
//! one.
//!
//! Four framings ([`Framing`]) and three protocols ([`Protocol`]: Binary, Compact and
//! Apache's JSON), in any combination but one (JSON inside TTHeader, see below):
//!
//! - **TTHeader** ([`ttheader`]): Kitex's header transport: a length, the magic
//!   `0x1000`, a sequence id, then key-value info blocks (metainfo, the method, the
//!   timeout...) before the payload.
//! - **THeader** ([`theader`]): Apache Thrift's header transport
//!   (`THeaderTransport`): a length, the magic `0x0FFF`, flags, a sequence id, then
//!   varint-coded protocol id, transforms (zlib) and key-value info headers before the
//!   payload; also read inside a Framed length, as Apache's test programs send it
//!   over `TFramedTransport`.
//! - **Framed**: a 4-byte big-endian length, then the message (Apache Thrift's
//!   `TFramedTransport`). The length is limited by [`Limits::max_frame`], 16,384,000
//!   bytes by default as in Apache Thrift.
//! - **Buffered**: the message alone (Apache Thrift's `TBufferedTransport`); its end is
//!   found by reading through it (Binary, Compact) or by matching its brackets (JSON,
//!   with [`MessageScanner`]).
//!
//! | framing | Binary | Compact | JSON |
//! |---|---|---|---|
//! | TTHeader | protocol id 0 | protocol id 2 | not offered: Kitex defines no id for it |
//! | THeader | protocol id 0 | protocol id 2 | protocol id 1 |
//! | Framed | length, then `80 01` | length, then `82` | length, then `[` |
//! | Buffered | `80 01` | `82` | `[` |
//!
//! A message's first bytes tell its protocol: strict Binary's version word `80 01`,
//! Compact's protocol id `82` (with version 1 in the next byte), JSON's `[` (the
//! `[1,"name",...]` of Apache's `TJSONProtocol`). TTHeader carries the protocol as an
//! id in its header, and Kitex's TTHeader defines ids for Binary (0) and Compact (2)
//! only: a TTHeader frame that declares any other is refused
//! ([`UnknownProtocol`](ttheader::HeaderError::UnknownProtocol)), and no TTHeader is
//! written for JSON ([`NoProtocolId`](ttheader::HeaderError::NoProtocolId); a client
//! configured so fails when it is made). Apache's THeader numbers JSON 1.
//!
//! A server does not know in advance what a client speaks: [`detect`] tells it from the
//! first bytes of the connection, and the server answers in kind:
//!
//! | request | reply |
//! |---|---|
//! | TTHeader | TTHeader: the same sequence id, flags, inner framing and protocol; the message type and backward metainfo as info |
//! | THeader | THeader: the same sequence id, flags, protocol, transforms (a zlib request gets a zlib reply) and outer framing; backward metainfo and the handler's headers as info, the request's info not echoed |
//! | Framed | Framed, the same protocol |
//! | Buffered | Buffered, the same protocol |
//!
//! Limits on what is read: every frame (TTHeader, THeader, Framed) and every Buffered
//! message by [`Limits::max_frame`] (a Buffered JSON message that has not closed its
//! first bracket within that many bytes fails there, and its connection closes; its
//! brackets may nest no deeper than the decoder's depth limit allows); headers
//! (TTHeader, THeader) by [`ttheader::HeaderLimits`], 64 KiB by default; a THeader
//! payload inflated by zlib by [`Limits::max_frame`] again, stopped as soon as it would
//! go beyond (no decompression bomb). Binary messages must carry the strict header
//! (`0x8001` version word), which every current Apache Thrift, Kitex and Volo client
//! writes; the old non-strict form (a bare method-name length first) cannot be told
//! from a frame length and is not accepted.

/// Runs `$body` with the type `$P` standing for the `thrift_wire` protocol that
/// `$protocol` (a [`Protocol`]) names: the one place where the protocol chosen at run
/// time becomes the type that encoders and decoders are generic over.
///
/// ```text
/// let n = with_protocol!(cx.protocol, P => Codec::<P>::new().encode_message(&h, &m, &mut out));
/// ```
macro_rules! with_protocol {
    ($protocol:expr, $P:ident => $body:expr) => {
        match $protocol {
            $crate::codec::Protocol::Binary => {
                type $P = ::thrift_wire::Binary;
                $body
            }
            $crate::codec::Protocol::Compact => {
                type $P = ::thrift_wire::Compact;
                $body
            }
            $crate::codec::Protocol::Json => {
                type $P = ::thrift_wire::Json;
                $body
            }
        }
    };
}
pub(crate) use with_protocol;

pub(crate) mod header;
mod pairs;
pub mod theader;
pub mod ttheader;

use bytes::{BufMut, Bytes};
use thrift_wire::protocol::json::{MESSAGE_START, MessageScanner};
use thrift_wire::{
    Binary, Codec, Compact, DecodeError, DecodeErrorKind, DecodeLimits, Decoder, Encoder,
    LinkBuffer, Message, MessageHeader, Sizer, TType,
};

/// How messages are delimited on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Framing {
    /// Kitex's TTHeader: a length, a header with key-value info, the payload.
    TTHeader,
    /// Apache Thrift's THeader: a length, a header with the protocol, transforms and
    /// key-value info, the payload (bare, or inside a Framed length).
    THeader,
    /// A 4-byte big-endian length, then the message.
    Framed,
    /// The message alone.
    Buffered,
}

/// The Thrift protocol of the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Thrift Binary (strict: the message begins with the version word `0x8001`).
    Binary,
    /// Thrift Compact (the message begins with the protocol id `0x82`).
    Compact,
    /// Apache Thrift's JSON protocol, `TJSONProtocol` (the message begins with `[`).
    /// Not carried by TTHeader, which has no protocol id for it.
    Json,
}

/// Size limits applied to everything read from the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest frame (or, when buffered, message) accepted, in bytes; a longer one
    /// is an error before any of it is buffered beyond this. Default 16,384,000, Apache
    /// Thrift's framed default.
    pub max_frame: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame: DEFAULT_MAX_FRAME,
        }
    }
}

/// A message body that can be written in any protocol: a call's arguments struct on
/// the client, the result struct of whichever method was called on the server. Every
/// [`Message`] is one; generated reply enums forward to the result struct they hold.
/// A client keeps a call's arguments as an [`ErasedBody`], which every `Body` is.
pub trait Body: Send + Sync {
    /// Exact encoded size.
    fn size<S: Sizer>(&self, s: &mut S) -> usize;
    /// Writes it.
    fn encode<E: Encoder>(&self, e: &mut E);
}

impl<M: Message + Send + Sync> Body for M {
    fn size<S: Sizer>(&self, s: &mut S) -> usize {
        Message::size(self, s)
    }

    fn encode<E: Encoder>(&self, e: &mut E) {
        Message::encode(self, e)
    }
}

/// A body already encoded in the protocol it is written in (an arguments or result
/// struct a proxy passes on, or one a generic client made from JSON): written as it is,
/// without a copy when large ([`Encoder::write_encoded`]). The bytes must be one whole
/// struct in the call's protocol; nothing checks them on the way out.
#[derive(Debug, Clone)]
pub struct Encoded(pub Bytes);

impl Body for Encoded {
    fn size<S: Sizer>(&self, s: &mut S) -> usize {
        s.encoded_len(&self.0)
    }

    fn encode<E: Encoder>(&self, e: &mut E) {
        e.write_encoded(&self.0)
    }
}

/// A [`Body`] behind a pointer: the protocol chosen when it is written, not by its
/// type. A client's call carries its arguments so (`Arc<dyn ErasedBody>`), through
/// layers that do not know their type; every `Body` is one.
pub trait ErasedBody: Send + Sync + 'static {
    /// Writes the message (`header`, then this body) in `protocol` inside `frame` into
    /// `out`; `Ok(Err(size))` when it would be larger than `max` (nothing written).
    fn write(
        &self,
        out: &mut LinkBuffer,
        protocol: Protocol,
        frame: &FrameOut<'_>,
        header: &MessageHeader,
        max: usize,
    ) -> Result<Result<(), usize>, FrameError>;
}

impl<M: Body + 'static> ErasedBody for M {
    fn write(
        &self,
        out: &mut LinkBuffer,
        protocol: Protocol,
        frame: &FrameOut<'_>,
        header: &MessageHeader,
        max: usize,
    ) -> Result<Result<(), usize>, FrameError> {
        with_protocol!(protocol, P => write_framed::<P, M>(out, frame, header, self, max))
    }
}

/// What a message is written inside: one of the four framings, with the header of the
/// two that have one.
#[derive(Debug, Clone, Copy)]
pub enum FrameOut<'a> {
    /// A TTHeader frame with this header.
    TTHeader(&'a ttheader::Header),
    /// A THeader frame with this header (its transforms applied to the message).
    THeader(&'a theader::Header),
    /// A 4-byte length before the message.
    Framed,
    /// The message alone.
    Buffered,
}

impl FrameOut<'_> {
    /// The framing written.
    pub fn framing(&self) -> Framing {
        match self {
            FrameOut::TTHeader(_) => Framing::TTHeader,
            FrameOut::THeader(_) => Framing::THeader,
            FrameOut::Framed => Framing::Framed,
            FrameOut::Buffered => Framing::Buffered,
        }
    }
}

/// Sizes a message (`header` and `body`) in protocol `P` and writes it inside `frame`
/// into `out`: [`write_message`] for TTHeader, Framed and Buffered,
/// [`write_theader_message`] for THeader. `Ok(Err(len))` when the message (or the
/// frame) is `len` bytes, above `max`: nothing is written.
pub fn write_framed<P, M>(
    out: &mut LinkBuffer,
    frame: &FrameOut<'_>,
    header: &MessageHeader,
    body: &M,
    max: usize,
) -> Result<Result<(), usize>, FrameError>
where
    P: thrift_wire::Protocol,
    M: Body + ?Sized,
{
    match *frame {
        FrameOut::THeader(h) => write_theader_message::<P, M>(out, h, header, body, max),
        FrameOut::TTHeader(h) => Ok(write_message::<P, M>(
            out,
            Framing::TTHeader,
            Some(h),
            header,
            body,
            max,
        )?),
        FrameOut::Framed => Ok(write_message::<P, M>(
            out,
            Framing::Framed,
            None,
            header,
            body,
            max,
        )?),
        FrameOut::Buffered => Ok(write_message::<P, M>(
            out,
            Framing::Buffered,
            None,
            header,
            body,
            max,
        )?),
    }
}

/// What separates the service from the method in a multiplexed method name
/// (`Service:method`), as Apache's `TMultiplexedProtocol` writes it and its
/// multiplexed servers route by.
pub const SERVICE_SEPARATOR: char = ':';

/// Apache Thrift's default frame size limit.
pub const DEFAULT_MAX_FRAME: usize = 16_384_000;

/// The strict Binary protocol's version word, high half (`0x8001`).
const BINARY_VERSION_1: [u8; 2] = [0x80, 0x01];
/// The Compact protocol's id byte.
const COMPACT_ID: u8 = 0x82;
/// The Compact protocol's version (low five bits of the second byte).
const COMPACT_VERSION: u8 = 1;

/// Why bytes from the network could not be framed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameError {
    /// The first bytes of a connection match no framing and protocol this server
    /// speaks (they are given, up to 8).
    #[error("unrecognized framing or protocol: first bytes {0:02x?}")]
    UnknownFraming(Vec<u8>),
    /// A frame length below zero.
    #[error("negative frame length {0}")]
    NegativeLength(i32),
    /// A frame (or buffered message) above the limit.
    #[error("frame of {size} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// Its size, as claimed by its length or as far as it was read.
        size: u64,
        /// The limit.
        limit: usize,
    },
    /// A malformed TTHeader.
    #[error("TTHeader: {0}")]
    TTHeader(#[from] ttheader::HeaderError),
    /// A malformed or unsupported THeader frame (the same error type as TTHeader's:
    /// made with `FrameError::THeader`, never by `?`).
    #[error("THeader: {0}")]
    THeader(theader::HeaderError),
    /// A buffered message that is not a valid message.
    #[error("buffered message: {0}")]
    Message(#[from] DecodeError),
    /// A frame that does not fit in what is left of the server's input budget
    /// (`ServerCapacity::max_buffered_input`).
    #[error("a frame of {0} bytes does not fit the server's input budget")]
    OverBudget(usize),
    /// A body that could not be written in the protocol asked for (on the sending
    /// side: a generic call's arguments, made in one protocol, re-encoded for another).
    #[error("the message body cannot be written: {0}")]
    Body(String),
}

/// A framing error ends the connection it came on: invalid data.
impl From<FrameError> for std::io::Error {
    fn from(e: FrameError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}

/// The most first bytes of a connection [`detect`] needs to tell its framing and
/// protocol (a THeader frame inside a Framed length has its protocol id 18 bytes in).
pub const DETECT_LEN: usize = 20;

/// Tells the framing and protocol of a connection from its first bytes; `Ok(None)` while
/// too few have arrived to tell (at most 8 are needed for Framed and Buffered; a
/// TTHeader's or THeader's protocol is read from its header, 15 bytes in, or 19 for a
/// THeader inside a Framed length: [`DETECT_LEN`] at most).
pub fn detect(head: &[u8]) -> Result<Option<(Framing, Protocol)>, FrameError> {
    if head.len() < 2 {
        return Ok(None);
    }
    if let Some(p) = message_protocol(head) {
        return Ok(Some((Framing::Buffered, p)));
    }
    if head.len() < 8 {
        // A frame length's first byte is small (0 for every frame under 16 MiB), which
        // tells it from a message; anything else cannot become valid.
        return if head[0] & 0x80 != 0 {
            Err(FrameError::UnknownFraming(head.to_vec()))
        } else {
            Ok(None)
        };
    }
    if head[4..6] == ttheader::MAGIC.to_be_bytes() {
        return match ttheader::peek_protocol(head)? {
            Some(p) => Ok(Some((Framing::TTHeader, p))),
            None => Ok(None),
        };
    }
    match theader::begins(head) {
        Some(true) => {
            return match theader::peek_protocol(head).map_err(FrameError::THeader)? {
                Some(p) => Ok(Some((Framing::THeader, p))),
                None => Ok(None),
            };
        }
        // A frame length inside a frame: a framed THeader's magic is at 8-9.
        None => return Ok(None),
        Some(false) => {}
    }
    match message_protocol(&head[4..]) {
        Some(p) => Ok(Some((Framing::Framed, p))),
        None => Err(FrameError::UnknownFraming(head[..8].to_vec())),
    }
}

/// The protocol whose message header `head` starts with (at least 2 bytes).
fn message_protocol(head: &[u8]) -> Option<Protocol> {
    if head[..2] == BINARY_VERSION_1 {
        Some(Protocol::Binary)
    } else if head[0] == COMPACT_ID && head[1] & 0x1f == COMPACT_VERSION {
        Some(Protocol::Compact)
    } else if head[0] == MESSAGE_START {
        // As a frame length, `[` would claim over 1.5 GB: never taken for one.
        Some(Protocol::Json)
    } else {
        None
    }
}

/// Cuts frames out of a connection's input for one framing and protocol: hand
/// [`frame_len`](Self::frame_len) to `Connection::read_frame`.
#[derive(Debug, Clone)]
pub struct FrameSplitter {
    framing: Framing,
    protocol: Protocol,
    limits: Limits,
    /// Buffered: the fewest bytes the message at the front can take, learnt from the
    /// last look; no need to look again before that many have arrived.
    at_least: usize,
    /// Buffered JSON: how far the brackets of the message at the front are matched,
    /// made on the first look (boxed: nothing for the other protocols to carry).
    scanner: Option<Box<MessageScanner>>,
}

impl FrameSplitter {
    /// A splitter for `framing` and `protocol` under `limits`.
    pub fn new(framing: Framing, protocol: Protocol, limits: Limits) -> Self {
        FrameSplitter {
            framing,
            protocol,
            limits,
            at_least: 0,
            scanner: None,
        }
    }

    /// The length of the frame at the front of `input` (with its length prefix, if
    /// any), once it can be told; `None` while more bytes are needed.
    ///
    /// A buffered message has no length: it ends where its struct ends, so this reads
    /// through the header and the struct (skipping every value) over what has arrived.
    /// When that runs out, the value it stopped in says how many more bytes it needs at
    /// least (a long string: all of them), and the next look waits for those, so a large
    /// message is not re-read for every piece of it; and a length that claims more than
    /// the limit fails at once, before it is buffered. A JSON message has no lengths: it
    /// ends where its first bracket closes; its brackets are matched by a
    /// [`MessageScanner`] that goes on, at each look, from where the last one stopped,
    /// and a message not closed within the limit fails there
    /// ([`FrameError::TooLarge`]), as does one nested deeper than the decoder's depth
    /// limit allows ([`FrameError::Message`]).
    pub fn frame_len(&mut self, input: &mut LinkBuffer) -> Result<Option<usize>, FrameError> {
        match self.framing {
            Framing::Framed | Framing::TTHeader | Framing::THeader => {
                let Some(h) = input.peek(4) else {
                    return Ok(None);
                };
                let len = i32::from_be_bytes([h[0], h[1], h[2], h[3]]);
                let len = usize::try_from(len).map_err(|_| FrameError::NegativeLength(len))?;
                if len > self.limits.max_frame {
                    return Err(self.too_large(len as u64));
                }
                Ok(Some(4 + len))
            }
            Framing::Buffered => self.buffered_len(input),
        }
    }

    /// The framing and protocol it cuts.
    pub fn kind(&self) -> (Framing, Protocol) {
        (self.framing, self.protocol)
    }

    fn too_large(&self, size: u64) -> FrameError {
        FrameError::TooLarge {
            size,
            limit: self.limits.max_frame,
        }
    }

    fn buffered_len(&mut self, input: &mut LinkBuffer) -> Result<Option<usize>, FrameError> {
        let have = input.len();
        if have == 0 || have < self.at_least {
            return Ok(None);
        }
        let outcome = match self.protocol {
            Protocol::Binary => message_end::<Binary>(input, have),
            Protocol::Compact => message_end::<Compact>(input, have),
            Protocol::Json => return self.json_len(input, have),
        };
        let Some(outcome) = outcome else {
            return Ok(None);
        };
        match outcome {
            Ok(len) if len > self.limits.max_frame => Err(self.too_large(len as u64)),
            Ok(len) => {
                self.at_least = 0;
                Ok(Some(len))
            }
            Err(e) => match missing(&e) {
                Some((needed, remaining)) => {
                    let at_least = (have - remaining) as u64 + needed;
                    if at_least > self.limits.max_frame as u64 {
                        return Err(self.too_large(at_least));
                    }
                    self.at_least = at_least as usize;
                    Ok(None)
                }
                None => Err(FrameError::Message(e)),
            },
        }
    }

    /// Buffered JSON: matches the brackets of what has arrived of the message at the
    /// front, from where the last look stopped.
    fn json_len(
        &mut self,
        input: &mut LinkBuffer,
        have: usize,
    ) -> Result<Option<usize>, FrameError> {
        let limit = self.limits.max_frame;
        let scanner = self
            .scanner
            .get_or_insert_with(|| Box::new(MessageScanner::new(DecodeLimits::default(), limit)));
        // The scanner reads the message from its start, in one piece: no copy while the
        // input sits in one buffer, as it does when read from a socket.
        let Some(bytes) = input.peek(have) else {
            return Ok(None);
        };
        scanner.scan(bytes).map_err(|e| match *e.kind() {
            DecodeErrorKind::SizeLimitExceeded { size, .. } => FrameError::TooLarge { size, limit },
            _ => FrameError::Message(e),
        })
    }
}

/// Sizes a message (`header` and `body`) in protocol `P` and writes it behind its
/// framing into `out`, with one reservation: behind `ttheader` when given, else behind a
/// Framed length, or nothing for Buffered. `Ok(Err(len))` when the message is `len`
/// bytes, above `max`: nothing is written.
pub fn write_message<P, M>(
    out: &mut LinkBuffer,
    framing: Framing,
    ttheader: Option<&ttheader::Header>,
    header: &MessageHeader,
    body: &M,
    max: usize,
) -> Result<Result<(), usize>, ttheader::HeaderError>
where
    P: thrift_wire::Protocol,
    M: Body + ?Sized,
{
    let codec = Codec::<P>::new();
    let mut sizer = codec.sizer();
    let len = sizer.message_begin_len(header) + body.size(&mut sizer);
    if len > max {
        return Ok(Err(len));
    }
    let copied = len - sizer.zero_copy_len();
    match (ttheader, framing) {
        (Some(h), _) => {
            out.reserve(h.prefix_len() + copied);
            h.write(len, out.tail_mut())?;
        }
        (None, Framing::Framed) => {
            out.reserve(4 + copied);
            out.tail_mut().put_u32(len as u32);
        }
        (None, _) => out.reserve(copied),
    }
    let mut e = codec.encoder(out);
    e.write_message_begin(header);
    body.encode(&mut e);
    Ok(Ok(()))
}

/// Sizes a message (`header` and `body`) in protocol `P` and writes it into `out` inside
/// a THeader frame described by `theader` (its transforms applied). `Ok(Err(len))`
/// when the message, or the frame, is `len` bytes, above `max`: nothing is written.
pub fn write_theader_message<P, M>(
    out: &mut LinkBuffer,
    theader: &theader::Header,
    header: &MessageHeader,
    body: &M,
    max: usize,
) -> Result<Result<(), usize>, FrameError>
where
    P: thrift_wire::Protocol,
    M: Body + ?Sized,
{
    let mut message = LinkBuffer::new();
    if let Err(len) =
        write_message::<P, M>(&mut message, Framing::Buffered, None, header, body, max)?
    {
        return Ok(Err(len));
    }
    theader
        .write_frame(message, out, max)
        .map_err(FrameError::THeader)
}

/// Reads the message header at the front of `input` (`have` bytes) in protocol `P` and
/// skips its struct; returns the bytes they took. `None` if `input` is shorter than
/// `have`.
fn message_end<P: thrift_wire::Protocol>(
    input: &mut LinkBuffer,
    have: usize,
) -> Option<Result<usize, DecodeError>> {
    // Looking needs the bytes in one piece: what arrived so far, copied once per look.
    let bytes = input.peek(have).map(Bytes::copy_from_slice)?;
    let mut d = P::decoder(bytes, DecodeLimits::default());
    let end = d
        .read_message_begin()
        .and_then(|_| d.skip(TType::Struct))
        .map(|()| have - d.remaining());
    Some(end)
}

/// The input ended inside a value that needs `needed` bytes where `remaining` were
/// left: more input may complete it.
fn missing(e: &DecodeError) -> Option<(u64, usize)> {
    match *e.kind() {
        DecodeErrorKind::UnexpectedEof { needed, remaining } => Some((needed as u64, remaining)),
        DecodeErrorKind::LengthExceedsInput {
            needed, remaining, ..
        } => Some((needed, remaining)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
