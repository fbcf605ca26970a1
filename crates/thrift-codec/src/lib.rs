//! The Thrift wire format: the Binary, Compact and JSON protocols, built for RPC speed
//! and for input nobody vouches for.
//!
//! A value encoded in the Binary protocol and decoded back (`fixtures` holds
//! hand-written types of the kind `thrift-codegen` generates):
//!
//! ```
//! use thrift_wire::fixtures::echo::Request;
//! use thrift_wire::{Binary, Codec, Compact, LinkBuffer, Utf8Bytes};
//!
//! let req = Request {
//!     action: Utf8Bytes::from_static("echo"),
//!     msg: Utf8Bytes::from("hello".to_string()),
//! };
//! let mut buf = LinkBuffer::new();
//! let n = Codec::<Binary>::new().encode(&req, &mut buf).unwrap();
//! let frame = buf.next(n);
//! let back: Request = Codec::<Binary>::new().decode(frame).unwrap();
//! assert_eq!(back, req);
//!
//! // The same type in the Compact protocol is smaller.
//! assert!(Codec::<Compact>::new().size(&req) < n);
//! ```
//!
//! # Why this crate exists
//!
//! An RPC framework spends much of each call turning structs into bytes and back. This
//! crate does it the way Kitex's `FastWrite` does, in safe, measured Rust:
//!
//! - **Size first.** A [`Message`] computes its exact encoded size ([`Sizer`]; constant
//!   time for fixed-width fields and for lists of them in the Binary protocol), the
//!   [`Codec`] reserves that much once, and the [`Encoder`] writes straight into it.
//! - **Zero copy.** Decoding reads one [`Bytes`](bytes::Bytes) frame; strings
//!   ([`Utf8Bytes`], validated with SIMD) and binaries are slices of it. Encoding inserts
//!   `Bytes`-held values of 4 KiB or more into the [`LinkBuffer`] as nodes of their own.
//! - **AVX2 lists.** `list<i32>`, `list<i64>` and `list<double>` are byte-swapped 32
//!   bytes at a time where the CPU has AVX2 (see [`simd`]), with a scalar twin elsewhere.
//! - **Hostile input.** Every length is checked against the bytes that remain, at the
//!   minimum wire width of its element type, before anything is allocated; nesting is
//!   bounded (64 by default) in decoding and skipping; invalid type ids, invalid UTF-8,
//!   over-long varints and containers of `void` are typed errors ([`DecodeError`]) that
//!   name the field path. Decoding never panics.
//!
//! # Decisions
//!
//! - Default-requiredness fields are plain values, always written, and take their
//!   default when absent on the wire; `optional` fields are `Option`s; a missing
//!   `required` field fails decoding.
//! - A field whose wire type differs from its declared type is skipped, as Apache Thrift
//!   does; a non-empty container whose element type differs is an error.
//! - Maps are `BTreeMap` and sets `BTreeSet` in the reference types, so that encoding is
//!   deterministic (byte-identical output for equal values).
//! - Writers emit strict Binary message headers; readers accept non-strict ones only when
//!   asked ([`Codec::accept_non_strict`]).
//! - [`Json`] is Apache Thrift's `TJSONProtocol`, written byte for byte as Apache's C++
//!   writes it; its decisions are in [`protocol::json`].
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod application_exception;
pub mod encoding;
mod error;
mod link_buffer;
mod message;
pub mod protocol;
pub mod simd;
mod ttype;
mod utf8_bytes;
pub mod wire;

#[cfg(feature = "fixtures")]
pub mod fixtures;

pub use application_exception::{ApplicationException, ApplicationExceptionKind};
pub use error::{DecodeError, DecodeErrorKind, EncodeError};
pub use link_buffer::LinkBuffer;
pub use message::{Codec, DEFAULT_ZERO_COPY_THRESHOLD, Message, MessageHeader, MessageType};
pub use protocol::binary::Binary;
pub use protocol::compact::Compact;
pub use protocol::json::Json;
pub use protocol::{
    DEFAULT_MAX_DEPTH, DecodeLimits, Decoder, Encoder, FieldHeader, ListHeader, MapHeader,
    Protocol, Sizer,
};
pub use ttype::TType;
pub use utf8_bytes::Utf8Bytes;

pub use bytes;
