//! The JSON protocol on any text: decoding as the fixture type the first byte selects
//! (what decodes must skip to the same length and round-trip), skipping as every type,
//! and the message scanner agreeing with the decoder (see
//! `thrift_wire_fuzz::json::fuzz_json`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| thrift_wire_fuzz::json::fuzz_json(data));
