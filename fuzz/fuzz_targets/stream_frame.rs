//! Any bytes as a TTHeader stream frame (Kitex's streaming): the length check, the
//! detection, the frame and the exception it may carry, and the round trip of
//! whatever decodes (see `thrift_wire_fuzz::stream::fuzz_stream_frame`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| thrift_wire_fuzz::stream::fuzz_stream_frame(data));
