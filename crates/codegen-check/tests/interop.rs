//! Cross-implementation test vectors for codegen's test IDLs against Apache Thrift.
//!
//! `interop/apache_idls.py` compiles `crates/codegen/tests/idl/*.thrift` with
//! `thrift --gen py` (after a few wire-neutral patches Apache's 0.17 compiler needs; see
//! the script), builds a fixed set of values of a representative set of the generated
//! structs, unions, exceptions and service argument/result structs, and encodes them with
//! Apache's Binary (strict) and Compact protocols. This test builds the same values by
//! case name ([`case`]) from our generated types (`codegen_check::test_idls`) and checks,
//! in both protocols:
//!
//! 1. Apache → ours: our generated code decodes Apache's bytes to the expected value and,
//!    where the bytes are canonical (`exact`), re-encodes them byte for byte.
//! 2. ours → Apache: the test writes its own encodings to a file and runs
//!    `apache_idls.py check`, which decodes them with Apache's pure-Python protocols,
//!    compares them with its values and, where exact, with its own encodings.
//!
//! Needs the Apache Thrift compiler (`thrift`, or `$THRIFT`) and `python3` (or `$PYTHON`)
//! with the `thrift` module (0.19 or later, for `uuid`). Without them the test is
//! skipped, unless `CI` is set, in which case it fails.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Debug;

use codegen_check::test_idls::{base, comments, includes, services, shapes};
use thrift_wire::bytes::Bytes;
use thrift_wire::{Binary, Codec, Compact, LinkBuffer, Message, Protocol, Utf8Bytes};

#[path = "../../../interop/harness.rs"]
mod harness;
use harness::*;

// ---------------------------------------------------------------------------------------
// The cases, mirrored from interop/apache_idls.py.

/// Every case `apache_idls.py` defines, in its order.
const CASES: &[&str] = &[
    "point_basic",
    "point_defaults",
    "range_basic",
    "rect_required_only",
    "rect_full",
    "rect_absent_defaults",
    "circle_basic",
    "circle_default",
    "shape_rect",
    "shape_circle",
    "shape_group",
    "tree_node_nested",
    "tree_node_leaf",
    "linked_list_3",
    "not_found_basic",
    "not_found_custom",
    "invalid_fields",
    "invalid_reason_only",
    "keywords_all",
    "keywords_no_result",
    "no_ids_flag",
    "no_ids_no_flag",
    "annotated_full",
    "annotated_empty",
    "event_full",
    "event_unknown_enum",
    "quoting_defaults",
    "numbers_defaults",
    "numbers_custom",
    "inline_basic",
    "doc_d_args",
    "store_get_args",
    "store_get_result_success",
    "store_get_result_nf",
    "store_get_result_bad",
    "store_put_args",
    "store_exists_args",
    "store_exists_result",
    "store_stats_result",
    "events_since_result",
    "events_since_result_nf",
];

const UUID: [u8; 16] = [
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff,
];

/// A value of some generated type, checked against Apache's bytes.
trait Value: Debug {
    /// Decodes `bytes`, compares with `self`, re-encodes when `exact`.
    fn check(&self, protocol: &str, bytes: &[u8], exact: bool) -> Result<(), String>;
    /// Our encoding in `protocol`.
    fn encode(&self, protocol: &str) -> Vec<u8>;
}

#[derive(Debug)]
struct V<T>(T);

fn encode_with<P: Protocol, M: Message>(m: &M) -> Vec<u8> {
    let codec = Codec::<P>::new();
    let mut buf = LinkBuffer::new();
    let n = codec.encode(m, &mut buf).expect("encodes");
    assert_eq!(n, codec.size(m), "size() is exact");
    buf.next(n).to_vec()
}

