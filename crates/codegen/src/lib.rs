//! Thrift IDL to Rust, driven from `build.rs` the way `prost-build` turns `.proto`
//! files into Rust.
//!
//! The pipeline is parse, resolve, emit:
//!
//! - a parser for the whole Thrift IDL grammar, with `file:line:col` errors (in progress);
//! - a resolver that follows includes, resolves typedefs and constants, assigns field
//!   ids, picks legal Rust names and boxes recursive fields, producing the
//!   [`model`] (in progress);
//! - the [`emit`]ter, which turns a [`model::Model`] into one formatted Rust file whose
//!   types implement `thrift_codec::Message` byte for byte like the hand-written
//!   reference types in `thrift_codec::fixtures` (the `codegen-check` crate compiles its
//!   output and proves it);
//! - `compile(...)` for the common case and a `Builder` for the rest, writing
//!   `$OUT_DIR/thrift_gen.rs` (to come, with the resolver).
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
mod names;
pub mod resolve;

pub mod ast;
mod error;
mod lexer;
mod parser;

pub use builder::{Builder, Error, compile};
pub use error::{ParseError, ParseErrorKind};
pub use parser::{MAX_NESTING, parse};
