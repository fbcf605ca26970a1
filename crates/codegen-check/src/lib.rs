//! codegen's output, compiled as a user's crate would compile it.
//!
//! `idl/echo.thrift`'s generated `EchoService`, served and called over loopback, as
//! a user's crate would do it:
//!
//! ```
//! use std::convert::Infallible;
//! use codegen_check::echo::{
//!     EchoError, EchoService, EchoServiceClient, EchoServiceEchoOrFailException,
//!     EchoServiceServer, Ids, MyTest, Request, Response,
//! };
//! use thrift_wire::Utf8Bytes;
//! use volo_core::client::ClientError;
//! use volo_core::context::ServerContext;
//! use volo_core::server::{Server, ServerError};
//!
//! struct Echo;
//!
//! impl EchoService for Echo {
//!     async fn echo(&self, _cx: &mut ServerContext, req: Request)
//!         -> Result<Response, ServerError<Infallible>> {
//!         Ok(Response { action: req.action, msg: req.msg })
//!     }
//!
//!     async fn echo_or_fail(&self, _cx: &mut ServerContext, req: Request)
//!         -> Result<Response, ServerError<EchoServiceEchoOrFailException>> {
//!         // A declared exception reaches the caller as itself.
//!         Err(ServerError::User(EchoError { code: 7, message: req.msg }.into()))
//!     }
//! #   async fn echo_test(&self, _cx: &mut ServerContext, t: MyTest)
//! #       -> Result<MyTest, ServerError<Infallible>> { Ok(t) }
//! #   async fn echo_ids(&self, _cx: &mut ServerContext, ids: Ids)
//! #       -> Result<Ids, ServerError<Infallible>> { Ok(ids) }
//! #   async fn notify(&self, _cx: &mut ServerContext, _event: Utf8Bytes)
//! #       -> Result<(), ServerError<Infallible>> { Ok(()) }
//!     // ... `echo_test`, `echo_ids` and `notify` likewise.
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = Server::new(EchoServiceServer::new(Echo))
//!     .bind(&"127.0.0.1:0".parse()?)
//!     .await?;
//! let addr = server.local_addr().clone();
//! tokio::spawn(server.serve());
//!
//! let client = EchoServiceClient::builder().address(addr).build()?;
//! let req = Request { action: "echo".into(), msg: "hello".into() };
//! let resp = client.echo(req.clone()).await?;
//! assert_eq!(resp.msg.as_str(), "hello");
//!
//! match client.echo_or_fail(req).await {
//!     Err(ClientError::User(EchoServiceEchoOrFailException::Err(e))) => assert_eq!(e.code, 7),
//!     other => panic!("expected the declared exception, got {other:?}"),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The build script runs `thrift_codegen::compile` on `idl/echo.thrift` and `idl/mixed.thrift`,
//! exactly as a user's would. Building this crate proves the output compiles cleanly
//! under the workspace lints and clippy `-D warnings`; its tests prove the generated
//! types put exactly the bytes of the hand-written reference types of
//! `thrift_wire::fixtures` on the wire, in both protocols, and that the generated
//! service traits and dispatchers serve calls as the `Service` volo-core's server runs.
#![forbid(unsafe_code)]
#![allow(missing_docs, unreachable_pub)]
// codegen's warned IDLs hold structs 64 levels deep (`deep_structs.thrift`), and codegen
// warns that the including crate needs this; without it the build fails.
#![recursion_limit = "256"]

include!(concat!(env!("OUT_DIR"), "/thrift_gen.rs"));

/// codegen's test IDLs, which together use every feature of the grammar.
pub mod test_idls {
    include!(concat!(env!("OUT_DIR"), "/test_idls.rs"));
}

/// The same IDL as the crate root, generated with `String`, `Vec<u8>`, `HashMap`/`HashSet`
/// and a `serde::Serialize` derive (plus one field attribute) through codegen's `Builder`.
pub mod std_types {
    include!(concat!(env!("OUT_DIR"), "/std_types.rs"));
}

/// Apache Thrift's cross-language test suite IDL (`ThriftTest.thrift` of Apache's corpus,
/// `../shared/apache-idl`), when the corpus is there (`cfg(apache_idl)`).
#[cfg(apache_idl)]
pub mod apache_thrift_test {
    include!(concat!(env!("OUT_DIR"), "/apache_thrift_test.rs"));
}

/// Apache Thrift's other test IDLs (the corpus's `*.thrift`), one module per file.
#[cfg(apache_idl)]
pub mod apache_tests {
    include!(concat!(env!("OUT_DIR"), "/apache_tests.rs"));
}

/// Apache Thrift's `Include.thrift` and `ReuseObjects.thrift`, with the older
/// `v0.16/ThriftTest.thrift` of the corpus they include.
#[cfg(apache_idl)]
pub mod apache_v0_16 {
    include!(concat!(env!("OUT_DIR"), "/apache_v0_16.rs"));
}

/// codegen's `tests/warned/*.thrift`: what Apache Thrift accepts but loses meaning (or
/// representation) in Rust, as codegen reads it.
pub mod warned {
    include!(concat!(env!("OUT_DIR"), "/warned.rs"));
}
