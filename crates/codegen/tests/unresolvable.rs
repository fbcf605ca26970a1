//! IDL files that parse but mean something impossible: each `tests/unresolvable/NAME.thrift`
//! that has a `NAME.err` must fail with exactly the message in it (files without one are
//! helpers, such as the other half of an include cycle).
//!
//! And IDL files that Apache Thrift's compiler accepts but that lose meaning in Rust (or
//! that Apache itself warns about): each `tests/warned/NAME.thrift` must compile with
//! exactly the warnings in `NAME.warn`, one a line, into Rust that parses.

use std::path::{Path, PathBuf};

/// Each `NAME.thrift` of `dir` that has a `NAME.<ext>`, with that file's text.
fn cases(dir: &str, ext: &str) -> Vec<(PathBuf, String)> {
    // Paths are given relative to the crate, as a build script would, so messages are
    // stable wherever the repository is.
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let mut names: Vec<_> = std::fs::read_dir(Path::new(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|p| {
            let want = std::fs::read_to_string(&p).unwrap();
            (p.with_extension("thrift"), want.trim_end().to_string())
        })
        .collect()
}

fn builder() -> thrift_codegen::Builder {
    let mut b = thrift_codegen::Builder::new();
    b.rerun_if_changed(false).cargo_warnings(false);
    b
}

#[test]
fn every_unresolvable_idl_fails_with_its_message() {
    let cases = cases("tests/unresolvable", "err");
    assert!(cases.len() >= 15, "{} cases", cases.len());
    let mut failures = Vec::new();
    for (idl, want) in cases {
        let got = match builder().generate(&[&idl]) {
            Ok(_) => "(no error)".to_string(),
            Err(e) => e.to_string(),
        };
        if got.trim_end() != want {
            failures.push(format!("{}:\n  want: {want}\n  got:  {got}", idl.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_warned_idl_compiles_with_its_warnings() {
    let cases = cases("tests/warned", "warn");
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for (idl, want) in cases {
        let got = match builder().model(&[&idl]) {
            Ok(model) => {
                let out = thrift_codegen::emit::emit(&model);
                if let Err(e) = syn::parse_file(&out) {
                    failures.push(format!("{}: output does not parse: {e}", idl.display()));
                }
                let lines: Vec<String> = model.warnings.iter().map(|w| w.to_string()).collect();
                lines.join("\n")
            }
            Err(e) => format!("(error) {e}"),
        };
        if got != want {
            failures.push(format!("{}:\n  want: {want}\n  got:  {got}", idl.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
