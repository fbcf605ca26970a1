//! codegen's `tests/idl/corners.thrift`, generated and used: Thrift's type names as
//! field names, uuid constants written as strings, doubles in sets and map keys, `{}`
//! as an empty set, enum names that share a value, typedefs of typedefs, containers
//! inside each other, and two versions of a struct reading each other's bytes.

use std::collections::{BTreeMap, BTreeSet};

use codegen_check::test_idls::corners;
use thrift_wire::bytes::Bytes;
use thrift_wire::{Binary, Codec, Compact, Utf8Bytes};

mod util;
use util::{encode, round_trip};

fn text(s: &str) -> Utf8Bytes {
    Utf8Bytes::from(s.to_string())
}

#[test]
fn fields_named_after_types_put_their_ids_and_types_on_the_wire() {
    let v = corners::TypeNames {
        i8: -1,
        i16: 2,
        i32: 3,
        i64: 4,
        uuid: [0xab; 16],
        string: text("s"),
        binary: Bytes::from_static(b"\x00"),
        bool: true,
        byte: 5,
        list: vec![6],
        set: BTreeSet::new(),
        map: BTreeMap::from([(text("k"), false)]),
    };
    #[rustfmt::skip]
    let mut expected: Vec<u8> = vec![
        3, 0, 1, 0xff, // 1: i8
        6, 0, 2, 0, 2, // 2: i16
        8, 0, 3, 0, 0, 0, 3, // 3: i32
        10, 0, 4, 0, 0, 0, 0, 0, 0, 0, 4, // 4: i64
        16, 0, 5, // 5: uuid, then its 16 bytes
    ];
    expected.extend([0xab; 16]);
    #[rustfmt::skip]
    expected.extend([
        11, 0, 6, 0, 0, 0, 1, b's', // 6: string
        11, 0, 7, 0, 0, 0, 1, 0, // 7: binary
        2, 0, 8, 1, // 8: bool
        3, 0, 9, 5, // 9: byte, an i8
        15, 0, 10, 3, 0, 0, 0, 1, 6, // 10: list<i8>
        14, 0, 11, 6, 0, 0, 0, 0, // 11: set<i16>, empty
        13, 0, 12, 11, 2, 0, 0, 0, 1, 0, 0, 0, 1, b'k', 0, // 12: map<string, bool>
        0, // stop
    ]);
    assert_eq!(&encode::<Binary, _>(&v)[..], &expected[..]);
    round_trip(&v);
}

#[test]
fn uuid_constants_written_as_strings_are_their_bytes() {
    assert_eq!(
        corners::TICKET,
        [
            0xc0, 0xff, 0xee, 0x00, 0x12, 0x34, 0x4a, 0xbc, 0x8d, 0xef, 0x01, 0x23, 0x45, 0x67,
            0x89, 0xab
        ]
    );
    // Braces and upper case change nothing but the text.
    assert_eq!(corners::BRACED[..10], corners::TICKET[..10]);
    assert_eq!(corners::BRACED[10..], [0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54]);
    let first: corners::RequestId = corners::FIRST_REQUEST;
    assert_eq!(u128::from_be_bytes(first), 1);
    assert_eq!(*corners::TICKETS, BTreeSet::from([first, corners::TICKET]));
}

#[test]
fn doubles_in_sets_and_map_keys_are_in_total_order_and_round_trip() {
    let c = &*corners::CALIBRATION;
    let levels: Vec<f64> = c.levels.iter().map(|d| d.0).collect();
    assert_eq!(levels, [-2.0, 0.5, 10.0]);
    let keys: Vec<f64> = c.buckets.keys().map(|d| d.0).collect();
    assert_eq!(keys, [-1.25, 4.0]);
    assert_eq!((c.raw.as_slice(), c.mean), ([1.0, 1.0].as_slice(), 1.0));
    round_trip(c);

    // NaN is an element like any other, and the two zeros are two elements; compared
    // by bits, NaN survives the trip, as does the sign of zero.
    round_trip(&corners::Readings {
        levels: util::odd_doubles(),
        buckets: BTreeMap::from([(corners::OrderedF64(-0.0), 1)]),
        ..Default::default()
    });
}

