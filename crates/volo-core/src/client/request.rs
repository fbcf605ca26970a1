//! What goes down a client stack and what comes back up: a [`ClientRequest`] (the
//! method's argument struct, type-erased and cheap to clone, so retry and backup layers
//! can send it again) and a [`ClientResponse`] (the reply message, checked against the
//! call, its result struct still to decode).

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use thrift_wire::{ApplicationException, Codec, Decoder, Message, Utf8Bytes};

use super::Error;
use crate::codec::{ErasedBody, Protocol, with_protocol};
use crate::envelope::{self, Answer, ReplyNames};

/// One call on its way down a client stack: the method, whether it is oneway, its
/// arguments, and, for a service of a multiplexed server, the `Service:method` name it
/// goes out under. Cloning it is cheap (the arguments and the name are shared), so
/// layers may send it more than once.
#[derive(Clone)]
pub struct ClientRequest {
    method: MethodName,
    oneway: bool,
    args: Arc<dyn ErasedBody>,
    /// The name sent instead of `method` (Apache's `TMultiplexedProtocol`), behind a
    /// pointer: a request that is not multiplexed, the common case, stays as small as
    /// it was (every layer of the stack moves it).
    multiplexed: Option<Arc<Utf8Bytes>>,
}

impl fmt::Debug for ClientRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientRequest")
            .field("method", &self.method)
            .field("oneway", &self.oneway)
            .field("multiplexed", &self.multiplexed)
            .finish_non_exhaustive()
    }
}

/// A method's name as a call carries it: a generated client's names are static, a
/// generic client's come from an IDL read at run time (shared, so a call's clones do
/// not copy the text).
#[derive(Clone, PartialEq, Eq)]
pub enum MethodName {
    /// Known when the program was built.
    Static(&'static str),
    /// Known while it runs.
    Shared(Arc<Utf8Bytes>),
}

impl MethodName {
    /// The name.
    pub fn as_str(&self) -> &str {
        match self {
            MethodName::Static(s) => s,
            MethodName::Shared(s) => s.as_str(),
        }
    }

    /// The name as the message header carries it (no copy of the text).
    pub fn to_utf8(&self) -> Utf8Bytes {
        match self {
            MethodName::Static(s) => Utf8Bytes::from_static(s),
            MethodName::Shared(s) => Utf8Bytes::clone(s),
        }
    }
}

impl fmt::Debug for MethodName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&'static str> for MethodName {
    fn from(s: &'static str) -> Self {
        MethodName::Static(s)
    }
}

impl From<Utf8Bytes> for MethodName {
    fn from(s: Utf8Bytes) -> Self {
        MethodName::Shared(Arc::new(s))
    }
}

impl From<String> for MethodName {
    fn from(s: String) -> Self {
        MethodName::Shared(Arc::new(s.into()))
    }
}

impl ClientRequest {
    /// A call of `method` with `args` (its argument struct) that expects a reply.
    pub fn new(method: impl Into<MethodName>, args: impl ErasedBody) -> Self {
        ClientRequest {
            method: method.into(),
            oneway: false,
            args: Arc::new(args),
            multiplexed: None,
        }
    }

    /// A oneway call: no reply is read.
    pub fn oneway(method: impl Into<MethodName>, args: impl ErasedBody) -> Self {
        ClientRequest {
            oneway: true,
            ..ClientRequest::new(method, args)
        }
    }

    /// Sends the call under `name` instead of the method's own name: `Service:method`
    /// for one service of a multiplexed server (Apache's `TMultiplexedProtocol`). A
    /// reply under either name answers the call (Apache's multiplexed servers reply
    /// under the bare name). [`Client`](super::Client)s bound with
    /// [`with_multiplexed_service`](super::Client::with_multiplexed_service) do this for
    /// every call.
    pub fn multiplexed_as(self, name: impl Into<Utf8Bytes>) -> Self {
        self.multiplexed_shared(Arc::new(name.into()))
    }

    /// [`multiplexed_as`](ClientRequest::multiplexed_as) with a name shared by many
    /// calls.
    pub(crate) fn multiplexed_shared(mut self, name: Arc<Utf8Bytes>) -> Self {
        self.multiplexed = Some(name);
        self
    }

    /// The method's name in the IDL: the name sent on the wire, unless the call is
    /// [multiplexed](ClientRequest::multiplexed_as).
    pub fn method(&self) -> &str {
        self.method.as_str()
    }

    /// The method's name as the call carries it.
    pub fn method_name(&self) -> &MethodName {
        &self.method
    }

    /// The name the call goes out under when it is not the method's: `Service:method`.
    pub fn multiplexed_name(&self) -> Option<&Utf8Bytes> {
        self.multiplexed.as_deref()
    }

    /// Whether no reply is expected.
    pub fn is_oneway(&self) -> bool {
        self.oneway
    }

    /// The arguments.
    pub fn args(&self) -> &dyn ErasedBody {
        &*self.args
    }
}

