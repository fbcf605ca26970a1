//! Thrift IDL to Rust, driven from `build.rs` the way `prost-build` turns `.proto`
//! files into Rust. What a build script gets, generated here into a string:
//!
//! ```
//! let dir = std::env::temp_dir().join(format!("codegen-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let idl = dir.join("hello.thrift");
//! std::fs::write(&idl, "struct Greeting { 1: string text }\n\
//!                       service Greeter { Greeting greet(1: string name) }\n")?;
//!
//! let rust = thrift_codegen::Builder::new().rerun_if_changed(false).generate(&[&idl])?;
//! assert!(rust.contains("pub mod hello"));           // one module per IDL file
//! assert!(rust.contains("pub struct Greeting"));     // the struct, with its codec
//! assert!(rust.contains("pub trait Greeter"));       // the service, to implement
//! assert!(rust.contains("pub struct GreeterClient")); // and its typed client
//! std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # From an empty crate to an encoded struct
//!
//! 1. Depend on the runtime codec (and on the RPC core, whose server interface the
//!    generated services implement), and on this crate at build time:
//!
//!    ```toml
//!    [dependencies]
//!    thrift-wire = { path = "../thrift-codec" }
//!    volo-core = { path = "../volo-core" }   # if the IDL has services
//!
//!    [build-dependencies]
//!    codegen = { path = "../codegen" }
//!    ```
//!
//! 2. Put the IDL in `idl/echo.thrift` and compile it from `build.rs`:
//!
//!    ```no_run
//!    // build.rs
//!    fn main() -> Result<(), Box<dyn std::error::Error>> {
//!        thrift_codegen::compile(&["idl/echo.thrift"], &["idl"])?;
//!        Ok(())
//!    }
//!    ```
//!
//! 3. Pull the generated code in (one module per IDL file, named after its stem) and use
//!    it with a [`thrift_wire::Codec`](https://docs.rs/thrift-wire):
//!
//!    ```ignore
//!    include!(concat!(env!("OUT_DIR"), "/thrift_gen.rs"));
//!
//!    use thrift_wire::{Binary, Codec, LinkBuffer};
//!
//!    let req = echo::Request { action: "echo".into(), msg: "hello".into() };
//!    let mut buf = LinkBuffer::new();
//!    let n = Codec::<Binary>::new().encode(&req, &mut buf)?;
//!    let back: echo::Request = Codec::<Binary>::new().decode(buf.next(n))?;
//!    assert_eq!(back, req);
//!    ```
//!
//! The `codegen-check` crate of this workspace is exactly such a crate, built and tested
//! in CI.
//!
//! # The pipeline
//!
//! - the parser reads the whole Thrift IDL grammar into an [`ast`], with
//!   `file:line:col` errors ([`ParseError`]);
//! - the [`resolve`]r follows includes, resolves typedefs and constants, assigns field
//!   ids, picks legal Rust names (the mapping is in [`names`]) and boxes
//!   recursive fields, producing the [`model`] ([`resolve::ResolveError`] otherwise),
//!   with a [`resolve::Warning`] for each thing Apache Thrift accepts but that loses
//!   meaning (printed as `cargo:warning=` lines, which cargo shows). Those errors and
//!   warnings are all one [`Diagnostic`] type, which prints as `file:line:col: message`
//!   and tells errors from warnings by its [`Severity`];
//! - the [`emit`]ter turns the model into one formatted Rust file whose types implement
//!   `thrift_wire::Message` byte for byte like the hand-written reference types in
//!   `thrift_wire::fixtures`;
//! - [`compile`] and [`Builder`] write `$OUT_DIR/thrift_gen.rs`, only when its content
//!   changes, and print `cargo:rerun-if-changed` for every IDL file read.
//!
//! Annotations are parsed and kept in the syntax tree but do not change the output.
//!
//! # Apache Thrift's IDLs
//!
//! What Apache Thrift's compiler (0.25) accepts, codegen accepts: every `test/*.thrift`
//! of Apache Thrift (but `BrokenConstants.thrift`, which it refuses on purpose) is
//! compiled by `codegen-check` from Apache's corpus beside the repository
//! (`../shared/apache-idl`, not part of it; without it those tests skip, or fail under
//! CI), and codegen's own test IDLs (`tests/idl/corners.thrift`, `tests/warned/`) hold
//! the same corners, asserted by its tests; beyond those, the Rust
//! made from every one of the 213 `.thrift` files in Apache's tree (c8f876181) that its
//! compiler accepts was built in one crate under clippy `-D warnings` on 2026-11-27
//! (library tests of Go, netstd, Rust, PHP, Smalltalk...: include names with dots, two
//! files of one name, a method named `client`, structs 65 levels deep, which need the
//! `recursion_limit` codegen's warning names). Where Apache is lenient
//! in a way that loses meaning, codegen reads the IDL as Apache does and says so in a
//! [`resolve::Warning`] (a `cargo:warning=` line in the build): a default naming another
//! enum's value, field or method names Rust spells alike (numbered), out-of-range ids
//! and constants (low bits kept), a oneway method's return type (dropped), an include
//! that is not found, two files whose module names meet (the included one numbered)...
//! the [`resolve`] docs list them. Where Rust needs a shape Thrift
//! does not: a `double` in a set element or map key (or in a struct that is one) is
//! the module's `OrderedF64` (total order), and a field always present that leads back
//! to its own struct becomes optional (warned), since no value of it could end.
//!
//! Deliberate differences: nesting deeper than [`MAX_NESTING`] is refused (bounded
//! input); `optional` on a method argument is kept (Apache ignores it and always sends
//! the argument): the handler gets an `Option` and the client sends it only when set;
//! an optional field's IDL default is checked but the field starts unset.
//!
//! # Services
//!
//! For each IDL `service S`, next to the `S<Method>Args` and `S<Method>Result` structs
//! of its methods, the generated module holds what volo-core's server needs:
//!
//! - `pub trait S` with one method per IDL function, taking the call's
//!   `&mut ServerContext` and the arguments (typed as the fields of `S<Method>Args`)
//!   and returning `impl Future<Output = Result<Ret, ServerError<Exc>>> + Send`: `Ret`
//!   is the return type (`()` for `void` and `oneway`), `Exc` is
//!   `std::convert::Infallible` without a `throws` clause and otherwise
//!   `S<Method>Exception`, an enum with one variant per declared exception (named after
//!   its field; `From` each exception type that only one variant holds). Implement it
//!   with `async fn`s. `service S extends B` makes `B` a supertrait, so one type
//!   implements the whole chain;
//! - `SReply`, an enum with the result struct of each method of the chain (and
//!   `Oneway` when a method is oneway), which implements `volo_core::codec::Body`;
//! - `SServer<T>`, which for any `T: S` is a
//!   `volo_core::service::Service<ServerContext, ServerRequest>` (and so a
//!   `volo_core::server::Dispatch`, which server layers wrap): it takes the method's
//!   IDL name from `cx.rpc.method`, decodes the arguments from the request in the
//!   call's protocol (zero-copy), calls the handler, and puts its value or declared
//!   exception in the result struct. `ServerError::Application` becomes
//!   `DispatchError::Application`, an unknown name `DispatchError::UnknownMethod`, bad
//!   arguments `DispatchError::Decode`; a oneway method's outcome is dropped. It also
//!   implements `volo_core::server::ServiceInfo`: the service's IDL name and which
//!   methods of the chain are oneway, which the server reads so that it never answers
//!   them, whatever message type they come in.
//!
//! Methods annotated with Kitex's `streaming.mode` (`"server"`, `"client"` or
//! `"bidirectional"`) are streams over TTHeader (Kitex's StreamX, see
//! `volo_core::stream`), not calls: they take one struct (each request) and return
//! one struct (each response), declare no exceptions, and leave `S`, `SReply` and
//! `SServer` alone (no args or result structs either). A service with any gets:
//!
//! - a method per stream on `SClient<T>`, the same client as the calls': each stream
//!   is opened through the client's stack (`Client::open_stream`: discovery,
//!   balancing, breakers, the retry of an opening that never left, layers). A server
//!   stream's method sends the request, closes its side and returns the `Receiver`;
//!   the others return the `ClientStream`. Each has a `_with` twin that takes the
//!   opening's `ClientContext` and the header's metadata;
//!
//! - `pub trait SStream`, one method per stream taking `&StreamContext` (the client's
//!   header, the metadata sent back) and, for a server stream, the request (read
//!   first) and a `Sender` of responses; for a client stream, a `Receiver` of
//!   requests, returning the one response; for a bidirectional stream, both halves.
//!   `Ok` ends the stream cleanly, a `HandlerError` ends it with the error in its
//!   trailer;
//! - `SStreamServer<T>`, a `volo_core::server::StreamHandler` for any `T: SStream`
//!   (give it to `Server::streams`), which answers an unknown method with
//!   `UNKNOWN_METHOD` in a trailer (Kitex's server answers nothing);
//! - `SStreamClient`, over a `volo_core::client::StreamClient` (one address, no
//!   stack), with the same methods; their `_with` twins take the header's metadata.
//!
//! Other values of `streaming.mode` (Kitex's `"unary"`, for gRPC) and streaming
//! methods of other shapes are refused with an error naming the method.
//!
//! The generated code names volo-core through one module, `::volo_core::codegen`,
//! which re-exports each runtime item it uses from the item's home; the paths above are
//! those homes.
//!
//! For `idl/echo.thrift`'s
//! `Response echo_or_fail(1: Request req) throws (1: EchoError err)`:
//!
//! ```ignore
//! use std::convert::Infallible;
//! use volo_core::context::ServerContext;
//! use volo_core::server::{Server, ServerError};
//! use echo::{EchoError, EchoService, EchoServiceEchoOrFailException, EchoServiceServer};
//!
//! struct Echo;
//!
//! impl EchoService for Echo {
//!     async fn echo_or_fail(
//!         &self,
//!         _cx: &mut ServerContext,
//!         req: echo::Request,
//!     ) -> Result<echo::Response, ServerError<EchoServiceEchoOrFailException>> {
//!         if req.action.as_str() == "fail" {
//!             // Reaches the caller as the result's `err` field.
//!             return Err(ServerError::User(EchoError { code: 1, message: req.msg }.into()));
//!         }
//!         Ok(echo::Response { action: req.action, msg: req.msg })
//!     }
//!     // ... `echo`, `echo_test`, `echo_ids` and `notify` likewise.
//! }
//!
//! let server = Server::new(EchoServiceServer::new(Echo));
//! ```
//!
//! `SClient<T>`, the typed client, has one `async fn` per method (and a `_with` twin
//! that takes the call's context); `SClient::builder()` builds it over the default
//! client stack. `Builder::type_attribute` applies to structs, unions, exceptions and
//! enums, not to the service items.
//!
//! # Speed
//!
//! Codegen time grows linearly with the IDL: `cargo bench -p benches --bench codegen`
//! runs it on a synthetic IDL of about 10,000 lines and on half of it, with
//! pilota-build on the same file as the peer. `benches/generated-crate-build-time.sh`
//! builds a crate from that IDL the way this page describes and times the build.
//!
//! It is a build-time crate and never depends on the runtime crates.
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod builder;
mod diagnostic;
pub mod emit;
mod load;
pub mod model;
pub mod names;
pub mod resolve;

pub mod ast;
mod error;
mod graph;
mod lexer;
mod parser;

pub use builder::{Builder, Error, compile};
pub use diagnostic::{Diagnostic, Severity};
pub use error::{ParseError, ParseErrorKind};
pub use load::{IdlFiles, MAX_IDL_FILE};
pub use parser::{MAX_NESTING, parse};