#[test]
fn empty_braces_are_empty_sets_and_maps() {
    // The two optional fields start unset (an optional field's IDL default is checked
    // but not applied); the third is always present, an empty set.
    let unset = corners::EmptyBraces::default();
    assert_eq!((&unset.blobs, &unset.counts), (&None, &None));
    assert!(unset.names.is_empty());
    assert_eq!(
        &encode::<Binary, _>(&unset)[..],
        [14, 0, 3, 11, 0, 0, 0, 0, 0]
    );
    let empty = corners::EmptyBraces {
        blobs: Some(BTreeSet::new()),
        counts: Some(BTreeMap::new()),
        names: BTreeSet::new(),
    };
    #[rustfmt::skip]
    let expected: &[u8] = &[
        14, 0, 1, 11, 0, 0, 0, 0, // 1: set<binary>, no elements
        13, 0, 2, 11, 8, 0, 0, 0, 0, // 2: map<binary, i32>, no entries
        14, 0, 3, 11, 0, 0, 0, 0, // 3: set<string>, no elements
        0,
    ];
    assert_eq!(&encode::<Binary, _>(&empty)[..], expected);
    round_trip(&empty);
    round_trip(&unset);
}

#[test]
fn enum_names_that_share_a_value_are_one_value() {
    use corners::Level;
    assert_eq!(Level::NONE, Level::ZERO);
    // A value's name is the first one it was given.
    assert_eq!(Level::NONE.name(), Some("ZERO"));
    assert_eq!(Level::BELOW, Level(-1));
    assert_eq!(Level::TOP.0, 16);
    assert_eq!(Level(2).name(), None);
    let alarm = corners::Alarm::default();
    assert_eq!((alarm.at, alarm.quiet), (Level::ONE, Level::ZERO));
    // A value the IDL does not name is kept through a round trip.
    round_trip(&corners::Alarm {
        at: Level(42),
        quiet: Level::FLOOR,
    });
}

#[test]
fn typedefs_of_typedefs_are_the_type_beneath() {
    let totals: &corners::Totals = &corners::SOME_TOTALS;
    assert_eq!(totals, &[1, 2, 3]);
    let index: &corners::TotalsByTotal = &corners::INDEX;
    assert_eq!(&index[&6], totals);
    assert!(index[&0].is_empty());
}

#[test]
fn containers_nest_in_every_position_and_round_trip() {
    let label = |key: &str, weight| corners::Label {
        key: text(key),
        weight,
    };
    let n = corners::Nesting {
        labels: Some(BTreeSet::from([
            label("b", 2),
            label("a", 1),
            label("b", 2),
        ])),
        by_ids: BTreeMap::from([(BTreeSet::from([3, 1]), vec![text("x")])]),
        deep: vec![BTreeMap::from([(
            BTreeSet::from([1_i16]),
            BTreeMap::from([(
                -1_i64,
                BTreeSet::from([vec![BTreeMap::from([(label("k", 0), text("v"))])]]),
            )]),
        )])],
        levels: BTreeMap::from([(label("z", 9), corners::Level::TOP)]),
        cube: vec![vec![vec![label("c", 3)], vec![]], vec![]],
    };
    assert_eq!(n.labels.as_ref().unwrap().len(), 2);
    round_trip(&n);
}

#[test]
fn two_versions_of_a_struct_read_each_other() {
    let v1 = corners::RecordV1 {
        first: 1,
        dropped_later: text("old"),
        last: 2,
    };
    #[rustfmt::skip]
    let expected: &[u8] = &[
        8, 0, 1, 0, 0, 0, 1, // 1: i32 first
        11, 0, 3, 0, 0, 0, 3, b'o', b'l', b'd', // 3: string dropped_later
        8, 0, 12, 0, 0, 0, 2, // 12: i32 last
        0,
    ];
    assert_eq!(&encode::<Binary, _>(&v1)[..], expected);
    // The newer reader skips field 3 and keeps the two it shares.
    let v2: corners::RecordV2 = Codec::<Binary>::new()
        .decode(encode::<Binary, _>(&v1))
        .unwrap();
    assert_eq!(
        v2,
        corners::RecordV2 {
            first: 1,
            last: 2,
            ..Default::default()
        }
    );
    // The older reader skips fields of every kind, in both protocols.
    let v2 = corners::RecordV2 {
        first: 3,
        small: -4,
        short_one: 5,
        long_one: -6,
        ratio: 0.75,
        label: corners::Label {
            key: text("k"),
            weight: 7,
        },
        numbers: vec![8, 9],
        words: BTreeSet::from([text("w")]),
        names: BTreeMap::from([(10, text("ten"))]),
        id: corners::TICKET,
        last: 11,
    };
    round_trip(&v2);
    let want = corners::RecordV1 {
        first: 3,
        dropped_later: Utf8Bytes::default(),
        last: 11,
    };
    let from_binary: corners::RecordV1 = Codec::<Binary>::new()
        .decode(encode::<Binary, _>(&v2))
        .unwrap();
    let from_compact: corners::RecordV1 = Codec::<Compact>::new()
        .decode(encode::<Compact, _>(&v2))
        .unwrap();
    assert_eq!((from_binary, from_compact), (want.clone(), want));
}
