//! Generates Rust with codegen, as a user's build script would: the repository's IDL
//! (`thrift_gen.rs`), codegen's grammar-covering test IDLs (`test_idls.rs`), the
//! repository's IDL again with every `Builder` type option changed (`std_types.rs`),
//! codegen's warned IDLs (`warned.rs`), and Apache Thrift's own test IDLs (`apache_*.rs`)
//! when their corpus is beside the repository.

use std::path::PathBuf;

use thrift_codegen::emit::{BinaryRepr, CollectionRepr, StringRepr};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    thrift_codegen::compile(
        &["../../idl/echo.thrift", "../../idl/mixed.thrift"],
        &["../../idl"],
    )?;
    let dir = "../codegen/tests/idl";
    thrift_codegen::Builder::new()
        .file_name("test_idls.rs")
        .include(dir)
        .compile(&[
            format!("{dir}/base.thrift"),
            format!("{dir}/shapes.thrift"),
            format!("{dir}/services.thrift"),
            format!("{dir}/includes.thrift"),
            format!("{dir}/comments.thrift"),
            format!("{dir}/handlers.thrift"),
            format!("{dir}/corners.thrift"),
        ])?;
    // What a user who wants std types and serde would ask for.
    thrift_codegen::Builder::new()
        .file_name("std_types.rs")
        .include("../../idl")
        .string_type(StringRepr::String)
        .binary_type(BinaryRepr::Vec)
        .collections(CollectionRepr::Hash)
        .type_attribute(".", "#[derive(serde::Serialize)]")
        .field_attribute("echo.Request.msg", r#"#[serde(rename = "message")]"#)
        .compile(&["../../idl/echo.thrift", "../../idl/mixed.thrift"])?;
    apache_corpus()?;
    // codegen's IDLs that Apache accepts but that lose meaning (or representation) in
    // Rust: what codegen makes of them must compile clean too.
    let warned = "../codegen/tests/warned";
    let mut idls: Vec<_> = std::fs::read_dir(warned)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    idls.retain(|p| p.extension().is_some_and(|e| e == "thrift"));
    idls.sort();
    println!("cargo:rerun-if-changed={warned}");
    thrift_codegen::Builder::new()
        .file_name("warned.rs")
        .cargo_warnings(false)
        .compile(&idls)?;
    Ok(())
}

/// Apache Thrift's test IDL corpus: `$APACHE_IDL_DIR`, else `shared/apache-idl` beside
/// the repository (where CI puts it). Not part of the repository: Apache's files, under
/// Apache's license.
fn apache_dir() -> PathBuf {
    println!("cargo::rerun-if-env-changed=APACHE_IDL_DIR");
    let dir = match std::env::var_os("APACHE_IDL_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/apache-idl"),
    };
    dir.canonicalize().unwrap_or(dir)
}

/// Compiles Apache's corpus into the `apache_*.rs` modules and sets `cfg(apache_idl)`,
/// which turns them and their tests on; without the corpus, generates nothing, and the
/// tests say `skipped:` (or fail, under CI) naming where the corpus was looked for
/// (`APACHE_IDL_LOOKED_AT` at compile time).
fn apache_corpus() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo::rustc-check-cfg=cfg(apache_idl)");
    let dir = apache_dir();
    println!("cargo::rustc-env=APACHE_IDL_LOOKED_AT={}", dir.display());
    if !dir.join("ThriftTest.thrift").is_file() {
        // A missing path is always out of date to cargo: the script runs again on every
        // build until the corpus is there.
        println!("cargo::rerun-if-changed={}", dir.display());
        return Ok(());
    }
    println!("cargo::rustc-cfg=apache_idl");
    let apache = dir.display().to_string();
    // The cross-language test suite's IDL.
    thrift_codegen::Builder::new()
        .file_name("apache_thrift_test.rs")
        .include(&apache)
        .compile(&[format!("{apache}/ThriftTest.thrift")])?;
    // The other test IDLs (all of `test/*.thrift` that Apache's compiler accepts), in
    // two groups: Include.thrift and ReuseObjects.thrift include an older copy of
    // ThriftTest.thrift, whose module name is taken in the first.
    // They make warnings on purpose (codegen's tests assert them); CI need not show them.
    let group = |file: &str, idls: &[&str]| {
        thrift_codegen::Builder::new()
            .file_name(file)
            .cargo_warnings(false)
            .include(&apache)
            .compile(
                &idls
                    .iter()
                    .map(|f| format!("{apache}/{f}"))
                    .collect::<Vec<_>>(),
            )
            .map(drop)
    };
    group("apache_tests.rs", APACHE_TESTS)?;
    group(
        "apache_v0_16.rs",
        &["Include.thrift", "ReuseObjects.thrift"],
    )?;
    Ok(())
}

/// Apache Thrift's `test/*.thrift` but ThriftTest.thrift, BrokenConstants.thrift
/// (which Apache's compiler refuses on purpose) and the two that include
/// `v0.16/ThriftTest.thrift`.
const APACHE_TESTS: &[&str] = &[
    "AnnotationTest.thrift",
    "ConstantsDemo.thrift",
    "DebugProtoTest.thrift",
    "DenseLinkingTest.thrift",
    "DocTest.thrift",
    "DoubleConstantsTest.thrift",
    "EnumContainersTest.thrift",
    "EnumTest.thrift",
    "ExceptionStruct.thrift",
    "FullCamelTest.thrift",
    "FuzzTest.thrift",
    "Identifiers.thrift",
    "Int64Test.thrift",
    "JsDeepConstructorTest.thrift",
    "JsRecursionDepthTest.thrift",
    "ManyOptionals.thrift",
    "ManyTypedefs.thrift",
    "NameConflictTest.thrift",
    "OptionalRequiredTest.thrift",
    "Recursive.thrift",
    "Service.thrift",
    "SmallTest.thrift",
    "SpecificNameTest.thrift",
    "StressTest.thrift",
    "TypedefTest.thrift",
    "Types.thrift",
    "UnsafeTypes.thrift",
    "VoidMethExceptionsTest.thrift",
];
