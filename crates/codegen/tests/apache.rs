//! Apache Thrift's own test IDLs (its corpus, `../shared/apache-idl` beside the
//! repository or `$APACHE_IDL_DIR`; not part of the repository): what Apache's compiler
//! accepts, codegen accepts, with the meaning Apache gives it. (`codegen-check`
//! compiles the generated Rust and uses it.)
//!
//! Without the corpus each test says `skipped:`, or fails when `CI` is set.

use std::path::PathBuf;

use thrift_codegen::model::{Model, Value};

mod support;
use support::{find_const, find_struct};

/// Where the corpus is looked for.
fn apache_dir() -> PathBuf {
    match std::env::var_os("APACHE_IDL_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/apache-idl"),
    }
}

/// The model of `files` of the corpus; `None` (a skip) without the corpus, unless `CI`
/// is set, where that fails.
fn model(files: &[&str]) -> Option<Model> {
    let dir = apache_dir();
    if !dir.join("ThriftTest.thrift").is_file() {
        let missing = format!(
            "Apache Thrift's IDL corpus, not found at {} (or set APACHE_IDL_DIR)",
            dir.display()
        );
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!("this test needs {missing}; CI is set, so this is a failure");
        }
        eprintln!("skipped: this test needs {missing}");
        return None;
    }
    let paths: Vec<PathBuf> = files.iter().map(|f| dir.join(f)).collect();
    let model = thrift_codegen::Builder::new()
        .rerun_if_changed(false)
        .include(&dir)
        .model(&paths)
        .unwrap_or_else(|e| panic!("{e}"));
    Some(model)
}

#[test]
fn thrift_test_empty_braces_are_an_empty_set_and_an_empty_map() {
    let Some(model) = model(&["ThriftTest.thrift"]) else {
        return;
    };
    let s = find_struct(&model, "thrift_test", "OptionalBinary");
    // `1: optional set<binary> bin_set = {}`, `2: optional map<binary,i32> bin_map = {}`.
    assert_eq!(s.fields[0].default, Some(Value::List(Vec::new())));
    assert_eq!(s.fields[1].default, Some(Value::Map(Vec::new())));
}

/// The warnings of a compile, as printed (`file:line:col: message`), with the file
/// shown by name only.
fn warnings(model: &Model) -> Vec<String> {
    model
        .warnings
        .iter()
        .map(|w| {
            let name = std::path::Path::new(&w.file).file_name().unwrap();
            format!(
                "{}:{}:{}: {}",
                name.to_string_lossy(),
                w.line,
                w.col,
                w.message
            )
        })
        .collect()
}

#[test]
fn a_default_naming_another_enums_value_is_read_as_apache_reads_it_with_a_warning() {
    // `1: MyEnum2 me2_2 = MyEnum1.ME2_2`: Apache looks `ME2_2` up in `MyEnum2`.
    let Some(model) = model(&["EnumTest.thrift"]) else {
        return;
    };
    let s = find_struct(&model, "enum_test", "MyStruct");
    let me2 = thrift_codegen::model::TypePath {
        module: "enum_test".into(),
        name: "MyEnum2".into(),
    };
    assert_eq!(s.fields[0].default, Some(Value::Enum(me2, 2)));
    assert_eq!(
        warnings(&model),
        [
            "EnumTest.thrift:80:22: `MyEnum1.ME2_2` names a value of enum `MyEnum1` where a \
          `MyEnum2` is expected; taken as `MyEnum2.ME2_2` (2), as Apache Thrift does"
        ]
    );
}

#[test]
fn field_names_that_rust_spells_alike_are_numbered_with_a_warning() {
    let Some(model) = model(&["NameConflictTest.thrift"]) else {
        return;
    };
    let tricky = find_struct(&model, "name_conflict_test", "Tricky_");
    let names: Vec<&str> = tricky.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["tricky", "tricky_2"]);
    let warnings = warnings(&model);
    assert!(
        warnings.contains(
            &"NameConflictTest.thrift:102:11: fields `tricky` and `Tricky` are both `tricky` \
              in Rust; `Tricky` is named `tricky_2`"
                .to_string()
        ),
        "{warnings:#?}"
    );
    assert_eq!(warnings.len(), 15, "{warnings:#?}");
    // Thrift type names as field names (THRIFT-5626).
    let s = find_struct(&model, "name_conflict_test", "Thrift5626");
    let names: Vec<&str> = s.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "i8", "i16", "i32", "i64", "uuid", "string", "binary", "bool", "byte", "list", "set",
            "map"
        ]
    );
}

