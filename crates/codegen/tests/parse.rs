//! Tests of the IDL parser: the test IDLs under `tests/idl/` and the workspace's own
//! `idl/` files are parsed and their trees checked in detail; every broken file under
//! `tests/rejected/` must fail with exactly the message in its `.err` twin; and no
//! input (prefixes, deletions, a large generated file) may panic.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use thrift_codegen::ast::{
    Annotation, BaseType, Const, ConstValue, ConstValueKind, Definition, Document, Enum, Field,
    FieldType, FieldTypeKind, FileId, Function, Header, Requiredness, Service, Span, StructKind,
    StructLike, Typedef,
};
use thrift_codegen::{MAX_NESTING, ParseError, ParseErrorKind, parse};

// ---- helpers ---------------------------------------------------------------------------

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn test_idl_dir() -> PathBuf {
    manifest_dir().join("tests").join("idl")
}

fn workspace_idl_dir() -> PathBuf {
    manifest_dir().join("..").join("..").join("idl")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn parse_path(path: &Path) -> Document {
    let name = file_name(path);
    parse(&read(path), FileId(0), &name).unwrap_or_else(|e| panic!("{e}"))
}

fn parse_test_idl(name: &str) -> Document {
    parse_path(&test_idl_dir().join(name))
}

fn parse_str(source: &str) -> Result<Document, ParseError> {
    parse(source, FileId(0), "t.thrift")
}

fn parse_err(source: &str) -> String {
    match parse_str(source) {
        Ok(document) => panic!("expected an error, got {document:?}"),
        Err(e) => e.to_string(),
    }
}

/// Every `*.thrift` file in `dir`, sorted.
fn thrift_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "thrift"))
        .collect();
    files.sort();
    files
}

/// All valid IDLs: the test IDLs and the workspace's `idl/echo.thrift`, `idl/mixed.thrift`.
fn valid_idls() -> Vec<PathBuf> {
    let mut files = thrift_files(&test_idl_dir());
    files.push(workspace_idl_dir().join("echo.thrift"));
    files.push(workspace_idl_dir().join("mixed.thrift"));
    files
}

fn span(line: u32, col: u32) -> Span {
    Span {
        file: FileId(0),
        line,
        col,
    }
}

// Lookups by name.

fn definition<'a>(document: &'a Document, name: &str) -> &'a Definition {
    document
        .definitions
        .iter()
        .find(|d| d.name().name == name)
        .unwrap_or_else(|| panic!("no definition named {name}"))
}

fn structure<'a>(document: &'a Document, name: &str) -> &'a StructLike {
    match definition(document, name) {
        Definition::Struct(s) => s,
        other => panic!("{name} is not struct-like: {other:?}"),
    }
}

fn enumeration<'a>(document: &'a Document, name: &str) -> &'a Enum {
    match definition(document, name) {
        Definition::Enum(e) => e,
        other => panic!("{name} is not an enum: {other:?}"),
    }
}

fn constant<'a>(document: &'a Document, name: &str) -> &'a Const {
    match definition(document, name) {
        Definition::Const(c) => c,
        other => panic!("{name} is not a const: {other:?}"),
    }
}

fn typedef<'a>(document: &'a Document, name: &str) -> &'a Typedef {
    match definition(document, name) {
        Definition::Typedef(t) => t,
        other => panic!("{name} is not a typedef: {other:?}"),
    }
}

fn service<'a>(document: &'a Document, name: &str) -> &'a Service {
    match definition(document, name) {
        Definition::Service(s) => s,
        other => panic!("{name} is not a service: {other:?}"),
    }
}

fn function<'a>(service: &'a Service, name: &str) -> &'a Function {
    service
        .functions
        .iter()
        .find(|f| f.name.name == name)
        .unwrap_or_else(|| panic!("no function named {name}"))
}

fn field<'a>(fields: &'a [Field], name: &str) -> &'a Field {
    fields
        .iter()
        .find(|f| f.name.name == name)
        .unwrap_or_else(|| panic!("no field named {name}"))
}

// Renderers: compact, complete text forms of subtrees, so that assertions check every
// part of a node (except spans and docs, which are checked separately).

fn render_annotations(out: &mut String, annotations: &[Annotation]) {
    if annotations.is_empty() {
        return;
    }
    out.push_str(" (");
    for (i, a) in annotations.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if a.value.is_empty() {
            out.push_str(&a.key);
        } else {
            write!(out, "{} = {:?}", a.key, a.value).unwrap();
        }
    }
    out.push(')');
}

fn ann(annotations: &[Annotation]) -> String {
    let mut out = String::new();
    render_annotations(&mut out, annotations);
    out.trim_start().to_owned()
}

fn ty(t: &FieldType) -> String {
    let mut out = match &t.kind {
        FieldTypeKind::Base(b) => b.as_str().to_owned(),
        FieldTypeKind::Named(name) => name.name.clone(),
        FieldTypeKind::List(e) => format!("list<{}>", ty(e)),
        FieldTypeKind::Set(e) => format!("set<{}>", ty(e)),
        FieldTypeKind::Map(k, v) => format!("map<{}, {}>", ty(k), ty(v)),
    };
    render_annotations(&mut out, &t.ann);
    out
}

