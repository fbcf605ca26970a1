//! The `idl` target: any text given to codegen as an IDL file is either refused with a
//! typed error or turned into Rust that parses. Parser, resolver and emitter must not
//! panic, loop or overflow the stack on it.

use thrift_codegen::ast::FileId;
use thrift_codegen::resolve::{SourceFile, resolve};

/// Runs the whole pipeline on `data` as one IDL file (includes name no other file, so
/// they resolve to nothing) and checks that Rust that parses comes out when the IDL is
/// accepted. Returns the generated source, if any.
pub fn fuzz_idl(data: &[u8]) -> Option<String> {
    let source = std::str::from_utf8(data).ok()?;
    let doc = thrift_codegen::parse(source, FileId(0), "fuzz.thrift").ok()?;
    let file = SourceFile {
        id: FileId(0),
        display: "fuzz.thrift".into(),
        stem: "fuzz".into(),
        doc,
        includes: Vec::new(),
    };
    let model = resolve(&[file]).ok()?;
    let rust = thrift_codegen::emit::emit(&model);
    if let Err(e) = syn::parse_file(&rust) {
        panic!("accepted IDL made Rust that does not parse ({e}):\n{source}\n---\n{rust}");
    }
    Some(rust)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    fn thrift_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "thrift"))
            .collect();
        files.sort();
        files
    }

    #[test]
    fn the_repository_idls_are_seeds_that_generate_rust() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        // Files that include nothing generate on their own; the others stop at the
        // unknown `other.Type` names, without panicking.
        let mut generated = 0;
        for dir in ["idl", "crates/codegen/tests/idl"] {
            for path in thrift_files(&root.join(dir)) {
                let data = std::fs::read(&path).unwrap();
                generated += usize::from(fuzz_idl(&data).is_some());
            }
        }
        assert!(generated >= 3, "only {generated} seed IDLs generated Rust");
    }

    #[test]
    fn rejected_idls_are_refused_without_panicking() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/codegen/tests");
        for dir in ["rejected", "unresolvable"] {
            for path in thrift_files(&root.join(dir)) {
                // Include errors come from loading files, which this target skips.
                if path
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("include_")
                {
                    continue;
                }
                let data = std::fs::read(&path).unwrap();
                assert!(fuzz_idl(&data).is_none(), "{} was accepted", path.display());
            }
        }
    }

    #[test]
    fn every_prefix_of_a_seed_is_handled() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/codegen/tests/idl/shapes.thrift");
        let data = std::fs::read(path).unwrap();
        for end in 0..=data.len() {
            fuzz_idl(&data[..end]);
        }
    }
}
