//! How long codegen takes on a large IDL: a generated file of about 10,000 lines
//! (550 structs of 12 fields, 78 enums, 36 services of 25 methods), and half of it, to
//! show the growth is linear; pilota-build (volo's code generator) on the same files is
//! the peer (at the smaller size: it takes seconds per run). Both write their output to
//! a file, as a build script does.
//!
//! `cargo bench -p benches --bench codegen`

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

/// Writes [`benches::big_idl`] with `structs` structs to a temporary file; returns its
/// path and line count.
fn write_idl(structs: usize) -> (PathBuf, usize) {
    let idl = benches::big_idl(structs);
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
        let mut builder = thrift_codegen::Builder::new();
        builder.rerun_if_changed(false);
        let out = builder
            .generate(&[&path])
            .expect("the generated IDL compiles");
        eprintln!(
            "{}: {lines} IDL lines -> {} lines of Rust",
            path.display(),
            out.lines().count()
        );
        let out_dir = path.with_extension("out");
        std::fs::create_dir_all(&out_dir).expect("output dir");
        builder.out_dir(&out_dir);
        group.bench_function(format!("codegen/{lines}_idl_lines"), |b| {
            b.iter(|| black_box(builder.compile(&[&path]).expect("generates")))
        });
        // pilota-build needs seconds per run here, and criterion takes ten samples at
        // least, so it runs at the smaller size only (about 2.5 minutes).
        if structs != 275 {
            continue;
        }
        let pilota_out = out_dir.join("pilota_gen.rs");
        group.bench_function(format!("pilota-build/{lines}_idl_lines"), |b| {
            b.iter(|| {
                pilota_build::Builder::thrift()
                    .ignore_unused(false)
                    .compile([&path], pilota_build::Output::File(pilota_out.clone()));
            })
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
