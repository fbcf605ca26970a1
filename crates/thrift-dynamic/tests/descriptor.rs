//! The descriptor reads what the IDL says: the benchmark service, and the corners
//! (includes, `extends`, typedefs, unions, enums, defaults, constants, names two files
//! share).

use std::path::PathBuf;

use thrift_codegen::IdlFiles;
use thrift_dynamic::{Descriptor, Kind, Literal, LoadError, Requiredness, StreamingMode, Ty};
use thrift_wire::TType;

fn echo_idl() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl/echo.thrift")
}

fn stream_idl() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl/stream.thrift")
}

#[test]
fn the_echo_service_is_read_with_its_methods_arguments_and_results() {
    let d = Descriptor::from_files(&[echo_idl()], &[] as &[PathBuf]).unwrap();
    assert_eq!(d.paths().len(), 1);
    let svc = d.service("EchoService").expect("by its bare name");
    assert!(std::ptr::eq(svc, d.service("echo.EchoService").unwrap()));
    let names: Vec<&str> = svc.methods.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        ["echo", "echo_test", "echo_ids", "echo_or_fail", "notify"]
    );

    let echo = svc.method("echo").unwrap();
    let request = d.struct_named("Request").unwrap();
    let args = d.struct_desc(echo.args);
    assert_eq!(args.fields.len(), 1);
    assert_eq!(
        (args.fields[0].id, args.fields[0].name.as_str()),
        (1, "req")
    );
    assert_eq!(args.fields[0].ty, Ty::Struct(request));
    let result = d.struct_desc(echo.result.unwrap());
    let success = result.field(0).expect("field 0 carries the return value");
    assert_eq!(
        success.ty,
        Ty::Struct(d.struct_named("echo.Response").unwrap())
    );
    assert_eq!(echo.returns, Some(success.ty.clone()));
    assert!(echo.throws.is_empty());

    let req = d.struct_desc(request);
    assert_eq!(req.kind, Kind::Struct);
    let msg = req.field_named("msg").unwrap();
    assert_eq!(
        (msg.id, msg.req, msg.ty.ttype()),
        (2, Requiredness::Required, TType::Binary)
    );

    let fail = svc.method("echo_or_fail").unwrap();
    assert_eq!(fail.throws.len(), 1);
    let err = &fail.throws[0];
    assert_eq!((err.id, err.name.as_str()), (1, "err"));
    assert_eq!(d.struct_desc(err.ty).kind, Kind::Exception);
    assert_eq!(
        d.struct_desc(fail.result.unwrap()).field(1).unwrap().ty,
        Ty::Struct(err.ty)
    );

    let notify = svc.method("notify").unwrap();
    assert!(notify.oneway && notify.result.is_none() && notify.returns.is_none());

    let ids = d.struct_desc(d.struct_named("Ids").unwrap());
    assert_eq!(ids.field(3).unwrap().ty, Ty::List(Box::new(Ty::Double)));
    assert_eq!(ids.field(4).unwrap().ty, Ty::Binary);
}

const BASE: &str = r#"
typedef i64 Id
enum Color { RED = 1, green, Blue = 10 }
struct Shared { 1: Id id, 2: Color color = Color.green }
const Color DEFAULT_COLOR = Color.Blue
service Base { Shared get(1: Id id) }
"#;

const TOP: &str = r#"
include "base.thrift"
struct Shared { 1: string other }
union Pick { 1: i32 n, 2: string s }
struct Deep {
    1: map<string, list<base.Shared>> m = {"a": [{"id": 3}]},
    2: set<double> scores,
    3: optional Pick pick,
    4: base.Id id = 5,
    5: uuid u,
}
const list<i32> PRIMES = [2, 3, 5]
service Top extends base.Base {
    void put(1: Deep d) throws (1: Oops oops, 2: Oops other),
}
exception Oops { 1: string why }
"#;

fn corners() -> Descriptor {
    let mut files = IdlFiles::new();
    files
        .insert("idl/base.thrift", BASE)
        .insert("idl/top.thrift", TOP);
    Descriptor::from_memory(&files, &["idl/top.thrift"], &[] as &[&str]).unwrap()
}

