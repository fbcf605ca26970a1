//! Shared by the benchmarks and the programs next to them.
//!
//! [`big_idl`] writes the large IDL that the codegen benchmark and
//! `benches/generated-crate-build-time.sh` use.

use std::fmt::Write as _;

/// A synthetic IDL with `structs` structs of 12 fields (every base type, lists, maps,
/// an enum and the previous struct), `structs / 7` enums of 8 values and
/// `structs / 15` services of 25 methods. 550 structs make about 10,000 lines.
pub fn big_idl(structs: usize) -> String {
    let mut idl = String::from("namespace rs big\n\n");
    let enums = structs / 7;
    for e in 0..enums {
        let _ = writeln!(idl, "enum Kind{e} {{");
        for v in 0..8 {
            let _ = writeln!(idl, "    K{e}_V{v} = {v},");
        }
        idl.push_str("}\n\n");
    }
    let types = [
        "i32",
        "i64",
        "string",
        "binary",
        "double",
        "bool",
        "list<i64>",
        "map<string, i32>",
    ];
    for s in 0..structs {
        let _ = writeln!(idl, "struct Item{s} {{");
        for f in 0..12 {
            let ty = if f == 10 && s > 0 {
                format!("Item{}", s - 1)
            } else if f == 11 && enums > 0 {
                format!("Kind{}", s % enums)
            } else {
                types[(s + f) % types.len()].to_string()
            };
            let req = if f % 3 == 0 { "optional " } else { "" };
            let _ = writeln!(idl, "    {}: {req}{ty} field_{f},", f + 1);
        }
        idl.push_str("}\n\n");
    }
    for svc in 0..structs / 15 {
        let _ = writeln!(idl, "service Service{svc} {{");
        for m in 0..25 {
            let arg = (svc * 25 + m) % structs;
            let _ = writeln!(
                idl,
                "    Item{arg} call_{m}(1: Item{arg} req, 2: i64 trace_id),"
            );
        }
        idl.push_str("}\n\n");
    }
    idl
}
