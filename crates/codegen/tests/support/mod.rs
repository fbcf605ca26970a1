//! What the tests that read models share: looking items up by their Thrift names.
#![allow(dead_code, unreachable_pub)]

use thrift_codegen::model::{ConstDef, EnumDef, Item, Model, StructDef};

/// The first item of module `module` that `pick` takes; panics naming `what` if none.
fn find<'m, T>(
    model: &'m Model,
    module: &str,
    what: &str,
    pick: impl Fn(&'m Item) -> Option<&'m T>,
) -> &'m T {
    model
        .modules
        .iter()
        .filter(|m| m.name == module)
        .flat_map(|m| &m.items)
        .find_map(pick)
        .unwrap_or_else(|| panic!("no {what} in module {module}"))
}

/// Struct, union or exception `name` of `module`.
pub fn find_struct<'m>(model: &'m Model, module: &str, name: &str) -> &'m StructDef {
    find(model, module, name, |i| match i {
        Item::Struct(s) if s.thrift_name == name => Some(s),
        _ => None,
    })
}

/// Enum `name` of `module`.
pub fn find_enum<'m>(model: &'m Model, module: &str, name: &str) -> &'m EnumDef {
    find(model, module, name, |i| match i {
        Item::Enum(e) if e.thrift_name == name => Some(e),
        _ => None,
    })
}

/// Constant `name` of `module`.
pub fn find_const<'m>(model: &'m Model, module: &str, name: &str) -> &'m ConstDef {
    find(model, module, name, |i| match i {
        Item::Const(c) if c.name == name => Some(c),
        _ => None,
    })
}
