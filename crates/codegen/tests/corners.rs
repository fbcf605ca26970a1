//! What the resolver makes of the corners codegen's own IDLs hold: `tests/idl/
//! corners.thrift`, and the model side of two `tests/warned/` files (their warnings are
//! checked by `unresolvable.rs`). These are the values, types, names and boxing the
//! generated code is made from; `codegen-check` compiles the same files and uses the
//! generated types.

use std::path::PathBuf;

use thrift_codegen::model::{Item, Model, Requiredness, Ty, TypePath, Value};

mod support;
use support::{find_const, find_enum, find_struct};

/// The model of `files` of `tests/<dir>`.
fn model(dir: &str, files: &[&str]) -> Model {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(dir);
    let paths: Vec<PathBuf> = files.iter().map(|f| dir.join(f)).collect();
    thrift_codegen::Builder::new()
        .rerun_if_changed(false)
        .cargo_warnings(false)
        .include(&dir)
        .model(&paths)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn corners() -> Model {
    model("idl", &["corners.thrift"])
}

fn path(module: &str, name: &str) -> TypePath {
    TypePath {
        module: module.into(),
        name: name.into(),
    }
}

#[test]
fn the_corners_make_no_warnings() {
    let model = corners();
    assert!(model.warnings.is_empty(), "{:#?}", model.warnings);
}

#[test]
fn thrift_type_names_are_field_names() {
    let model = corners();
    let s = find_struct(&model, "corners", "TypeNames");
    let names: Vec<&str> = s.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "i8", "i16", "i32", "i64", "uuid", "string", "binary", "bool", "byte", "list", "set",
            "map"
        ]
    );
    let types: Vec<&Ty> = s.fields.iter().map(|f| &f.ty).collect();
    assert_eq!(
        types,
        [
            &Ty::I8,
            &Ty::I16,
            &Ty::I32,
            &Ty::I64,
            &Ty::Uuid,
            &Ty::String,
            &Ty::Binary,
            &Ty::Bool,
            &Ty::I8,
            &Ty::List(Box::new(Ty::I8)),
            &Ty::Set(Box::new(Ty::I16)),
            &Ty::Map(Box::new(Ty::String), Box::new(Ty::Bool)),
        ]
    );
}

#[test]
fn uuid_constants_are_strings_with_or_without_braces() {
    let model = corners();
    let value = |name: &str| find_const(&model, "corners", name).value.clone();
    let ticket = [
        0xc0, 0xff, 0xee, 0x00, 0x12, 0x34, 0x4a, 0xbc, 0x8d, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89,
        0xab,
    ];
    assert_eq!(value("TICKET"), Value::Uuid(ticket));
    // Upper case, in braces.
    assert_eq!(
        value("BRACED"),
        Value::Uuid([
            0xc0, 0xff, 0xee, 0x00, 0x12, 0x34, 0x4a, 0xbc, 0x8d, 0xef, 0xfe, 0xdc, 0xba, 0x98,
            0x76, 0x54
        ])
    );
    // Through a typedef, and as set elements, by name or written out.
    let mut one = [0; 16];
    one[15] = 1;
    let first = find_const(&model, "corners", "FIRST_REQUEST");
    assert_eq!((&first.ty, &first.value), (&Ty::Uuid, &Value::Uuid(one)));
    assert_eq!(
        value("TICKETS"),
        Value::List(vec![Value::Uuid(ticket), Value::Uuid(one)])
    );
}

/// A constant keeps the doc comment written before it (the emitter writes it as
/// `///` lines, as it does for types).
#[test]
fn constants_keep_their_doc_comments() {
    let model = corners();
    let doc = |name: &str| find_const(&model, "corners", name).doc.clone();
    assert_eq!(
        doc("TICKET").as_deref(),
        Some("The canonical form of a uuid, lower and upper case.")
    );
    assert_eq!(doc("NEGATIVE_WHOLE"), None);
}

#[test]
fn doubles_that_need_an_order_are_ordered_doubles() {
    let model = corners();
    let s = find_struct(&model, "corners", "Readings");
    let ty = |name: &str| &s.fields.iter().find(|f| f.name == name).unwrap().ty;
    assert_eq!(ty("levels"), &Ty::Set(Box::new(Ty::OrderedDouble)));
    assert_eq!(
        ty("buckets"),
        &Ty::Map(Box::new(Ty::OrderedDouble), Box::new(Ty::I8))
    );
    assert_eq!(ty("raw"), &Ty::List(Box::new(Ty::Double)));
    assert_eq!(ty("mean"), &Ty::Double);
    // The plain `mean` keeps the struct out of sets and map keys.
    assert!(!s.hashable);
}

