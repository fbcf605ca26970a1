//! Calls without generated code, through the same client stack as generated clients
//! (timeouts, retry, breakers, balancing, discovery, tracing and metrics all apply):
//! a [`GenericClient`] wraps any [`volo_core::client::Client`] and takes its methods,
//! arguments and replies from an IDL read at run time ([`thrift_dynamic`]).
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

pub use client::{GenericClient, Idl};
pub use encoded::EncodedStruct;
pub use error::GenericError;
pub use server::{
    GenericReply, GenericService, JsonCall, JsonForm, JsonHandler, JsonService, Thrown, ValueCall,
    ValueForm, ValueHandler, ValueService,
};