fn check_with<P: Protocol, M: Message + PartialEq + Debug>(
    want: &M,
    bytes: &[u8],
    exact: bool,
) -> Result<(), String> {
    let got: M = Codec::<P>::new()
        .decode(Bytes::copy_from_slice(bytes))
        .map_err(|e| format!("our generated code failed to decode it: {e}"))?;
    if &got != want {
        return Err(format!("decoded\n  {got:?}\nexpected\n  {want:?}"));
    }
    if exact {
        let ours = encode_with::<P, M>(want);
        if ours != bytes {
            return Err(format!("re-encoding differs: {}", hex_diff(bytes, &ours)));
        }
    }
    Ok(())
}

impl<T: Message + PartialEq + Debug> Value for V<T> {
    fn check(&self, protocol: &str, bytes: &[u8], exact: bool) -> Result<(), String> {
        match protocol {
            "binary" => check_with::<Binary, T>(&self.0, bytes, exact),
            "compact" => check_with::<Compact, T>(&self.0, bytes, exact),
            other => Err(format!("unknown protocol {other:?}")),
        }
    }

    fn encode(&self, protocol: &str) -> Vec<u8> {
        match protocol {
            "binary" => encode_with::<Binary, T>(&self.0),
            _ => encode_with::<Compact, T>(&self.0),
        }
    }
}

fn text(s: &str) -> Utf8Bytes {
    Utf8Bytes::from(s.to_string())
}

fn texts(items: &[&str]) -> Vec<Utf8Bytes> {
    items.iter().map(|s| text(s)).collect()
}

fn point(x: i32, y: i32) -> base::Point {
    base::Point { x, y }
}

fn rect(width: i32, height: i32) -> shapes::Rect {
    shapes::Rect {
        width,
        height,
        ..shapes::Rect::default()
    }
}

fn circle(radius: f64) -> shapes::Circle {
    shapes::Circle { radius }
}

fn leaf(value: i64) -> shapes::TreeNode {
    shapes::TreeNode {
        value,
        children: vec![],
        parent: None,
    }
}

fn not_found(key: &str, code: i32) -> shapes::NotFound {
    shapes::NotFound {
        key: text(key),
        code,
    }
}

fn event(
    at: i64,
    status: i32,
    marks: BTreeMap<base::Color, Vec<base::Point>>,
    shape: shapes::Shape,
    ids: Vec<i32>,
) -> includes::Event {
    includes::Event {
        at,
        status: base::Status(status),
        marks,
        shape,
        ids,
    }
}