#[test]
fn integers_are_taken_where_doubles_are_expected() {
    let model = corners();
    let value = |name: &str| find_const(&model, "corners", name).value.clone();
    assert_eq!(value("WHOLE"), Value::Double(3.0));
    assert_eq!(value("NEGATIVE_WHOLE"), Value::Double(-12.0));
    assert_eq!(
        value("STEPS"),
        Value::List(vec![
            Value::Double(1.0),
            Value::Double(-0.5),
            Value::Double(2.5e-3),
            Value::Double(700.0),
        ])
    );
}

#[test]
fn empty_braces_are_an_empty_set_or_an_empty_map() {
    let model = corners();
    let s = find_struct(&model, "corners", "EmptyBraces");
    let defaults: Vec<Option<&Value>> = s.fields.iter().map(|f| f.default.as_ref()).collect();
    assert_eq!(
        defaults,
        [
            Some(&Value::List(Vec::new())),
            Some(&Value::Map(Vec::new())),
            Some(&Value::List(Vec::new())),
        ]
    );
    assert_eq!(
        s.fields[0].ty,
        Ty::Set(Box::new(Ty::Binary)),
        "a set, whatever the braces"
    );
}

#[test]
fn implicit_enum_values_follow_the_one_before_and_names_may_share_one() {
    let model = corners();
    let level = find_enum(&model, "corners", "Level");
    let values: Vec<(&str, i32)> = level.values.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    assert_eq!(
        values,
        [
            ("FLOOR", -2),
            ("BELOW", -1),
            ("ZERO", 0),
            ("NONE", 0),
            ("ONE", 1),
            ("TOP", 16)
        ]
    );
    let alarm = find_struct(&model, "corners", "Alarm");
    let level = || path("corners", "Level");
    assert_eq!(alarm.fields[0].default, Some(Value::Enum(level(), 1)));
    assert_eq!(alarm.fields[1].default, Some(Value::Enum(level(), 0)));
}

