//! The `Message` trait, message envelopes, and `Codec`, the entry point.

use std::marker::PhantomData;

use bytes::Bytes;

use crate::error::{DecodeError, DecodeErrorKind, EncodeError};
use crate::link_buffer::LinkBuffer;
use crate::protocol::{DecodeLimits, Decoder, Encoder, Protocol, Sizer};
use crate::utf8_bytes::Utf8Bytes;

/// A Thrift struct (or union, or exception) that can be sized, encoded and decoded in
/// any [`Protocol`].
///
/// Generated code implements it; so do the hand-written reference types in
/// the `fixtures` module (feature `fixtures`). Contract for implementers:
///
/// - `size` returns exactly the number of bytes `encode` writes, for the same sizer and
///   encoder protocol. [`Codec::encode`] reserves that many bytes once; an `encode` that
///   writes more still works (the buffer grows) but loses the single allocation.
/// - `encode` writes one struct: `write_struct_begin`, fields, `write_struct_end`.
/// - `decode` reads one struct, skips unknown fields and fields whose wire type differs
///   from the declared one, fails with [`MissingRequiredField`](DecodeErrorKind::MissingRequiredField)
///   when a `required` field is absent, and adds `(struct, field)` to the error path of
///   any failure inside a field.
pub trait Message: Sized {
    /// Exact encoded size.
    fn size<S: Sizer>(&self, s: &mut S) -> usize;
    /// Writes the value.
    fn encode<E: Encoder>(&self, e: &mut E);
    /// Reads a value.
    fn decode<D: Decoder>(d: &mut D) -> Result<Self, DecodeError>;
}

/// The kind of an RPC message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MessageType {
    /// A request that expects a reply.
    Call = 1,
    /// A reply (a result struct).
    Reply = 2,
    /// A reply carrying a `TApplicationException`.
    Exception = 3,
    /// A request that expects no reply.
    Oneway = 4,
}

/// The envelope in front of every RPC message: method name, kind and sequence id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageHeader {
    /// The method name.
    pub name: Utf8Bytes,
    /// The message kind.
    pub ty: MessageType,
    /// The sequence id that pairs a reply with its call.
    pub seq_id: i32,
}

/// Encodes and decodes [`Message`]s in protocol `P` with a set of limits.
///
/// ```
/// use bytes::Bytes;
/// use thrift_wire::{Binary, Codec, LinkBuffer, Message, TType};
/// use thrift_wire::{DecodeError, Decoder, Encoder, Sizer};
///
/// // A one-field struct, written by hand as generated code would be.
/// #[derive(Debug, PartialEq)]
/// struct Ping { seq: i64 }
///
/// impl Message for Ping {
///     fn size<S: Sizer>(&self, s: &mut S) -> usize {
///         let saved = s.struct_begin();
///         s.field_begin_len(TType::I64, 1) + s.i64_len(self.seq) + s.struct_end_len(saved)
///     }
///     fn encode<E: Encoder>(&self, e: &mut E) {
///         let saved = e.write_struct_begin();
///         e.write_field_begin(TType::I64, 1);
///         e.write_i64(self.seq);
///         e.write_struct_end(saved);
///     }
///     fn decode<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
///         let saved = d.read_struct_begin()?;
///         let mut seq = 0;
///         loop {
///             let f = d.read_field_begin()?;
///             match (f.id, f.ty) {
///                 (_, TType::Stop) => break,
///                 (1, TType::I64) => seq = d.read_i64().map_err(|e| e.push("Ping", "seq"))?,
///                 (_, ty) => d.skip(ty)?,
///             }
///         }
///         d.read_struct_end(saved);
///         Ok(Ping { seq })
///     }
/// }
///
/// let codec = Codec::<Binary>::new();
/// let mut buf = LinkBuffer::new();
/// let written = codec.encode(&Ping { seq: 7 }, &mut buf)?;
/// assert_eq!(written, 12); // field header 3 + i64 8 + stop 1
/// let frame: Bytes = buf.next(written);
/// assert_eq!(codec.decode::<Ping>(frame)?, Ping { seq: 7 });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Codec<P: Protocol> {
    zero_copy_threshold: usize,
    max_size: usize,
    limits: DecodeLimits,
    _protocol: PhantomData<P>,
}

/// The default size from which `Bytes`-held strings and binaries are inserted into the
/// output as buffer nodes instead of being copied (4 KiB).
pub const DEFAULT_ZERO_COPY_THRESHOLD: usize = 4096;

impl<P: Protocol> Default for Codec<P> {
    fn default() -> Self {
        Codec {
            zero_copy_threshold: DEFAULT_ZERO_COPY_THRESHOLD,
            max_size: i32::MAX as usize,
            limits: DecodeLimits::default(),
            _protocol: PhantomData,
        }
    }
}

