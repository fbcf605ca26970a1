//! Apache Thrift's own test IDLs (`idl/apache/`, taken unchanged from Apache Thrift):
//! what Apache's compiler accepts, codegen accepts, with the meaning Apache gives it.
//! (`codegen-check` compiles the generated Rust and uses it.)

use std::path::PathBuf;

use codegen::model::{Item, Model, StructDef, Value};

fn apache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl/apache")
}

fn model(files: &[&str]) -> Model {
    let dir = apache_dir();
    let paths: Vec<PathBuf> = files.iter().map(|f| dir.join(f)).collect();
    codegen::Builder::new()
        .rerun_if_changed(false)
        .include(&dir)
        .model(&paths)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn find_struct<'m>(model: &'m Model, module: &str, name: &str) -> &'m StructDef {
    model
        .modules
        .iter()
        .filter(|m| m.name == module)
        .flat_map(|m| &m.items)
        .find_map(|i| match i {
            Item::Struct(s) if s.thrift_name == name => Some(s),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no struct {module}.{name}"))
}

#[test]
fn thrift_test_empty_braces_are_an_empty_set_and_an_empty_map() {
    let model = model(&["ThriftTest.thrift"]);
    let s = find_struct(&model, "thrift_test", "OptionalBinary");
    // `1: optional set<binary> bin_set = {}`, `2: optional map<binary,i32> bin_map = {}`.
    assert_eq!(s.fields[0].default, Some(Value::List(Vec::new())));
    assert_eq!(s.fields[1].default, Some(Value::Map(Vec::new())));
}
