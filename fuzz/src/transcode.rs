//! The `json_to_thrift` and `thrift_to_json` targets: thrift-dynamic's one-pass
//! transcoder against the descriptor of `idl/mixed.thrift`, transcoding as `Mixed`.
//!
//! An input is a selector byte (bit 0: the Thrift protocol, 0 Binary, 1 Compact; the
//! other bits are ignored) followed by JSON text or Thrift bytes.
//!
//! Checked on every input: the transcoder returns `Ok` or a typed error (never panics),
//! and leaves its output buffer as it was on error, with a JSON offset inside the input.
//! What converts must round-trip: JSON -> Thrift bytes that thrift-wire decodes as
//! `Mixed`, and that go to JSON and back to the very same bytes; Thrift -> JSON text
//! that goes to Thrift and back to the very same text.

use std::path::PathBuf;
use std::sync::OnceLock;

use bytes::Bytes;
use thrift_dynamic::{Descriptor, StructId, ThriftProtocol, json_to_thrift, thrift_to_json};
use thrift_wire::fixtures::mixed::Mixed;
use thrift_wire::{Binary, Codec, Compact};

/// The descriptor of `idl/mixed.thrift` (read once) and its `Mixed`.
fn mixed_desc() -> &'static (Descriptor, StructId) {
    static DESC: OnceLock<(Descriptor, StructId)> = OnceLock::new();
    DESC.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../idl");
        let d = Descriptor::from_files(&[dir.join("mixed.thrift")], &[dir])
            .expect("idl/mixed.thrift loads");
        let ty = d.struct_named("mixed.Mixed").expect("defines Mixed");
        (d, ty)
    })
}

fn split(data: &[u8]) -> Option<(ThriftProtocol, &[u8])> {
    let (&sel, rest) = data.split_first()?;
    let p = if sel & 1 == 0 {
        ThriftProtocol::Binary
    } else {
        ThriftProtocol::Compact
    };
    Some((p, rest))
}

fn decodes_as_mixed(p: ThriftProtocol, bytes: &[u8]) {
    let bytes = Bytes::copy_from_slice(bytes);
    let decoded = match p {
        ThriftProtocol::Binary => Codec::<Binary>::new().decode::<Mixed>(bytes),
        ThriftProtocol::Compact => Codec::<Compact>::new().decode::<Mixed>(bytes),
    };
    if let Err(e) = decoded {
        panic!("transcoded bytes do not decode as Mixed: {e}");
    }
}

/// The `json_to_thrift` target.
pub fn fuzz_json_to_thrift(data: &[u8]) {
    let Some((p, json)) = split(data) else {
        return;
    };
    let (d, ty) = mixed_desc();
    let mut out = vec![0xa5];
    match json_to_thrift(d, *ty, json, p, &mut out) {
        Err(e) => {
            let _ = e.to_string();
            assert_eq!(out, [0xa5], "an error leaves the output as it was");
            if let Some(offset) = e.offset() {
                assert!(offset <= json.len(), "the offset is inside the input: {e}");
            }
        }
        Ok(()) => {
            let bytes = out.split_off(1);
            decodes_as_mixed(p, &bytes);
            let mut text = Vec::new();
            if let Err(e) = thrift_to_json(d, *ty, Bytes::from(bytes.clone()), p, &mut text) {
                panic!("transcoded bytes do not go back to JSON: {e}");
            }
            let mut again = Vec::new();
            if let Err(e) = json_to_thrift(d, *ty, &text, p, &mut again) {
                panic!("JSON the transcoder wrote does not go back: {e}");
            }
            assert_eq!(again, bytes, "JSON -> Thrift -> JSON -> Thrift is stable");
        }
    }
}

/// The `thrift_to_json` target.
pub fn fuzz_thrift_to_json(data: &[u8]) {
    let Some((p, bytes)) = split(data) else {
        return;
    };
    let (d, ty) = mixed_desc();
    let mut out = vec![b' '];
    match thrift_to_json(d, *ty, Bytes::copy_from_slice(bytes), p, &mut out) {
        Err(e) => {
            let _ = e.to_string();
            assert_eq!(out, b" ", "an error leaves the output as it was");
        }
        Ok(()) => {
            let text = out.split_off(1);
            let mut thrift = Vec::new();
            if let Err(e) = json_to_thrift(d, *ty, &text, p, &mut thrift) {
                panic!(
                    "JSON the transcoder wrote does not go back: {e}\n{}",
                    String::from_utf8_lossy(&text)
                );
            }
            decodes_as_mixed(p, &thrift);
            let mut again = Vec::new();
            if let Err(e) = thrift_to_json(d, *ty, Bytes::from(thrift), p, &mut again) {
                panic!("transcoded bytes do not go back to JSON: {e}");
            }
            assert_eq!(again, text, "Thrift -> JSON -> Thrift -> JSON is stable");
        }
    }
}

/// The seed inputs: the sample `Mixed` (with finite scores: JSON has no infinity) and
/// the empty one, in both protocols, as Thrift bytes (for `thrift_to_json`) and as the
/// JSON the transcoder makes of them (for `json_to_thrift`).
pub fn transcode_seeds() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut sample = crate::mixed();
    sample.ids.scores.retain(|s| s.is_finite());
    let (d, ty) = mixed_desc();
    let mut json_seeds = Vec::new();
    let mut thrift_seeds = Vec::new();
    for value in [sample, Mixed::default()] {
        for (sel, p) in [(0u8, ThriftProtocol::Binary), (1, ThriftProtocol::Compact)] {
            let bytes = match p {
                ThriftProtocol::Binary => crate::encode(Codec::<Binary>::new(), &value),
                ThriftProtocol::Compact => crate::encode(Codec::<Compact>::new(), &value),
            };
            let mut json = vec![sel];
            thrift_to_json(d, *ty, bytes.clone(), p, &mut json).expect("a fixture transcodes");
            json_seeds.push(json);
            let mut thrift = vec![sel];
            thrift.extend_from_slice(&bytes);
            thrift_seeds.push(thrift);
        }
    }
    (json_seeds, thrift_seeds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_pass_both_targets() {
        let (json, thrift) = transcode_seeds();
        for seed in &json {
            fuzz_json_to_thrift(seed);
        }
        for seed in &thrift {
            fuzz_thrift_to_json(seed);
        }
    }

    #[test]
    fn the_json_seeds_transcode() {
        let (json, _) = transcode_seeds();
        let (d, ty) = mixed_desc();
        for seed in &json {
            let (p, text) = split(seed).unwrap();
            let mut out = Vec::new();
            json_to_thrift(d, *ty, text, p, &mut out).unwrap();
        }
    }
}
