//! `compile` and `Builder`: the build-script face of the crate.

use std::path::{Path, PathBuf};

use crate::emit::{BinaryRepr, CollectionRepr, Options, StringRepr, emit_with};
use crate::error::ParseError;
use crate::load::{Disk, Files, IdlFiles, load};
use crate::model::Model;
use crate::resolve::{ResolveError, resolve};

/// Why a compile failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An IDL file is not valid Thrift syntax.
    #[error(transparent)]
    Parse(ParseError),
    /// An IDL file is valid syntax but means something impossible (an unknown type, a
    /// duplicate field id, a constant of the wrong type, an include cycle...).
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    /// An attribute given to the builder is not one or more outer attributes
    /// (`#[...]`) in Rust syntax.
    #[error("attribute for `{path}` is not a Rust `#[...]` attribute: {attribute}")]
    Attribute {
        /// The path it was given for.
        path: String,
        /// The attribute as given.
        attribute: String,
    },
    /// No output directory: `OUT_DIR` is unset and none was given.
    #[error("OUT_DIR is not set: call compile from a build script or set Builder::out_dir")]
    NoOutDir,
}

/// Compiles `idls` (searching `includes` for their includes) into
/// `$OUT_DIR/thrift_gen.rs`, with the defaults of [`Builder`].
///
/// ```no_run
/// // build.rs
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     thrift_codegen::compile(&["idl/echo.thrift"], &["idl"])?;
///     Ok(())
/// }
/// ```
pub fn compile(idls: &[impl AsRef<Path>], includes: &[impl AsRef<Path>]) -> Result<(), Error> {
    let mut builder = Builder::new();
    for dir in includes {
        builder.include(dir);
    }
    builder.compile(idls).map(drop)
}

/// Options for a compile, in the manner of `prost_build::Config`.
///
/// Defaults: output to `$OUT_DIR/thrift_gen.rs`; no include directories besides each
/// file's own; `cargo:rerun-if-changed` printed for every IDL file read, and a
/// `cargo:warning=` line for every [`Warning`](crate::resolve::Warning) (what the IDL
/// says that Apache Thrift accepts but that loses meaning, and how codegen read it), so
/// that cargo shows them when it builds the crate.
#[derive(Debug, Clone)]
pub struct Builder {
    out_dir: Option<PathBuf>,
    file_name: String,
    include_dirs: Vec<PathBuf>,
    rerun_if_changed: bool,
    cargo_warnings: bool,
    options: Options,
    /// Attributes that did not parse, reported when generating.
    bad_attribute: Option<(String, String)>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            out_dir: None,
            file_name: "thrift_gen.rs".to_string(),
            include_dirs: Vec::new(),
            rerun_if_changed: true,
            cargo_warnings: true,
            options: Options::default(),
            bad_attribute: None,
        }
    }
}

