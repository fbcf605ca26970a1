//! [`ServerRequest`]: a call's arguments as the server hands them to its service.

use bytes::Bytes;
use thrift_wire::{DecodeLimits, Message, Protocol as WireFormat};

use super::DispatchError;
use crate::codec::with_protocol;
use crate::context::ServerContext;

/// The arguments of one call, still encoded: the bytes of the message after its header
/// (the args struct), a slice of the frame they came in (no copy).
///
/// The method, sequence id, framing and protocol are in the [`ServerContext`] that
/// comes with it; [`decode`](ServerRequest::decode) reads the arguments in the call's
/// protocol. Cloning it clones a `Bytes` handle, not the bytes, so a layer may keep a
/// copy (to log or replay the call) at no cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerRequest {
    args: Bytes,
}

impl ServerRequest {
    /// A request whose arguments are `args`: the encoded args struct (what follows the
    /// message header), in the protocol the context says.
    pub fn new(args: Bytes) -> Self {
        ServerRequest { args }
    }

    /// The encoded arguments.
    pub fn args(&self) -> &Bytes {
        &self.args
    }

    /// Gives back the encoded arguments.
    pub fn into_args(self) -> Bytes {
        self.args
    }

    /// Decodes the arguments as `A` (a generated `<Service><Method>Args`) in the
    /// protocol of the call (`cx.protocol`). Strings and binaries in `A` are slices of
    /// the frame. Bytes after the args struct are ignored, as Apache Thrift's servers
    /// ignore them.
    pub fn decode<A: Message>(&self, cx: &ServerContext) -> Result<A, DispatchError> {
        let decoded = with_protocol!(cx.protocol, P => A::decode(&mut self.decoder::<P>()));
        decoded.map_err(DispatchError::Decode)
    }

    /// A decoder over the arguments in protocol `P`, with the default limits, for
    /// reading them by hand. `P` must be the call's protocol (`cx.protocol`).
    pub fn decoder<P: WireFormat>(&self) -> P::Decoder {
        P::decoder(self.args.clone(), DecodeLimits::default())
    }
}

/// What goes down a server's stack: a call's arguments ([`ServerRequest`]) or a
/// stream's opening ([`StreamOpening`](super::StreamOpening)). The server's built-in
/// layers are written over it, so that a stream is admitted through the same limiter,
/// span, panic catching and user layers as a call (see
/// [one stack for calls and streams](super#one-stack-for-calls-and-streams)).
///
/// A layer of yours chooses, as on the client
/// ([`ClientCall`](crate::client::ClientCall)): written over `R: ServerCall` it wraps
/// calls and streams alike; written over [`ServerRequest`] it wraps calls only, and a
/// server with such a layer cannot serve streams (its `bind` does not compile).
///
/// What a layer knows of either: the method (`cx.rpc.method`), the service
/// (`cx.rpc.callee.service`), the peer ([`ServerContext::peer`]) and the metainfo
/// (`cx.metainfo`, from a stream's header too) are in the context; the outcome is the
/// service's `Result`, which for a stream comes when the stream has ended (its
/// handler returned), with the handler's error as a [`DispatchError`]. Implementers
/// outside this crate are not expected: the server makes both.
pub trait ServerCall: Send + 'static {
    /// Whether it opens a stream: then the response comes when the stream ends, and
    /// the layers beneath hold what they took (a limiter's slot) for its whole life.
    fn opens_stream(&self) -> bool;
}

impl ServerCall for ServerRequest {
    fn opens_stream(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Framing, Protocol};
    use crate::test_support::{Text, text};
    use thrift_wire::{Binary, Codec, Compact, Decoder, Json, LinkBuffer};

    fn encoded<P: WireFormat>(t: &Text) -> Bytes {
        let mut buf = LinkBuffer::new();
        let n = Codec::<P>::new().encode(t, &mut buf).unwrap();
        buf.next(n)
    }

    #[test]
    fn arguments_decode_in_the_protocol_of_the_call_as_slices_of_the_frame() {
        let want = text(1, "zero copy");
        for (protocol, args) in [
            (Protocol::Binary, encoded::<Binary>(&want)),
            (Protocol::Compact, encoded::<Compact>(&want)),
            (Protocol::Json, encoded::<Json>(&want)),
        ] {
            let cx = ServerContext::new(Framing::Framed, protocol);
            let req = ServerRequest::new(args.clone());
            let got: Text = req.decode(&cx).unwrap();
            assert_eq!(got, want, "{protocol:?}");
            let s = got.text.unwrap();
            let range = args.as_ptr_range();
            assert!(
                range.contains(&s.as_str().as_ptr()),
                "{protocol:?}: the string is a slice of the arguments"
            );
        }
        // Cut short, the arguments fail as a decode error.
        let cx = ServerContext::new(Framing::Framed, Protocol::Binary);
        let args = encoded::<Binary>(&want);
        let cut = ServerRequest::new(args.slice(..args.len() - 2));
        assert!(matches!(
            cut.decode::<Text>(&cx),
            Err(DispatchError::Decode(_))
        ));
        // By hand, with a decoder in the call's protocol.
        let req = ServerRequest::new(args);
        let mut d = req.decoder::<Binary>();
        assert_eq!(Text::decode(&mut d).unwrap(), want);
        assert_eq!(d.remaining(), 0);
    }
}
