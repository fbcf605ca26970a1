//! The crate's modules form layers: each uses only modules declared before it in
//! `lib.rs`, so their graph has no cycle (a connection does not name the poller's
//! loop, the poller names neither connections nor listeners).

use std::collections::HashMap;

/// The modules `lib.rs` declares, in order (public or not).
fn modules(lib: &str) -> Vec<String> {
    lib.lines()
        .map(|l| l.trim())
        .filter_map(|l| {
            l.strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("mod "))
        })
        .map(|m| m.trim_end_matches(';').to_string())
        .collect()
}

/// The crate modules `source` names in code (`crate::name`), comments left out.
fn uses(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in source.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for part in line.split("crate::").skip(1) {
            let name: String = part
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

#[test]
fn each_module_uses_only_those_declared_before_it() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let read = |m: &str| std::fs::read_to_string(src.join(format!("{m}.rs"))).unwrap();
    let order = modules(&read("lib"));
    assert!(order.len() >= 10, "lib.rs declares {order:?}");
    let rank: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let mut wrong = Vec::new();
    for (i, m) in order.iter().enumerate() {
        for used in uses(&read(m)) {
            match rank.get(used.as_str()) {
                Some(&j) if j < i => {}
                _ => wrong.push(format!("{m} uses {used}")),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "uses of modules not declared before: {wrong:?}"
    );
}

#[test]
fn the_check_sees_a_use_in_code_and_not_in_comments() {
    let code =
        "use crate::poller::{Entry, lock};\n// crate::conn in a comment\nlet x = crate::sys::f();";
    assert_eq!(uses(code), ["poller", "sys"]);
    assert_eq!(modules("mod a;\n\nmod b;\npub use a::X;"), ["a", "b"]);
}
