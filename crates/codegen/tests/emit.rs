//! The emitter on hand-built models of `idl/echo.thrift` and `idl/mixed.thrift`.
//!
//! The resolver must produce exactly the hand-built model from the IDL files (its
//! service included), and the generated code is checked in as
//! `tests/golden/echo_mixed.rs` (and that of the test IDLs as `tests/golden/test_idls.rs`);
//! `UPDATE_GOLDEN=1 cargo test -p thrift-codegen --test emit` rewrites it after a deliberate
//! change, otherwise a difference fails with the first differing lines. The
//! `codegen-check` crate compiles the same output from its build script and tests it
//! byte for byte against `thrift_wire::fixtures`.

use std::path::PathBuf;

use thrift_codegen::emit::GENERATED_HEADER;
use thrift_codegen::model::{
    FieldDef, Item, MethodDef, Model, Module, Requiredness, ServiceDef, StructDef, StructKind,
    ThrowDef, Ty, TypePath,
};

fn field(id: i16, name: &str, ty: Ty, req: Requiredness) -> FieldDef {
    FieldDef {
        id,
        thrift_name: name.to_string(),
        name: name.to_string(),
        ty,
        req,
        default: None,
        boxed: false,
    }
}

fn strukt(name: &str, kind: StructKind, hashable: bool, fields: Vec<FieldDef>) -> Item {
    let union_default = (kind == StructKind::Union && !fields.is_empty()).then_some(0);
    Item::Struct(StructDef {
        thrift_name: name.to_string(),
        name: name.to_string(),
        kind,
        fields,
        doc: None,
        hashable,
        union_default,
    })
}

fn path(module: &str, name: &str) -> TypePath {
    TypePath {
        module: module.to_string(),
        name: name.to_string(),
    }
}

fn list(t: Ty) -> Ty {
    Ty::List(Box::new(t))
}

/// What the resolver must produce for the two IDLs.
fn echo_mixed() -> Model {
    use Requiredness::{Default as Def, Optional, Required};
    let action_msg = || {
        vec![
            field(1, "action", Ty::String, Required),
            field(2, "msg", Ty::String, Required),
        ]
    };
    let echo = Module {
        name: "echo".to_string(),
        items: vec![
            strukt("Request", StructKind::Struct, true, action_msg()),
            strukt("Response", StructKind::Struct, true, action_msg()),
            strukt(
                "Ano",
                StructKind::Struct,
                true,
                vec![field(1, "num", Ty::I64, Def)],
            ),
            strukt(
                "MyTest",
                StructKind::Struct,
                true,
                vec![
                    field(1, "num", Ty::I64, Def),
                    field(2, "ano", Ty::Struct(path("echo", "Ano")), Def),
                    field(3, "nums", list(Ty::I64), Def),
                ],
            ),
            strukt(
                "Ids",
                StructKind::Struct,
                false,
                vec![
                    field(1, "ids32", list(Ty::I32), Def),
                    field(2, "ids64", list(Ty::I64), Def),
                    field(3, "scores", list(Ty::Double), Def),
                    field(4, "blob", Ty::Binary, Def),
                ],
            ),
            strukt(
                "EchoError",
                StructKind::Exception,
                true,
                vec![
                    field(1, "code", Ty::I32, Def),
                    field(2, "message", Ty::String, Def),
                ],
            ),
        ],
    };
    let mixed = Module {
        name: "mixed".to_string(),
        items: vec![strukt(
            "Mixed",
            StructKind::Struct,
            false,
            vec![
                field(1, "id", Ty::I64, Def),
                field(2, "name", Ty::String, Def),
                field(3, "flag", Ty::Bool, Def),
                field(4, "tiny", Ty::I8, Def),
                field(5, "small", Ty::I16, Def),
                field(6, "count", Ty::I32, Def),
                field(7, "ratio", Ty::Double, Def),
                field(
                    8,
                    "requests",
                    list(Ty::Struct(path("echo", "Request"))),
                    Def,
                ),
                field(
                    9,
                    "counters",
                    Ty::Map(Box::new(Ty::String), Box::new(Ty::I64)),
                    Def,
                ),
                field(10, "tags", Ty::Set(Box::new(Ty::I32)), Def),
                field(11, "labels", list(Ty::String), Def),
                field(12, "payload", Ty::Binary, Optional),
                field(13, "ids", Ty::Struct(path("echo", "Ids")), Def),
            ],
        )],
    };
    Model {
        modules: vec![echo, mixed],
        warnings: Vec::new(),
    }
}

