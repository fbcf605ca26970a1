//! The path language and its resolution: errors name the column or the failing prefix.

use proptest::prelude::*;
use thrift_dynamic::Ty;
use thrift_dynamic::path::{
    FieldPath, Found, MAX_PATH_LEN, MAX_STEPS, MapKey, ParseError, ParseErrorKind,
    ResolveErrorKind, Step, StepKind,
};
use thrift_wire::TType;

use crate::util::{descriptor, mixed_id, resolve};

#[test]
fn parses_every_step_kind() {
    let p = FieldPath::parse(r#"req.items[3].#7.by_id[-42]["h\"i\u00e9\n"]"#).unwrap();
    assert_eq!(
        p.steps(),
        [
            Step::Name("req".into()),
            Step::Name("items".into()),
            Step::Int(3),
            Step::Id(7),
            Step::Name("by_id".into()),
            Step::Int(-42),
            Step::Str("h\"ié\n".into()),
        ]
    );
    assert_eq!(FieldPath::parse("#-1").unwrap().steps(), [Step::Id(-1)]);
    assert_eq!(
        FieldPath::parse("a[-9223372036854775808]").unwrap().steps()[1],
        Step::Int(i64::MIN)
    );
    assert_eq!(
        FieldPath::parse(r#"m["\ud83d\ude00"]"#).unwrap().steps()[1],
        Step::Str("😀".into())
    );
}

fn error(text: &str) -> ParseError {
    FieldPath::parse(text).expect_err(text)
}

fn expected(text: &str) -> (usize, &'static str, Found) {
    match error(text) {
        ParseError {
            column,
            kind: ParseErrorKind::Expected { expected, found },
        } => (column, expected, found),
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn parse_errors_name_the_column_and_what_was_expected() {
    assert_eq!(expected(""), (1, "a field name or `#id`", Found::End));
    assert_eq!(
        expected("a..b"),
        (3, "a field name or `#id`", Found::Char('.'))
    );
    assert_eq!(
        expected("a b"),
        (2, "`.`, `[` or the end of the path", Found::Char(' '))
    );
    assert_eq!(expected("a["), (3, "an integer or a string", Found::End));
    assert_eq!(expected("a[1"), (4, "`]`", Found::End));
    assert_eq!(
        expected("a[x]"),
        (3, "an integer or a string", Found::Char('x'))
    );
    assert_eq!(
        expected("a[\"x"),
        (5, "`\"` closing the string", Found::End)
    );
    assert_eq!(
        expected("a[-]"),
        (4, "an integer or a string", Found::Char(']'))
    );
    assert_eq!(expected("#x"), (2, "a field id", Found::Char('x')));
    assert_eq!(
        expected("é"),
        (1, "a field name or `#id`", Found::Char('é'))
    );
    assert_eq!(
        expected("éa.1"),
        (1, "a field name or `#id`", Found::Char('é'))
    );
    // Columns count characters, not bytes.
    assert_eq!(expected("a[\"é\"]x").0, 7);
    assert_eq!(expected(r#"a["\q"]"#).0, 5);
    assert_eq!(
        error("#40000"),
        ParseError {
            column: 2,
            kind: ParseErrorKind::FieldIdOutOfRange
        }
    );
    assert_eq!(
        error("a[9223372036854775808]"),
        ParseError {
            column: 3,
            kind: ParseErrorKind::IntegerOutOfRange
        }
    );
    assert_eq!(
        error(r#"a["\ud800x"]"#),
        ParseError {
            column: 4,
            kind: ParseErrorKind::InvalidUnicodeEscape
        }
    );
}

#[test]
fn length_and_step_count_are_bounded() {
    let long = "a".repeat(MAX_PATH_LEN + 1);
    assert_eq!(
        error(&long).kind,
        ParseErrorKind::TooLong {
            len: MAX_PATH_LEN + 1,
            max: MAX_PATH_LEN
        }
    );
    let most = vec!["a"; MAX_STEPS].join(".");
    assert_eq!(FieldPath::parse(&most).unwrap().steps().len(), MAX_STEPS);
    let too_many = format!("{most}[0]");
    assert_eq!(
        error(&too_many),
        ParseError {
            column: most.len() + 1,
            kind: ParseErrorKind::TooManySteps { max: MAX_STEPS }
        }
    );
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        "[A-Za-z_][A-Za-z0-9_]{0,8}".prop_map(Step::Name),
        any::<i16>().prop_map(Step::Id),
        any::<i64>().prop_map(Step::Int),
        any::<String>().prop_map(Step::Str),
    ]
}

proptest! {
    #[test]
    fn display_parses_back_to_the_same_path(
        first in prop_oneof!["[a-z_][a-z0-9_]{0,8}".prop_map(Step::Name), any::<i16>().prop_map(Step::Id)],
        rest in prop::collection::vec(step(), 0..MAX_STEPS - 1),
    ) {
        let mut text = String::new();
        // Build the text by hand, then check parse and Display agree with it.
        let steps: Vec<Step> = std::iter::once(first).chain(rest).collect();
        for (i, s) in steps.iter().enumerate() {
            match s {
                Step::Name(n) => { if i > 0 { text.push('.'); } text.push_str(n); }
                Step::Id(id) => { if i > 0 { text.push('.'); } text.push_str(&format!("#{id}")); }
                Step::Int(n) => text.push_str(&format!("[{n}]")),
                Step::Str(s) => text.push_str(&format!("[{}]", serde_like_json(s))),
            }
        }
        prop_assume!(text.len() <= MAX_PATH_LEN);
        let parsed = FieldPath::parse(&text).unwrap();
        prop_assert_eq!(parsed.steps(), &steps[..]);
        let shown = parsed.to_string();
        prop_assert_eq!(FieldPath::parse(&shown).unwrap(), parsed);
    }

    #[test]
    fn parsing_any_text_never_panics(text in any::<String>()) {
        match FieldPath::parse(&text) {
            Ok(p) => prop_assert_eq!(FieldPath::parse(&p.to_string()).unwrap(), p),
            Err(e) => prop_assert!(e.column >= 1 && e.column <= text.chars().count() + 1),
        }
    }
}

/// A JSON string literal, every non-ASCII character as `\u` escapes (so the parser's
/// surrogate pairs are exercised too).
fn serde_like_json(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04X}"));
                }
            }
        }
    }
    out.push('"');
    out
}

#[test]
fn resolution_gives_field_ids_and_types() {
    let d = descriptor();
    let p = resolve(&d, "requests[3].msg");
    let kinds: Vec<_> = p.steps().iter().map(|s| s.kind.clone()).collect();
    assert_eq!(
        kinds,
        [StepKind::Field(8), StepKind::Index(3), StepKind::Field(2)]
    );
    assert_eq!(p.ty(), &Ty::String);
    assert!(matches!(p.steps()[1].ty, Ty::Struct(_)));
    let c = resolve(&d, "counters[\"hits\"]");
    assert_eq!(
        c.steps()[1].kind,
        StepKind::Key(MapKey::Bytes(b"hits".to_vec()))
    );
    assert_eq!(c.ty(), &Ty::I64);
    assert_eq!(c.root(), mixed_id(&d));
    assert_eq!(c.path().to_string(), "counters[\"hits\"]");
}

#[test]
fn integer_keys_fit_their_key_type() {
    let d = thrift_dynamic::Descriptor::from_text(
        "m.thrift",
        "enum E { A = 1 } struct M { 1: map<i8, string> small, 2: map<E, i32> by_enum, 3: map<i64, i64> big }",
    )
    .unwrap();
    let m = d.struct_named("M").unwrap();
    let at = |p: &str| FieldPath::parse(p).unwrap().resolve(&d, m);
    assert_eq!(
        at("small[-128]").unwrap().steps()[1].kind,
        StepKind::Key(MapKey::Int {
            value: -128,
            ty: TType::I8
        })
    );
    assert_eq!(
        at("by_enum[1]").unwrap().steps()[1].kind,
        StepKind::Key(MapKey::Int {
            value: 1,
            ty: TType::I32
        })
    );
    assert!(at("big[-9223372036854775808]").is_ok());
    let e = at("small[128]").unwrap_err();
    assert_eq!(e.prefix, "small[128]");
    assert!(matches!(e.kind, ResolveErrorKind::BadKey { .. }), "{e}");
    assert!(matches!(
        at("big[\"1\"]").unwrap_err().kind,
        ResolveErrorKind::BadKey { .. }
    ));
}

#[test]
fn resolution_errors_name_the_prefix_that_failed() {
    let d = descriptor();
    let root = mixed_id(&d);
    let fail = |text: &str| {
        FieldPath::parse(text)
            .unwrap()
            .resolve(&d, root)
            .expect_err(text)
    };
    let e = fail("requests[3].nope.more");
    assert_eq!(e.prefix, "requests[3].nope");
    assert_eq!(
        e.kind,
        ResolveErrorKind::NoSuchField {
            strukt: "Request".into(),
            field: "nope".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "path `requests[3].nope`: struct Request has no field nope"
    );
    let e = fail("#99");
    assert_eq!(
        e.kind,
        ResolveErrorKind::NoSuchField {
            strukt: "Mixed".into(),
            field: "#99".into()
        }
    );
    let e = fail("id[0]");
    assert_eq!(
        (e.prefix.as_str(), e.kind),
        ("id[0]", ResolveErrorKind::NotIndexable { ty: "i64".into() })
    );
    let e = fail("requests.msg");
    assert_eq!(
        e.kind,
        ResolveErrorKind::NotAStruct {
            ty: "list<echo.Request>".into()
        }
    );
    let e = fail("labels[-1]");
    assert!(matches!(e.kind, ResolveErrorKind::BadIndex { .. }));
    let e = fail("labels[\"x\"]");
    assert!(matches!(e.kind, ResolveErrorKind::BadIndex { .. }));
    let e = fail("counters[1]");
    assert_eq!(
        e.kind,
        ResolveErrorKind::BadKey {
            subscript: "1".into(),
            key: "string".into()
        }
    );
    let e = fail("name.len");
    assert_eq!(
        e.kind,
        ResolveErrorKind::NotAStruct {
            ty: "string".into()
        }
    );
}
