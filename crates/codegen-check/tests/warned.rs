//! codegen's `tests/warned` IDLs (what Apache Thrift accepts but loses meaning, or its
//! representation, in Rust), generated and used: they read as Apache reads them.

use std::collections::BTreeSet;

use codegen_check::warned::{
    const_out_of_range, duplicate_field_name, enum_value_of_other_enum, field_id_too_big,
    lenient_constants, nonpositive_field_ids, required_cycles,
    struct_with_double_in_set as doubles,
};
use thrift_wire::Binary;

mod util;
use util::{encode, round_trip};

#[test]
fn constants_read_as_apache_reads_them() {
    assert_eq!(const_out_of_range::X, 44); // 300 in an i8
    assert_eq!([lenient_constants::B, lenient_constants::F], [true, false]); // 2, -1
    assert_eq!(lenient_constants::T, 1); // true
    assert_eq!(lenient_constants::D, 1.0); // true
    assert!(lenient_constants::S.is_empty()); // {1: 2} for a set
    assert!(lenient_constants::M.is_empty()); // [1] for a map
    assert!(lenient_constants::L.is_empty()); // {} for a list
}

#[test]
fn field_ids_read_as_apache_numbers_them() {
    // `40000: i32 a` goes on the wire as 40000's low 16 bits, -25536 (0x9c40).
    let bytes = encode::<Binary, _>(&field_id_too_big::A { a: 7 });
    assert_eq!(&bytes[..3], [8, 0x9c, 0x40]);
    // `0: zero`, `-5: minus`, `3: three`: the first two are numbered -1 and -2, and go
    // first, in id order.
    let v = nonpositive_field_ids::A {
        zero: 1,
        minus: 2,
        three: 3,
    };
    let bytes = encode::<Binary, _>(&v);
    #[rustfmt::skip]
    assert_eq!(&bytes[..], [
        8, 0xff, 0xfe, 0, 0, 0, 2, // -2: minus
        8, 0xff, 0xff, 0, 0, 0, 1, // -1: zero
        8, 0, 3, 0, 0, 0, 3, // 3: three
        0,
    ]);
    round_trip(&v);
}

#[test]
fn a_struct_holding_a_double_can_be_a_set_element() {
    // `set<Point>` where Point holds a double: its double is an OrderedF64.
    let point = |x: f64| doubles::Point {
        x: doubles::OrderedF64(x),
    };
    let a = doubles::A {
        s: BTreeSet::from([point(f64::NAN), point(1.5), point(-0.0), point(1.5)]),
    };
    assert_eq!(a.s.len(), 3);
    round_trip(&a);
}

#[test]
fn a_default_naming_another_enums_value_means_the_fields_enum() {
    use enum_value_of_other_enum::{Fruit, Orchard, Tree};
    // `1: Tree tree = Fruit.PEAR`: PEAR of Tree (7), not of Fruit (2).
    let o = Orchard::default();
    assert_eq!((o.tree, o.tree.0), (Tree::PEAR, 7));
    assert_eq!(o.fruit, Fruit::PEAR);
    round_trip(&o);
}

#[test]
fn fields_that_would_never_end_are_optional_and_cycles_boxed() {
    use required_cycles::{Bag, Chain, Coil, Left, Right};
    // `1: Chain & next` holds itself: optional, so a chain ends.
    let chain = Chain {
        next: Some(Box::new(Chain {
            next: None,
            value: 2,
        })),
        value: 1,
    };
    round_trip(&chain);
    assert_eq!(Chain::default().next, None);
    // Left and Right hold each other: the first is optional, the second stays present.
    round_trip(&Left {
        right: Some(Box::new(Right {
            left: Box::new(Left::default()),
        })),
    });
    assert_eq!(
        &encode::<Binary, _>(&Right::default())[..],
        [12, 0, 1, 0, 0]
    );
    round_trip(&Bag {
        items: vec![Bag { items: vec![] }],
    });
    // No Spiral ends, so a Coil holds none and writes only its turns.
    let coil = Coil {
        spiral: None,
        turns: 3,
    };
    assert_eq!(&encode::<Binary, _>(&coil)[..], [8, 0, 2, 0, 0, 0, 3, 0]);
    round_trip(&coil);
}

#[test]
fn field_names_rust_spells_alike_are_numbered_and_keep_their_ids() {
    // `flag` and `Flag` (ids 1 and 2): the second is `flag_2`.
    let b = duplicate_field_name::B {
        flag: false,
        flag_2: true,
    };
    assert_eq!(&encode::<Binary, _>(&b)[..], [2, 0, 1, 0, 2, 0, 2, 1, 0]);
    round_trip(&b);
}
