//! What needs every struct of a compile at once: cycles, values that end, depth.
//!
//! [`StructGraph`] holds every struct as a node: fields that close a cycle are boxed,
//! fields always present that would make every value endless become optional (with a
//! warning), unions get the first variant whose value ends as their default, and
//! chains of structs deep enough to need a higher `recursion_limit` are warned about.

use std::collections::{HashMap, HashSet};

use crate::ast::{self, Definition, Span};
use crate::model::{Item, Requiredness, StructDef, StructKind, Ty, TypePath, Value};

use super::{DEEP_NESTING, Resolver};

impl<'a> Resolver<'a> {
    /// Warns when structs hold structs [`DEEP_NESTING`] levels deep or more (Apache's
    /// Smalltalk tests hold a chain of 65): rustc proves such types `Send` and `Sync`
    /// (the server needs both) one level at a time, two steps a level with the
    /// `Option` of an optional field, and its default limit of 128 steps ends the
    /// build. The including crate must raise it; generated code cannot, being
    /// included inside a module.
    pub(super) fn warn_deep_nesting(&self, graph: &StructGraph) {
        // The IDL's own structs (a method's arguments add one level to its types',
        // and have no place in the IDL to point at), the deepest, the first of equals.
        let deepest = graph
            .depths()
            .filter_map(|(fi, name, depth)| Some((depth, fi, self.structs[fi].get(name)?)))
            .max_by_key(|&(depth, fi, s)| (depth, std::cmp::Reverse((fi, s.name.span.line))));
        let Some((depth, fi, s)) = deepest else {
            return;
        };
        if depth < DEEP_NESTING {
            return;
        }
        self.warn(
            fi,
            s.name.span,
            format!(
                "`{}` holds structs {depth} levels deep: the crate that includes this code \
                 needs `#![recursion_limit = \"{}\"]` (Rust's default, 128, is too low \
                 to check such types for `Send` and `Sync`)",
                s.name.name,
                (depth * 4).next_power_of_two().max(256)
            ),
        );
    }

