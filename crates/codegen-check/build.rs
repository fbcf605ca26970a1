//! Generates Rust with codegen, as a user's build script would: the repository's IDL
//! (`thrift_gen.rs`) and codegen's grammar-covering test IDLs (`test_idls.rs`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    codegen::compile(
        &["../../idl/echo.thrift", "../../idl/mixed.thrift"],
        &["../../idl"],
    )?;
    let dir = "../codegen/tests/idl";
    codegen::Builder::new()
        .file_name("test_idls.rs")
        .include(dir)
        .compile(&[
            format!("{dir}/base.thrift"),
            format!("{dir}/shapes.thrift"),
            format!("{dir}/services.thrift"),
            format!("{dir}/includes.thrift"),
            format!("{dir}/comments.thrift"),
        ])?;
    Ok(())
}
