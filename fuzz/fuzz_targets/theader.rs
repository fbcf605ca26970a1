//! Any bytes as an Apache THeader frame: detection, frame cutting, the header and the
//! bounded zlib transform, and the round trip of whatever decodes (see
//! `thrift_wire_fuzz::theader::fuzz_theader`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| thrift_wire_fuzz::theader::fuzz_theader(data));
