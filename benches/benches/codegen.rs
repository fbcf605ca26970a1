//! How long codegen takes on a large IDL: a generated file of about 10,000 lines
//! (550 structs of 12 fields, 78 enums, 36 services of 25 methods), and half of it, to
//! show the growth is linear.
//!
//! `cargo bench -p benches --bench codegen`

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

/// Writes an IDL with `structs` structs (and proportional enums and services); returns
/// its path and line count.
fn write_idl(structs: usize) -> (PathBuf, usize) {
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
    let lines = idl.lines().count();
    let dir = std::env::temp_dir().join(format!("codegen-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(format!("big{structs}.thrift"));
    std::fs::write(&path, idl).expect("write idl");
    (path, lines)
}

fn codegen(c: &mut Criterion) {
    let mut group = c.benchmark_group("codegen");
    for structs in [275, 550] {
        let (path, lines) = write_idl(structs);
        let mut builder = codegen::Builder::new();
        builder.rerun_if_changed(false);
        let out = builder
            .generate(&[&path])
            .expect("the generated IDL compiles");
        eprintln!(
            "{}: {lines} IDL lines -> {} lines of Rust",
            path.display(),
            out.lines().count()
        );
        group.bench_function(format!("{lines}_idl_lines"), |b| {
            b.iter(|| black_box(builder.generate(&[&path]).expect("generates")))
        });
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .sample_size(10)
}

criterion_group! {
    name = benches;
    config = config();
    targets = codegen
}
criterion_main!(benches);