fn value(v: &ConstValue) -> String {
    match &v.kind {
        ConstValueKind::Int(i) => i.to_string(),
        ConstValueKind::Double(d) => format!("{d:?}"),
        ConstValueKind::Bool(b) => b.to_string(),
        ConstValueKind::Str(s) => format!("{s:?}"),
        ConstValueKind::Ident(name) => name.name.clone(),
        ConstValueKind::List(items) => {
            let items: Vec<String> = items.iter().map(value).collect();
            format!("[{}]", items.join(", "))
        }
        ConstValueKind::Map(entries) => {
            let entries: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{}: {}", value(k), value(v)))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
    }
}

fn fld(f: &Field) -> String {
    let mut out = String::new();
    if let Some(id) = f.id {
        write!(out, "{id}: ").unwrap();
    }
    match f.req {
        Requiredness::Required => out.push_str("required "),
        Requiredness::Optional => out.push_str("optional "),
        Requiredness::Default => {}
    }
    write!(out, "{} {}", ty(&f.ty), f.name.name).unwrap();
    if let Some(default) = &f.default {
        write!(out, " = {}", value(default)).unwrap();
    }
    render_annotations(&mut out, &f.ann);
    out
}

fn fields(fs: &[Field]) -> Vec<String> {
    fs.iter().map(fld).collect()
}

fn func(f: &Function) -> String {
    let mut out = String::new();
    if f.oneway {
        out.push_str("oneway ");
    }
    match &f.returns {
        Some(t) => out.push_str(&ty(t)),
        None => out.push_str("void"),
    }
    write!(out, " {}({})", f.name.name, fields(&f.args).join(", ")).unwrap();
    if !f.throws.is_empty() {
        write!(out, " throws ({})", fields(&f.throws).join(", ")).unwrap();
    }
    render_annotations(&mut out, &f.ann);
    out
}

fn enum_values(e: &Enum) -> Vec<(String, Option<i64>, String)> {
    e.values
        .iter()
        .map(|v| (v.name.name.clone(), v.value, ann(&v.ann)))
        .collect()
}

fn namespaces(document: &Document) -> Vec<(String, String, String)> {
    document
        .headers
        .iter()
        .filter_map(|h| match h {
            Header::Namespace(ns) => Some((ns.scope.clone(), ns.name.name.clone(), ann(&ns.ann))),
            _ => None,
        })
        .collect()
}

fn definition_names(document: &Document) -> Vec<&str> {
    document
        .definitions
        .iter()
        .map(|d| d.name().name.as_str())
        .collect()
}

// ---- the test IDLs -----------------------------------------------------------------------

#[test]
fn base_thrift() {
    let document = parse_test_idl("base.thrift");
    let s = |owned: &[&str]| owned.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    assert_eq!(
        namespaces(&document),
        vec![
            ("rs".into(), "base".into(), String::new()),
            ("py".into(), "base.types".into(), String::new()),
            ("*".into(), "base".into(), String::new()),
        ]
    );
    assert_eq!(document.namespace("rs").unwrap().name.name, "base");
    assert_eq!(document.namespace("py").unwrap().name.name, "base.types");
    assert_eq!(document.namespace("go").unwrap().scope, "*");
    assert_eq!(document.includes().count(), 0);

    assert_eq!(
        definition_names(&document),
        vec![
            "Timestamp",
            "Name",
            "IdList",
            "History",
            "Status",
            "Color",
            "Offset",
            "Point",
            "Range",
            "MAX_ITEMS",
            "MIN_I64",
            "MAX_I64",
            "MASK",
            "PI",
            "AVOGADRO",
            "MILLI",
            "ENABLED",
            "DISABLED",
            "GREETING",
            "MAGIC",
            "EPOCH",
            "DEFAULT_STATUS",
            "LIMIT",
            "PRIMES",
            "MATRIX",
            "WARM",
            "WEIGHTS",
            "PALETTE",
            "NESTED",
            "ORIGIN",
            "UNIT",
            "CORNERS",
        ]
    );

    // Typedefs: base, annotated base, container with a definition annotation, nested.
    let timestamp = typedef(&document, "Timestamp");
    assert_eq!(ty(&timestamp.ty), "i64");
    assert_eq!(timestamp.ty.kind, FieldTypeKind::Base(BaseType::I64));
    assert_eq!(
        timestamp.doc.as_deref(),
        Some("Milliseconds since the Unix epoch.")
    );
    assert_eq!(timestamp.span, span(9, 1));
    assert_eq!(timestamp.name.span, span(9, 13));
    assert_eq!(
        ty(&typedef(&document, "Name").ty),
        r#"string (rust.type = "Arc<str>")"#
    );
    let id_list = typedef(&document, "IdList");
    assert_eq!(ty(&id_list.ty), "list<i32>");
    assert_eq!(ann(&id_list.ann), r#"(cpp.template = "std::vector")"#);
    assert_eq!(id_list.doc, None);
    assert_eq!(
        ty(&typedef(&document, "History").ty),
        "map<string, list<Timestamp>>"
    );

    // Enums: explicit (one hex), implicit, negative/implicit/hex mixed.
    let status = enumeration(&document, "Status");
    assert_eq!(
        enum_values(status),
        vec![
            ("UNKNOWN".into(), Some(0), String::new()),
            ("ACTIVE".into(), Some(1), String::new()),
            (
                "SUSPENDED".into(),
                Some(2),
                r#"(deprecated = "use INACTIVE")"#.into()
            ),
            ("INACTIVE".into(), Some(0x10), String::new()),
        ]
    );
    assert_eq!(ann(&status.ann), r#"(rust.derive = "Hash")"#);
    assert_eq!(
        status.doc.as_deref(),
        Some("Lifecycle of a job; every value is explicit.")
    );
    assert_eq!(status.values[1].span, span(17, 5));
    assert_eq!(status.values[1].name.span, span(17, 5));
    let color = enumeration(&document, "Color");
    assert_eq!(
        enum_values(color),
        vec![
            ("RED".into(), None, String::new()),
            ("GREEN".into(), None, String::new()),
            ("BLUE".into(), None, String::new()),
        ]
    );
    assert_eq!(color.doc.as_deref(), Some("Implicit values: 0, 1, 2."));
    assert_eq!(
        enum_values(enumeration(&document, "Offset")),
        vec![
            ("BEHIND".into(), Some(-2), String::new()),
            ("SLIGHTLY_BEHIND".into(), Some(-1), String::new()),
            ("ON_TIME".into(), None, String::new()),
            ("AHEAD".into(), Some(0x7fff_ffff), String::new()),
            ("LAST".into(), Some(-0x8000_0000), String::new()),
        ]
    );

    let point = structure(&document, "Point");
    assert_eq!(point.kind, StructKind::Struct);
    assert_eq!(fields(&point.fields), s(&["1: i32 x = 0", "2: i32 y = 0"]));
    assert_eq!(
        fields(&structure(&document, "Range").fields),
        s(&["1: Point lo", "2: Point hi"])
    );

    // Constants: every literal kind, references, nested lists/maps, struct literals.
    let consts: Vec<(String, String, String)> = document
        .definitions
        .iter()
        .filter_map(|d| match d {
            Definition::Const(c) => Some((c.name.name.clone(), ty(&c.ty), value(&c.value))),
            _ => None,
        })
        .collect();
    let expected: Vec<(&str, &str, &str)> = vec![
        ("MAX_ITEMS", "i32", "1000"),
        ("MIN_I64", "i64", "-9223372036854775808"),
        ("MAX_I64", "i64", "9223372036854775807"),
        ("MASK", "i64", "4278255360"),
        ("PI", "double", "3.14159"),
        ("AVOGADRO", "double", "6.022e23"),
        ("MILLI", "double", "0.001"),
        ("ENABLED", "bool", "true"),
        ("DISABLED", "bool", "false"),
        ("GREETING", "string", r#""hello, world""#),
        ("MAGIC", "binary", r#""THRIFT""#),
        ("EPOCH", "Timestamp", "0"),
        ("DEFAULT_STATUS", "Status", "Status.ACTIVE"),
        ("LIMIT", "i32", "MAX_ITEMS"),
        ("PRIMES", "list<i32>", "[2, 3, 5, 7, 11]"),
        ("MATRIX", "list<list<string>>", r#"[["a", "b"], [], ["c"]]"#),
        ("WARM", "set<Color>", "[Color.RED]"),
        (
            "WEIGHTS",
            "map<string, i32>",
            r#"{"low": 1, "high": MAX_ITEMS}"#,
        ),
        (
            "PALETTE",
            "map<Status, list<Color>>",
            "{Status.ACTIVE: [Color.GREEN], Status.INACTIVE: [Color.RED, Color.BLUE]}",
        ),
        (
            "NESTED",
            "map<string, map<string, double>>",
            r#"{"a": {"x": 1.5, "y": -20000000000.0}, "b": {}}"#,
        ),
        ("ORIGIN", "Point", r#"{"x": 0, "y": 0}"#),
        (
            "UNIT",
            "Range",
            r#"{"lo": ORIGIN, "hi": {"x": 1, "y": LIMIT}}"#,
        ),
        (
            "CORNERS",
            "list<Point>",
            r#"[{"x": 0, "y": 0}, {"x": 1, "y": 1}]"#,
        ),
    ];
    let expected: Vec<(String, String, String)> = expected
        .into_iter()
        .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()))
        .collect();
    assert_eq!(consts, expected);

    // Exact literal kinds, docs and positions.
    assert_eq!(
        constant(&document, "MIN_I64").value.kind,
        ConstValueKind::Int(i64::MIN)
    );
    assert_eq!(
        constant(&document, "MILLI").value.kind,
        ConstValueKind::Double(1.0e-3)
    );
    assert_eq!(
        constant(&document, "DEFAULT_STATUS").doc.as_deref(),
        Some("References an enum value.")
    );
    assert_eq!(
        constant(&document, "LIMIT").doc.as_deref(),
        Some("References another constant.")
    );
    assert_eq!(constant(&document, "MASK").doc, None);
    let palette = constant(&document, "PALETTE");
    assert_eq!(palette.span, span(69, 1));
    assert_eq!(palette.value.span, span(69, 42));
    let ConstValueKind::Map(entries) = &palette.value.kind else {
        panic!("PALETTE is not a map literal");
    };
    assert_eq!(entries[1].0.span, span(71, 5));
    assert_eq!(entries[1].1.span, span(71, 22));
    let ConstValueKind::List(colors) = &entries[1].1.kind else {
        panic!("PALETTE value is not a list");
    };
    assert_eq!(colors[1].span, span(71, 34));
}

#[test]
fn shapes_thrift() {
    let document = parse_test_idl("shapes.thrift");
    let s = |owned: &[&str]| owned.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    assert_eq!(
        namespaces(&document),
        vec![("rs".into(), "shapes".into(), String::new())]
    );
    assert_eq!(
        definition_names(&document),
        vec![
            "Rect",
            "Circle",
            "Shape",
            "TreeNode",
            "LinkedList",
            "NotFound",
            "Invalid",
            "Annotated",
            "NoIds",
            "Empty",
            "Keywords",
            "Ping",
            "Pong",
            "PING_PONG",
        ]
    );

    let rect = structure(&document, "Rect");
    assert_eq!(rect.kind, StructKind::Struct);
    assert_eq!(
        rect.doc.as_deref(),
        Some("A rectangle: every base type, every requiredness, several defaults.")
    );
    assert_eq!(
        fields(&rect.fields),
        s(&[
            "1: required i32 width",
            "2: required i32 height",
            "3: optional string label",
            "4: double scale = 1.0",
            "5: bool visible = true",
            "6: list<string> tags = []",
            "7: map<string, i32> props = {}",
            "8: optional binary thumbnail",
            "9: i8 layer = -1",
            "10: i16 z",
            "11: byte flags = 15",
            "12: uuid id",
            "13: string kind = \"rect\"",
            "14: i64 created_at",
        ])
    );
    let width = field(&rect.fields, "width");
    assert_eq!(width.span, span(6, 5));
    assert_eq!(width.ty.span, span(6, 17));
    assert_eq!(width.name.span, span(6, 21));
    assert_eq!(width.req, Requiredness::Required);
    assert_eq!(
        field(&rect.fields, "scale").default.as_ref().unwrap().span,
        span(9, 23)
    );

    assert_eq!(
        fields(&structure(&document, "Circle").fields),
        s(&[r#"1: double radius = 0.5 (unit = "mm")"#])
    );

    let shape = structure(&document, "Shape");
    assert_eq!(shape.kind, StructKind::Union);
    assert_eq!(shape.doc.as_deref(), Some("Exactly one of these is set."));
    assert_eq!(
        fields(&shape.fields),
        s(&["1: Rect rect", "2: Circle circle", "3: list<Shape> group"])
    );
    assert_eq!(ann(&shape.ann), r#"(rust.name = "AnyShape")"#);

    let tree = structure(&document, "TreeNode");
    assert_eq!(tree.doc.as_deref(), Some("Recursive: a tree of nodes."));
    assert_eq!(
        fields(&tree.fields),
        s(&[
            "1: i64 value",
            "2: list<TreeNode> children",
            r#"3: optional TreeNode parent (rust.box = "true")"#,
        ])
    );
    assert_eq!(
        fields(&structure(&document, "LinkedList").fields),
        s(&["1: i32 head", "2: optional LinkedList tail"])
    );

    let not_found = structure(&document, "NotFound");
    assert_eq!(not_found.kind, StructKind::Exception);
    assert_eq!(
        fields(&not_found.fields),
        s(&["1: string key", "2: i32 code = 404"])
    );
    let invalid = structure(&document, "Invalid");
    assert_eq!(invalid.kind, StructKind::Exception);
    assert_eq!(
        fields(&invalid.fields),
        s(&[
            "1: required string reason",
            "2: optional list<string> fields"
        ])
    );
    assert_eq!(ann(&invalid.ann), r#"(message = "reason")"#);

    let annotated = structure(&document, "Annotated");
    assert_eq!(
        fields(&annotated.fields),
        s(&[
            r#"1: list<i32> (cpp.template = "std::list") ids"#,
            r#"2: set<string> (rust.type = "BTreeSet") names (serde.rename = "n")"#,
            r#"3: map<i32, string> (cpp.template = "std::unordered_map") index"#,
            r#"4: string (rust.type = "SmolStr") small"#,
            r#"5: i64 ts (rust.serde = "skip", deprecated)"#,
            r#"6: map<i32, i32> (cpp_type = "std::map<int, int>") legacy_map"#,
            r#"7: set<i32> (cpp_type = "std::set<int>") legacy_set"#,
            r#"8: list<i32> (cpp_type = "std::deque<int>") legacy_list"#,
            "9: list<map<string, set<i64>>> deep",
        ])
    );
    assert_eq!(ann(&annotated.ann), r#"(rust.derive = "Hash", final)"#);
    let ts = field(&annotated.fields, "ts");
    assert_eq!(ts.ann[1].key, "deprecated");
    assert_eq!(ts.ann[1].value, "");
    assert_eq!(ts.ann[0].span, span(58, 16));
    // The nested type tree itself, not just its rendering.
    let deep = &field(&annotated.fields, "deep").ty;
    let FieldTypeKind::List(element) = &deep.kind else {
        panic!("deep is not a list");
    };
    let FieldTypeKind::Map(key, val) = &element.kind else {
        panic!("deep's element is not a map");
    };
    assert_eq!(key.kind, FieldTypeKind::Base(BaseType::String));
    assert!(
        matches!(&val.kind, FieldTypeKind::Set(e) if e.kind == FieldTypeKind::Base(BaseType::I64))
    );
    assert_eq!((element.span.line, element.span.col), (62, 13));

    let no_ids = structure(&document, "NoIds");
    assert_eq!(
        fields(&no_ids.fields),
        s(&["string name", "i32 count", "optional bool flag"])
    );
    assert!(no_ids.fields.iter().all(|f| f.id.is_none()));
    assert_eq!(no_ids.fields[0].span, no_ids.fields[0].ty.span);

    assert!(structure(&document, "Empty").fields.is_empty());
    assert_eq!(
        fields(&structure(&document, "Keywords").fields),
        s(&[
            "1: string type",
            "2: i32 match",
            "3: bool async",
            r#"4: string self (rust.name = "self_")"#,
            "5: optional string Result",
            "6: Empty fn = {}",
        ])
    );
}

#[test]
fn services_thrift() {
    let document = parse_test_idl("services.thrift");
    let s = |owned: &[&str]| owned.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    let includes: Vec<&str> = document.includes().map(|i| i.path.as_str()).collect();
    assert_eq!(includes, vec!["shapes.thrift"]);
    assert_eq!(document.includes().next().unwrap().span, span(1, 1));
    assert_eq!(definition_names(&document), vec!["Base", "Store", "Empty"]);

    let base = service(&document, "Base");
    assert_eq!(base.extends, None);
    assert_eq!(
        base.doc.as_deref(),
        Some("The service every other one extends.")
    );
    assert_eq!(
        base.functions.iter().map(func).collect::<Vec<_>>(),
        s(&["void ping()", r#"string version() (idempotent = "true")"#])
    );
    assert!(base.functions.iter().all(|f| !f.oneway));

    let store = service(&document, "Store");
    let extends = store.extends.as_ref().expect("Store extends Base");
    assert_eq!(extends.name, "Base");
    assert_eq!(extends.span, span(12, 23));
    assert_eq!(ann(&store.ann), r#"(rust.client = "StoreClient")"#);
    assert_eq!(
        store.functions.iter().map(func).collect::<Vec<_>>(),
        s(&[
            "void put(1: string key, 2: shapes.Shape value) throws (1: shapes.Invalid invalid)",
            "shapes.Shape get(1: required string key) throws (1: shapes.NotFound nf, 2: shapes.Invalid bad)",
            "oneway void forget(1: string key)",
            "list<shapes.Rect> rects(1: i32 limit = 10, 2: optional string prefix)",
            "map<string, i64> stats()",
            "bool exists(string key)",
            r#"i32 count(1: list<string> (cpp.template = "std::vector") keys (x = "y")) (timeout_ms = "100")"#,
        ])
    );
    let put = function(store, "put");
    assert_eq!(put.doc.as_deref(), Some("Stores a shape."));
    assert_eq!(put.returns, None);
    assert_eq!(put.span, span(14, 5));
    assert_eq!(put.name.span, span(14, 10));
    assert_eq!(put.throws[0].span, span(14, 60));
    let forget = function(store, "forget");
    assert!(forget.oneway);
    assert_eq!(forget.returns, None);
    assert_eq!(forget.span, span(16, 5));
    assert_eq!(forget.doc, None);
    let get = function(store, "get");
    assert_eq!(
        get.returns.as_ref().map(|t| &t.kind),
        Some(&FieldTypeKind::Named(thrift_codegen::ast::Ident {
            name: "shapes.Shape".into(),
            span: span(15, 5)
        }))
    );
    assert!(function(store, "stats").throws.is_empty());

    let empty = service(&document, "Empty");
    assert!(empty.functions.is_empty());
    assert_eq!(empty.doc, None);
}

#[test]
fn includes_thrift() {
    let document = parse_test_idl("includes.thrift");
    let s = |owned: &[&str]| owned.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    let includes: Vec<&str> = document.includes().map(|i| i.path.as_str()).collect();
    assert_eq!(
        includes,
        vec!["base.thrift", "shapes.thrift", "services.thrift"]
    );
    let cpp: Vec<(&str, Span)> = document
        .headers
        .iter()
        .filter_map(|h| match h {
            Header::CppInclude(c) => Some((c.path.as_str(), c.span)),
            _ => None,
        })
        .collect();
    assert_eq!(cpp, vec![("<unordered_map>", span(4, 1))]);
    assert_eq!(
        namespaces(&document),
        vec![
            ("rs".into(), "includes".into(), String::new()),
            ("java".into(), "com.example.service".into(), String::new()),
            (
                "py.twisted".into(),
                "includes.twisted".into(),
                String::new()
            ),
        ]
    );
    assert_eq!(document.namespace("cpp"), None);
    assert_eq!(document.headers.len(), 7);

    assert_eq!(ty(&typedef(&document, "When").ty), "base.Timestamp");
    let start = constant(&document, "START");
    assert_eq!(
        (ty(&start.ty), value(&start.value)),
        ("base.Status".into(), "base.Status.ACTIVE".into())
    );
    assert_eq!(
        value(&constant(&document, "PATH").value),
        r#"[base.ORIGIN, {"x": base.MAX_ITEMS, "y": 2}]"#
    );
    assert_eq!(
        fields(&structure(&document, "Event").fields),
        s(&[
            "1: required base.Timestamp at",
            "2: base.Status status = base.Status.UNKNOWN",
            "3: map<base.Color, list<base.Point>> marks",
            "4: shapes.Shape shape",
            "5: base.IdList ids = base.PRIMES",
        ])
    );
    let events = service(&document, "Events");
    assert_eq!(events.extends.as_ref().unwrap().name, "services.Store");
    assert_eq!(
        events.functions.iter().map(func).collect::<Vec<_>>(),
        s(&["list<Event> since(1: When at) throws (1: shapes.NotFound nf)"])
    );
}

#[test]
fn comments_thrift() {
    let document = parse_test_idl("comments.thrift");
    let s = |owned: &[&str]| owned.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    assert_eq!(
        namespaces(&document),
        vec![
            ("rs".into(), "comments".into(), String::new()),
            ("*".into(), "comments.all".into(), String::new()),
        ]
    );
    assert_eq!(
        definition_names(&document),
        vec![
            "Quoting",
            "Numbers",
            "Sep",
            "MIXED_SEPS",
            "MAP_SEPS",
            "Inline",
            "Doc"
        ]
    );

    // Strings: both quote styles, every escape, decoded exactly.
    let quoting = structure(&document, "Quoting");
    assert_eq!(
        quoting.doc.as_deref(),
        Some("Quoting: both quote styles, every escape.")
    );
    let string_default = |name: &str| match &field(&quoting.fields, name).default {
        Some(ConstValue {
            kind: ConstValueKind::Str(text),
            ..
        }) => text.clone(),
        other => panic!("{name}: not a string default: {other:?}"),
    };
    assert_eq!(
        string_default("dq"),
        "tab\there \"quoted\" back\\slash nl\n cr\r apos' e-acute \u{e9} smile \u{1F600}"
    );
    assert_eq!(
        string_default("sq"),
        "single 'quoted' with \"double\" inside"
    );
    assert_eq!(string_default("empty"), "");
    assert_eq!(
        string_default("not_comments"),
        "# not a comment // nor this /* nor this */"
    );
    assert_eq!(string_default("raw_utf8"), "héllo wörld ✓");
    assert_eq!(
        field(&quoting.fields, "dq").doc.as_deref(),
        Some("Double-quoted string with every escape.")
    );
    assert_eq!(
        field(&quoting.fields, "sq").doc.as_deref(),
        Some("Single-quoted string.")
    );
    assert_eq!(field(&quoting.fields, "empty").doc, None);
    // Columns count characters, not bytes: the field after the non-ASCII string.
    assert_eq!(quoting.fields.len(), 5);

    // Numbers and separators.
    let numbers = structure(&document, "Numbers");
    assert_eq!(
        numbers.doc.as_deref(),
        Some(
            "Numbers: hex, signs, exponents; `,` and `;` separators, or none.\n\n  indented line kept"
        )
    );
    assert_eq!(
        fields(&numbers.fields),
        s(&[
            "1: i32 hex = 51966",
            "2: i64 neg_hex = -31",
            "3: double exp = 1000.0",
            "4: double neg_exp = -0.00025",
            "5: double frac = 0.5",
            "6: double plus = 1.25",
            "7: i32 plus_int = 7",
            "8: double big = 6.02e23",
        ])
    );
    assert_eq!(field(&numbers.fields, "neg_exp").span, span(29, 26));

    let sep = enumeration(&document, "Sep");
    assert_eq!(
        enum_values(sep)
            .into_iter()
            .map(|(n, v, _)| (n, v))
            .collect::<Vec<_>>(),
        vec![
            ("A".into(), Some(1)),
            ("B".into(), Some(2)),
            ("C".into(), Some(3)),
            ("D".into(), Some(4)),
        ]
    );
    // `/**/` and `/***/` are empty and carry no documentation.
    assert_eq!(sep.doc, None);
    assert_eq!(
        value(&constant(&document, "MIXED_SEPS").value),
        "[1, 2, 3, 4]"
    );
    assert_eq!(
        value(&constant(&document, "MAP_SEPS").value),
        r#"{"a": "b", "c": "d", "e": "f"}"#
    );

    let inline = structure(&document, "Inline");
    assert_eq!(fields(&inline.fields), s(&["1: i32 x"]));
    assert_eq!(inline.name.span, span(41, 21));
    assert_eq!(inline.fields[0].name.span, span(41, 90));

    let doc_service = service(&document, "Doc");
    assert_eq!(
        doc_service.functions.iter().map(func).collect::<Vec<_>>(),
        s(&[
            "void a()",
            "void b()",
            "oneway void c()",
            "i32 d(1: i32 x, 2: i32 y)"
        ])
    );
    let docs: Vec<Option<&str>> = doc_service
        .functions
        .iter()
        .map(|f| f.doc.as_deref())
        .collect();
    assert_eq!(
        docs,
        vec![
            Some("Line doc on a function\nspanning two lines."),
            None,
            Some("Block doc."),
            None,
        ]
    );
    // A tab counts as one column.
    assert_eq!(function(doc_service, "d").span, span(51, 2));
}

#[test]
fn workspace_echo_idl() {
    let document = parse_path(&workspace_idl_dir().join("echo.thrift"));
    let s = |owned: &[&str]| owned.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    assert_eq!(
        namespaces(&document),
        vec![
            ("rs".into(), "echo".into(), String::new()),
            ("py".into(), "echo".into(), String::new()),
            ("go".into(), "echo".into(), String::new()),
        ]
    );
    assert_eq!(
        definition_names(&document),
        vec![
            "Request",
            "Response",
            "Ano",
            "MyTest",
            "Ids",
            "EchoError",
            "EchoService"
        ]
    );
    for name in ["Request", "Response"] {
        assert_eq!(
            fields(&structure(&document, name).fields),
            s(&["1: required string action", "2: required string msg"])
        );
    }
    assert_eq!(
        fields(&structure(&document, "MyTest").fields),
        s(&["1: i64 num", "2: Ano ano", "3: list<i64> nums"])
    );
    assert_eq!(
        fields(&structure(&document, "Ids").fields),
        s(&[
            "1: list<i32> ids32",
            "2: list<i64> ids64",
            "3: list<double> scores",
            "4: binary blob",
        ])
    );
    let error = structure(&document, "EchoError");
    assert_eq!(error.kind, StructKind::Exception);
    assert_eq!(
        fields(&error.fields),
        s(&["1: i32 code", "2: string message"])
    );
    assert_eq!(
        service(&document, "EchoService")
            .functions
            .iter()
            .map(func)
            .collect::<Vec<_>>(),
        s(&[
            "Response echo(1: Request req)",
            "MyTest echo_test(1: MyTest t)",
            "Ids echo_ids(1: Ids ids)",
            "Response echo_or_fail(1: Request req) throws (1: EchoError err)",
            "oneway void notify(1: string event)",
        ])
    );
}

#[test]
fn workspace_mixed_idl() {
    let document = parse_path(&workspace_idl_dir().join("mixed.thrift"));
    let s = |owned: &[&str]| owned.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    let includes: Vec<&str> = document.includes().map(|i| i.path.as_str()).collect();
    assert_eq!(includes, vec!["echo.thrift"]);
    assert_eq!(document.namespace("rs").unwrap().name.name, "mixed");
    assert_eq!(definition_names(&document), vec!["Mixed"]);
    assert_eq!(
        fields(&structure(&document, "Mixed").fields),
        s(&[
            "1: i64 id",
            "2: string name",
            "3: bool flag",
            "4: byte tiny",
            "5: i16 small",
            "6: i32 count",
            "7: double ratio",
            "8: list<echo.Request> requests",
            "9: map<string, i64> counters",
            "10: set<i32> tags",
            "11: list<string> labels",
            "12: optional binary payload",
            "13: echo.Ids ids",
        ])
    );
}

// ---- smaller grammar points ----------------------------------------------------------------

#[test]
fn empty_and_comment_only_documents() {
    for source in [
        "",
        "\n\n",
        "// nothing\n# here\n/* at all */",
        "/** dangling doc */",
        "\u{feff}",
    ] {
        assert_eq!(
            parse_str(source).unwrap(),
            Document::default(),
            "{source:?}"
        );
    }
}

#[test]
fn spans_carry_the_file_id() {
    let document = parse("struct A {\n  1: i32 x = 5\n}", FileId(7), "a.thrift").unwrap();
    let a = structure(&document, "A");
    let file7 = |line, col| Span {
        file: FileId(7),
        line,
        col,
    };
    assert_eq!(a.span, file7(1, 1));
    assert_eq!(a.name.span, file7(1, 8));
    assert_eq!(a.fields[0].span, file7(2, 3));
    assert_eq!(a.fields[0].ty.span, file7(2, 6));
    assert_eq!(a.fields[0].name.span, file7(2, 10));
    assert_eq!(a.fields[0].default.as_ref().unwrap().span, file7(2, 14));
}

#[test]
fn annotation_keys_may_be_keywords_and_values_are_optional() {
    let document =
        parse_str(r#"struct A {} (optional, struct = "x"; cpp.type = 'y',) typedef i32 T ()"#)
            .unwrap();
    let a = structure(&document, "A");
    assert_eq!(ann(&a.ann), r#"(optional, struct = "x", cpp.type = "y")"#);
    assert_eq!(a.ann[0].span, span(1, 14));
    assert!(typedef(&document, "T").ann.is_empty());
}

#[test]
fn namespace_annotations_and_separators_after_definitions() {
    let document = parse_str(
        "namespace rs a.b (rust.edition = \"2024\");\ninclude \"x.thrift\",\nconst i32 A = 1 (note = \"n\");\ntypedef i32 B,\nstruct C {};\n",
    )
    .unwrap();
    assert_eq!(
        namespaces(&document),
        vec![(
            "rs".into(),
            "a.b".into(),
            r#"(rust.edition = "2024")"#.into()
        )]
    );
    assert_eq!(ann(&constant(&document, "A").ann), r#"(note = "n")"#);
    assert_eq!(definition_names(&document), vec!["A", "B", "C"]);
}

#[test]
fn field_ids_may_be_negative_and_mixed_with_implicit_ones() {
    let document = parse_str("struct A { -1: i32 a, i32 b, 32767: i32 c, 0x10: i32 d }").unwrap();
    let ids: Vec<Option<i64>> = structure(&document, "A")
        .fields
        .iter()
        .map(|f| f.id)
        .collect();
    assert_eq!(ids, vec![Some(-1), None, Some(32767), Some(16)]);
}

#[test]
fn doc_comments_attach_to_the_next_item_only() {
    let source = "/** Old. */\n/** New. */\n// plain\nstruct A {\n  /** Field. */ 1: i32 a\n  /// Dangling.\n}\n/** Enum doc. */ enum E {\n  /// Value doc.\n  X = 1\n}\n";
    let document = parse_str(source).unwrap();
    let a = structure(&document, "A");
    assert_eq!(a.doc.as_deref(), Some("New."));
    assert_eq!(a.fields[0].doc.as_deref(), Some("Field."));
    let e = enumeration(&document, "E");
    assert_eq!(e.doc.as_deref(), Some("Enum doc."));
    assert_eq!(e.values[0].doc.as_deref(), Some("Value doc."));
    assert_eq!(definition(&document, "E").doc(), Some("Enum doc."));
}

#[test]
fn definition_accessors() {
    let document = parse_test_idl("base.thrift");
    let status = definition(&document, "Status");
    assert_eq!(status.span(), span(15, 1));
    assert_eq!(
        status.doc(),
        Some("Lifecycle of a job; every value is explicit.")
    );
    assert_eq!(status.annotations().len(), 1);
    assert_eq!(StructKind::Exception.as_str(), "exception");
    assert_eq!(BaseType::Uuid.as_str(), "uuid");
}

#[test]
fn nesting_limit_is_exact() {
    let nested_type = |depth: usize| {
        format!(
            "typedef {}i32{} T",
            "list<".repeat(depth),
            ">".repeat(depth)
        )
    };
    let nested_const = |depth: usize| {
        format!(
            "const list<i32> X = {}{}",
            "[".repeat(depth),
            "]".repeat(depth)
        )
    };
    let nested_map = |depth: usize| {
        format!(
            "const map<i32, i32> X = {}1{}",
            "{1: ".repeat(depth),
            "}".repeat(depth)
        )
    };
    assert!(parse_str(&nested_type(MAX_NESTING)).is_ok());
    assert!(parse_str(&nested_const(MAX_NESTING)).is_ok());
    assert!(parse_str(&nested_map(MAX_NESTING)).is_ok());
    for source in [
        nested_type(MAX_NESTING + 1),
        nested_const(MAX_NESTING + 1),
        nested_map(MAX_NESTING + 1),
        nested_const(100_000),
        nested_type(100_000),
    ] {
        let e = parse_str(&source).unwrap_err();
        assert_eq!(e.kind(), &ParseErrorKind::TooDeep(MAX_NESTING));
    }
}

#[test]
fn error_accessors() {
    let e = parse("struct A {\n  1: i32 a\n  2: }", FileId(3), "dir/x.thrift").unwrap_err();
    assert_eq!(e.file_name(), "dir/x.thrift");
    assert_eq!((e.line(), e.col()), (3, 6));
    assert_eq!(
        e.kind(),
        &ParseErrorKind::Unexpected {
            found: "'}'".into(),
            expected: "a field type".into(),
        }
    );
    assert_eq!(
        e.to_string(),
        "dir/x.thrift:3:6: found '}', expected a field type"
    );
}

#[test]
fn long_tokens_are_shortened_in_messages() {
    let name = "a".repeat(100);
    assert_eq!(
        parse_err(&format!("namespace rs a {name}")),
        format!(
            "t.thrift:1:16: found '{}...', expected a header or definition",
            "a".repeat(37)
        )
    );
    assert_eq!(
        parse_err(&format!("struct A {{ 1: i32 \"{name}\" }}")),
        format!(
            "t.thrift:1:19: found string literal \"{}..., expected a field name",
            "a".repeat(36)
        )
    );
}

// ---- rejected inputs ---------------------------------------------------------------------

#[test]
fn rejected_files_fail_with_the_expected_message() {
    let dir = manifest_dir().join("tests").join("rejected");
    let files = thrift_files(&dir);
    assert!(
        files.len() >= 15,
        "only {} rejected cases in {}",
        files.len(),
        dir.display()
    );
    let mut failures = String::new();
    for path in &files {
        let expected_path = path.with_extension("err");
        let expected = read(&expected_path);
        let expected = expected.trim_end_matches(['\n', '\r']);
        let name = file_name(path);
        match parse(&read(path), FileId(0), &name) {
            Ok(_) => writeln!(failures, "{name}: parsed, expected `{expected}`").unwrap(),
            Err(e) if e.to_string() == expected => {}
            Err(e) => writeln!(
                failures,
                "{name}:\n  expected `{expected}`\n  got      `{e}`"
            )
            .unwrap(),
        }
    }
    // Every .err file has its .thrift twin.
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "err") {
            assert!(
                path.with_extension("thrift").exists(),
                "{} has no .thrift twin",
                path.display()
            );
        }
    }
    assert!(failures.is_empty(), "{failures}");
}

// ---- robustness ----------------------------------------------------------------------------

#[test]
fn every_prefix_of_every_valid_idl_parses_or_fails_without_panicking() {
    for path in valid_idls() {
        let source = read(&path);
        let name = file_name(&path);
        assert!(parse(&source, FileId(0), &name).is_ok(), "{name}");
        for (end, _) in source.char_indices() {
            // Ok or Err are both fine; a panic fails the test.
            let _ = parse(&source[..end], FileId(0), &name);
        }
    }
}

#[test]
fn deleting_or_replacing_any_character_never_panics() {
    for path in valid_idls() {
        let source = read(&path);
        let name = file_name(&path);
        let replacements = ["\"", "{", "<", "0x", "/*", "-", "[", "\\u"];
        for (i, (start, c)) in source.char_indices().enumerate() {
            let end = start + c.len_utf8();
            let deleted = format!("{}{}", &source[..start], &source[end..]);
            let _ = parse(&deleted, FileId(0), &name);
            // One replacement per position, in turn, keeps the test quick.
            let replacement = replacements[i % replacements.len()];
            let replaced = format!("{}{replacement}{}", &source[..start], &source[end..]);
            let _ = parse(&replaced, FileId(0), &name);
        }
    }
}

/// A 10,000+ line IDL: enums, hundreds of structs with ten fields each, constants and
/// services with many methods.
fn generated_idl() -> String {
    let mut idl = String::from("namespace rs big\ninclude \"base.thrift\"\n\n");
    for e in 0..40 {
        writeln!(idl, "/** Enum {e}. */\nenum Enum{e} {{").unwrap();
        for v in 0..8 {
            writeln!(idl, "    E{e}_V{v} = {v},").unwrap();
        }
        idl.push_str("}\n\n");
    }
    for s in 0..450 {
        writeln!(idl, "/** Struct {s}. */\nstruct S{s} {{").unwrap();
        writeln!(idl, "    1: required i64 id,").unwrap();
        writeln!(idl, "    2: optional string name = \"s{s}\",").unwrap();
        writeln!(idl, "    3: list<i32> values = [1, 2, 3],").unwrap();
        writeln!(idl, "    4: map<string, list<double>> series,").unwrap();
        writeln!(idl, "    5: set<Enum{}> flags,", s % 40).unwrap();
        writeln!(idl, "    6: S{} previous,", s.max(1) - 1).unwrap();
        writeln!(idl, "    7: base.Timestamp at (rust.type = \"u64\"),").unwrap();
        writeln!(idl, "    8: binary payload,").unwrap();
        writeln!(idl, "    9: bool active = true,").unwrap();
        writeln!(idl, "    10: double ratio = 0.5,").unwrap();
        idl.push_str("}\n\n");
    }
    for c in 0..200 {
        writeln!(
            idl,
            "const map<string, list<i32>> C{c} = {{\"k{c}\": [{c}, -{c}, 0x{c:x}]}}"
        )
        .unwrap();
    }
    idl.push('\n');
    for v in 0..20 {
        writeln!(idl, "service Svc{v} {{").unwrap();
        for m in 0..200 {
            let s = (v * 200 + m) % 450;
            writeln!(
                idl,
                "    S{s} call{m}(1: S{s} req, 2: i32 flags) throws (1: base.Point err),"
            )
            .unwrap();
        }
        idl.push_str("}\n\n");
    }
    idl
}

#[test]
fn a_large_generated_idl_parses() {
    let idl = generated_idl();
    let lines = idl.lines().count();
    assert!(lines >= 10_000, "only {lines} lines");
    let document = parse(&idl, FileId(0), "big.thrift").unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(document.headers.len(), 2);
    assert_eq!(document.definitions.len(), 40 + 450 + 200 + 20);
    let structs: Vec<&StructLike> = document
        .definitions
        .iter()
        .filter_map(|d| match d {
            Definition::Struct(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(structs.len(), 450);
    assert!(structs.iter().all(|s| s.fields.len() == 10));
    let last = structure(&document, "S449");
    assert_eq!(last.doc.as_deref(), Some("Struct 449."));
    assert_eq!(fld(&last.fields[5]), "6: S448 previous");
    assert_eq!(
        value(&constant(&document, "C199").value),
        r#"{"k199": [199, -199, 199]}"#
    );
    let services: Vec<&Service> = document
        .definitions
        .iter()
        .filter_map(|d| match d {
            Definition::Service(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(services.len(), 20);
    assert!(services.iter().all(|s| s.functions.len() == 200));
    let last_service = service(&document, "Svc19");
    // The file ends with the service's `}` and a blank line.
    let last_line = u32::try_from(lines).unwrap() - 2;
    assert_eq!(
        last_service.functions[199].span.line, last_line,
        "positions stay exact at the end of a long file"
    );
}

#[test]
fn apache_thrift_leniencies_parse() {
    // What Apache Thrift 0.25's grammar takes that the stricter reading refused: the
    // `&` reference marker, keywords as field names, `true`/`false` as integers,
    // `async`, the XSD options, and `cpp_type` before a list's `<`.
    let doc = parse_str(
        "struct Node xsd_all {\n\
         \x20 10: Node & next\n\
         \x20 2: i8 i8, 3: string required, 4: list<i32> list, 5: binary async\n\
         \x20 true: i32 one xsd_optional xsd_nillable xsd_attrs { 1: i32 attr }\n\
         \x20 7: list cpp_type \"std::deque\" <i32> deque\n\
         \x20 8: i32 senum\n\
         }\n\
         enum E { A = true, B = false }\n\
         service S { async void fire(1: Node service) }\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let node = structure(&doc, "Node");
    let names: Vec<&str> = node.fields.iter().map(|f| f.name.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "next", "i8", "required", "list", "async", "one", "deque", "senum"
        ]
    );
    assert!(node.fields[0].reference && !node.fields[1].reference);
    assert_eq!(node.fields[5].id, Some(1));
    assert_eq!(ann(&node.fields[6].ty.ann), r#"(cpp_type = "std::deque")"#);
    let values: Vec<Option<i64>> = enumeration(&doc, "E")
        .values
        .iter()
        .map(|v| v.value)
        .collect();
    assert_eq!(values, [Some(1), Some(0)]);
    let fire = function(service(&doc, "S"), "fire");
    assert!(fire.oneway);
    assert_eq!(fire.args[0].name.name, "service");
    // `true` is no field name, and a deprecated word still starts no definition.
    assert!(parse_err("struct A { 1: i32 true }").contains("found 'true', expected a field name"));
    assert!(parse_err("senum E { }").contains("'senum' is deprecated"));
}
