//! Decodes the input as the fixture type its first byte selects; a value that decodes
//! must skip to the same length, re-encode to exactly `size` bytes, and decode back to
//! itself (see `thrift_wire_fuzz::fuzz_decode`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| thrift_wire_fuzz::fuzz_decode(data));
