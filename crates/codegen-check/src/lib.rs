//! codegen's output, compiled as a user's crate would compile it.
//!
//! `generated/echo_mixed.rs` is what the emitter writes for `idl/echo.thrift` and
//! `idl/mixed.thrift` (kept up to date by `codegen`'s `emit` test). Building this crate
//! proves it compiles cleanly under the workspace lints and clippy `-D warnings`; its
//! tests prove the generated types put exactly the bytes of the hand-written reference
//! types of `thrift_codec::fixtures` on the wire, in both protocols.
#![forbid(unsafe_code)]
#![allow(missing_docs, unreachable_pub)]

include!("../generated/echo_mixed.rs");
