//! Symbol tables: which name means which definition.
//!
//! Builds the per-file tables (Thrift name to definition, include stem to file, Rust
//! type name to struct or enum), gives every file its module name, and looks names up,
//! `Name` or `stem.Name` of an include, with any trailing part (`Status.ACTIVE`) left
//! for the caller.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::ast::{self, Definition, Span};
use crate::model::TypePath;
use crate::names;

use super::{DefRef, ResolveError, Resolver, SourceFile, at, warning_at};

impl<'a> Resolver<'a> {
    /// Names every file's module and builds its symbol tables; fails on a definition
    /// given twice or a file name that makes no Rust module name.
    pub(super) fn new(files: &'a [SourceFile]) -> Result<Self, ResolveError> {
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut defs = Vec::new();
        let mut include_names = Vec::new();
        let mut structs = Vec::new();
        let mut enums = Vec::new();
        let mut early_warnings = Vec::new();
        // Module names, given from the last file to the first: a file comes after the
        // files it includes, so when two files of one name in different directories
        // meet (Apache's PHP tests include `../../../../test/ThriftTest.thrift` from a
        // `ThriftTest.thrift`), the including one keeps the name and the included one
        // takes the first free number, with a warning. Apache keeps them apart by
        // their namespaces.
        let mut modules = vec![String::new(); files.len()];
        for (i, file) in files.iter().enumerate().rev() {
            let module = names::snake(&file.stem);
            if !names::is_legal(&module) {
                return Err(at(
                    file,
                    Span::default(),
                    format!("file name `{}` does not make a Rust module name", file.stem),
                ));
            }
            let module = match seen.get(&module) {
                None => module,
                Some(&other) => {
                    let numbered = (2..)
                        .map(|n| format!("{module}_{n}"))
                        .find(|m| !seen.contains_key(m))
                        .unwrap_or_default();
                    early_warnings.push(warning_at(
                        file,
                        Span::default(),
                        format!(
                            "module `{module}` would come from both {} and this file; this \
                             file's is `{numbered}`",
                            files[other].display
                        ),
                    ));
                    numbered
                }
            };
            seen.insert(module.clone(), i);
            modules[i] = module;
        }
        for file in files {
            let mut table = HashMap::new();
            let mut struct_table = HashMap::new();
            let mut enum_table = HashMap::new();
            for def in &file.doc.definitions {
                match def {
                    Definition::Struct(s) => {
                        struct_table
                            .entry(names::upper_camel(&s.name.name))
                            .or_insert(s);
                    }
                    Definition::Enum(e) => {
                        enum_table
                            .entry(names::upper_camel(&e.name.name))
                            .or_insert(e);
                    }
                    _ => {}
                }
                let (name, r) = match def {
                    Definition::Typedef(t) => (&t.name, DefRef::Typedef(t)),
                    Definition::Enum(e) => (&e.name, DefRef::Enum(e)),
                    Definition::Struct(s) => (&s.name, DefRef::Struct(s)),
                    Definition::Const(c) => (&c.name, DefRef::Const(c)),
                    Definition::Service(s) => (&s.name, DefRef::Service(s)),
                };
                if table.insert(name.name.as_str(), r).is_some() {
                    return Err(at(
                        file,
                        name.span,
                        format!("`{}` is defined twice", name.name),
                    ));
                }
            }
            defs.push(table);
            structs.push(struct_table);
            enums.push(enum_table);
            let mut incs = HashMap::new();
            for &inc in &file.includes {
                incs.insert(files[inc].stem.as_str(), inc);
            }
            include_names.push(incs);
        }
        Ok(Resolver {
            files,
            modules,
            defs,
            include_names,
            structs,
            enums,
            warnings: RefCell::new(early_warnings),
        })
    }

    /// Finds the definition `name` means in `file`: `Name`, or `stem.Name` of an include.
    /// Returns the file it lives in, its definition, and any unused trailing part
    /// (`Status.ACTIVE` looks up `Status` and leaves `ACTIVE`).
    ///
    /// An include's stem may hold dots itself (`include "Thrift5320.enum.thrift"` is
    /// named `Thrift5320.enum`, as in Apache's own tests): every dot of `name` is tried
    /// as the end of the stem, the last first, so the longest stem wins.
    pub(super) fn lookup(
        &self,
        file: usize,
        name: &'a str,
    ) -> Option<(usize, DefRef<'a>, Option<&'a str>)> {
        if let Some(d) = self.defs[file].get(name) {
            return Some((file, *d, None));
        }
        let (head, rest) = name.split_once('.')?;
        if let Some(d) = self.defs[file].get(head) {
            return Some((file, *d, Some(rest)));
        }
        name.rmatch_indices('.').find_map(|(dot, _)| {
            let &inc = self.include_names[file].get(&name[..dot])?;
            let rest = &name[dot + 1..];
            if let Some(d) = self.defs[inc].get(rest) {
                return Some((inc, *d, None));
            }
            let (head, tail) = rest.split_once('.')?;
            self.defs[inc].get(head).map(|d| (inc, *d, Some(tail)))
        })
    }

    /// Where the type that `file` defines as `thrift_name` lives in the model.
    pub(super) fn path(&self, file: usize, thrift_name: &str) -> TypePath {
        TypePath {
            module: self.modules[file].clone(),
            name: names::upper_camel(thrift_name),
        }
    }

    /// The IDL definition of the enum at `p`.
    pub(super) fn find_enum(&self, p: &TypePath) -> Option<&'a ast::Enum> {
        let file = self.modules.iter().position(|m| *m == p.module)?;
        self.enums[file].get(&p.name).copied()
    }

    /// The file and IDL definition of the struct at `p`.
    pub(super) fn find_struct(&self, p: &TypePath) -> Option<(usize, &'a ast::StructLike)> {
        let file = self.modules.iter().position(|m| *m == p.module)?;
        Some((file, *self.structs[file].get(&p.name)?))
    }
}