fn idl_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../idl")
}

fn builder() -> thrift_codegen::Builder {
    let mut b = thrift_codegen::Builder::new();
    b.rerun_if_changed(false).include(idl_dir());
    b
}

/// What the resolver must produce for `service EchoService`.
fn echo_service() -> ServiceDef {
    use Requiredness::Default as Def;
    let echo = |name: &str| path("echo", name);
    let method =
        |thrift: &str, rust: &str, variant: &str, param: FieldDef, ret: Option<Ty>| MethodDef {
            thrift_name: thrift.to_string(),
            name: rust.to_string(),
            variant: variant.to_string(),
            doc: None,
            owner: echo("EchoService"),
            args: echo(&format!("EchoService{variant}Args")),
            params: vec![param],
            result: Some(echo(&format!("EchoService{variant}Result"))),
            returns: ret,
            oneway: false,
            exception: None,
            throws: Vec::new(),
        };
    let req = || field(1, "req", Ty::Struct(echo("Request")), Def);
    let response = || Some(Ty::Struct(echo("Response")));
    let my_test = || Ty::Struct(echo("MyTest"));
    let ids = || Ty::Struct(echo("Ids"));
    let mut echo_or_fail = method(
        "echo_or_fail",
        "echo_or_fail",
        "EchoOrFail",
        req(),
        response(),
    );
    echo_or_fail.exception = Some(echo("EchoServiceEchoOrFailException"));
    echo_or_fail.throws = vec![ThrowDef {
        variant: "Err".to_string(),
        field: "err".to_string(),
        ty: echo("EchoError"),
    }];
    let mut notify = method(
        "notify",
        "notify",
        "Notify",
        field(1, "event", Ty::String, Def),
        None,
    );
    notify.oneway = true;
    notify.result = None;
    ServiceDef {
        thrift_name: "EchoService".to_string(),
        name: "EchoService".to_string(),
        reply: "EchoServiceReply".to_string(),
        server: "EchoServiceServer".to_string(),
        client: "EchoServiceClient".to_string(),
        maker: "EchoServiceClientMaker".to_string(),
        doc: None,
        extends: None,
        streams: Vec::new(),
        stream_names: None,
        methods: vec![
            method("echo", "echo", "Echo", req(), response()),
            method(
                "echo_test",
                "echo_test",
                "EchoTest",
                field(1, "t", my_test(), Def),
                Some(my_test()),
            ),
            method(
                "echo_ids",
                "echo_ids",
                "EchoIds",
                field(1, "ids", ids(), Def),
                Some(ids()),
            ),
            echo_or_fail,
            notify,
        ],
        inherited: Vec::new(),
    }
}

#[test]
fn the_resolver_produces_the_hand_built_model_for_echo_and_mixed() {
    let idl = idl_dir();
    let mut model = builder()
        .model(&[idl.join("echo.thrift"), idl.join("mixed.thrift")])
        .unwrap_or_else(|e| panic!("{e}"));
    // The hand-built model leaves out the service's args and result structs.
    let service_structs: Vec<String> = model.modules[0]
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Struct(s) if s.name.starts_with("EchoService") => Some(s.name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        service_structs,
        [
            "EchoServiceEchoArgs",
            "EchoServiceEchoResult",
            "EchoServiceEchoTestArgs",
            "EchoServiceEchoTestResult",
            "EchoServiceEchoIdsArgs",
            "EchoServiceEchoIdsResult",
            "EchoServiceEchoOrFailArgs",
            "EchoServiceEchoOrFailResult",
            "EchoServiceNotifyArgs",
        ]
    );
    // The service comes last, after its structs.
    match model.modules[0].items.pop() {
        Some(Item::Service(s)) => assert_eq!(s, echo_service()),
        other => panic!("expected the service last, got {other:?}"),
    }
    model.modules[0]
        .items
        .retain(|item| !matches!(item, Item::Struct(s) if s.name.starts_with("EchoService")));
    assert_eq!(model, echo_mixed());
}

