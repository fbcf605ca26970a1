//! Generates Rust from Apache Thrift's test IDL (unmodified), as a user's build script
//! would.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    codegen::compile(
        &["../../idl/apache/ThriftTest.thrift"],
        &["../../idl/apache"],
    )?;
    Ok(())
}
