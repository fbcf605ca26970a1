//! Thrift without generated code: IDL read while a program runs.
//!
//! The programs that sit between services cannot have every IDL compiled in: API
//! gateways that turn HTTP and JSON into Thrift calls, proxies, traffic replay, a
//! command-line tool that calls a service by hand. This crate gives them what the IDL
//! says at run time.
//!
//! IDL read from text, and what it says about a method:
//!
//! ```
//! use thrift_dynamic::{Descriptor, Ty};
//!
//! let idl = r#"
//!     struct Request { 1: required string msg, 2: i64 id = 7 }
//!     exception Failed { 1: string why }
//!     service Echo { Request echo(1: Request req) throws (1: Failed err) }
//! "#;
//! let d = Descriptor::from_text("echo.thrift", idl)?;
//! let echo = d.service("Echo").unwrap().method("echo").unwrap();
//! let args = d.struct_desc(echo.args);
//! let req = args.field_named("req").unwrap();
//! assert_eq!(req.ty, Ty::Struct(d.struct_named("echo.Request").unwrap()));
//! assert_eq!(echo.throws[0].name, "err");
//! # Ok::<(), thrift_dynamic::LoadError>(())
//! ```
//!
//! - [`Descriptor`]: every service (with the methods it inherits, and its streaming
//!   methods with their [`StreamingMode`]), struct, union, exception, enum and
//!   constant of a set of IDL files, by Thrift name and field id, resolved across
//!   includes. It is read by codegen's own parser and resolver, so an
//!   IDL means the same here as in a `build.rs`, and shared cheaply (an `Arc`).
//! - [`IdlProvider`]: the current descriptor of a set of files, read again when they
//!   change; a change that does not load keeps the last good descriptor, with a log
//!   line saying why.
//! - [`value`]: values of any IDL type by field id ([`value::Value`]), checked
//!   against the descriptor, encoded and decoded in any protocol.
//! - [`json_to_thrift`] and [`thrift_to_json`]: JSON and Binary/Compact Thrift turned
//!   into each other in one pass, driven by a descriptor, with no tree in between
//!   (what an HTTP/JSON gateway does); the JSON conventions and the cost model are in
//!   the [`json`] module.
//! - [`path`]: one field of an encoded message, read or replaced in place without
//!   decoding the rest (`requests[3].msg`, `counters["hits"]`): a path checked once
//!   against the descriptor, then walked over Binary or Compact bytes, stepping over
//!   everything else.

mod descriptor;
mod error;
pub mod json;
pub mod path;
mod provider;
pub mod value;

pub use descriptor::{
    ConstDesc, Descriptor, EnumDesc, EnumId, FieldDesc, Kind, Literal, MethodDesc, Requiredness,
    ServiceDesc, StreamDesc, StreamingMode, StructDesc, StructId, ThrowDesc, Ty,
};
pub use error::LoadError;
pub use json::{
    ThriftProtocol, TranscodeError, json_to_result, json_to_thrift, result_to_json, thrift_to_json,
};
pub use provider::{IdlProvider, Watch};
