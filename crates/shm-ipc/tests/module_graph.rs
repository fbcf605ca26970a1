//! The crate's modules use each other without a cycle: leaf modules (layout, rings, free
//! lists, descriptors, regions, system calls) at the bottom, the session's core, the
//! control frames and the reader above them, sessions and streams on top.
//!
//! A module "uses" another when its code names a path `crate::other` (in a `use` or
//! inline, test code included); a re-exported name such as `crate::Config` counts as
//! its module. Comment lines do not count, so doc links may point anywhere. A file in a
//! module's folder (`sys/fake.rs`) counts as that module. Run with `--nocapture` to see
//! the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The names after `crate::` in `code`: `crate::a::b` gives `a`, `crate::{a::b, c}`
/// gives `a` and `c`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group, up to its closing brace.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.push(first_ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            names.push(first_ident(&item));
        } else {
            names.push(first_ident(rest));
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

fn first_ident(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Code without its comment lines.
fn code_of(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Which module each name of `lib.rs`'s `pub use` lines comes from.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in lib.lines() {
        let Some(path) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let path = path.trim_end_matches(';');
        let Some((module, names)) = path.split_once("::") else {
            continue;
        };
        let names = names.trim_start_matches('{').trim_end_matches('}');
        for name in names.split(',') {
            out.insert(name.trim().to_string(), module.to_string());
        }
    }
    out
}

fn graph(src: &Path) -> Graph {
    let lib = code_of(&src.join("lib.rs"));
    let names = reexports(&lib);
    // Every module of the crate, and the files that make it up.
    let mut files: BTreeMap<String, Vec<std::path::PathBuf>> = BTreeMap::new();
    for entry in fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.extension().is_some_and(|e| e == "rs") && stem != "lib" {
            files.entry(stem).or_default().push(path);
        }
    }
    for (module, paths) in files.iter_mut() {
        if let Ok(dir) = fs::read_dir(src.join(module)) {
            paths.extend(dir.map(|e| e.unwrap().path()));
        }
    }
    let mut g = Graph::new();
    for (module, paths) in &files {
        let uses = g.entry(module.clone()).or_default();
        for path in paths {
            for name in crate_paths(&code_of(path)) {
                let target = names.get(&name).unwrap_or(&name);
                if target != module && files.contains_key(target) {
                    uses.insert(target.clone());
                }
            }
        }
    }
    g
}

/// A cycle of `g`, if it has one.
fn cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        m: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            let mut c = path[at..].to_vec();
            c.push(m.to_string());
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(g, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|m| visit(g, m, &mut Vec::new(), &mut done))
}

#[test]
fn the_parser_sees_every_form_of_path() {
    let code = "use crate::a::B;\nlet x = crate::c::d();\nuse crate::{e::F, g, h::{I, J}};";
    assert_eq!(crate_paths(code), ["a", "c", "e", "g", "h"]);
    let lib = "pub use config::{Config, Exhaustion};\npub use stream::Stream;";
    let names = reexports(lib);
    assert_eq!(names["Exhaustion"], "config");
    assert_eq!(names["Stream"], "stream");
}

#[test]
fn a_cycle_is_found() {
    let edges = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")];
    let mut g = Graph::new();
    for (from, to) in edges {
        g.entry(from.into()).or_default().insert(to.into());
        g.entry(to.into()).or_default();
    }
    assert_eq!(cycle(&g).unwrap(), ["a", "b", "c", "a"]);
    g.get_mut("c").unwrap().clear();
    assert_eq!(cycle(&g), None);
}

#[test]
fn modules_use_each_other_without_a_cycle() {
    let g = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    for (module, uses) in &g {
        let uses: Vec<_> = uses.iter().map(String::as_str).collect();
        println!("{module:10} -> {}", uses.join(", "));
    }
    assert!(
        g.get("session").is_some_and(|u| !u.is_empty()),
        "no paths found: {g:?}"
    );
    if let Some(c) = cycle(&g) {
        panic!("the modules use each other in a circle: {}", c.join(" -> "));
    }
}
