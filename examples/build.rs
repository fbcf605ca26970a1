//! Generates Rust from the benchmark IDL, as a user's build script would, and from the
//! second service of the multiplexed interop test into a file of its own.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    thrift_codegen::compile(&["../idl/echo.thrift"], &["../idl"])?;
    thrift_codegen::Builder::new()
        .file_name("second_gen.rs")
        .include("../idl")
        .compile(&["../idl/second.thrift"])?;
    thrift_codegen::Builder::new()
        .file_name("stream_gen.rs")
        .include("../idl")
        .compile(&["../idl/stream.thrift"])?;
    Ok(())
}
