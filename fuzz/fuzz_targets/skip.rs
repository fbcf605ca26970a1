//! Skips the input as every type id, and as the struct its first byte selects; skipping
//! never reads past the input, and agrees with typed decoding where that succeeds (see
//! `thrift_wire_fuzz::fuzz_skip`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| thrift_wire_fuzz::fuzz_skip(data));
