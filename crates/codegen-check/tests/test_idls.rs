//! The grammar-covering test IDLs of codegen, generated and used: defaults, unions,
//! recursion, keyword names, implicit ids, enums with unknown values, constants,
//! exceptions and service args/results.

use codegen_check::test_idls::{base, services, shapes};
use thrift_wire::{Binary, Codec, DecodeErrorKind};

mod util;
use util::{encode, round_trip};

#[test]
fn idl_defaults_are_the_rust_defaults() {
    let r = shapes::Rect::default();
    assert_eq!(r.scale, 1.0);
    assert!(r.visible);
    assert_eq!(r.layer, -1);
    assert_eq!(r.flags, 0x0f);
    assert_eq!(&*r.kind, "rect");
    assert_eq!(r.label, None);
    assert_eq!(shapes::Circle::default().radius, 0.5);
    assert_eq!(shapes::NotFound::default().code, 404);
    round_trip(&r);
}

#[test]
fn a_missing_required_field_fails_with_its_path() {
    let empty = encode::<Binary, _>(&shapes::Empty {});
    let err = Codec::<Binary>::new()
        .decode::<shapes::Rect>(empty)
        .unwrap_err();
    assert_eq!(err.kind(), &DecodeErrorKind::MissingRequiredField);
    assert_eq!(err.path(), "Rect.width");
}

#[test]
fn unions_hold_exactly_one_variant() {
    let shapes_to_try = [
        shapes::Shape::Rect(shapes::Rect {
            width: 3,
            height: 4,
            ..Default::default()
        }),
        shapes::Shape::Circle(shapes::Circle { radius: 2.0 }),
        shapes::Shape::Group(vec![
            shapes::Shape::Circle(shapes::Circle::default()),
            shapes::Shape::Group(vec![]),
        ]),
    ];
    for s in &shapes_to_try {
        round_trip(s);
    }
    let empty = encode::<Binary, _>(&shapes::Empty {});
    let err = Codec::<Binary>::new()
        .decode::<shapes::Shape>(empty)
        .unwrap_err();
    assert_eq!(err.kind(), &DecodeErrorKind::InvalidUnion(0));
}

#[test]
fn recursive_structs_are_boxed_and_round_trip() {
    let leaf = shapes::TreeNode {
        value: 2,
        children: vec![],
        parent: None,
    };
    let tree = shapes::TreeNode {
        value: 1,
        children: vec![leaf.clone(), leaf],
        parent: Some(Box::new(shapes::TreeNode::default())),
    };
    round_trip(&tree);
    let list = shapes::LinkedList {
        head: 1,
        tail: Some(Box::new(shapes::LinkedList {
            head: 2,
            tail: None,
        })),
    };
    round_trip(&list);
}

#[test]
fn mutually_recursive_structs_box_each_other_in_fields_and_consts() {
    let expected = shapes::Ping {
        n: 1,
        pong: Some(Box::new(shapes::Pong {
            n: 2,
            ping: Some(Box::new(shapes::Ping { n: 3, pong: None })),
        })),
    };
    assert_eq!(*shapes::PING_PONG, expected);
    round_trip(&expected);
}

#[test]
fn keyword_and_prelude_names_are_escaped() {
    let k = shapes::Keywords {
        r#type: "t".to_string().into(),
        r#match: 7,
        r#async: true,
        self_: "s".to_string().into(),
        result: Some("r".to_string().into()),
        r#fn: shapes::Empty {},
    };
    round_trip(&k);
}

#[test]
fn fields_without_ids_count_down_from_minus_one() {
    let v = shapes::NoIds {
        name: "n".to_string().into(),
        count: 5,
        flag: Some(true),
    };
    let bytes = encode::<Binary, _>(&v);
    // Fields go out in ascending id order, as Apache Thrift writes them: the first
    // header is the bool `flag` (type 2) with id -3.
    assert_eq!(&bytes[..3], &[2, 0xff, 0xfd]);
    round_trip(&v);
}

#[test]
fn enums_keep_values_the_idl_does_not_name() {
    assert_eq!(base::Status::INACTIVE.0, 16);
    assert_eq!(base::Color::BLUE.0, 2);
    assert_eq!(base::Offset::ON_TIME.0, 0);
    assert_eq!(base::Status(99).name(), None);
    assert_eq!(format!("{:?}", base::Status(99)), "Status(99)");
    assert_eq!(format!("{:?}", base::Status::ACTIVE), "ACTIVE");
}

#[test]
fn constants_resolve_references() {
    assert_eq!(base::LIMIT, base::MAX_ITEMS);
    assert_eq!(base::DEFAULT_STATUS, base::Status::ACTIVE);
    assert_eq!(*base::PRIMES, vec![2, 3, 5, 7, 11]);
    assert_eq!(base::UNIT.hi.y, base::MAX_ITEMS);
    assert_eq!(base::WEIGHTS.get("high"), Some(&1000));
    assert_eq!(base::MIN_I64, i64::MIN);
    assert_eq!(&base::MAGIC[..], b"THRIFT");
}

#[test]
fn exceptions_are_errors() {
    let e = shapes::NotFound {
        key: "k".to_string().into(),
        code: 404,
    };
    let as_error: &dyn std::error::Error = &e;
    assert!(as_error.to_string().contains("404"));
    round_trip(&e);
}

#[test]
fn service_results_carry_success_or_a_declared_exception() {
    // Every method of the test services gets args and (unless oneway) result structs.
    let _ = services::StorePutArgs::default();
    let r = services::StoreGetResult::default();
    round_trip(&r);
}
