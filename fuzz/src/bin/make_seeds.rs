//! Writes the seed corpus of the fuzz targets: every sample value of
//! `thrift_wire_fuzz::seeds` into `corpus/decode/` and `corpus/skip/`, of
//! `thrift_wire_fuzz::json_seeds` into `corpus/json/`, the frames of
//! `thrift_wire_fuzz::theader::theader_seeds` into `corpus/theader/`, those of
//! `thrift_wire_fuzz::stream::stream_seeds` into `corpus/stream_frame/`, the inputs of
//! `thrift_wire_fuzz::path::path_seeds` into `corpus/path/`, and those of
//! `thrift_wire_fuzz::transcode::transcode_seeds` into `corpus/json_to_thrift/` and
//! `corpus/thrift_to_json/` (or under the directory given as the only argument). Run it
//! before fuzzing:
//!
//! ```text
//! cargo run --manifest-path fuzz/Cargo.toml --bin make_seeds
//! cargo +nightly fuzz run decode
//! ```

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus"));
    let binary = thrift_wire_fuzz::seeds();
    let json = thrift_wire_fuzz::json_seeds();
    for (target, seeds) in [("decode", &binary), ("skip", &binary), ("json", &json)] {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        for (i, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:02}")), seed)?;
        }
        println!("{} seeds in {}", seeds.len(), dir.display());
    }
    let theader = thrift_wire_fuzz::theader::theader_seeds();
    let stream = thrift_wire_fuzz::stream::stream_seeds();
    let path = thrift_wire_fuzz::path::path_seeds();
    for (target, seeds) in [
        ("theader", &theader),
        ("stream_frame", &stream),
        ("path", &path),
    ] {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        for (i, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:02}")), seed)?;
        }
        println!("{} seeds in {}", seeds.len(), dir.display());
    }
    let (json, thrift) = thrift_wire_fuzz::transcode::transcode_seeds();
    for (target, seeds) in [("json_to_thrift", &json), ("thrift_to_json", &thrift)] {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        for (i, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:02}")), seed)?;
        }
        println!("{} seeds in {}", seeds.len(), dir.display());
    }
    Ok(())
}