/// What goes down a client stack: a call ([`ClientRequest`]) or a stream's opening
/// ([`StreamRequest`](super::StreamRequest)). The built-in layers are written over it,
/// so that a stream is opened through the same timeout, breakers, retry, balancing,
/// spans and metrics as a call is made. A layer of yours chooses: written over
/// `R: ClientCall` it wraps calls and streams alike; over [`ClientRequest`] it wraps
/// calls only (a client's streams then need a stack without it).
///
/// What the layers read of it beside the context: the method (idempotency marks),
/// whether a reply is awaited (oneway calls get no backup request), and whether it
/// opens a stream (never retried once it may have reached a server, whatever the
/// marks, and never raced by a backup request: a server may be running it).
pub trait ClientCall: Clone + Send + Sync + 'static {
    /// The method's name as it is carried.
    fn method_name(&self) -> &MethodName;

    /// The method's name in the IDL.
    fn method(&self) -> &str {
        self.method_name().as_str()
    }

    /// Whether no reply is awaited (a oneway call).
    fn is_oneway(&self) -> bool;

    /// Whether it opens a stream.
    fn opens_stream(&self) -> bool;
}

impl ClientCall for ClientRequest {
    fn method_name(&self) -> &MethodName {
        &self.method
    }

    fn is_oneway(&self) -> bool {
        self.oneway
    }

    fn opens_stream(&self) -> bool {
        false
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
    Json,
}

impl From<Protocol> for WideProtocol {
    fn from(p: Protocol) -> Self {
        match p {
            Protocol::Binary => WideProtocol::Binary,
            Protocol::Compact => WideProtocol::Compact,
            Protocol::Json => WideProtocol::Json,
        }
    }
}

impl From<WideProtocol> for Protocol {
    fn from(p: WideProtocol) -> Self {
        match p {
            WideProtocol::Binary => Protocol::Binary,
            WideProtocol::Compact => Protocol::Compact,
            WideProtocol::Json => Protocol::Json,
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
        let names = ReplyNames {
            method,
            multiplexed: None,
        };
        read_reply(payload, protocol, names, seq_id, max_size)
    }

    /// Reads a reply message (its framing removed) to `req`, sent with `seq_id`, as
    /// [`from_reply`](ClientResponse::from_reply) does; the reply of a
    /// [multiplexed](ClientRequest::multiplexed_as) call may carry the bare method name
    /// or the name the call went out under.
    pub fn from_reply_to(
        payload: Bytes,
        protocol: Protocol,
        req: &ClientRequest,
        seq_id: i32,
        max_size: usize,
    ) -> Result<Self, Error> {
        let names = ReplyNames {
            method: req.method(),
            multiplexed: req.multiplexed_name().map(Utf8Bytes::as_str),
        };
        read_reply(payload, protocol, names, seq_id, max_size)
    }

    /// The result struct's bytes, as they came (empty for a oneway call): a proxy
    /// passes them on, a generic client reads them with the IDL.
    pub fn encoded(&self) -> &Bytes {
        &self.body
    }

    /// The protocol the result struct is encoded in.
    pub fn protocol(&self) -> Protocol {
        self.protocol.into()
    }

    /// Decodes the result struct.
    pub fn decode<R: Message>(&self) -> Result<R, Error> {
        with_protocol!(self.protocol.into(), P => self.decode_in::<P, R>())
    }

    fn decode_in<P: thrift_wire::Protocol, R: Message>(&self) -> Result<R, Error> {
        let codec = Codec::<P>::new().max_size(self.max_size.max(self.body.len()));
        let mut d = codec.decoder(self.body.clone()).map_err(Error::protocol)?;
        R::decode(&mut d).map_err(Error::protocol)
    }
}

fn read_reply(
    payload: Bytes,
    protocol: Protocol,
    names: ReplyNames<'_>,
    seq_id: i32,
    max_size: usize,
) -> Result<ClientResponse, Error> {
    with_protocol!(protocol, P => read_reply_in::<P>(payload, protocol, names, seq_id, max_size))
}

fn read_reply_in<P: thrift_wire::Protocol>(
    payload: Bytes,
    protocol: Protocol,
    names: ReplyNames<'_>,
    seq_id: i32,
    max_size: usize,
) -> Result<ClientResponse, Error> {
    let codec = Codec::<P>::new().max_size(max_size.max(payload.len()));
    let mut d = codec.decoder(payload.clone()).map_err(Error::protocol)?;
    let header = d.read_message_begin().map_err(Error::protocol)?;
    match envelope::match_reply(&header, names, seq_id).map_err(Error::protocol)? {
        Answer::Reply => {
            let at = payload.len() - d.remaining();
            // A JSON message is an array: its closing `]` (and any white space) follows
            // the result struct, and is not part of it.
            let end = match protocol {
                Protocol::Json => json_struct_end(&payload, at),
                _ => payload.len(),
            };
            Ok(ClientResponse {
                body: payload.slice(at..end),
                protocol: protocol.into(),
                max_size,
            })
        }
        Answer::Exception => Err(Error::application(
            ApplicationException::decode(&mut d).map_err(Error::protocol)?,
        )),
    }
}

/// Where the result struct of a JSON message whose struct starts at `at` ends: before
/// the array's closing `]` and the white space around it (the end of `payload` when
/// there is no `]`, which the struct's decoding then reports).
fn json_struct_end(payload: &[u8], at: usize) -> usize {
    let text = &payload[at..];
    let trimmed = text.trim_ascii_end();
    match trimmed.strip_suffix(b"]") {
        Some(inner) => at + inner.trim_ascii_end().len(),
        None => payload.len(),
    }
}
