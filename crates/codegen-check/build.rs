//! Generates Rust with codegen, as a user's build script would: the repository's IDL
//! (`thrift_gen.rs`), codegen's grammar-covering test IDLs (`test_idls.rs`), and the
//! repository's IDL again with every `Builder` type option changed (`std_types.rs`), and
//! Apache Thrift's own test IDLs, taken unchanged into `idl/apache/` (`apache_*.rs`).

use codegen::emit::{BinaryRepr, CollectionRepr, StringRepr};

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
            format!("{dir}/handlers.thrift"),
            format!("{dir}/corners.thrift"),
        ])?;
    // What a user who wants std types and serde would ask for.
    codegen::Builder::new()
        .file_name("std_types.rs")
        .include("../../idl")
        .string_type(StringRepr::String)
        .binary_type(BinaryRepr::Vec)
        .collections(CollectionRepr::Hash)
        .type_attribute(".", "#[derive(serde::Serialize)]")
        .field_attribute("echo.Request.msg", r#"#[serde(rename = "message")]"#)
        .compile(&["../../idl/echo.thrift", "../../idl/mixed.thrift"])?;
    // Apache Thrift's cross-language test suite IDL, unmodified.
    let apache = "../../idl/apache";
    codegen::Builder::new()
        .file_name("apache_thrift_test.rs")
        .include(apache)
        .compile(&[format!("{apache}/ThriftTest.thrift")])?;
    // Apache Thrift's other test IDLs (all of `test/*.thrift` that its compiler accepts),
    // in two groups: Include.thrift and ReuseObjects.thrift include an older copy of
    // ThriftTest.thrift, whose module name is taken in the first.
    // They make warnings on purpose (codegen's tests assert them); CI need not show them.
    let group = |file: &str, idls: &[&str]| {
        codegen::Builder::new()
            .file_name(file)
            .cargo_warnings(false)
            .include(apache)
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
    // codegen's IDLs that Apache accepts but that lose meaning (or representation) in
    // Rust: what codegen makes of them must compile clean too.
    let warned = "../codegen/tests/warned";
    let mut idls: Vec<_> = std::fs::read_dir(warned)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    idls.retain(|p| p.extension().is_some_and(|e| e == "thrift"));
    idls.sort();
    println!("cargo:rerun-if-changed={warned}");
    codegen::Builder::new()
        .file_name("warned.rs")
        .cargo_warnings(false)
        .compile(&idls)?;
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
