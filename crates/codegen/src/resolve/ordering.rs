//! Set elements and map keys: where a `double` must be an `OrderedF64`.
//!
//! Rust needs a total order there, so a `double` in such a type, and in every struct
//! that is one or is held by one, becomes [`Ty::OrderedDouble`]; a type that still
//! cannot be ordered is an error, as is a module that defines the
//! [`ORDERED_F64`](crate::model::ORDERED_F64) name it then needs.

use std::collections::{HashMap, HashSet};

use crate::ast::Span;
use crate::model::{Item, Module, ORDERED_F64, Ty, TypePath, Value};
use crate::names;

use super::recursion::StructGraph;
use super::{ResolveError, Resolver, describe};

impl<'a> Resolver<'a> {
    /// Fails if a set element or map key inside `ty`, a field type of `owner`, holds a
    /// struct that holds a `double` (which no `OrderedF64` can stand for).
    pub(super) fn check_orderable(
        &self,
        graph: &StructGraph,
        file: usize,
        owner: &str,
        ty: &Ty,
    ) -> Result<(), ResolveError> {
        match ty {
            Ty::Set(e) | Ty::Map(e, _) if !graph.orderable(e) => Err(self.err(
                file,
                Span::default(),
                format!(
                    "in `{owner}`: set elements and map keys must be orderable, and {} is not \
                     (it is or holds a struct that holds a double)",
                    describe(e)
                ),
            )),
            Ty::List(t) | Ty::Set(t) => self.check_orderable(graph, file, owner, t),
            Ty::Map(k, v) => {
                self.check_orderable(graph, file, owner, k)?;
                self.check_orderable(graph, file, owner, v)
            }
            _ => Ok(()),
        }
    }

    /// Fails if the module, which needs its `OrderedF64`, defines that name itself.
    pub(super) fn check_ordered_f64_free(
        &self,
        file: usize,
        module: &Module,
    ) -> Result<(), ResolveError> {
        let name = ORDERED_F64;
        let taken = module.items.iter().any(|item| match item {
            Item::Struct(s) => s.name == name,
            Item::Enum(e) => e.name == name,
            Item::Typedef(t) => t.name == name,
            Item::Service(s) => [&s.name, &s.reply, &s.server, &s.client, &s.maker]
                .iter()
                .any(|n| *n == name),
            Item::Const(_) => false,
        });
        if !taken {
            return Ok(());
        }
        let span = self.files[file]
            .doc
            .definitions
            .iter()
            .find(|d| names::upper_camel(&d.name().name) == name)
            .map_or_else(Span::default, |d| d.name().span);
        Err(self.err(
            file,
            span,
            format!(
                "`{name}` is generated twice in module `{}`: the module has doubles in set \
                 elements or map keys, which are its `{name}`",
                module.name
            ),
        ))
    }
}

/// Finds the structs and unions that are set elements or map keys, or are held by one
/// (however deep), and makes every `double` in their fields an
/// [`Ty::OrderedDouble`], so that they can derive `Ord` and `Hash` (Apache Thrift
/// accepts `set<S>` whatever `S` holds). Returns them.
pub(super) fn order_key_structs(
    modules: &[String],
    per_file: &mut [Vec<Item>],
) -> HashSet<TypePath> {
    fn structs_in(ty: &Ty, in_key: bool, out: &mut Vec<(TypePath, bool)>) {
        match ty {
            Ty::Struct(p) => out.push((p.clone(), in_key)),
            Ty::List(t) => structs_in(t, in_key, out),
            Ty::Set(t) => structs_in(t, true, out),
            Ty::Map(k, v) => {
                structs_in(k, true, out);
                structs_in(v, in_key, out);
            }
            _ => {}
        }
    }
    // Every struct's field types, and the key positions of every type spelled anywhere.
    let mut fields_of: HashMap<TypePath, Vec<TypePath>> = HashMap::new();
    let mut keys: Vec<TypePath> = Vec::new();
    for (fi, items) in per_file.iter().enumerate() {
        for item in items {
            let mut found = Vec::new();
            match item {
                Item::Struct(s) => s
                    .fields
                    .iter()
                    .for_each(|f| structs_in(&f.ty, false, &mut found)),
                Item::Const(c) => structs_in(&c.ty, false, &mut found),
                Item::Typedef(t) => structs_in(&t.ty, false, &mut found),
                Item::Enum(_) | Item::Service(_) => {}
            }
            keys.extend(found.iter().filter(|(_, k)| *k).map(|(p, _)| p.clone()));
            if let Item::Struct(s) = item {
                let path = TypePath {
                    module: modules[fi].clone(),
                    name: s.name.clone(),
                };
                fields_of.insert(path, found.into_iter().map(|(p, _)| p).collect());
            }
        }
    }
    let mut closed: HashSet<TypePath> = HashSet::new();
    while let Some(p) = keys.pop() {
        if closed.insert(p.clone()) {
            keys.extend(fields_of.get(&p).into_iter().flatten().cloned());
        }
    }
    for (fi, items) in per_file.iter_mut().enumerate() {
        for item in items.iter_mut() {
            if let Item::Struct(s) = item {
                let path = TypePath {
                    module: modules[fi].clone(),
                    name: s.name.clone(),
                };
                if closed.contains(&path) {
                    for f in &mut s.fields {
                        f.ty = ordered(f.ty.clone());
                    }
                }
            }
        }
    }
    closed
}

/// Makes the field types of the struct literals inside `v` whose structs
/// [`order_key_structs`] changed match them.
pub(super) fn order_key_literals(v: &mut Value, keys: &HashSet<TypePath>) {
    match v {
        Value::List(items) => items.iter_mut().for_each(|v| order_key_literals(v, keys)),
        Value::Map(entries) => entries.iter_mut().for_each(|(k, v)| {
            order_key_literals(k, keys);
            order_key_literals(v, keys);
        }),
        Value::Struct(owner, fields) => {
            let key = keys.contains(owner);
            for f in fields {
                if key {
                    f.ty = ordered(f.ty.clone());
                }
                order_key_literals(&mut f.value, keys);
            }
        }
        _ => {}
    }
}

/// `ty` with every `double` inside it made [`Ty::OrderedDouble`]: what a set element or
/// map key type holds.
pub(super) fn ordered(ty: Ty) -> Ty {
    match ty {
        Ty::Double => Ty::OrderedDouble,
        Ty::List(t) => Ty::List(Box::new(ordered(*t))),
        Ty::Set(t) => Ty::Set(Box::new(ordered(*t))),
        Ty::Map(k, v) => Ty::Map(Box::new(ordered(*k)), Box::new(ordered(*v))),
        other => other,
    }
}