#[test]
fn includes_extends_typedefs_unions_and_defaults_are_resolved() {
    let d = corners();
    assert!(d.paths().is_empty(), "read from memory");
    // Two files define `Shared`: only the qualified names find them.
    assert!(d.struct_named("Shared").is_none());
    let base_shared = d.struct_named("base.Shared").unwrap();
    let top_shared = d.struct_named("top.Shared").unwrap();
    assert_ne!(base_shared, top_shared);
    assert_eq!(d.struct_desc(top_shared).fields[0].name, "other");

    // The typedef is its type; the enum default is its number.
    let shared = d.struct_desc(base_shared);
    assert_eq!(shared.field(1).unwrap().ty, Ty::I64);
    let color = shared.field(2).unwrap();
    let Ty::Enum(color_id) = color.ty else {
        panic!("{:?}", color.ty)
    };
    assert_eq!(color.default, Some(Literal::Int(2)));
    let e = d.enum_desc(color_id);
    assert_eq!(
        e.values,
        [("RED".into(), 1), ("green".into(), 2), ("Blue".into(), 10)]
    );
    assert_eq!(
        (e.name_of(10), e.value_of("green")),
        (Some("Blue"), Some(2))
    );
    assert_eq!(d.enum_named("Color"), Some(color_id));

    // Containers, a union, a struct literal in a default.
    let deep = d.struct_desc(d.struct_named("Deep").unwrap());
    assert_eq!(
        deep.field(1).unwrap().ty,
        Ty::Map(
            Box::new(Ty::String),
            Box::new(Ty::List(Box::new(Ty::Struct(base_shared))))
        )
    );
    assert_eq!(
        deep.field(1).unwrap().default,
        Some(Literal::Map(vec![(
            Literal::Str("a".into()),
            Literal::List(vec![Literal::Struct(
                base_shared,
                vec![(1, Literal::Int(3)), (2, Literal::Int(2))]
            )])
        )]))
    );
    assert_eq!(deep.field(2).unwrap().ty, Ty::Set(Box::new(Ty::Double)));
    let pick = deep.field(3).unwrap();
    assert_eq!(pick.req, Requiredness::Optional);
    let Ty::Struct(pick_id) = pick.ty else {
        panic!("{:?}", pick.ty)
    };
    assert_eq!(d.struct_desc(pick_id).kind, Kind::Union);
    assert_eq!(deep.field(4).unwrap().default, Some(Literal::Int(5)));
    assert_eq!(deep.field(5).unwrap().ty.ttype(), TType::Uuid);

    // A service's own methods, then the inherited ones, each with its owner.
    let top = d.service("Top").unwrap();
    assert_eq!(top.extends.as_deref(), Some("base.Base"));
    let methods: Vec<(&str, &str)> = top
        .methods
        .iter()
        .map(|m| (m.name.as_str(), m.owner.as_str()))
        .collect();
    assert_eq!(methods, [("put", "top.Top"), ("get", "base.Base")]);
    let put = top.method("put").unwrap();
    assert!(put.returns.is_none(), "void");
    let throws: Vec<(i16, &str)> = put.throws.iter().map(|t| (t.id, t.name.as_str())).collect();
    assert_eq!(throws, [(1, "oops"), (2, "other")]);
    assert!(
        d.struct_desc(put.result.unwrap()).field(0).is_none(),
        "void has no field 0"
    );

    // Constants by Thrift name.
    let primes = d.constant("PRIMES").unwrap();
    assert_eq!(primes.ty, Ty::List(Box::new(Ty::I32)));
    assert_eq!(
        primes.value,
        Literal::List(vec![Literal::Int(2), Literal::Int(3), Literal::Int(5)])
    );
    assert_eq!(
        d.constant("base.DEFAULT_COLOR").unwrap().value,
        Literal::Int(10)
    );
}

/// Streaming methods are read apart from the ping-pong ones, with their mode and the
/// structs of their messages; a service that extends one does not inherit them.
#[test]
fn streaming_methods_are_read_with_their_mode_and_message_structs() {
    let d = Descriptor::from_files(&[stream_idl()], &[] as &[PathBuf]).unwrap();
    let svc = d.service("StreamService").unwrap();
    let names: Vec<&str> = svc.methods.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["echo"], "ping-pong methods only");
    let streams: Vec<(&str, StreamingMode)> = svc
        .streams
        .iter()
        .map(|m| (m.name.as_str(), m.mode))
        .collect();
    assert_eq!(
        streams,
        [
            ("server_echo", StreamingMode::Server),
            ("client_count", StreamingMode::Client),
            ("bidi_echo", StreamingMode::Bidirectional),
        ]
    );
    let bidi = svc.stream("bidi_echo").unwrap();
    assert_eq!(bidi.request, d.struct_named("stream.Request").unwrap());
    assert_eq!(bidi.response, d.struct_named("Response").unwrap());
    assert!(
        svc.stream("echo").is_none(),
        "a ping-pong method is no stream"
    );
    assert_eq!(StreamingMode::Bidirectional.to_string(), "bidirectional");

    let child = Descriptor::from_text(
        "child.thrift",
        "struct M { 1: i32 n }\n\
         service Base { M up(1: M m) (streaming.mode = \"client\") }\n\
         service Child extends Base { M down(1: M m) (streaming.mode = \"server\") }",
    )
    .unwrap();
    let own: Vec<&str> = child
        .service("Child")
        .unwrap()
        .streams
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(own, ["down"]);
}

#[test]
fn bad_idl_is_a_typed_error_with_its_place() {
    let err =
        Descriptor::from_text("bad.thrift", "struct A { 1: i32 x,\n 2: Nope y }").unwrap_err();
    assert!(matches!(err, LoadError::Idl(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with("bad.thrift:2:"), "{text}");
    assert!(text.contains("Nope"), "{text}");

    let err = Descriptor::from_text("bad.thrift", "struct {").unwrap_err();
    assert!(err.to_string().starts_with("bad.thrift:1:"), "{err}");

    let err = Descriptor::from_files(&["/nonexistent/x.thrift"], &[] as &[&str]).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/x.thrift"), "{err}");
}

#[test]
fn clones_share_one_descriptor() {
    let d = corners();
    let c = d.clone();
    assert!(d.same(&c));
    assert!(!d.same(&corners()), "read again is another");
}