/// Every service of the test IDLs, by Rust name.
fn test_idl_services() -> Vec<ServiceDef> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/idl");
    let model = builder()
        .include(&dir)
        .model(&[dir.join("includes.thrift"), dir.join("handlers.thrift")])
        .unwrap_or_else(|e| panic!("{e}"));
    model
        .modules
        .into_iter()
        .flat_map(|m| m.items)
        .filter_map(|item| match item {
            Item::Service(s) => Some(s),
            _ => None,
        })
        .collect()
}

#[test]
fn an_extends_chain_brings_every_base_method_with_its_owner() {
    let services = test_idl_services();
    let find = |name: &str| services.iter().find(|s| s.name == name).unwrap();
    let methods = |list: &[MethodDef]| -> Vec<String> {
        list.iter()
            .map(|m| format!("{}.{}", m.owner.name, m.thrift_name))
            .collect()
    };

    // includes.Events extends services.Store, which extends services.Base.
    let events = find("Events");
    assert_eq!(events.extends, Some(path("services", "Store")));
    assert_eq!(methods(&events.methods), ["Events.since"]);
    assert_eq!(
        methods(&events.inherited),
        [
            "Store.put",
            "Store.get",
            "Store.forget",
            "Store.rects",
            "Store.stats",
            "Store.exists",
            "Store.count",
            "Base.ping",
            "Base.version",
        ]
    );
    // Inherited methods keep their owner's structs and exception enums.
    let get = events.inherited.iter().find(|m| m.name == "get").unwrap();
    assert_eq!(get.args, path("services", "StoreGetArgs"));
    assert_eq!(get.result, Some(path("services", "StoreGetResult")));
    assert_eq!(get.exception, Some(path("services", "StoreGetException")));
    assert_eq!(
        get.throws
            .iter()
            .map(|t| (t.variant.as_str(), t.field.as_str(), t.ty.name.as_str()))
            .collect::<Vec<_>>(),
        [("Nf", "nf", "NotFound"), ("Bad", "bad", "Invalid")]
    );
    let forget = events
        .inherited
        .iter()
        .find(|m| m.name == "forget")
        .unwrap();
    assert!(forget.oneway && forget.result.is_none() && forget.exception.is_none());
    let ping = events.inherited.iter().find(|m| m.name == "ping").unwrap();
    assert_eq!(
        (&ping.returns, &ping.result),
        (&None, &Some(path("services", "BasePingResult")))
    );

    // A chain whose root has no methods; Rust names where Thrift names are keywords.
    let t = find("T");
    assert_eq!(t.extends, Some(path("handlers", "Tricky")));
    assert_eq!(
        methods(&t.inherited),
        ["Tricky.type", "Tricky.match", "Tricky.async"]
    );
    let names: Vec<(&str, &str)> = t
        .inherited
        .iter()
        .map(|m| (m.name.as_str(), m.variant.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("r#type", "Type"),
            ("r#match", "Match"),
            ("r#async", "Async")
        ]
    );
    assert_eq!(find("Tricky").extends, Some(path("services", "Empty")));
    assert!(find("Empty").inherited.is_empty() && find("Empty").extends.is_none());
}

