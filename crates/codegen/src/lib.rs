//! Thrift IDL to Rust, driven from `build.rs` the way `prost-build` turns `.proto`
//! files into Rust.
//!
//! # From an empty crate to an encoded struct
//!
//! 1. Depend on the runtime codec, and on this crate at build time:
//!
//!    ```toml
//!    [dependencies]
//!    thrift-codec = { path = "../thrift-codec" }
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
//!        codegen::compile(&["idl/echo.thrift"], &["idl"])?;
//!        Ok(())
//!    }
//!    ```
//!
//! 3. Pull the generated code in (one module per IDL file, named after its stem) and use
//!    it with a [`thrift_codec::Codec`](https://docs.rs/thrift-codec):
//!
//!    ```ignore
//!    include!(concat!(env!("OUT_DIR"), "/thrift_gen.rs"));
//!
//!    use thrift_codec::{Binary, Codec, LinkBuffer};
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
//!   recursive fields, producing the [`model`] ([`resolve::ResolveError`] otherwise);
//! - the [`emit`]ter turns the model into one formatted Rust file whose types implement
//!   `thrift_codec::Message` byte for byte like the hand-written reference types in
//!   `thrift_codec::fixtures`;
//! - [`compile`] and [`Builder`] write `$OUT_DIR/thrift_gen.rs`, only when its content
//!   changes, and print `cargo:rerun-if-changed` for every IDL file read.
//!
//! Service traits, dispatchers and clients come with the RPC core (volo-core); here each
//! method gets its `<Service><Method>Args` and `<Service><Method>Result` structs.
//! Annotations are parsed and kept in the syntax tree but do not change the output.
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
pub use error::{ParseError, ParseErrorKind};
pub use parser::{MAX_NESTING, parse};
