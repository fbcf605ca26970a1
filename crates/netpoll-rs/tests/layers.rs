//! The crate's modules form layers: each uses only modules declared before it in
//! `lib.rs`, so their graph has no cycle (a connection does not name the poller's
//! loop, the poller names neither connections nor listeners). Inside the `sys` folder
//! the files form layers too: `mod.rs` (the drivers' interface) on top, the drivers
//! under it, and their shared words under them.

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

/// Each lower-case name that follows `prefix` in `source`'s code (comments left out),
/// with what comes after it on the line.
fn names_after<'a>(source: &'a str, prefix: &str) -> Vec<(String, &'a str)> {
    let mut out = Vec::new();
    for line in source.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for part in line.split(prefix).skip(1) {
            let name: String = part
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            out.push((name.clone(), &part[name.len()..]));
        }
    }
    out
}

/// The crate modules `source` names in code (`crate::name`), comments left out.
fn uses(source: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (name, _) in names_after(source, "crate::") {
        if !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// The sibling files `source` (a file of a folder module) names: `super::name::`,
/// and `super::` alone (the folder's `mod.rs`) as `mod`; comments left out.
fn sibling_uses(source: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (name, rest) in names_after(source, "super::") {
        // `super::x::Y` names file x; `super::Y` or `super::f(..)` the folder's mod.rs.
        let file = if !name.is_empty() && rest.starts_with("::") {
            name
        } else {
            "mod".to_string()
        };
        if !out.contains(&file) {
            out.push(file);
        }
    }
    out
}

/// The module's code: `src/{m}.rs`, or every file of the folder `src/{m}/`.
fn module_source(src: &std::path::Path, m: &str) -> String {
    let file = src.join(format!("{m}.rs"));
    if file.exists() {
        return std::fs::read_to_string(file).unwrap();
    }
    let mut all = String::new();
    for entry in std::fs::read_dir(src.join(m)).unwrap() {
        all += &std::fs::read_to_string(entry.unwrap().path()).unwrap();
    }
    all
}

#[test]
fn the_files_of_sys_use_no_file_that_uses_them() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sys");
    let mut edges: HashMap<String, Vec<String>> = HashMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        // A file's tests may use what they like: they are no part of the layers.
        let code = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or(&text);
        let mut used = sibling_uses(code);
        if name == "mod" {
            used.clear();
        }
        used.retain(|u| *u != name);
        edges.insert(name, used);
    }
    assert!(edges.len() >= 4, "sys holds {:?}", edges.keys());
    assert!(
        edges
            .iter()
            .all(|(_, used)| !used.contains(&"mod".to_string())),
        "a driver uses sys/mod.rs, which uses it: {edges:?}"
    );
    // No cycle among the siblings: peel off the files that use none left.
    let mut left = edges.clone();
    while !left.is_empty() {
        let leaves: Vec<String> = left
            .iter()
            .filter(|(_, used)| used.iter().all(|u| !left.contains_key(u)))
            .map(|(f, _)| f.clone())
            .collect();
        assert!(!leaves.is_empty(), "a cycle among {:?}", left);
        for f in leaves {
            left.remove(&f);
        }
    }
}

#[test]
fn each_module_uses_only_those_declared_before_it() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let read = |m: &str| module_source(&src, m);
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
    let sibling = "use super::event::Op;\nuse super::Setup;\n// super::epoll::X\nsuper::f();";
    assert_eq!(sibling_uses(sibling), ["event", "mod"]);
}
