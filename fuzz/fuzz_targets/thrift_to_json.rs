//! thrift-dynamic's Thrift -> JSON transcoder on any bytes, as `Mixed`: `Ok` or a typed
//! error, and what converts round-trips (see
//! `thrift_wire_fuzz::transcode::fuzz_thrift_to_json`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| thrift_wire_fuzz::transcode::fuzz_thrift_to_json(data));