#[test]
fn generated_service_code_has_the_documented_shape() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/idl");
    let out = builder()
        .include(&dir)
        .generate(&[dir.join("handlers.thrift")])
        .unwrap_or_else(|e| panic!("{e}"));
    for want in [
        // A context parameter that does not clash with an argument called `cx`.
        "            cx_: &mut ::volo_core::codegen::ServerContext,\n            cx: i32,\n",
        // Two variants hold `NotFound`, so only `Oops` converts.
        "impl ::std::convert::From<super::handlers::Oops> for TrickyTypeException",
        "pub trait T: super::handlers::Tricky {",
        "impl<T: super::handlers::T> ::volo_core::codegen::Service<::volo_core::codegen::ServerContext, ::volo_core::codegen::ServerRequest> for TServer<T> {",
        // The server learns the oneway methods of the whole chain from the IDL.
        "impl<T> ::volo_core::codegen::ServiceInfo for TServer<T> {\n        const NAME: &'static str = \"T\";\n\n        fn is_oneway(method: &str) -> bool {\n            ::std::matches!(method, \"fire\")\n",
        // Arguments are decoded in the call's protocol, from the request.
        "let a = req.decode::<super::handlers::TrickyTypeArgs>(cx)?;",
        // Inherited methods are called through the trait that declares them.
        "<T as super::handlers::Tricky>::r#type(&self.inner, cx, a.cx, a.self_,",
        // A oneway-only service: its reply writes nothing.
        "fn size<S: __tc::Sizer>(&self, _s: &mut S) -> usize {\n            match self {\n                Self::Oneway => 0,",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    assert!(!out.contains("From<super::shapes::NotFound> for TrickyTypeException"));
}

/// Compares `out` with `tests/golden/<name>` (or rewrites it with `UPDATE_GOLDEN=1`).
fn check_golden(name: &str, out: &str) {
    assert!(out.starts_with(GENERATED_HEADER));
    // The emitter writes text, so check that it is Rust, laid out as it says.
    if let Err(e) = syn::parse_file(out) {
        panic!("{name}: the generated code does not parse: {e}");
    }
    for (i, line) in out.lines().enumerate() {
        let indent = line.len() - line.trim_start_matches(' ').len();
        assert!(
            indent % 4 == 0 && !line.contains('\t') && !line.ends_with(' '),
            "{name}:{}: badly laid out: {line:?}",
            i + 1
        );
    }
    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, out).unwrap();
        return;
    }
    let want =
        std::fs::read_to_string(&golden).unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
    if want != out {
        let diff: Vec<String> = want
            .lines()
            .zip(out.lines())
            .enumerate()
            .filter(|(_, (w, g))| w != g)
            .take(10)
            .map(|(i, (w, g))| format!("line {}:\n- {w}\n+ {g}", i + 1))
            .collect();
        panic!(
            "{} differs from the generated code ({} vs {} lines):\n{}",
            golden.display(),
            want.lines().count(),
            out.lines().count(),
            diff.join("\n")
        );
    }
}

#[test]
fn echo_and_mixed_match_the_checked_in_output() {
    let idl = idl_dir();
    let out = builder()
        .generate(&[idl.join("echo.thrift"), idl.join("mixed.thrift")])
        .unwrap_or_else(|e| panic!("{e}"));
    check_golden("echo_mixed.rs", &out);
}

#[test]
fn test_idls_match_the_checked_in_output() {
    // The same files, in the same order, as codegen-check compiles and tests.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/idl");
    let files: Vec<PathBuf> = [
        "base", "shapes", "services", "includes", "comments", "handlers", "corners",
    ]
    .iter()
    .map(|name| dir.join(format!("{name}.thrift")))
    .collect();
    let out = builder()
        .include(&dir)
        .generate(&files)
        .unwrap_or_else(|e| panic!("{e}"));
    check_golden("test_idls.rs", &out);
}

