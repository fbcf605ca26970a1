//! Thrift IDL to Rust, driven from `build.rs` the way `prost-build` turns `.proto`
//! files into Rust.
//!
//! This crate is not written yet; it is reserved in the workspace so that the layout
//! and the dependency graph are fixed from the start. When it lands it will hold:
//!
//! - a parser for the whole Thrift IDL grammar, with `file:line:col` errors;
//! - a resolver (includes, typedefs, constants, legal Rust names);
//! - an emitter that writes one `$OUT_DIR/thrift_gen.rs` whose types implement
//!   `thrift_codec::Message` byte for byte like the hand-written reference
//!   implementations in `thrift_codec::fixtures`;
//! - `compile(...)` for the common case and a `Builder` for the rest.
//!
//! It is a build-time crate and will never depend on the runtime crates.
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
