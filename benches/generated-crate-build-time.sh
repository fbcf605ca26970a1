#!/usr/bin/env bash
# How long a user's crate generated from the large bench IDL takes to build: its
# build.rs runs thrift_codegen::compile on the IDL and its lib.rs includes the output, as the
# codegen crate docs show. Dependencies are built first; the figure is the rebuild after
# the IDL changes (build script run + compiling the generated code), in the dev and the
# release profile.
#
# Usage: benches/generated-crate-build-time.sh [STRUCT_COUNT]   (550: ~10,000 IDL lines)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
structs=${1:-550}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/src" "$dir/idl"

cargo run -q --release --manifest-path "$root/Cargo.toml" -p benches --bin big-idl -- "$structs" \
    > "$dir/idl/big.thrift"
cp "$root/rust-toolchain.toml" "$dir/"
cat > "$dir/Cargo.toml" <<TOML
[package]
name = "big-generated"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
thrift-wire = { path = "$root/crates/thrift-codec" }
volo-core = { path = "$root/crates/volo-core" }

[build-dependencies]
thrift-codegen = { path = "$root/crates/codegen" }

[workspace]
TOML
cat > "$dir/build.rs" <<'RS'
fn main() -> Result<(), Box<dyn std::error::Error>> {
    thrift_codegen::compile(&["idl/big.thrift"], &["idl"])?;
    Ok(())
}
RS
cat > "$dir/src/lib.rs" <<'RS'
include!(concat!(env!("OUT_DIR"), "/thrift_gen.rs"));
RS

echo "IDL: $(wc -l < "$dir/idl/big.thrift") lines ($structs structs)"
for profile in dev release; do
    flag=""
    [ "$profile" = release ] && flag="--release"
    # Dependencies and a first build, not timed.
    (cd "$dir" && cargo build -q $flag)
    touch "$dir/idl/big.thrift"
    start=$(date +%s.%N)
    (cd "$dir" && cargo build -q $flag)
    end=$(date +%s.%N)
    generated=$(find "$dir/target" -name thrift_gen.rs -path "*big-generated*" | head -n 1)
    printf '%-8s rebuild after an IDL change: %.1f s (generated: %s lines of Rust)\n' \
        "$profile" "$(awk "BEGIN { print $end - $start }")" "$(wc -l < "$generated")"
done