#[test]
fn builder_attributes_must_be_rust_attributes() {
    let idl = idl_dir().join("echo.thrift");
    for bad in [
        "derive(Clone)",
        "#[derive(Clone)",
        "#[derive(Clone)] struct",
        "",
    ] {
        let mut b = builder();
        b.type_attribute(".", bad);
        match b.generate(&[&idl]) {
            Err(thrift_codegen::Error::Attribute { path, attribute }) => {
                assert_eq!((path.as_str(), attribute.as_str()), (".", bad.trim()));
            }
            other => panic!("{bad:?} was accepted: {:?}", other.map(|s| s.len())),
        }
        let mut b = builder();
        b.field_attribute("echo.Request.msg", bad);
        assert!(matches!(
            b.generate(&[&idl]),
            Err(thrift_codegen::Error::Attribute { .. })
        ));
    }
    // Several attributes in one string are fine, and land on what the path selects only.
    let mut b = builder();
    b.type_attribute("echo.Request", "#[must_use] #[doc = \"x\"]");
    b.field_attribute("echo.Response.msg", "#[doc(alias = \"message\")]");
    let out = b.generate(&[&idl]).unwrap();
    assert_eq!(out.matches("#[must_use] #[doc = \"x\"]").count(), 1);
    let request = out.find("pub struct Request ").unwrap();
    assert!(out[..request].ends_with("#[must_use] #[doc = \"x\"]\n    "));
    assert_eq!(out.matches("#[doc(alias = \"message\")]").count(), 1);
}

#[test]
fn text_rustc_refuses_in_comments_is_kept_out_of_doc_comments() {
    // A bare CR is an error in a doc comment and bidi controls are denied by default;
    // in string literals both are escaped.
    let tricky = "left\u{202E}right\rmore\u{2066}end";
    let mut s = match strukt("Doc", StructKind::Struct, true, vec![]) {
        Item::Struct(s) => s,
        _ => unreachable!(),
    };
    s.doc = Some(format!("line one\n{tricky}"));
    let model = Model {
        modules: vec![Module {
            name: "m".into(),
            items: vec![
                Item::Struct(s),
                Item::Const(thrift_codegen::model::ConstDef {
                    thrift_name: "tricky".into(),
                    name: "TRICKY".into(),
                    ty: Ty::String,
                    value: thrift_codegen::model::Value::Str(tricky.into()),
                    doc: None,
                }),
            ],
        }],
        warnings: Vec::new(),
    };
    let out = thrift_codegen::emit::emit(&model);
    syn::parse_file(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert!(
        !out.contains(['\u{202E}', '\u{2066}', '\r']),
        "raw control characters in:\n{out}"
    );
    assert!(out.contains("    /// left right more end\n"), "{out}");
    assert!(
        out.contains(r#""left\u{202e}right\rmore\u{2066}end""#),
        "{out}"
    );
}

#[test]
fn idl_docs_are_plain_text_to_rustdoc() {
    // Text rustdoc would read as HTML, a link, a doctest fence or a bare URL.
    let mut s = match strukt("Doc", StructKind::Struct, true, vec![]) {
        Item::Struct(s) => s,
        _ => unreachable!(),
    };
    s.doc = Some(
        "@param set<i32> thing - see [1, 2]\n```\nnot code\n```\n~~~\n\
         see https://thrift.apache.org/docs. (or http://x.y/z?a=b)\nC:\\path\n\
         `map<K, V>` is kept, a lone ` is not"
            .into(),
    );
    let model = Model {
        modules: vec![Module {
            name: "m".into(),
            items: vec![Item::Struct(s)],
        }],
        warnings: Vec::new(),
    };
    let out = thrift_codegen::emit::emit(&model);
    for expected in [
        r"/// @param set\<i32\> thing - see \[1, 2\]",
        r"/// \`\`\`",
        r"/// not code",
        r"/// \~~~",
        r"/// see <https://thrift.apache.org/docs>. (or <http://x.y/z?a=b>)",
        r"/// C:\\path",
        r"/// `map<K, V>` is kept, a lone \` is not",
    ] {
        assert!(
            out.contains(&format!("{expected}\n")),
            "{expected} in:\n{out}"
        );
    }
}