impl Builder {
    /// A builder with the defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes into `dir` instead of `$OUT_DIR`.
    pub fn out_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Names the output file (default `thrift_gen.rs`).
    pub fn file_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.file_name = name.into();
        self
    }

    /// Adds a directory to search for included files (after the including file's own).
    pub fn include(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.include_dirs.push(dir.as_ref().to_path_buf());
        self
    }

    /// Whether to print `cargo:rerun-if-changed` for every IDL file read (default on).
    pub fn rerun_if_changed(&mut self, on: bool) -> &mut Self {
        self.rerun_if_changed = on;
        self
    }

    /// Whether to print a `cargo:warning=` line for every warning (default on). The
    /// warnings are in [`Model::warnings`] either way.
    pub fn cargo_warnings(&mut self, on: bool) -> &mut Self {
        self.cargo_warnings = on;
        self
    }

    /// The Rust type for `string`: `Utf8Bytes` (zero-copy, the default) or `String`.
    pub fn string_type(&mut self, repr: StringRepr) -> &mut Self {
        self.options.string = repr;
        self
    }

    /// The Rust type for `binary`: `Bytes` (zero-copy, the default) or `Vec<u8>`.
    pub fn binary_type(&mut self, repr: BinaryRepr) -> &mut Self {
        self.options.binary = repr;
        self
    }

    /// The Rust types for `map` and `set`: `BTreeMap`/`BTreeSet` (the default) or
    /// `HashMap`/`HashSet`.
    pub fn collections(&mut self, repr: CollectionRepr) -> &mut Self {
        self.options.collections = repr;
        self
    }

    /// Adds `attribute` (e.g. `"#[derive(serde::Serialize)]"`) to every generated type
    /// that `path` selects: `"."` for all, `"module"` for one file's, `"module.Type"` for
    /// one (Thrift names; the module is the file stem). Structs, unions, exceptions and
    /// enums get it; a service's trait, reply enum, dispatcher and exception enums do not.
    pub fn type_attribute(
        &mut self,
        path: impl Into<String>,
        attribute: impl AsRef<str>,
    ) -> &mut Self {
        if let Some(attr) = self.parse_attribute(path.into(), attribute.as_ref()) {
            self.options.type_attributes.push(attr);
        }
        self
    }

    /// Adds `attribute` to every struct field that `path` selects
    /// (`"module.Type.field"`, or a prefix of it as in [`type_attribute`](Self::type_attribute)).
    pub fn field_attribute(
        &mut self,
        path: impl Into<String>,
        attribute: impl AsRef<str>,
    ) -> &mut Self {
        if let Some(attr) = self.parse_attribute(path.into(), attribute.as_ref()) {
            self.options.field_attributes.push(attr);
        }
        self
    }

    /// Checks that `attribute` is one or more outer attributes (`#[...]`), or records it
    /// to be reported by `generate`.
    fn parse_attribute(&mut self, path: String, attribute: &str) -> Option<(String, String)> {
        let attribute = attribute.trim();
        match syn::parse::Parser::parse_str(syn::Attribute::parse_outer, attribute) {
            Ok(attrs) if !attrs.is_empty() => Some((path, attribute.to_string())),
            _ => {
                self.bad_attribute = Some((path, attribute.to_string()));
                None
            }
        }
    }

    /// Parses and resolves `idls` into the model the emitter works from.
    pub fn model(&self, idls: &[impl AsRef<Path>]) -> Result<Model, Error> {
        self.model_from(&Disk, true, idls).map(|(model, _)| model)
    }

    /// [`model`](Self::model), and the path of every file read (the roots and what
    /// they include, as found): what a program that loads IDL at run time watches
    /// for changes.
    pub fn model_with_paths(
        &self,
        idls: &[impl AsRef<Path>],
    ) -> Result<(Model, Vec<PathBuf>), Error> {
        self.model_from(&Disk, true, idls)
    }

    /// [`model`](Self::model) from files held in memory instead of the file system
    /// (`idls` and the include directories are paths among `files`). No
    /// `cargo:rerun-if-changed` line is printed for them.
    pub fn model_in(&self, files: &IdlFiles, idls: &[impl AsRef<Path>]) -> Result<Model, Error> {
        self.model_from(files, false, idls).map(|(model, _)| model)
    }

    fn model_from(
        &self,
        fs: &dyn Files,
        on_disk: bool,
        idls: &[impl AsRef<Path>],
    ) -> Result<(Model, Vec<PathBuf>), Error> {
        let roots: Vec<PathBuf> = idls.iter().map(|p| p.as_ref().to_path_buf()).collect();
        let loaded = load(fs, &roots, &self.include_dirs)?;
        if self.rerun_if_changed && on_disk {
            for path in &loaded.read {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
        // Printed before resolving, so that a missing include is reported even when the
        // names it should have brought then fail the compile.
        self.print_warnings(&loaded.warnings);
        let mut model = resolve(&loaded.files)?;
        self.print_warnings(&model.warnings);
        model.warnings.splice(0..0, loaded.warnings);
        Ok((model, loaded.read))
    }

    fn print_warnings(&self, warnings: &[crate::resolve::Warning]) {
        if self.cargo_warnings {
            for warning in warnings {
                println!("cargo:warning={warning}");
            }
        }
    }

    /// Generates the Rust source for `idls` without writing it.
    pub fn generate(&self, idls: &[impl AsRef<Path>]) -> Result<String, Error> {
        if let Some((path, attribute)) = &self.bad_attribute {
            return Err(Error::Attribute {
                path: path.clone(),
                attribute: attribute.clone(),
            });
        }
        Ok(emit_with(&self.model(idls)?, &self.options))
    }

    /// Generates and writes the output file; rewrites it only when its content changes,
    /// so that an unchanged IDL does not make cargo rebuild the crate. Returns its path.
    pub fn compile(&self, idls: &[impl AsRef<Path>]) -> Result<PathBuf, Error> {
        let source = self.generate(idls)?;
        let dir = match &self.out_dir {
            Some(dir) => dir.clone(),
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or(Error::NoOutDir)?,
        };
        let path = dir.join(&self.file_name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(source.as_str()) {
            std::fs::write(&path, source).map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?;
        }
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::{Duration, SystemTime};

    use super::*;

    /// A fresh directory for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("codegen-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn compile_rewrites_the_output_only_when_it_changes() {
        let dir = scratch("rewrite");
        let idl = dir.join("a.thrift");
        write(&idl, "struct A { 1: i32 x }\n");
        let mut b = Builder::new();
        b.rerun_if_changed(false).out_dir(&dir);
        let out = b.compile(&[&idl]).unwrap();
        assert_eq!(out, dir.join("thrift_gen.rs"));

        // Backdate the output: an unchanged IDL must leave it alone.
        let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        std::fs::File::options()
            .write(true)
            .open(&out)
            .unwrap()
            .set_modified(old)
            .unwrap();
        b.compile(&[&idl]).unwrap();
        assert_eq!(std::fs::metadata(&out).unwrap().modified().unwrap(), old);

        write(&idl, "struct A { 1: i32 x }\nstruct B { 1: i64 y }\n");
        b.compile(&[&idl]).unwrap();
        assert_ne!(std::fs::metadata(&out).unwrap().modified().unwrap(), old);
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.starts_with(crate::emit::GENERATED_HEADER) && text.contains("pub struct B "));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn every_file_read_is_reported_for_rerun_if_changed() {
        // a includes b (found through an include dir), which includes c next to it, and
        // d in a subdirectory of its own.
        let dir = scratch("rerun");
        write(
            &dir.join("a.thrift"),
            "include \"b.thrift\"\ninclude \"sub/d.thrift\"\nstruct A { 1: b.B b }\n",
        );
        write(
            &dir.join("inc/b.thrift"),
            "include \"c.thrift\"\nstruct B { 1: c.C c }\n",
        );
        write(&dir.join("inc/c.thrift"), "struct C { 1: i32 x }\n");
        write(&dir.join("sub/d.thrift"), "struct D { 1: i32 x }\n");
        let loaded = load(&Disk, &[dir.join("a.thrift")], &[dir.join("inc")])
            .unwrap_or_else(|e| panic!("{e}"));
        let (files, read) = (loaded.files, loaded.read);
        let mut names: Vec<String> = read
            .iter()
            .map(|p| p.strip_prefix(&dir).unwrap_or(p).display().to_string())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["a.thrift", "inc/b.thrift", "inc/c.thrift", "sub/d.thrift"]
        );
        assert_eq!(files.len(), 4);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Files in memory resolve as files on disk do: includes next to the including file
    /// (through `..` too) and in the include directories, and the model is the same.
    #[test]
    fn files_in_memory_resolve_their_includes_as_on_disk() {
        let mut files = IdlFiles::new();
        files
            .insert(
                "svc/a.thrift",
                "include \"../common/b.thrift\"\ninclude \"c.thrift\"\n\
                 struct A { 1: b.B b, 2: c.C c }\n",
            )
            .insert("common/b.thrift", "struct B { 1: i32 x }\n")
            .insert("inc/c.thrift", "struct C { 1: string s }\n");
        let mut b = Builder::new();
        b.include("inc")
            .rerun_if_changed(false)
            .cargo_warnings(false);
        let model = b
            .model_in(&files, &["svc/./a.thrift"])
            .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = model.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["b", "c", "a"]);

        let dir = scratch("memory");
        write(
            &dir.join("svc/a.thrift"),
            &files.files[Path::new("svc/a.thrift")],
        );
        write(&dir.join("common/b.thrift"), "struct B { 1: i32 x }\n");
        write(&dir.join("inc/c.thrift"), "struct C { 1: string s }\n");
        let mut b = Builder::new();
        b.include(dir.join("inc"))
            .rerun_if_changed(false)
            .cargo_warnings(false);
        let (on_disk, read) = b.model_with_paths(&[dir.join("svc/a.thrift")]).unwrap();
        assert_eq!(on_disk.modules, model.modules);
        assert_eq!(read.len(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A root or include that is not among the files is an error or a warning, as on
    /// disk; a file over the size limit is refused, not read.
    #[test]
    fn missing_and_oversized_files_in_memory_are_errors() {
        let mut files = IdlFiles::new();
        files.insert(
            "a.thrift",
            "include \"gone.thrift\"\nstruct A { 1: i32 x }\n",
        );
        let mut b = Builder::new();
        b.rerun_if_changed(false).cargo_warnings(false);
        let model = b.model_in(&files, &["a.thrift"]).unwrap();
        assert!(
            model.warnings[0]
                .to_string()
                .contains("\"gone.thrift\" not found")
        );
        let err = b.model_in(&files, &["b.thrift"]).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err}");

        let huge = " ".repeat(crate::MAX_IDL_FILE as usize + 1);
        files.insert("huge.thrift", huge);
        let err = b.model_in(&files, &["huge.thrift"]).unwrap_err();
        assert!(err.to_string().contains("IDL file limit"), "{err}");
    }

    #[test]
    fn lexical_paths_drop_dots_and_keep_leading_parents() {
        use crate::load::lexical;
        assert_eq!(
            lexical(Path::new("a/./b/../c.thrift")),
            Path::new("a/c.thrift")
        );
        assert_eq!(lexical(Path::new("../x/../../y")), Path::new("../../y"));
        assert_eq!(lexical(Path::new("/a/../b")), Path::new("/b"));
    }
}
