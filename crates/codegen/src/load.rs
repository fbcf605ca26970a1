//! Reading IDL files: following includes, detecting include cycles, parsing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::ast::{FileId, Span};
use crate::diagnostic::Diagnostic;
use crate::error::ParseError;
use crate::resolve::{SourceFile, Warning};
use crate::{Error, parse};

/// What [`load`] read.
pub(crate) struct Loaded {
    /// Every file, includes before includers.
    pub(crate) files: Vec<SourceFile>,
    /// Every path read (for `cargo:rerun-if-changed`).
    pub(crate) read: Vec<PathBuf>,
    /// Includes that were not found: Apache Thrift's compiler warns and goes on (names
    /// from them are then unknown).
    pub(crate) warnings: Vec<Warning>,
}

/// Loads `roots` and everything they include, in an order where every file comes after
/// the files it includes.
pub(crate) fn load(roots: &[PathBuf], include_dirs: &[PathBuf]) -> Result<Loaded, Error> {
    let mut loader = Loader {
        include_dirs,
        files: Vec::new(),
        by_path: HashMap::new(),
        stack: Vec::new(),
        read: Vec::new(),
        warnings: Vec::new(),
    };
    for root in roots {
        loader.load(root, None)?;
    }
    let files = loader.files.into_iter().map(|(_, f)| f).collect();
    Ok(Loaded {
        files,
        read: loader.read,
        warnings: loader.warnings,
    })
}

struct Loader<'a> {
    include_dirs: &'a [PathBuf],
    /// Loaded files, with their canonical paths, includes before includers.
    files: Vec<(PathBuf, SourceFile)>,
    by_path: HashMap<PathBuf, usize>,
    /// Files being loaded, outermost first, canonical and as displayed: an include of
    /// one of these is a cycle.
    stack: Vec<(PathBuf, String)>,
    read: Vec<PathBuf>,
    warnings: Vec<Warning>,
}

impl Loader<'_> {
    /// Loads `path` (already located) and returns its index.
    fn load(&mut self, path: &Path, from: Option<(&SourceFile, Span)>) -> Result<usize, Error> {
        let canonical = path.canonicalize().map_err(|source| match from {
            Some((file, span)) => Error::Resolve(Diagnostic::error(
                file.display.clone(),
                span.line,
                span.col,
                format!("cannot read included file {}: {source}", path.display()),
            )),
            None => Error::Io {
                path: path.to_path_buf(),
                source,
            },
        })?;
        if let Some(&i) = self.by_path.get(&canonical) {
            return Ok(i);
        }
        if let Some(pos) = self.stack.iter().position(|(p, _)| *p == canonical) {
            let mut cycle: Vec<String> = self.stack[pos..].iter().map(|(_, d)| d.clone()).collect();
            cycle.push(path.display().to_string());
            let (file, span) = from
                .map(|(f, s)| (f.display.clone(), s))
                .unwrap_or_default();
            return Err(Error::Resolve(Diagnostic::error(
                file,
                span.line.max(1),
                span.col.max(1),
                format!("include cycle: {}", cycle.join(" -> ")),
            )));
        }
        let source = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        self.read.push(path.to_path_buf());
        let display = path.display().to_string();
        let id = FileId(self.read.len() as u32);
        let doc = parse(&source, id, &display).map_err(Error::Parse)?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut file = SourceFile {
            id,
            display,
            stem,
            doc,
            includes: Vec::new(),
        };

        self.stack.push((canonical.clone(), file.display.clone()));
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let includes: Vec<(String, Span)> = file
            .doc
            .includes()
            .map(|i| (i.path.clone(), i.span))
            .collect();
        for (inc, span) in includes {
            let found = std::iter::once(&dir)
                .chain(self.include_dirs)
                .map(|d| d.join(&inc))
                .find(|p| p.is_file());
            let Some(found) = found else {
                self.warnings.push(Diagnostic::warning(
                    file.display.clone(),
                    span.line,
                    span.col,
                    format!(
                        "included file \"{inc}\" not found next to it or in the include paths; \
                         going on without it, as Apache Thrift does (its names are unknown)"
                    ),
                ));
                continue;
            };
            let index = self.load(&found, Some((&file, span)));
            let index = match index {
                Ok(i) => i,
                Err(e) => {
                    self.stack.pop();
                    return Err(e);
                }
            };
            file.includes.push(index);
        }
        self.stack.pop();
        self.files.push((canonical.clone(), file));
        let index = self.files.len() - 1;
        self.by_path.insert(canonical, index);
        Ok(index)
    }
}

impl From<ParseError> for Error {
    fn from(e: ParseError) -> Self {
        Error::Parse(e)
    }
}
