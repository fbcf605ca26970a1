//! Generates Rust from the suite's interface (`idl/thrift_test.thrift`, written for this
//! crate), as a user's build script would.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    thrift_codegen::compile(&["idl/thrift_test.thrift"], &["idl"])?;
    Ok(())
}