#[test]
fn typedefs_of_typedefs_are_the_type_beneath() {
    let model = corners();
    let typedef = |name: &str| {
        model.modules[0]
            .items
            .iter()
            .find_map(|i| match i {
                Item::Typedef(t) if t.name == name => Some(t.ty.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no typedef {name}"))
    };
    assert_eq!(typedef("Total"), Ty::I32);
    let totals = Ty::List(Box::new(Ty::I32));
    assert_eq!(typedef("Totals"), totals);
    let index = find_const(&model, "corners", "INDEX");
    assert_eq!(index.ty, Ty::Map(Box::new(Ty::I32), Box::new(totals)));
    let ints = |v: &[i64]| Value::List(v.iter().map(|&i| Value::Int(i)).collect());
    assert_eq!(
        index.value,
        Value::Map(vec![
            (Value::Int(6), ints(&[1, 2, 3])),
            (Value::Int(0), ints(&[])),
        ])
    );
}

#[test]
fn a_default_naming_another_enums_value_means_the_fields_enum() {
    // `1: Tree tree = Fruit.PEAR`: Apache Thrift looks `PEAR` up in `Tree` (7); the
    // warning is in `tests/warned/enum_value_of_other_enum.warn`.
    let model = model("warned", &["enum_value_of_other_enum.thrift"]);
    let module = "enum_value_of_other_enum";
    let s = find_struct(&model, module, "Orchard");
    assert_eq!(
        s.fields[0].default,
        Some(Value::Enum(path(module, "Tree"), 7))
    );
    assert_eq!(
        s.fields[1].default,
        Some(Value::Enum(path(module, "Fruit"), 2))
    );
    assert_eq!(model.warnings.len(), 1, "{:#?}", model.warnings);
}

#[test]
fn fields_that_close_a_cycle_are_boxed_and_endless_ones_optional() {
    // The warnings are in `tests/warned/required_cycles.warn`.
    let model = model("warned", &["required_cycles.thrift"]);
    let field = |s: &str, f: &str| {
        let s = find_struct(&model, "required_cycles", s);
        s.fields
            .iter()
            .find(|x| x.thrift_name == f)
            .unwrap()
            .clone()
    };
    let optional = |s: &str, f: &str| field(s, f).req == Requiredness::Optional;
    // A struct that holds itself: boxed, and optional so that a value can end.
    assert!(field("Chain", "next").boxed && optional("Chain", "next"));
    assert!(!optional("Chain", "value"));
    // Two that hold each other: both boxed, the first of the cycle optional.
    assert!(field("Left", "right").boxed && optional("Left", "right"));
    assert!(field("Right", "left").boxed && !optional("Right", "left"));
    // Through a list the cycle ends: neither boxed nor changed.
    assert!(!field("Bag", "items").boxed && !optional("Bag", "items"));
    // No value of either union ends, so neither has a `Default`, and a field always
    // present that holds one becomes optional, in a struct and in a method's arguments.
    for union in ["Spiral", "Twist"] {
        let u = find_struct(&model, "required_cycles", union);
        assert_eq!(u.union_default, None, "{union}");
    }
    assert!(optional("Coil", "spiral") && !optional("Coil", "turns"));
    assert!(optional("turn_args", "spiral"));
    assert_eq!(model.warnings.len(), 4, "{:#?}", model.warnings);
}

/// A service that extends one with streams inherits its calls, not its streams
/// (which have no args or result structs to be called with).
#[test]
fn a_base_service_s_streams_are_not_inherited_as_calls() {
    let mut files = thrift_codegen::IdlFiles::new();
    files.insert(
        "idl/child.thrift",
        "struct M { 1: i32 n }\n\
         service Base { M get(1: M m), M up(1: M m) (streaming.mode = \"client\") }\n\
         service Child extends Base { M down(1: M m) (streaming.mode = \"server\") }",
    );
    let model = thrift_codegen::Builder::new()
        .rerun_if_changed(false)
        .cargo_warnings(false)
        .model_in(&files, &["idl/child.thrift"])
        .unwrap_or_else(|e| panic!("{e}"));
    let child = model
        .modules
        .iter()
        .flat_map(|f| &f.items)
        .find_map(|i| match i {
            Item::Service(s) if s.thrift_name == "Child" => Some(s),
            _ => None,
        })
        .expect("Child");
    let inherited: Vec<&str> = child.inherited.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(inherited, ["get"]);
    let streams: Vec<&str> = child.streams.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(streams, ["down"]);
}

/// Kitex's `streaming.mode` methods (idl/stream.thrift, the examples' streaming
/// service) leave the ping-pong methods and their structs alone: they become the
/// service's streams, each with its request and response structs and its mode.
#[test]
fn streaming_methods_are_streams_not_calls() {
    use thrift_codegen::model::StreamingMode;
    let idl = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl/stream.thrift");
    let model = thrift_codegen::Builder::new()
        .rerun_if_changed(false)
        .cargo_warnings(false)
        .model(&[&idl])
        .unwrap_or_else(|e| panic!("{e}"));
    let service = model
        .modules
        .iter()
        .flat_map(|f| &f.items)
        .find_map(|i| match i {
            Item::Service(s) => Some(s),
            _ => None,
        })
        .expect("a service");
    let calls: Vec<&str> = service.methods.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(calls, ["echo"]);
    let streams: Vec<(&str, StreamingMode, &str, &str)> = service
        .streams
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.mode,
                s.request.name.as_str(),
                s.response.name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        streams,
        [
            ("server_echo", StreamingMode::Server, "Request", "Response"),
            ("client_count", StreamingMode::Client, "Request", "Response"),
            (
                "bidi_echo",
                StreamingMode::Bidirectional,
                "Request",
                "Response"
            ),
        ]
    );
    let names = service.stream_names.as_ref().expect("stream names");
    assert_eq!(
        (
            names.handler.as_str(),
            names.server.as_str(),
            names.client.as_str()
        ),
        (
            "StreamServiceStream",
            "StreamServiceStreamServer",
            "StreamServiceStreamClient"
        )
    );
    // No args or result structs for the streams: only `echo`'s.
    let structs: Vec<&str> = model
        .modules
        .iter()
        .flat_map(|f| &f.items)
        .filter_map(|i| match i {
            Item::Struct(s) if s.name.starts_with("StreamService") => Some(s.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        structs,
        ["StreamServiceEchoArgs", "StreamServiceEchoResult"]
    );
}
