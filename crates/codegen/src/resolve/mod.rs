//! The resolver: parsed documents to the [`Model`] the emitter works from.
//!
//! Decisions, where the Thrift specification leaves room:
//!
//! - One module per IDL file, named after its stem; of two files with the same module
//!   name (in different directories), the included one is numbered (`name_2`), with a
//!   warning. Names from an included file are written `stem.Name`, where the stem may
//!   hold dots itself (`include "a.b.thrift"`, then `a.b.Name`).
//! - Fields without an id get negative ids counting down from -1, as Apache Thrift's
//!   compiler assigns them, and so do fields whose written id is 0 or negative, as that
//!   compiler does without its `--allow-neg-keys` (with a warning). An id beyond `i16`
//!   keeps its low 16 bits (with a warning). Enum values without one follow the
//!   previous value (from 0).
//!
//! Where Apache Thrift's compiler accepts what loses meaning, codegen reads it as Apache
//! does and records a [`Warning`]: an integer constant too wide for its type keeps its
//! low bits, an integer other than 0 or 1 for a `bool` is `true` when above 0, a
//! non-empty map literal for a list or set (or list literal for a map) is an empty one,
//! a oneway method's return type is dropped, and the cases below that say so.
//! - Fields of a union are never `required`: a union holds exactly one of them.
//! - Constants may refer to other constants and to enum values (`Status.ACTIVE`,
//!   `base.Status.ACTIVE`); integers are accepted for `double` and `0`/`1` for `bool`;
//!   struct literals are maps whose keys are field names; `{}` is also an empty set or
//!   list, as Apache Thrift reads it.
//! - An `optional` field's IDL default is checked, and a constant struct literal that
//!   leaves the field out holds it, but a generated struct starts with the field unset
//!   (`None`), as Apache's C++ and Rust generators do: an optional field is written only
//!   when the program sets it.
//! - Set elements and map keys must be orderable (they are `BTreeSet`/`BTreeMap`). A
//!   `double` there (`set<double>`, `map<double, V>`, `set<list<double>>`) is the
//!   module's `OrderedF64` ([`Ty::OrderedDouble`]): an `f64` ordered by
//!   `f64::total_cmp`, equal and hashed by bit pattern, a `double` on the wire. So is
//!   every `double` field of a struct or union that is a set element or map key, or is
//!   held by one, so that it can derive `Ord` and `Hash`.
//! - A field whose struct type leads back to the struct that holds it (directly, or
//!   through other structs' plain or optional fields) is boxed; containers already
//!   break the cycle.
//! - Every service method gets `<Service><Method>Args` and, unless `oneway`,
//!   `<Service><Method>Result` (field 0 `success` unless `void`, then one optional
//!   field per declared exception), emitted in the service's module; a method with a
//!   `throws` clause also gets `<Service><Method>Exception`, and the service its trait,
//!   `<Service>Reply`, `<Service>Server` and `<Service>Client`.
//! - A service shares one namespace with its whole `extends` chain (the dispatcher
//!   serves every method of it by name): a method name that is already a base's is an
//!   error, as are services that extend each other in a cycle.
//! - Names Apache Thrift tells apart but Rust would spell alike are numbered, with a
//!   warning: fields (`tricky`, `Tricky` are `tricky`, `tricky_2`), methods of a chain
//!   (`getItem`, `get_item`: the later one's Rust names come from `get_item_2`; its
//!   wire name is unchanged), methods named like the generated client's own `new`,
//!   `client` and `builder` (`client_2`), exceptions of a method (`X1`, `X12`), and the
//!   types generated for a service when the IDL defines a type of that name
//!   (`StoreReply2`).
//! - An `include` that is not found is a warning, as in Apache Thrift: the compile goes
//!   on, and a name from that file is then unknown.
//! - Structs holding structs [`DEEP_NESTING`] levels deep or more are a warning that
//!   names the `#![recursion_limit]` the including crate needs: rustc's default of 128
//!   is too low to prove such types `Send` and `Sync` (a chain of 64 fails), and code
//!   included inside a module cannot raise it.
//!
//! # Layout
//!
//! [`resolve`] builds the symbol tables first (`symbols`: module names, definitions,
//! lookups). A first pass then resolves each definition on its own: types, typedef
//! chains, field lists and enums (`shapes`), constant values (`constants`), and
//! services with their methods' structs (`services`). A second pass needs every
//! struct of the compile at once: it boxes the fields that close a cycle and makes
//! every value end (`recursion`), and makes the `double`s of set elements and map
//! keys orderable (`ordering`). This file holds the resolver's state, its diagnostics
//! and the two passes' driver.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::ast::{self, Definition, FileId, Span};
use crate::diagnostic::{Diagnostic, Severity};
use crate::model::{
    ConstDef, Item, Model, Module, StructDef, StructKind, Ty, TypePath, TypedefDef,
};
use crate::names;

mod constants;
mod ordering;
mod recursion;
mod services;
mod shapes;
mod symbols;

use ordering::{order_key_literals, order_key_structs};
use recursion::StructGraph;

