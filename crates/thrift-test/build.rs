//! Generates Rust from Apache Thrift's test IDL, as a user's build script would.
//!
//! `idl-tmp/ThriftTest.thrift` is `idl/apache/ThriftTest.thrift` without the one
//! default codegen does not accept yet (`optional set<binary> bin_set = {}`); it goes
//! once codegen takes the unmodified file.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    codegen::compile(&["idl-tmp/ThriftTest.thrift"], &["idl-tmp"])?;
    Ok(())
}
