//! Generates pilota's Rust for the benchmark IDLs, so that the codec bench compares
//! thrift-wire with the code volo users actually compile.

use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let idl_dir = manifest_dir.join("../idl");
    let idls = [idl_dir.join("echo.thrift"), idl_dir.join("mixed.thrift")];
    for idl in &idls {
        println!("cargo::rerun-if-changed={}", idl.display());
    }
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo")).join("pilota_gen.rs");
    pilota_build::Builder::thrift()
        // The IDLs are compiled as a whole: every struct is generated, used by a service or not.
        .ignore_unused(false)
        .compile(idls.clone(), pilota_build::Output::File(out));

    // json_transcode's peer: the same IDL through codegen with `String`, `Vec<u8>` and
    // serde derives, binaries as base64 (`serde(with)`) like the transcoder writes them.
    thrift_codegen::Builder::new()
        .file_name("serde_gen.rs")
        .rerun_if_changed(false)
        .include(&idl_dir)
        .string_type(thrift_codegen::emit::StringRepr::String)
        .binary_type(thrift_codegen::emit::BinaryRepr::Vec)
        .type_attribute(".", "#[derive(serde::Serialize, serde::Deserialize)]")
        .field_attribute("echo.Ids.blob", r#"#[serde(with = "crate::base64_bytes")]"#)
        .field_attribute(
            "mixed.Mixed.payload",
            r#"#[serde(with = "crate::base64_option", default)]"#,
        )
        .compile(&idls)
        .expect("codegen compiles the benchmark IDL");
}