/// A meaning error in the IDL: an unknown type, a duplicate id, a constant of the wrong
/// type... with the position it was found at: a [`Diagnostic`] of severity
/// [`Error`](Severity::Error). The name stays for the callers that know it.
pub type ResolveError = Diagnostic;

/// Something the IDL says that Apache Thrift's compiler accepts but that loses meaning
/// (or that Apache Thrift itself warns about), and what codegen made of it: a
/// [`Diagnostic`] of severity [`Warning`](Severity::Warning). The compile goes on;
/// [`Builder`](crate::Builder) prints each as a `cargo:warning=` line. The name stays
/// for the callers that know it.
pub type Warning = Diagnostic;

/// One parsed file, ready to resolve.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The id its spans carry.
    pub id: FileId,
    /// The name errors show (the path as given).
    pub display: String,
    /// The file stem: the module name, and the prefix other files use for its names.
    pub stem: String,
    /// The parsed document.
    pub doc: ast::Document,
    /// The files its `include`s name, as indices into the same list, in order.
    pub includes: Vec<usize>,
}

/// How deep typedef chains and constant references may go before they count as a cycle.
const MAX_REFERENCE_DEPTH: usize = 64;

/// How many levels of structs inside structs make codegen warn that the including crate
/// needs a higher `recursion_limit` (see `Resolver::warn_deep_nesting`).
pub const DEEP_NESTING: usize = 48;

/// Resolves `files` (all of one compile, includes among them) into a model with one
/// module per file, in the order given.
pub fn resolve(files: &[SourceFile]) -> Result<Model, ResolveError> {
    Resolver::new(files)?.run()
}