/// The value of case `name` and its type label, as `apache_idls.py` reports it.
fn case(name: &str) -> Option<(&'static str, Box<dyn Value>)> {
    use shapes::Shape;
    fn v<T: Message + PartialEq + Debug + 'static>(
        label: &'static str,
        t: T,
    ) -> Option<(&'static str, Box<dyn Value>)> {
        Some((label, Box::new(V(t))))
    }
    match name {
        "point_basic" => v("base.Point", point(1, -2)),
        "point_defaults" => v("base.Point", base::Point::default()),
        "range_basic" => v(
            "base.Range",
            base::Range {
                lo: point(-5, -6),
                hi: point(i32::MAX, i32::MIN),
            },
        ),

        "rect_required_only" => v("shapes.Rect", rect(3, 4)),
        "rect_full" => v(
            "shapes.Rect",
            shapes::Rect {
                width: i32::MAX,
                height: i32::MIN,
                label: Some(text("label-é")),
                scale: -0.0,
                visible: false,
                tags: texts(&["b", "a", ""]),
                props: BTreeMap::from([(text("z"), 1), (text("a"), -1), (text("é"), 2)]),
                thumbnail: Some(Bytes::from_static(b"\x00\xff\x80thumb")),
                layer: -128,
                z: i16::MIN,
                flags: 127,
                id: UUID,
                kind: text(""),
                created_at: i64::MIN,
            },
        ),
        "rect_absent_defaults" => v("shapes.Rect", rect(1, 2)),

        "circle_basic" => v("shapes.Circle", circle(2.25)),
        "circle_default" => v("shapes.Circle", shapes::Circle::default()),

        "shape_rect" => v(
            "shapes.Shape",
            Shape::Rect(shapes::Rect {
                label: Some(text("r")),
                ..rect(5, 6)
            }),
        ),
        "shape_circle" => v("shapes.Shape", Shape::Circle(circle(1.5))),
        "shape_group" => v(
            "shapes.Shape",
            Shape::Group(vec![
                Shape::Circle(circle(0.5)),
                Shape::Group(vec![]),
                Shape::Group(vec![Shape::Rect(rect(1, 1))]),
            ]),
        ),

        "tree_node_nested" => v(
            "shapes.TreeNode",
            shapes::TreeNode {
                value: 1,
                children: vec![
                    leaf(2),
                    shapes::TreeNode {
                        value: 3,
                        children: vec![leaf(4), leaf(-5)],
                        parent: None,
                    },
                ],
                parent: Some(Box::new(shapes::TreeNode {
                    value: 0,
                    children: vec![],
                    parent: Some(Box::new(leaf(i64::MAX))),
                })),
            },
        ),
        "tree_node_leaf" => v("shapes.TreeNode", leaf(i64::MIN)),
        "linked_list_3" => v(
            "shapes.LinkedList",
            shapes::LinkedList {
                head: 1,
                tail: Some(Box::new(shapes::LinkedList {
                    head: 2,
                    tail: Some(Box::new(shapes::LinkedList {
                        head: 3,
                        tail: None,
                    })),
                })),
            },
        ),

        "not_found_basic" => v("shapes.NotFound", not_found("missing", 404)),
        "not_found_custom" => v("shapes.NotFound", not_found("", -1)),
        "invalid_fields" => v(
            "shapes.Invalid",
            shapes::Invalid {
                reason: text("bad"),
                fields: Some(texts(&["a", "b"])),
            },
        ),
        "invalid_reason_only" => v(
            "shapes.Invalid",
            shapes::Invalid {
                reason: text("why"),
                fields: None,
            },
        ),

        "keywords_all" => v(
            "shapes.Keywords",
            shapes::Keywords {
                r#type: text("t"),
                r#match: 7,
                r#async: true,
                self_: text("me"),
                result: Some(text("ok")),
                r#fn: shapes::Empty {},
            },
        ),
        "keywords_no_result" => v(
            "shapes.Keywords",
            shapes::Keywords {
                r#type: text(""),
                r#match: -1,
                r#async: false,
                self_: text(""),
                result: None,
                r#fn: shapes::Empty {},
            },
        ),

        "no_ids_flag" => v(
            "shapes.NoIds",
            shapes::NoIds {
                name: text("n"),
                count: 3,
                flag: Some(true),
            },
        ),
        "no_ids_no_flag" => v(
            "shapes.NoIds",
            shapes::NoIds {
                name: text(""),
                count: -3,
                flag: None,
            },
        ),

        "annotated_full" => v(
            "shapes.Annotated",
            shapes::Annotated {
                ids: vec![3, 1, 2],
                names: BTreeSet::from([text("b"), text("a"), text("é")]),
                index: BTreeMap::from([(2, text("two")), (-1, text("minus one"))]),
                small: text("s"),
                ts: 1 << 40,
                legacy_map: BTreeMap::from([(1, 10), (0, 0)]),
                legacy_set: BTreeSet::from([5, -5]),
                legacy_list: vec![9, 8],
                deep: vec![
                    BTreeMap::from([
                        (text("x"), BTreeSet::from([3, 1])),
                        (text("a"), BTreeSet::new()),
                    ]),
                    BTreeMap::new(),
                ],
            },
        ),
        "annotated_empty" => v("shapes.Annotated", shapes::Annotated::default()),

        "event_full" => v(
            "includes.Event",
            event(
                1_700_000_000_000,
                1,
                BTreeMap::from([
                    (base::Color(2), vec![]),
                    (base::Color(0), vec![point(1, 2), point(0, 0)]),
                ]),
                Shape::Circle(circle(3.0)),
                vec![2, 3, 5],
            ),
        ),
        "event_unknown_enum" => v(
            "includes.Event",
            event(-1, 7, BTreeMap::new(), Shape::Group(vec![]), vec![]),
        ),

        "quoting_defaults" => v("comments.Quoting", comments::Quoting::default()),
        "numbers_defaults" => v("comments.Numbers", comments::Numbers::default()),
        "numbers_custom" => v(
            "comments.Numbers",
            comments::Numbers {
                hex: -1,
                neg_hex: i64::MAX,
                exp: -0.0,
                neg_exp: 1e-300,
                frac: f64::INFINITY,
                plus: -1.5,
                plus_int: i32::MIN,
                big: 5e-324,
            },
        ),
        "inline_basic" => v("comments.Inline", comments::Inline { x: 42 }),
        "doc_d_args" => v("comments.Doc.d_args", comments::DocDArgs { x: 1, y: 2 }),

        "store_get_args" => v(
            "services.Store.get_args",
            services::StoreGetArgs { key: text("k") },
        ),
        "store_get_result_success" => v(
            "services.Store.get_result",
            services::StoreGetResult {
                success: Some(Shape::Circle(circle(0.25))),
                nf: None,
                bad: None,
            },
        ),
        "store_get_result_nf" => v(
            "services.Store.get_result",
            services::StoreGetResult {
                success: None,
                nf: Some(not_found("k", 404)),
                bad: None,
            },
        ),
        "store_get_result_bad" => v(
            "services.Store.get_result",
            services::StoreGetResult {
                success: None,
                nf: None,
                bad: Some(shapes::Invalid {
                    reason: text("no"),
                    fields: Some(vec![]),
                }),
            },
        ),
        "store_put_args" => v(
            "services.Store.put_args",
            services::StorePutArgs {
                key: text("k"),
                value: Shape::Rect(rect(2, 3)),
            },
        ),
        "store_exists_args" => v(
            "services.Store.exists_args",
            services::StoreExistsArgs { key: text("key") },
        ),
        "store_exists_result" => v(
            "services.Store.exists_result",
            services::StoreExistsResult {
                success: Some(false),
            },
        ),
        "store_stats_result" => v(
            "services.Store.stats_result",
            services::StoreStatsResult {
                success: Some(BTreeMap::from([(text("b"), 2), (text("a"), i64::MIN)])),
            },
        ),
        "events_since_result" => v(
            "includes.Events.since_result",
            includes::EventsSinceResult {
                success: Some(vec![event(
                    5,
                    0x10,
                    BTreeMap::new(),
                    Shape::Circle(shapes::Circle::default()),
                    vec![],
                )]),
                nf: None,
            },
        ),
        "events_since_result_nf" => v(
            "includes.Events.since_result",
            includes::EventsSinceResult {
                success: None,
                nf: Some(not_found("since", 1)),
            },
        ),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------
// The test.

fn check_apache_line(line: &str, seen: &mut HashSet<(String, String)>) -> Result<(), String> {
    let obj = parse_json_line(line)?;
    let name = get_str(&obj, "case")?;
    let protocol = get_str(&obj, "protocol")?;
    let exact = get_bool(&obj, "exact")?;
    let bytes = unhex(get_str(&obj, "hex")?)?;
    let (label, value) =
        case(name).ok_or("a case tests/interop.rs does not know: add it to `case`")?;
    let got_label = get_str(&obj, "type")?;
    if label != got_label {
        return Err(format!(
            "type: expected {label}, apache_idls.py says {got_label}"
        ));
    }
    if get_str(&obj, "expect")? != "ok" {
        return Err("only \"expect\": \"ok\" is supported".into());
    }
    if !seen.insert((name.to_string(), protocol.to_string())) {
        return Err("duplicate".into());
    }
    value.check(protocol, &bytes, exact)
}

#[test]
fn apache_thrift_interop_test_idls() {
    for name in CASES {
        assert!(
            case(name).is_some(),
            "CASES lists {name} but `case` lacks it"
        );
    }
    run_interop(
        "apache_idls.py",
        "codegen-check",
        CASES,
        check_apache_line,
        |name, protocol| Some(case(name)?.1.encode(protocol)),
    );
}
