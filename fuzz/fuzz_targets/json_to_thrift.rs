//! thrift-dynamic's JSON -> Thrift transcoder on any text, as `Mixed`: `Ok` or a typed
//! error, and what converts round-trips (see
//! `thrift_wire_fuzz::transcode::fuzz_json_to_thrift`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| thrift_wire_fuzz::transcode::fuzz_json_to_thrift(data));