/// A definition of the IDL, by kind, as the symbol tables hold it.
#[derive(Debug, Clone, Copy)]
enum DefRef<'a> {
    Typedef(&'a ast::Typedef),
    Enum(&'a ast::Enum),
    Struct(&'a ast::StructLike),
    Const(&'a ast::Const),
    Service(&'a ast::Service),
}

/// What resolving a compile needs to know across definitions: the files, their module
/// names and symbol tables, and the warnings so far.
struct Resolver<'a> {
    files: &'a [SourceFile],
    modules: Vec<String>,
    /// Per file: Thrift name to definition.
    defs: Vec<HashMap<&'a str, DefRef<'a>>>,
    /// Per file: include stem to file index.
    include_names: Vec<HashMap<&'a str, usize>>,
    /// Per file: Rust struct name to definition.
    structs: Vec<HashMap<String, &'a ast::StructLike>>,
    /// Per file: Rust enum name to definition.
    enums: Vec<HashMap<String, &'a ast::Enum>>,
    /// What was accepted with a warning, in the order found (each once).
    warnings: RefCell<Vec<Warning>>,
}

impl<'a> Resolver<'a> {
    /// Records a warning (once: definitions are resolved more than once, e.g. a struct
    /// for itself and for each constant literal of it).
    fn warn(&self, file: usize, span: Span, message: String) {
        let w = warning_at(&self.files[file], span, message);
        let mut warnings = self.warnings.borrow_mut();
        if !warnings.contains(&w) {
            warnings.push(w);
        }
    }

    /// An error at `span` of file `file`.
    fn err(&self, file: usize, span: Span, message: String) -> ResolveError {
        at(&self.files[file], span, message)
    }

    /// Resolves every definition of every file (pass 1), then makes the decisions that
    /// need all of them (pass 2).
    fn run(self) -> Result<Model, ResolveError> {
        // Pass 1: every struct-like, including service args/results, unboxed.
        let mut per_file: Vec<Vec<Item>> = vec![Vec::new(); self.files.len()];
        for (fi, file) in self.files.iter().enumerate() {
            let mut taken: HashMap<String, Span> = HashMap::new();
            let mut claim = |name: &str, span: Span, this: &Self| -> Result<(), ResolveError> {
                if let Some(prev) = taken.insert(name.to_string(), span) {
                    return Err(this.err(
                        fi,
                        span,
                        format!(
                            "`{name}` is generated twice in module `{}` (first at line {})",
                            this.modules[fi], prev.line
                        ),
                    ));
                }
                Ok(())
            };
            for def in &file.doc.definitions {
                match def {
                    Definition::Struct(s) => {
                        let name = names::upper_camel(&s.name.name);
                        claim(&name, s.name.span, &self)?;
                        let kind = match s.kind {
                            ast::StructKind::Struct => StructKind::Struct,
                            ast::StructKind::Union => StructKind::Union,
                            ast::StructKind::Exception => StructKind::Exception,
                        };
                        let fields = self.fields(fi, s)?;
                        per_file[fi].push(Item::Struct(StructDef {
                            thrift_name: s.name.name.clone(),
                            name,
                            kind,
                            fields,
                            doc: s.doc.clone(),
                            hashable: false,
                            // Decided once every struct is known (`end_every_value`).
                            union_default: None,
                        }));
                    }
                    Definition::Enum(e) => {
                        let name = names::upper_camel(&e.name.name);
                        claim(&name, e.name.span, &self)?;
                        per_file[fi].push(Item::Enum(self.enum_def(fi, e)?));
                    }
                    Definition::Typedef(t) => {
                        let name = names::upper_camel(&t.name.name);
                        claim(&name, t.name.span, &self)?;
                        let ty = self.ty(fi, &t.ty, 0)?;
                        per_file[fi].push(Item::Typedef(TypedefDef { name, ty }));
                    }
                    Definition::Const(c) => {
                        let name = names::upper_snake(&c.name.name);
                        claim(&name, c.name.span, &self)?;
                        let ty = self.ty(fi, &c.ty, 0)?;
                        let value = self.value(fi, &c.value, &ty, 0)?;
                        per_file[fi].push(Item::Const(ConstDef {
                            thrift_name: c.name.name.clone(),
                            name,
                            ty,
                            value,
                            doc: c.doc.clone(),
                        }));
                    }
                    Definition::Service(svc) => {
                        for item in self.service_items(fi, svc)? {
                            let span = svc.name.span;
                            match &item {
                                Item::Struct(s) => claim(&s.name, span, &self)?,
                                Item::Service(s) => {
                                    claim(&s.name, span, &self)?;
                                    claim(&s.reply, span, &self)?;
                                    claim(&s.server, span, &self)?;
                                    claim(&s.client, span, &self)?;
                                    claim(&s.maker, span, &self)?;
                                    for e in s.methods.iter().filter_map(|m| m.exception.as_ref()) {
                                        claim(&e.name, span, &self)?;
                                    }
                                }
                                Item::Enum(_) | Item::Typedef(_) | Item::Const(_) => {}
                            }
                            per_file[fi].push(item);
                        }
                    }
                }
            }
        }
        // Pass 2: boxing, ordering, and the checks that need every struct.
        let keys = order_key_structs(&self.modules, &mut per_file);
        let graph = StructGraph::new(&self.modules, &per_file);
        self.warn_deep_nesting(&graph);
        for (fi, items) in per_file.iter_mut().enumerate() {
            for item in items {
                if let Item::Struct(s) = item {
                    let owner = TypePath {
                        module: self.modules[fi].clone(),
                        name: s.name.clone(),
                    };
                    for f in &mut s.fields {
                        f.boxed = matches!(&f.ty, Ty::Struct(t) if graph.same_cycle(&owner, t));
                    }
                }
            }
        }
        let made_optional = self.end_every_value(&mut per_file);
        let mut modules = Vec::new();
        for (fi, items) in per_file.into_iter().enumerate() {
            let mut out = Vec::new();
            for mut item in items {
                match &mut item {
                    Item::Struct(s) => {
                        for f in &mut s.fields {
                            self.check_orderable(&graph, fi, &s.thrift_name, &f.ty)?;
                            if let Some(v) = &mut f.default {
                                order_key_literals(v, &keys);
                                graph.mark_boxed(v, &made_optional);
                            }
                        }
                        s.hashable = s.fields.iter().all(|f| graph.orderable(&f.ty));
                    }
                    Item::Const(c) => {
                        order_key_literals(&mut c.value, &keys);
                        graph.mark_boxed(&mut c.value, &made_optional)
                    }
                    Item::Enum(_) | Item::Typedef(_) | Item::Service(_) => {}
                }
                out.push(item);
            }
            let module = Module {
                name: self.modules[fi].clone(),
                items: out,
            };
            if module.uses_ordered_f64() {
                self.check_ordered_f64_free(fi, &module)?;
            }
            modules.push(module);
        }
        Ok(Model {
            modules,
            warnings: self.warnings.into_inner(),
        })
    }
}

/// An error at `span` of `file` (a span of line or column 0, for what has no place in
/// the file, points at its start).
fn at(file: &SourceFile, span: Span, message: String) -> ResolveError {
    Diagnostic::error(
        file.display.clone(),
        span.line.max(1),
        span.col.max(1),
        message,
    )
}

/// A warning at `span` of `file`, placed as [`at`] places errors.
fn warning_at(file: &SourceFile, span: Span, message: String) -> Warning {
    Diagnostic {
        severity: Severity::Warning,
        ..at(file, span, message)
    }
}

/// A type as the IDL spells it, for messages: `list<i32>`, `module.Name`.
fn describe(ty: &Ty) -> String {
    match ty {
        Ty::Bool => "bool".into(),
        Ty::I8 => "i8".into(),
        Ty::I16 => "i16".into(),
        Ty::I32 => "i32".into(),
        Ty::I64 => "i64".into(),
        Ty::Double | Ty::OrderedDouble => "double".into(),
        Ty::String => "string".into(),
        Ty::Binary => "binary".into(),
        Ty::Uuid => "uuid".into(),
        Ty::List(t) => format!("list<{}>", describe(t)),
        Ty::Set(t) => format!("set<{}>", describe(t)),
        Ty::Map(k, v) => format!("map<{}, {}>", describe(k), describe(v)),
        Ty::Struct(p) | Ty::Enum(p) => format!("{}.{}", p.module, p.name),
    }
}