    /// Makes sure every struct and union has a value that ends, which Rust needs to
    /// build one (a default, a decoded value). A field that is always present and leads
    /// back to its own struct through fields that are always present (Apache's
    /// `1: RecList & nextitem`) would make every value endless: such fields become
    /// optional (`Option<Box<_>>`, written only when set, as Apache's C++ makes them
    /// pointers), with a warning; then so does any field always present whose type is
    /// a union all of whose variants lead back to it. Unions get the first variant
    /// whose value ends as their default, and none when there is none. Returns the
    /// fields made optional.
    pub(super) fn end_every_value(
        &self,
        per_file: &mut [Vec<Item>],
    ) -> HashSet<(TypePath, String)> {
        let mut made = HashSet::new();
        // Closing fields first, one at a time (each may end the others' values): that is
        // what Apache's `&` asks for.
        for boxed_only in [true, false] {
            while let Some((fi, index, field)) = self.endless_field(per_file, boxed_only) {
                let Item::Struct(s) = &mut per_file[fi][index] else {
                    break;
                };
                let f = &mut s.fields[field];
                let why = match (&f.ty, boxed_only) {
                    (_, true) => format!(
                        "leads back to `{}` through fields that are always present",
                        s.thrift_name
                    ),
                    (Ty::Struct(target), false) => format!(
                        "is a `{}`, a union whose every variant leads back to it",
                        target.name
                    ),
                    _ => break,
                };
                let span = self.field_span(fi, &s.thrift_name, &f.thrift_name);
                self.warn(
                    fi,
                    span,
                    format!(
                        "field `{}` of `{}` {why}, so no value of it would end: it is an \
                         `Option` here, written only when set",
                        f.thrift_name, s.thrift_name
                    ),
                );
                f.req = Requiredness::Optional;
                let owner = TypePath {
                    module: self.modules[fi].clone(),
                    name: s.name.clone(),
                };
                made.insert((owner, f.name.clone()));
            }
        }
        let ends = value_ends(&self.modules, per_file);
        for (fi, items) in per_file.iter_mut().enumerate() {
            for item in items.iter_mut() {
                match item {
                    Item::Struct(s) if s.kind == StructKind::Union => {
                        s.union_default = s.fields.iter().position(|f| match &f.ty {
                            Ty::Struct(t) => ends.get(t).copied().unwrap_or(true),
                            _ => true,
                        });
                    }
                    // The handler's parameters are the args struct's fields.
                    Item::Service(svc) => {
                        for m in &mut svc.methods {
                            for p in &mut m.params {
                                let key = (
                                    TypePath {
                                        module: self.modules[fi].clone(),
                                        name: m.args.name.clone(),
                                    },
                                    p.name.clone(),
                                );
                                if made.contains(&key) {
                                    p.req = Requiredness::Optional;
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        for items in per_file.iter_mut() {
            for item in items.iter_mut() {
                if let Item::Service(svc) = item {
                    for m in &mut svc.inherited {
                        let Some(owner) = self.modules.iter().position(|x| *x == m.owner.module)
                        else {
                            continue;
                        };
                        for p in &mut m.params {
                            if made.contains(&(
                                TypePath {
                                    module: self.modules[owner].clone(),
                                    name: m.args.name.clone(),
                                },
                                p.name.clone(),
                            )) {
                                p.req = Requiredness::Optional;
                            }
                        }
                    }
                }
            }
        }
        made
    }

    /// The first field (file, item and field index) that is always present and whose
    /// struct type has no value that ends, among the fields that close a cycle if
    /// `boxed_only`.
    fn endless_field(
        &self,
        per_file: &[Vec<Item>],
        boxed_only: bool,
    ) -> Option<(usize, usize, usize)> {
        let ends = value_ends(&self.modules, per_file);
        for (fi, items) in per_file.iter().enumerate() {
            for (index, item) in items.iter().enumerate() {
                let Item::Struct(s) = item else { continue };
                if s.kind == StructKind::Union {
                    continue;
                }
                let found = s.fields.iter().position(|f| {
                    f.req != Requiredness::Optional
                        && (f.boxed || !boxed_only)
                        && matches!(&f.ty, Ty::Struct(t) if !ends.get(t).copied().unwrap_or(true))
                });
                if let Some(field) = found {
                    return Some((fi, index, field));
                }
            }
        }
        None
    }

    /// Where field `field` of struct (or args struct) `owner` is written, or where the
    /// file starts if it cannot be found.
    fn field_span(&self, file: usize, owner: &str, field: &str) -> Span {
        let in_fields = |fields: &[ast::Field]| {
            fields
                .iter()
                .find(|f| f.name.name == field)
                .map(|f| f.name.span)
        };
        self.files[file]
            .doc
            .definitions
            .iter()
            .find_map(|d| match d {
                Definition::Struct(s) if s.name.name == owner => in_fields(&s.fields),
                Definition::Service(svc) => svc.functions.iter().find_map(|func| {
                    if format!("{}_args", func.name.name) == owner {
                        in_fields(&func.args)
                    } else {
                        None
                    }
                }),
                _ => None,
            })
            .unwrap_or_default()
    }
}

/// Which structs and unions have a value that ends (least fixed point): a struct whose
/// fields always present all have one, a union with a variant that has one. Base
/// types, enums and containers (which may be empty) always have one. Linear in the
/// fields: a worklist over the reverse edges.
fn value_ends(modules: &[String], per_file: &[Vec<Item>]) -> HashMap<TypePath, bool> {
    let mut defs: Vec<(TypePath, &StructDef)> = Vec::new();
    for (fi, items) in per_file.iter().enumerate() {
        for item in items {
            if let Item::Struct(s) = item {
                let path = TypePath {
                    module: modules[fi].clone(),
                    name: s.name.clone(),
                };
                defs.push((path, s));
            }
        }
    }
    let index: HashMap<&TypePath, usize> =
        defs.iter().enumerate().map(|(i, (p, _))| (p, i)).collect();
    // Per def: the defs that wait on it, and how many struct fields it waits on.
    let mut waiting: Vec<Vec<usize>> = vec![Vec::new(); defs.len()];
    let mut pending = vec![0usize; defs.len()];
    let mut ends = vec![false; defs.len()];
    let mut queue = Vec::new();
    for (i, (_, s)) in defs.iter().enumerate() {
        let union = s.kind == StructKind::Union;
        let mut free = false;
        for f in &s.fields {
            if !union && f.req == Requiredness::Optional {
                continue;
            }
            match &f.ty {
                Ty::Struct(t) if index.contains_key(t) => {
                    waiting[index[t]].push(i);
                    pending[i] += 1;
                }
                _ => free = true,
            }
        }
        if (union && free) || (!union && pending[i] == 0) {
            ends[i] = true;
            queue.push(i);
        }
    }
    while let Some(t) = queue.pop() {
        for &d in &waiting[t] {
            if ends[d] {
                continue;
            }
            pending[d] -= 1;
            if defs[d].1.kind == StructKind::Union || pending[d] == 0 {
                ends[d] = true;
                queue.push(d);
            }
        }
    }
    defs.into_iter()
        .zip(ends)
        .map(|((p, _), e)| (p, e))
        .collect()
}

/// Every struct of a compile as a graph node, for the decisions that need all of them:
/// which fields close a cycle (boxed) and which structs hold a `double` somewhere
/// (not orderable).
pub(super) struct StructGraph {
    /// Per module (in `modules` order): Rust struct name to node.
    nodes: Vec<HashMap<String, usize>>,
    modules: Vec<String>,
    /// Each node's strongly connected component over plain and optional struct fields.
    component: Vec<usize>,
    /// Whether each node reaches a `double` (through any field, containers included).
    unorderable: Vec<bool>,
    /// How many structs the longest chain of structs inside structs from each node
    /// passes through (containers included; a cycle counts once).
    depth: Vec<usize>,
}

impl StructGraph {
    /// The graph of every struct in `per_file` (one list of items per module).
    pub(super) fn new(modules: &[String], per_file: &[Vec<Item>]) -> Self {
        let mut nodes: Vec<HashMap<String, usize>> = vec![HashMap::new(); modules.len()];
        let mut defs: Vec<&StructDef> = Vec::new();
        for (fi, items) in per_file.iter().enumerate() {
            for item in items {
                if let Item::Struct(s) = item {
                    nodes[fi].insert(s.name.clone(), defs.len());
                    defs.push(s);
                }
            }
        }
        let mut graph = StructGraph {
            nodes,
            modules: modules.to_vec(),
            component: Vec::new(),
            unorderable: Vec::new(),
            depth: Vec::new(),
        };
        // Direct struct fields make the cycles that need a box; containers already hold
        // their elements on the heap.
        let direct: Vec<Vec<usize>> = defs
            .iter()
            .map(|s| {
                s.fields
                    .iter()
                    .filter_map(|f| match &f.ty {
                        Ty::Struct(p) => graph.node(p),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        // Any struct inside a field's type matters for ordering.
        let mut nested: Vec<Vec<usize>> = Vec::with_capacity(defs.len());
        let mut doubles = Vec::with_capacity(defs.len());
        for s in &defs {
            let mut targets = Vec::new();
            let mut double = false;
            for f in &s.fields {
                graph.walk(&f.ty, &mut targets, &mut double);
            }
            nested.push(targets);
            doubles.push(double);
        }
        graph.component = crate::graph::components(&direct);
        graph.unorderable = crate::graph::reaching(&nested, &doubles);
        graph.depth = crate::graph::chain_lengths(&nested);
        graph
    }

    /// Every struct: its module's index, its Rust name, and the length of the longest
    /// chain of structs inside it.
    pub(super) fn depths(&self) -> impl Iterator<Item = (usize, &str, usize)> {
        self.nodes.iter().enumerate().flat_map(move |(fi, names)| {
            names
                .iter()
                .map(move |(name, &n)| (fi, name.as_str(), self.depth[n]))
        })
    }

    /// The node of the struct at `p`, if it is one of the compile's.
    fn node(&self, p: &TypePath) -> Option<usize> {
        let module = self.modules.iter().position(|m| *m == p.module)?;
        self.nodes[module].get(&p.name).copied()
    }

    /// Collects the structs inside `ty` and whether a `double` is there outside them.
    fn walk(&self, ty: &Ty, structs: &mut Vec<usize>, double: &mut bool) {
        match ty {
            Ty::Double => *double = true,
            Ty::List(t) | Ty::Set(t) => self.walk(t, structs, double),
            Ty::Map(k, v) => {
                self.walk(k, structs, double);
                self.walk(v, structs, double);
            }
            Ty::Struct(p) => structs.extend(self.node(p)),
            _ => {}
        }
    }

    /// Whether a field of struct `owner` with struct type `target` closes a cycle, that is
    /// whether `target` leads back to `owner`.
    pub(super) fn same_cycle(&self, owner: &TypePath, target: &TypePath) -> bool {
        match (self.node(owner), self.node(target)) {
            (Some(a), Some(b)) => self.component[a] == self.component[b],
            _ => false,
        }
    }

    /// Whether values of `ty` can be ordered (no `double` anywhere inside).
    pub(super) fn orderable(&self, ty: &Ty) -> bool {
        match ty {
            Ty::Double => false,
            Ty::List(t) | Ty::Set(t) => self.orderable(t),
            Ty::Map(k, v) => self.orderable(k) && self.orderable(v),
            Ty::Struct(p) => self.node(p).is_some_and(|n| !self.unorderable[n]),
            _ => true,
        }
    }

    /// Boxes the fields of the struct literals inside `v` that close a cycle, as the
    /// fields themselves are, and makes optional those that
    /// [`Resolver::end_every_value`] made optional.
    pub(super) fn mark_boxed(&self, v: &mut Value, made_optional: &HashSet<(TypePath, String)>) {
        match v {
            Value::List(items) => items
                .iter_mut()
                .for_each(|v| self.mark_boxed(v, made_optional)),
            Value::Map(entries) => entries.iter_mut().for_each(|(k, v)| {
                self.mark_boxed(k, made_optional);
                self.mark_boxed(v, made_optional);
            }),
            Value::Struct(owner, fields) => {
                for f in fields {
                    self.mark_boxed(&mut f.value, made_optional);
                    if f.value != Value::Default
                        && made_optional.contains(&(owner.clone(), f.name.clone()))
                    {
                        f.optional = true;
                    }
                    // A field left to its default builds `Default::default()` whatever
                    // its type, boxed or not.
                    f.boxed = f.value != Value::Default
                        && matches!(&f.ty, Ty::Struct(t) if self.same_cycle(owner, t));
                }
            }
            _ => {}
        }
    }
}
