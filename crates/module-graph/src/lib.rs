//! Which top-level modules of a crate use which, read from its sources, and a cycle
//! among them if there is one. On a crate of three modules where `client` and
//! `server` use each other:
//!
//! ```
//! use module_graph::{Code, Graph};
//!
//! let src = std::env::temp_dir().join(format!("module-graph-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&src)?;
//! std::fs::write(src.join("lib.rs"), "mod client;\nmod codec;\nmod server;\n")?;
//! std::fs::write(src.join("codec.rs"), "pub fn encode() {}\n")?;
//! std::fs::write(src.join("client.rs"), "use crate::codec::encode;\nuse crate::server::Reply;\n")?;
//! std::fs::write(src.join("server.rs"), "use crate::codec::encode;\nuse crate::client::Call;\n")?;
//!
//! let graph = Graph::read(&src, Code::WithTests)?;
//! assert_eq!(graph.uses("client").collect::<Vec<_>>(), ["codec", "server"]);
//! let cycle = graph.cycle().expect("client and server use each other");
//! assert!(cycle.contains(&"client".to_string()) && cycle.contains(&"server".to_string()));
//! assert!(!cycle.contains(&"codec".to_string()));
//! std::fs::remove_dir_all(&src)?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Crates keep their layers acyclic with a test of their own:
//!
//! ```no_run
//! let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
//! let graph = module_graph::Graph::read(&src, module_graph::Code::WithTests).unwrap();
//! assert_eq!(graph.cycle(), None, "{graph}");
//! ```
//!
//! The reading is textual, which keeps it small and good enough for a crate's own
//! tests:
//! - A module "uses" another when its code names a path `crate::other` (in a `use` or
//!   inline); a name that `lib.rs` re-exports (`pub use other::Name;`) counts as the
//!   module it comes from.
//! - Comment lines do not count, so doc links may point anywhere.
//! - The modules are those `lib.rs` declares (`mod name;`); a folder such as `src/bin`
//!   that is no module does not count.
//! - Every file in a module's folder, at any depth, counts as that module
//!   (`server/limit/rate.rs` is `server`).
//! - With [`Code::WithoutTests`], test code does not count: files named `tests.rs`,
//!   files under a `tests` folder, modules that `lib.rs` declares under
//!   `#[cfg(test)]`, and a file's tail from `#[cfg(test)]` followed by `mod`. A crate whose tests drive one module with another (a server's tests call it
//!   with the client) checks the code it ships that way.
#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Which code of a crate counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// All of it, test modules included.
    WithTests,
    /// The code that is shipped: test files and `#[cfg(test)] mod` tails left out.
    WithoutTests,
}

/// The crate's top-level modules, each with the modules it uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    uses: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    /// Reads the crate whose sources are under `src` (with its `lib.rs` there).
    pub fn read(src: &Path, code: Code) -> io::Result<Graph> {
        let lib = without_comments(&fs::read_to_string(src.join("lib.rs"))?);
        let names = reexports(&lib);
        let mut files: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        for (module, test) in declared_modules(&lib) {
            if test && code == Code::WithoutTests {
                continue;
            }
            let mut found = Vec::new();
            let file = src.join(format!("{module}.rs"));
            if file.is_file() {
                found.push(file);
            }
            let dir = src.join(&module);
            if dir.is_dir() {
                rust_files(&dir, &mut found)?;
            }
            files.insert(module, found);
        }
        let mut graph = Graph::default();
        for (module, paths) in &files {
            let uses = graph.uses.entry(module.clone()).or_default();
            for path in paths {
                if code == Code::WithoutTests && is_test_file(path) {
                    continue;
                }
                let mut text = fs::read_to_string(path)?;
                if code == Code::WithoutTests {
                    text.truncate(test_tail(&text));
                }
                for name in crate_paths(&without_comments(&text)) {
                    let target = names.get(&name).unwrap_or(&name);
                    if target != module && files.contains_key(target) {
                        uses.insert(target.clone());
                    }
                }
            }
        }
        Ok(graph)
    }

    /// A graph of the given edges, for tests.
    pub fn from_edges<'a>(edges: impl IntoIterator<Item = (&'a str, &'a str)>) -> Graph {
        let mut graph = Graph::default();
        for (from, to) in edges {
            graph.uses.entry(from.into()).or_default().insert(to.into());
            graph.uses.entry(to.into()).or_default();
        }
        graph
    }

    /// The modules `module` uses (none if the crate has no such module).
    pub fn uses(&self, module: &str) -> impl Iterator<Item = &str> {
        self.uses
            .get(module)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// The crate's modules, in name order.
    pub fn modules(&self) -> impl Iterator<Item = &str> {
        self.uses.keys().map(String::as_str)
    }

    /// A cycle, if the modules have one: the modules on it, the first repeated last.
    pub fn cycle(&self) -> Option<Vec<String>> {
        let mut done = BTreeSet::new();
        self.uses
            .keys()
            .find_map(|m| self.visit(m, &mut Vec::new(), &mut done))
    }

    fn visit(
        &self,
        module: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == module) {
            let mut cycle = path[at..].to_vec();
            cycle.push(module.to_string());
            return Some(cycle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_string());
        for next in self.uses(module) {
            if let Some(cycle) = self.visit(next, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(module.to_string());
        None
    }
}

/// One line a module: `name -> what it uses`.
impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (module, uses) in &self.uses {
            let uses: Vec<_> = uses.iter().map(String::as_str).collect();
            writeln!(f, "{module:14} -> {}", uses.join(", "))?;
        }
        Ok(())
    }
}

/// The modules `lib` declares (`mod name;`, with any visibility), each with whether
/// it is test code (declared under `#[cfg(test)]`).
fn declared_modules(lib: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut under_test = false;
    for line in lib.lines() {
        let line = line.trim();
        if line.starts_with("#[") {
            under_test |= line == "#[cfg(test)]";
            continue;
        }
        let rest = ["pub ", "pub(crate) "]
            .iter()
            .find_map(|v| line.strip_prefix(v))
            .unwrap_or(line);
        if let Some(name) = rest.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
            out.push((name.trim().to_string(), under_test));
        }
        under_test = false;
    }
    out
}

/// Adds the `.rs` files under `dir`, at any depth, to `out`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

fn is_test_file(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "tests.rs")
        || path.components().any(|c| c.as_os_str() == "tests")
}

/// Where a file's test tail starts: the first `#[cfg(test)]` whose next line declares
/// a module; the file's length if none does.
fn test_tail(text: &str) -> usize {
    let mut offset = 0;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            return offset;
        }
        offset += line.len();
    }
    text.len()
}

/// `code` without its comment lines.
fn without_comments(code: &str) -> String {
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names after `crate::` in `code`: `crate::a::b` gives `a`, `crate::{a::b, c}`
/// gives `a` and `c`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The group's top-level items, up to its closing brace.
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

/// The module each name of `lib`'s `pub use` lines comes from.
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
            let name = name.rsplit("::").next().unwrap_or(name);
            out.insert(name.trim().to_string(), module.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests;
