//! codegen's output, compiled as a user's crate would compile it.
//!
//! The build script runs `codegen::compile` on `idl/echo.thrift` and `idl/mixed.thrift`,
//! exactly as a user's would. Building this crate proves the output compiles cleanly
//! under the workspace lints and clippy `-D warnings`; its tests prove the generated
//! types put exactly the bytes of the hand-written reference types of
//! `thrift_codec::fixtures` on the wire, in both protocols, and that the generated
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