impl<P: Protocol> Codec<P> {
    /// A codec with the defaults: zero-copy from 4 KiB, nesting depth 64, sizes up to
    /// `i32::MAX` (Thrift lengths are `i32`; framing applies its own, smaller limit),
    /// strict message headers only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the size from which `Bytes`-held strings/binaries are inserted as their own
    /// buffer nodes rather than copied. `usize::MAX` turns zero-copy encoding off.
    pub fn zero_copy_threshold(mut self, bytes: usize) -> Self {
        self.zero_copy_threshold = bytes;
        self
    }

    /// Sets the largest value this codec encodes or decodes, in bytes. Capped at
    /// `i32::MAX`, the largest length the wire can carry.
    pub fn max_size(mut self, bytes: usize) -> Self {
        self.max_size = bytes.min(i32::MAX as usize);
        self
    }

    /// Sets the deepest nesting of structs and containers that decoding accepts.
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.limits.max_depth = depth;
        self
    }

    /// Accepts Binary message headers without a version word (old clients).
    pub fn accept_non_strict(mut self, accept: bool) -> Self {
        self.limits.accept_non_strict = accept;
        self
    }

    /// The exact encoded size of `msg`.
    pub fn size<M: Message>(&self, msg: &M) -> usize {
        msg.size(&mut P::sizer(self.zero_copy_threshold))
    }

    /// Appends `msg` to `buf`: sizes it, reserves once, writes. Returns the bytes written.
    pub fn encode<M: Message>(&self, msg: &M, buf: &mut LinkBuffer) -> Result<usize, EncodeError> {
        let mut sizer = P::sizer(self.zero_copy_threshold);
        let size = msg.size(&mut sizer);
        self.reserve(buf, size, sizer.zero_copy_len())?;
        msg.encode(&mut P::encoder(buf, self.zero_copy_threshold));
        Ok(size)
    }

    /// Appends a message header and `body` (an args or result struct) to `buf`.
    pub fn encode_message<M: Message>(
        &self,
        header: &MessageHeader,
        body: &M,
        buf: &mut LinkBuffer,
    ) -> Result<usize, EncodeError> {
        let mut sizer = P::sizer(self.zero_copy_threshold);
        let size = sizer.message_begin_len(header) + body.size(&mut sizer);
        self.reserve(buf, size, sizer.zero_copy_len())?;
        let mut encoder = P::encoder(buf, self.zero_copy_threshold);
        encoder.write_message_begin(header);
        body.encode(&mut encoder);
        Ok(size)
    }

    fn reserve(
        &self,
        buf: &mut LinkBuffer,
        size: usize,
        zero_copy: usize,
    ) -> Result<(), EncodeError> {
        if size > self.max_size {
            return Err(EncodeError::SizeLimitExceeded {
                size,
                limit: self.max_size,
            });
        }
        buf.reserve(size - zero_copy);
        Ok(())
    }

    /// Decodes one value that fills `input` exactly (strings and binaries are slices of
    /// `input`).
    pub fn decode<M: Message>(&self, input: Bytes) -> Result<M, DecodeError> {
        let mut d = self.decoder(input)?;
        let value = M::decode(&mut d)?;
        finish(&d)?;
        Ok(value)
    }

    /// Decodes a message header and the body that follows it, filling `input` exactly.
    pub fn decode_message<M: Message>(
        &self,
        input: Bytes,
    ) -> Result<(MessageHeader, M), DecodeError> {
        let mut d = self.decoder(input)?;
        let header = d.read_message_begin()?;
        let value = M::decode(&mut d)?;
        finish(&d)?;
        Ok((header, value))
    }

    /// A decoder over `input`, for reading several values or a header and a body by hand.
    pub fn decoder(&self, input: Bytes) -> Result<P::Decoder, DecodeError> {
        if input.len() > self.max_size {
            return Err(DecodeError::new(DecodeErrorKind::SizeLimitExceeded {
                size: input.len() as u64,
                limit: self.max_size as u64,
            }));
        }
        Ok(P::decoder(input, self.limits))
    }

    /// An encoder appending to `buf`, for writing by hand (reserve first; see [`size`](Codec::size)).
    pub fn encoder<'a>(&self, buf: &'a mut LinkBuffer) -> P::Encoder<'a> {
        P::encoder(buf, self.zero_copy_threshold)
    }

    /// A sizer with this codec's zero-copy threshold.
    pub fn sizer(&self) -> P::Sizer {
        P::sizer(self.zero_copy_threshold)
    }
}

fn finish<D: Decoder>(d: &D) -> Result<(), DecodeError> {
    match d.remaining() {
        0 => Ok(()),
        n => Err(DecodeError::new(DecodeErrorKind::TrailingBytes(n))),
    }
}
