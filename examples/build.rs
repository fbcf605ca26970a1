//! Generates Rust from the benchmark IDL, as a user's build script would.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    codegen::compile(&["../idl/echo.thrift"], &["../idl"])?;
    Ok(())
}
