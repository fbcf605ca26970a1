//! Calls without generated code, through the same client stack as generated clients
//! (timeouts, retry, breakers, balancing, discovery, tracing and metrics all apply):
//! a [`GenericClient`] wraps any [`volo_core::client::Client`] and takes its methods,
//! arguments and replies from an IDL read at run time ([`thrift_dynamic`]).
//!
//! Streams of the examples' `StreamService`, opened from its IDL read at run time,
//! one JSON object per message each way:
//!
//! ```
//! # use examples::stream::{StreamServiceServer, StreamServiceStreamServer};
//! # use examples::stream_service::Streams;
//! use thrift_dynamic::Descriptor;
//! use thrift_generic::GenericStreamClient;
//! use volo_core::client::ClientConfig;
//! use volo_core::stream::Metadata;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let bound = volo_core::server::Server::new(StreamServiceServer::new(Streams))
//! #     .streams(StreamServiceStreamServer::new(Streams))
//! #     .bind(&"127.0.0.1:0".parse()?)
//! #     .await?;
//! # let addr = bound.local_addr().clone();
//! # tokio::spawn(bound.serve());
//! let idl = concat!(env!("CARGO_MANIFEST_DIR"), "/../../idl/stream.thrift");
//! let idl = Descriptor::from_files(&[idl], &[] as &[&str])?;
//! let client = GenericStreamClient::connect(addr, &ClientConfig::default(), idl, "StreamService")?;
//!
//! // Bidirectional: a response for each request, as they go.
//! let mut s = client.open_json("bidi_echo", &Metadata::new()).await?;
//! s.send(br#"{"action":"hi","msg":"there"}"#).await?;
//! let echoed = s.recv().await?.expect("a response");
//! assert_eq!(&echoed[..], br#"{"action":"hi","msg":"there"}"#);
//! s.close_send().await?;
//! assert_eq!(s.recv().await?, None, "the server ended the stream");
//!
//! // A server stream: one request, then its responses.
//! let request = br#"{"action":"push","msg":"m","count":2}"#;
//! let mut rx = client.server_stream_json("server_echo", &Metadata::new(), request).await?;
//! let mut n = 0;
//! while let Some(json) = rx.recv().await? {
//!     assert_eq!(&json[..], br#"{"action":"push","msg":"m"}"#);
//!     n += 1;
//! }
//! assert_eq!(n, 2);
//! # Ok(())
//! # }
//! ```
//!
//! Three forms of call:
//!
//! - **binary**: [`GenericClient::call_binary`] takes the encoded arguments struct and
//!   gives back the encoded result struct, byte for byte, in the client's protocol: a
//!   proxy's pass-through. The IDL only says whether the method is oneway.
//! - **value**: [`GenericClient::call_value`] takes a
//!   [`StructValue`](thrift_dynamic::value::StructValue) of the arguments (by field
//!   id), checked against the IDL before anything is sent, and gives back the return
//!   value, or the declared exception as [`GenericError::Declared`].
//! - **JSON**: [`GenericClient::call_json`] takes the arguments as a JSON object keyed
//!   by field name and gives back the return value as JSON text (`null` for `void`),
//!   or the declared exception's JSON in [`GenericError::DeclaredJson`]. The JSON is
//!   transcoded straight into the protocol set with [`GenericClient::with_protocol`]
//!   (Binary unless told), and the reply's result struct straight into JSON, with no
//!   value tree in between ([`thrift_dynamic::json`] has the conventions, which are
//!   Kitex's). Bad JSON fails before anything is sent, with the field path and the
//!   byte offset.
//!
//! # Streams
//!
//! A [`GenericStreamClient`] opens streams of a service's streaming methods (Kitex's
//! `streaming.mode` annotation, `server`, `client` or `bidirectional`: the IDL's
//! [`ServiceDesc::streams`](thrift_dynamic::ServiceDesc::streams)), over TTHeader as
//! Kitex's StreamX speaks them, one JSON object per message each way
//! ([`JsonStream`]). Made [`from_client`](GenericStreamClient::from_client), it
//! opens each stream through a [`Client`](volo_core::client::Client)'s stack, as the
//! generated client does (discovery, balancing, breakers, the retry of an opening
//! that never left, layers); made with [`connect`](GenericStreamClient::connect), to
//! one address without a stack.
//!
//! - **What a message is.** Each request is a value of the method's one argument's
//!   struct, each response one of its return type's struct, alone on the wire (no
//!   arguments or result struct around it), in Binary: what the generated stream
//!   client sends (`Sender<Request>` and `Receiver<Response>` for
//!   `Response bidi_echo(1: Request req)`) and what Kitex sends. As JSON a message is
//!   that struct as an object keyed by field name, `{"action":"a","msg":"b"}`, not
//!   `{"req":{...}}` as [`call_json`](GenericClient::call_json) takes arguments: a
//!   streaming method has exactly one argument, and this is the form of Kitex's JSON
//!   generic call.
//! - **Sending.** [`JsonSender::send`] transcodes the JSON straight into the struct's
//!   Binary bytes ([`thrift_dynamic::json_to_thrift`]) and sends those bytes as they
//!   are ([`EncodedStruct`]). JSON that does not fit is [`GenericError::JsonMessage`],
//!   naming the field path and the byte offset, and nothing is sent. A server stream
//!   takes one request ([`GenericStreamClient::server_stream_json`] sends it and
//!   closes the sending side); a second is [`GenericError::SecondRequest`].
//! - **Receiving.** [`JsonReceiver::recv`] gives the next response as JSON text,
//!   transcoded straight from the bytes received, and `None` once the server ended
//!   the stream cleanly; then [`JsonReceiver::trailer`] has the trailer's metadata.
//! - **Modes.** A stream is opened only for a streaming method
//!   ([`GenericError::NotStreaming`] otherwise), and a streaming method is not
//!   called ([`GenericError::Streaming`]); nothing is sent for either.
//! - **Failures** come as a call's where a call fails the same way
//!   ([`GenericError::from_stream`] has the table), so that a caller that already
//!   tells calls' failures apart by [`ErrorKind`](volo_core::client::ErrorKind)
//!   treats streams alike: the exception in a trailer (a handler's error) is an
//!   application exception, as a call's; a passed deadline a timeout; a connection
//!   that fails `Io` (`Connect` while the stream is opened). What a call has no
//!   counterpart for (a business status in the trailer, a reset, a cancel, a
//!   refused opening) is [`GenericError::Stream`], as volo-core said it.
//! - **Opening.** Streams are opened through volo-core's
//!   [`StreamClient`](volo_core::client::StreamClient) (mux connections to
//!   one address, a deadline per stream), in one private module of this crate: when
//!   the ordinary client stack opens streams (discovery, balancing, breakers), that
//!   module is what changes. Each stream reads the IDL once, when it is opened, and
//!   keeps it to its end.
//!
//! # Serving
//!
//! A [`GenericService`] ([`JsonService`], [`ValueService`]) answers every method of one IDL service
//! through one handler ([`JsonHandler`], [`ValueHandler`]) that takes and gives JSON
//! or values, in whichever protocol each call came in. It is an ordinary dispatcher:
//! put one in a server with its [`facts`](GenericService::facts)
//! (`Server::with_facts(service.clone(), service.facts())`), or behind a generated
//! dispatcher as the handler of the methods it does not know
//! (`volo_core::server::with_fallback`). A declared exception is thrown by its `throws`
//! field's name ([`Thrown::Declared`]); anything else is an application exception.
//! What the generated client of the same IDL sees is what a generated server would
//! have sent.
//!
//! The IDL is fixed ([`Idl::Fixed`]) or follows its files ([`Idl::Watched`], an
//! [`IdlProvider`](thrift_dynamic::IdlProvider)): each call reads the current
//! descriptor once, so a reload never changes a call half-way.

mod client;
mod encoded;
mod error;
mod server;
mod stream;

pub use client::{GenericClient, Idl};
pub use encoded::EncodedStruct;
pub use error::GenericError;
pub use server::{
    GenericReply, GenericService, JsonCall, JsonForm, JsonHandler, JsonService, Thrown, ValueCall,
    ValueForm, ValueHandler, ValueService,
};
pub use stream::{GenericStreamClient, JsonReceiver, JsonSender, JsonStream};
