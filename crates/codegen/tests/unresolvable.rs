//! IDL files that parse but mean something impossible: each `tests/unresolvable/NAME.thrift`
//! that has a `NAME.err` must fail with exactly the message in it (files without one are
//! helpers, such as the other half of an include cycle).

use std::path::Path;

#[test]
fn every_unresolvable_idl_fails_with_its_message() {
    // Paths are given relative to the crate, as a build script would, so messages are
    // stable wherever the repository is.
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let dir = Path::new("tests/unresolvable");
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "err"))
        .collect();
    names.sort();
    assert!(names.len() >= 15, "{} cases", names.len());
    let mut failures = Vec::new();
    for err_path in names {
        let idl = err_path.with_extension("thrift");
        let want = std::fs::read_to_string(&err_path).unwrap();
        let got = match codegen::Builder::new()
            .rerun_if_changed(false)
            .generate(&[&idl])
        {
            Ok(_) => "(no error)".to_string(),
            Err(e) => e.to_string(),
        };
        if got.trim_end() != want.trim_end() {
            failures.push(format!(
                "{}:\n  want: {}\n  got:  {got}",
                idl.display(),
                want.trim_end()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
