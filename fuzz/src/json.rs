//! The `json` target: the JSON protocol's decoder, skipper and message scanner on any
//! bytes. An input is a selector byte (as for the other targets; its protocol bit is
//! ignored) followed by the text to decode.
//!
//! Checked on every input: typed decoding as the selected fixture type (a value that
//! decodes must skip to the same length and round-trip, with `size` exact and the
//! encoding deterministic); skipping as every type ends inside the input; the message
//! scanner agrees with the decoder (a message that decodes is cut whole, up to trailing
//! whitespace) and finds the same end whether the bytes come at once or in pieces.

use bytes::Bytes;
use thrift_wire::protocol::json::{MessageScanner, message_len};
use thrift_wire::{Codec, DecodeLimits, Decoder, Json, TType};

use crate::{ALL_TYPES, Selector, Target, decode_in};

/// The `json` target.
pub fn fuzz_json(data: &[u8]) {
    let Some((sel, input)) = Selector::split(data) else {
        return;
    };
    let codec = sel.codec::<Json>();
    decode_in::<Json>(sel, input.clone());
    skip_as_every_type(codec, &input);
    scan(codec, sel, &input);
}

fn skip_as_every_type(codec: Codec<Json>, input: &Bytes) {
    for ty in ALL_TYPES {
        let mut d = codec.decoder(input.clone()).expect("within the size limit");
        let result = d.skip(ty);
        assert!(d.remaining() <= input.len(), "skip stays inside the input");
        if matches!(ty, TType::Stop | TType::Void) {
            assert!(result.is_err(), "{ty:?} is no value to skip");
        }
    }
}

fn scan(codec: Codec<Json>, sel: Selector, input: &Bytes) {
    let limits = DecodeLimits {
        max_depth: if sel.shallow {
            4
        } else {
            thrift_wire::DEFAULT_MAX_DEPTH
        },
        ..DecodeLimits::default()
    };
    let whole = message_len(input, limits, usize::MAX);
    if let Ok(Some(n)) = whole {
        assert!(n <= input.len());
    }
    // In pieces of 1, 2, 3... bytes: the same answer as at once.
    let mut scanner = MessageScanner::new(limits, usize::MAX);
    let mut piecewise = Ok(None);
    let mut end = 0;
    let mut step = 1;
    while end < input.len() {
        end = (end + step).min(input.len());
        step += 1;
        piecewise = scanner.scan(&input[..end]);
        if !matches!(piecewise, Ok(None)) {
            break;
        }
    }
    if !input.is_empty() {
        assert_eq!(
            piecewise.as_ref().map_err(|e| e.kind().clone()),
            whole.as_ref().map_err(|e| e.kind().clone()),
            "the scanner's answer depends on how the bytes arrive"
        );
    }
    // A message the decoder takes is cut whole by the scanner.
    if sel.target == Target::CallRequest
        && codec
            .decode_message::<thrift_wire::fixtures::echo::Request>(input.clone())
            .is_ok()
    {
        let n = match whole {
            Ok(Some(n)) => n,
            other => panic!("a message that decodes scans as {other:?}"),
        };
        assert!(
            input[n..].iter().all(u8::is_ascii_whitespace),
            "the scanner cut a message short"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_decode_and_pass_every_check() {
        for seed in crate::json_seeds() {
            fuzz_json(&seed);
            let (sel, input) = Selector::split(&seed).unwrap();
            let codec = sel.codec::<Json>();
            let ok = match sel.target {
                Target::CallRequest => codec
                    .decode_message::<thrift_wire::fixtures::echo::Request>(input)
                    .is_ok(),
                _ => {
                    let mut d = codec.decoder(input).unwrap();
                    d.skip(TType::Struct).is_ok() && d.remaining() == 0
                }
            };
            assert!(ok, "seed {:?}", String::from_utf8_lossy(&seed));
        }
    }

    #[test]
    fn truncated_and_corrupted_text_passes_the_checks() {
        for seed in crate::json_seeds() {
            for cut in 0..seed.len() {
                fuzz_json(&seed[..cut]);
            }
            let mut flipped = seed.clone();
            for i in 1..flipped.len() {
                flipped[i] ^= 0x20;
                fuzz_json(&flipped);
                flipped[i] ^= 0x20;
            }
        }
    }
}
