//! Generates pilota's Rust for the benchmark IDLs, so that the codec bench compares
//! thrift-codec with the code volo users actually compile.

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
        .compile(idls, pilota_build::Output::File(out));
}
