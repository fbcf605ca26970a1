//! thrift-dynamic's field paths on any text and bytes: parsing, reading and replacing
//! against the `Mixed` descriptor (see `thrift_wire_fuzz::path::fuzz_path`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| thrift_wire_fuzz::path::fuzz_path(data));
