//! Any text as an IDL file: codegen refuses it with an error or emits Rust that parses
//! (see `thrift_wire_fuzz::idl::fuzz_idl`). Seeds: the repository's `.thrift` files.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    thrift_wire_fuzz::idl::fuzz_idl(data);
});
