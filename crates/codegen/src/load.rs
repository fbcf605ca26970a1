//! Reading IDL files: following includes, detecting include cycles, parsing. Files
//! come from the file system or from memory ([`IdlFiles`]).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Component, Path, PathBuf};

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

/// The largest IDL file read, 64 MiB: an IDL may come from a user of a running
/// program (see `IdlFiles`), and a larger one is refused rather than held in memory.
pub const MAX_IDL_FILE: u64 = 64 << 20;

/// Where the loader reads files: the file system, or a set in memory.
pub(crate) trait Files {
    /// The path that names `path` whichever way it is spelled.
    fn canonical(&self, path: &Path) -> io::Result<PathBuf>;
    /// Whether `path` names a file.
    fn is_file(&self, path: &Path) -> bool;
    /// The file's text, at most [`MAX_IDL_FILE`] bytes.
    fn read(&self, path: &Path) -> io::Result<String>;
}

/// The file system.
pub(crate) struct Disk;

impl Files for Disk {
    fn canonical(&self, path: &Path) -> io::Result<PathBuf> {
        path.canonicalize()
    }

    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }

    fn read(&self, path: &Path) -> io::Result<String> {
        use std::io::Read;
        let file = std::fs::File::open(path)?;
        let mut text = String::new();
        // One byte over the limit tells a file at the limit from a larger one.
        file.take(MAX_IDL_FILE + 1).read_to_string(&mut text)?;
        if text.len() as u64 > MAX_IDL_FILE {
            return Err(too_large());
        }
        Ok(text)
    }
}

fn too_large() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("larger than the IDL file limit of {MAX_IDL_FILE} bytes"),
    )
}

/// IDL files held in memory, by path, for [`Builder::model_in`](crate::Builder::model_in):
/// a program that takes IDL text from its users (a gateway's admin API, a test) without
/// writing it to disk. Includes are looked up as on disk (next to the including file,
/// then in the include directories), among these files only. Paths are compared as
/// written, with `.` and `..` taken away (`a/../b.thrift` is `b.thrift`).
#[derive(Debug, Clone, Default)]
pub struct IdlFiles {
    pub(crate) files: BTreeMap<PathBuf, String>,
}

impl IdlFiles {
    /// No files.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the file at `path` with `text`.
    pub fn insert(&mut self, path: impl AsRef<Path>, text: impl Into<String>) -> &mut Self {
        self.files.insert(lexical(path.as_ref()), text.into());
        self
    }
}

impl Files for IdlFiles {
    fn canonical(&self, path: &Path) -> io::Result<PathBuf> {
        let path = lexical(path);
        if self.files.contains_key(&path) {
            Ok(path)
        } else {
            Err(io::Error::new(io::ErrorKind::NotFound, "no such IDL file"))
        }
    }

    fn is_file(&self, path: &Path) -> bool {
        self.files.contains_key(&lexical(path))
    }

    fn read(&self, path: &Path) -> io::Result<String> {
        let text = self
            .files
            .get(&lexical(path))
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such IDL file"))?;
        if text.len() as u64 > MAX_IDL_FILE {
            return Err(too_large());
        }
        Ok(text.clone())
    }
}

/// `path` with `.` taken away and each `..` taking away the part before it (one that
/// has none before it is kept).
pub(crate) fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                _ => out.push(".."),
            },
            other => out.push(other),
        }
    }
    out
}

/// Loads `roots` and everything they include, in an order where every file comes after
/// the files it includes.
pub(crate) fn load(
    fs: &dyn Files,
    roots: &[PathBuf],
    include_dirs: &[PathBuf],
) -> Result<Loaded, Error> {
    let mut loader = Loader {
        fs,
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
    fs: &'a dyn Files,
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
        let canonical = self.fs.canonical(path).map_err(|source| match from {
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
        let source = self.fs.read(path).map_err(|source| Error::Io {
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
                .find(|p| self.fs.is_file(p));
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
