//! The routing table alone: which service a call's name and TTHeader find.

use super::*;

fn never(_: &str) -> bool {
    false
}

fn table(default: bool) -> Table {
    let mut t = Table::default();
    let entry = |name, idl| Entry {
        served: ServiceFacts::new(name, never),
        idl,
    };
    if default {
        t.set_default();
    }
    t.add(entry("Calc", "Calculator"));
    t.add(entry("Ünï", "Unicode"));
    t
}

fn with_isn(isn: &str) -> Header {
    let mut h = Header::new(0, crate::codec::Protocol::Binary);
    h.str_kv.push((
        str_key::IDL_SERVICE_NAME.into(),
        Utf8Bytes::from(isn.to_string()),
    ));
    h
}

/// The registered name and the bare method a name is routed to, or the error message.
fn route(t: &Table, name: &str, tt: Option<&Header>) -> Result<(&'static str, String), String> {
    t.route(&Utf8Bytes::from(name.to_string()), tt)
        .map(|(s, m)| (s.name(), m.as_str().to_string()))
        .map_err(|u| format!("{} | {}", u.method.as_str(), u.exception.message.as_str()))
}

#[test]
fn the_name_before_the_first_separator_picks_the_service() {
    let t = table(false);
    assert_eq!(route(&t, "Calc:add", None), Ok(("Calc", "add".into())));
    // The method keeps any later separator (Apache's Java, Python and Go split once).
    assert_eq!(route(&t, "Calc:a:b", None), Ok(("Calc", "a:b".into())));
    assert_eq!(route(&t, "Ünï:ö", None), Ok(("Ünï", "ö".into())));
    assert_eq!(route(&t, "Calc:", None), Ok(("Calc", "".into())));
    // The prefix is matched whole and by the registered name, not the IDL name.
    assert_eq!(
        route(&t, "Calculator:add", None),
        Err("add | unknown service Calculator (in the method name Calculator:add)".into())
    );
    assert_eq!(
        route(&t, ":add", None),
        Err("add | unknown service  (in the method name :add)".into())
    );
    // A prefix of no service is an error even with a default and a good isn.
    let t = table(true);
    assert!(route(&t, "Nope:add", Some(&with_isn("Calculator"))).is_err());
}

#[test]
fn without_a_prefix_the_isn_then_the_default_decide() {
    let t = table(false);
    assert_eq!(
        route(&t, "add", Some(&with_isn("Unicode"))),
        Ok(("Ünï", "add".into()))
    );
    assert_eq!(
        route(&t, "add", None),
        Err(
            "add | no service named (expected Service:method), and the server has no \
             default service for add"
                .into()
        )
    );
    assert_eq!(
        route(&t, "add", Some(&with_isn("Calc"))),
        Err(
            "add | unknown service Calc (TTHeader isn), and the server has no default \
             service for add"
                .into()
        ),
        "isn is the IDL name, not the registered one"
    );
    let t = table(true);
    assert_eq!(route(&t, "add", None), Ok(("Calc", "add".into())));
    assert_eq!(
        route(&t, "add", Some(&with_isn("Nope"))),
        Ok(("Calc", "add".into()))
    );
    assert_eq!(
        route(&t, "add", Some(&with_isn("Unicode"))),
        Ok(("Ünï", "add".into()))
    );
}

/// The bare method is a slice of the name that came in (no copy).
#[test]
fn the_bare_method_shares_the_bytes_of_the_name() {
    let t = table(false);
    let name = Utf8Bytes::from("Calc:add".to_string());
    let (_, method) = t.route(&name, None).unwrap();
    assert_eq!(method.as_str(), "add");
    assert_eq!(method.as_ptr(), name[5..].as_ptr());
}