#[test]
fn reference_marked_fields_that_close_a_cycle_are_boxed() {
    // `1: RecList & nextitem` and the like; the `&` itself changes nothing.
    let Some(model) = model(&["Recursive.thrift"]) else {
        return;
    };
    for (name, field) in [
        ("RecList", "nextitem"),
        ("CoRec", "other"),
        ("CoRec2", "other"),
        ("VectorTest", "lister"),
    ] {
        let s = find_struct(&model, "recursive", name);
        let f = s.fields.iter().find(|f| f.thrift_name == field).unwrap();
        let closes_cycle = name != "VectorTest";
        assert_eq!(f.boxed, closes_cycle, "{name}.{field}");
    }
    // A field always present that leads back to its own struct would make every value
    // endless (and `Default` or decoding recurse forever): the first of each such
    // cycle becomes optional, and so does a field holding a union that has no value
    // that ends.
    let end = "so no value of it would end: it is an `Option` here, written only when set";
    assert_eq!(
        warnings(&model),
        [
            format!(
                "Recursive.thrift:26:16: field `nextitem` of `RecList` leads back to `RecList` \
                 through fields that are always present, {end}"
            ),
            format!(
                "Recursive.thrift:31:16: field `other` of `CoRec` leads back to `CoRec` \
                 through fields that are always present, {end}"
            ),
            format!(
                "Recursive.thrift:47:17: field `other` of `CoError` leads back to `CoError` \
                 through fields that are always present, {end}"
            ),
            format!(
                "Recursive.thrift:63:33: field `item` of `echoCoUnion_args` is a `CoUnion`, a \
                 union whose every variant leads back to it, {end}"
            ),
        ]
    );
    let optional = |s: &str, f: &str| {
        let s = find_struct(&model, "recursive", s);
        s.fields.iter().find(|x| x.thrift_name == f).unwrap().req
            == thrift_codegen::model::Requiredness::Optional
    };
    assert!(optional("RecList", "nextitem") && optional("CoRec", "other"));
    assert!(!optional("CoRec2", "other") && !optional("RecList", "item"));
    // Neither union has a value that ends, so neither gets a `Default`.
    assert_eq!(
        find_struct(&model, "recursive", "CoUnion").union_default,
        None
    );
}

#[test]
fn uuid_constants_are_written_as_strings_with_or_without_braces() {
    let Some(model) = model(&["ConstantsDemo.thrift"]) else {
        return;
    };
    let value = |name: &str| find_const(&model, "constants_demo", name).value.clone();
    assert_eq!(
        value("GEN_UUID"),
        Value::Uuid([
            0x00, 0x00, 0x00, 0x00, 0x44, 0x44, 0xcc, 0xcc, 0xff, 0xff, 0x01, 0x23, 0x45, 0x67,
            0x89, 0xab
        ])
    );
    assert_eq!(
        value("GEN_GUID"),
        Value::Uuid([
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd,
            0xee, 0xff
        ])
    );
}

#[test]
fn doubles_in_set_elements_and_map_keys_are_ordered_doubles() {
    use thrift_codegen::model::Ty;
    let Some(model) = model(&["DebugProtoTest.thrift"]) else {
        return;
    };
    let s = find_struct(&model, "debug_proto_test", "CompactProtoTestStruct");
    let ty = |name: &str| &s.fields.iter().find(|f| f.thrift_name == name).unwrap().ty;
    assert_eq!(ty("double_set"), &Ty::Set(Box::new(Ty::OrderedDouble)));
    assert_eq!(
        ty("double_byte_map"),
        &Ty::Map(Box::new(Ty::OrderedDouble), Box::new(Ty::I8))
    );
    assert_eq!(ty("double_list"), &Ty::List(Box::new(Ty::Double)));
    // A plain `double` field (`a_double`) still keeps the struct out of keys.
    assert!(!s.hashable);
}
