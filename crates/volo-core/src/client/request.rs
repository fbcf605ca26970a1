//! What goes down a client stack and what comes back up: a [`ClientRequest`] (the
//! method's argument struct, type-erased and cheap to clone, so retry and backup layers
//! can send it again) and a [`ClientResponse`] (the reply message, checked against the
//! call, its result struct still to decode).

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use thrift_codec::{
    ApplicationException, Binary, Codec, Compact, Decoder, LinkBuffer, Message, MessageHeader,
    MessageType,
};

use super::Error;
use crate::codec::ttheader::Header;
use crate::codec::{Framing, Protocol};

/// An argument struct that can be written in either protocol: every generated args
/// struct (every [`Message`]) is one.
pub trait EncodeArgs: Send + Sync + 'static {
    /// Writes the message (`header`, then the struct) behind its framing into `out`;
    /// `Ok(Err(size))` when it would be larger than `max_frame` (nothing written).
    fn write(
        &self,
        out: &mut LinkBuffer,
        protocol: Protocol,
        framing: Framing,
        ttheader: Option<&Header>,
        header: &MessageHeader,
        max_frame: usize,
    ) -> Result<Result<(), usize>, crate::codec::ttheader::HeaderError>;
}

impl<M: Message + Send + Sync + 'static> EncodeArgs for M {
    fn write(
        &self,
        out: &mut LinkBuffer,
        protocol: Protocol,
        framing: Framing,
        ttheader: Option<&Header>,
        header: &MessageHeader,
        max_frame: usize,
    ) -> Result<Result<(), usize>, crate::codec::ttheader::HeaderError> {
        match protocol {
            Protocol::Binary => crate::codec::write_message::<Binary, M>(
                out, framing, ttheader, header, self, max_frame,
            ),
            Protocol::Compact => crate::codec::write_message::<Compact, M>(
                out, framing, ttheader, header, self, max_frame,
            ),
        }
    }
}

/// One call on its way down a client stack: the method, whether it is oneway, and its
/// arguments. Cloning it is cheap (the arguments are shared), so layers may send it
/// more than once.
#[derive(Clone)]
pub struct ClientRequest {
    method: &'static str,
    oneway: bool,
    args: Arc<dyn EncodeArgs>,
}

impl fmt::Debug for ClientRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientRequest")
            .field("method", &self.method)
            .field("oneway", &self.oneway)
            .finish_non_exhaustive()
    }
}

impl ClientRequest {
    /// A call of `method` with `args` (its argument struct) that expects a reply.
    pub fn new(method: &'static str, args: impl EncodeArgs) -> Self {
        ClientRequest {
            method,
            oneway: false,
            args: Arc::new(args),
        }
    }

    /// A oneway call: no reply is read.
    pub fn oneway(method: &'static str, args: impl EncodeArgs) -> Self {
        ClientRequest {
            oneway: true,
            ..ClientRequest::new(method, args)
        }
    }

    /// The method's name as sent on the wire.
    pub fn method(&self) -> &'static str {
        self.method
    }

    /// Whether no reply is expected.
    pub fn is_oneway(&self) -> bool {
        self.oneway
    }

    /// The arguments.
    pub fn args(&self) -> &dyn EncodeArgs {
        &*self.args
    }
}

/// The answer to a [`ClientRequest`]: the reply message, already checked (it answers
/// this call's method and sequence id, and is a reply, not an exception), its result
/// struct still to decode with [`decode`](ClientResponse::decode). A oneway call's
/// response is empty.
#[derive(Debug, Clone)]
pub struct ClientResponse {
    /// The result struct's bytes (after the message header); empty for oneway.
    body: Bytes,
    protocol: WideProtocol,
    max_size: usize,
}

/// [`Protocol`] in a whole word. A response goes up through every layer of the client
/// stack inside a `Result`; with a one-byte field, the `Result`'s tag shares that
/// byte's word with seven bytes of padding, and each layer's move of it became
/// overlapping narrow copies that stall the CPU's store forwarding (measured in
/// `benches/client_stack.rs`). A word-sized tag is copied as a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
enum WideProtocol {
    Binary,
    Compact,
}

impl From<Protocol> for WideProtocol {
    fn from(p: Protocol) -> Self {
        match p {
            Protocol::Binary => WideProtocol::Binary,
            Protocol::Compact => WideProtocol::Compact,
        }
    }
}

impl ClientResponse {
    /// The response of a oneway call.
    pub fn none() -> Self {
        ClientResponse {
            body: Bytes::new(),
            protocol: WideProtocol::Binary,
            max_size: 0,
        }
    }

    /// Reads a reply message (its framing removed) to a call of `method` with `seq_id`:
    /// the result struct's bytes, or the exception or mismatch it carries.
    pub fn from_reply(
        payload: Bytes,
        protocol: Protocol,
        method: &str,
        seq_id: i32,
        max_size: usize,
    ) -> Result<Self, Error> {
        match protocol {
            Protocol::Binary => read_reply::<Binary>(payload, protocol, method, seq_id, max_size),
            Protocol::Compact => read_reply::<Compact>(payload, protocol, method, seq_id, max_size),
        }
    }

    /// Decodes the result struct.
    pub fn decode<R: Message>(&self) -> Result<R, Error> {
        match self.protocol {
            WideProtocol::Binary => self.decode_in::<Binary, R>(),
            WideProtocol::Compact => self.decode_in::<Compact, R>(),
        }
    }

    fn decode_in<P: thrift_codec::Protocol, R: Message>(&self) -> Result<R, Error> {
        let codec = Codec::<P>::new().max_size(self.max_size.max(self.body.len()));
        let mut d = codec.decoder(self.body.clone()).map_err(Error::protocol)?;
        R::decode(&mut d).map_err(Error::protocol)
    }
}

/// A reply's body, or why it is not one.
#[derive(Debug, thiserror::Error)]
enum ReplyError {
    #[error("the reply is for {got}, the call was {sent}")]
    WrongMethod { sent: String, got: String },
    #[error("sent sequence id {sent}, the reply has {got}")]
    BadSequence { sent: i32, got: i32 },
    #[error("a {0:?} message in reply to a call")]
    NotAReply(MessageType),
}

fn read_reply<P: thrift_codec::Protocol>(
    payload: Bytes,
    protocol: Protocol,
    method: &str,
    seq_id: i32,
    max_size: usize,
) -> Result<ClientResponse, Error> {
    let codec = Codec::<P>::new().max_size(max_size.max(payload.len()));
    let mut d = codec.decoder(payload.clone()).map_err(Error::protocol)?;
    let header = d.read_message_begin().map_err(Error::protocol)?;
    if header.name.as_str() != method {
        return Err(Error::protocol(ReplyError::WrongMethod {
            sent: method.to_string(),
            got: header.name.as_str().to_string(),
        }));
    }
    if header.seq_id != seq_id {
        return Err(Error::protocol(ReplyError::BadSequence {
            sent: seq_id,
            got: header.seq_id,
        }));
    }
    match header.ty {
        MessageType::Reply => {
            let at = payload.len() - d.remaining();
            Ok(ClientResponse {
                body: payload.slice(at..),
                protocol: protocol.into(),
                max_size,
            })
        }
        MessageType::Exception => Err(Error::application(
            ApplicationException::decode(&mut d).map_err(Error::protocol)?,
        )),
        other => Err(Error::protocol(ReplyError::NotAReply(other))),
    }
}
