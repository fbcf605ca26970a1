//! The value of an instance's key: a [`Registration`] as JSON, written by the
//! registry and read (defensively: it is another process's data) by discovery.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use volo_core::context::Address;
use volo_core::registry::Registration;

/// The JSON value, as stored.
#[derive(Debug, Serialize, Deserialize)]
struct Value {
    /// Every address, as `Address`'s `Display` writes it.
    addresses: Vec<String>,
    /// Missing: 100, the default weight.
    #[serde(default = "default_weight")]
    weight: u32,
    /// Missing: none.
    #[serde(default)]
    tags: BTreeMap<String, String>,
    /// Missing or null: no host identity.
    #[serde(default)]
    host: Option<String>,
}

fn default_weight() -> u32 {
    100
}

/// `instance`'s value.
pub(crate) fn encode(instance: &Registration) -> Vec<u8> {
    let value = Value {
        addresses: instance.addresses.iter().map(ToString::to_string).collect(),
        weight: instance.weight,
        tags: instance.tags.clone(),
        host: instance.host.clone(),
    };
    // A struct of strings, maps of strings and a number always serializes.
    serde_json::to_vec(&value).unwrap_or_default()
}

/// The registration a value holds.
#[derive(Debug)]
pub(crate) struct Decoded {
    /// The registration, with the addresses that parsed.
    pub(crate) registration: Registration,
    /// The addresses that did not parse (left out), with why.
    pub(crate) bad_addresses: Vec<String>,
}

/// Why a value was skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Skip {
    /// Larger than the limit.
    #[error("value of {len} bytes is over the limit of {max}")]
    TooLarge { len: usize, max: usize },
    /// Not the JSON of a registration.
    #[error("value is not a registration's JSON: {0}")]
    Json(String),
    /// No address parsed.
    #[error("value has no address that parses (bad: {0:?})")]
    NoAddress(Vec<String>),
}

/// The registration of `service` in `bytes`: at most `max` bytes of JSON with at
/// least one address that parses. Addresses that do not are left out and reported
/// (a newer server may register a kind of address this client does not know; its
/// other addresses still serve).
pub(crate) fn decode(service: &str, bytes: &[u8], max: usize) -> Result<Decoded, Skip> {
    if bytes.len() > max {
        return Err(Skip::TooLarge {
            len: bytes.len(),
            max,
        });
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| Skip::Json(e.to_string()))?;
    let mut addresses = Vec::with_capacity(value.addresses.len());
    let mut bad_addresses = Vec::new();
    for a in value.addresses {
        match a.parse::<Address>() {
            Ok(address) => addresses.push(address),
            Err(_) => bad_addresses.push(a),
        }
    }
    if addresses.is_empty() {
        return Err(Skip::NoAddress(bad_addresses));
    }
    Ok(Decoded {
        registration: Registration {
            service: service.to_string(),
            addresses,
            weight: value.weight,
            tags: value.tags,
            host: value.host,
        },
        bad_addresses,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg() -> Registration {
        Registration {
            service: "echo".into(),
            addresses: ["127.0.0.1:9000", "unix:/run/x.sock", "shm:/run/x.shm"]
                .iter()
                .map(|a| a.parse().unwrap())
                .collect(),
            weight: 70,
            tags: BTreeMap::from([("k".to_string(), "v".to_string())]),
            host: None,
        }
    }

    #[test]
    fn the_value_is_the_documented_json_and_reads_back() {
        let bytes = encode(&reg());
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            r#"{"addresses":["127.0.0.1:9000","unix:/run/x.sock","shm:/run/x.shm"],"weight":70,"tags":{"k":"v"},"host":null}"#
        );
        let back = decode("echo", &bytes, 1 << 16).unwrap();
        assert_eq!(back.registration, reg());
        assert!(back.bad_addresses.is_empty());
    }

    #[test]
    fn missing_fields_take_defaults_and_unknown_ones_are_ignored() {
        let d = decode(
            "echo",
            br#"{"addresses":["svc.local:80"],"future":[1,2]}"#,
            1024,
        )
        .unwrap();
        assert_eq!(d.registration.weight, 100);
        assert!(d.registration.tags.is_empty());
        assert_eq!(d.registration.host, None);
    }

    #[test]
    fn bad_values_are_refused_with_why() {
        let max = 64;
        assert!(matches!(
            decode("echo", &[b' '; 65], max),
            Err(Skip::TooLarge { len: 65, max: 64 })
        ));
        for bad in [
            &b""[..],
            b"{",
            b"null",
            b"[]",
            b"\xff\xfe",
            br#"{"weight":1}"#,
            br#"{"addresses":"1.2.3.4:5"}"#,
            br#"{"addresses":[],"weight":-1}"#,
            br#"{"addresses":["1.2.3.4:5"],"tags":{"k":1}}"#,
        ] {
            assert!(
                matches!(decode("echo", bad, max), Err(Skip::Json(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            decode("echo", br#"{"addresses":["nope"]}"#, max).unwrap_err(),
            Skip::NoAddress(vec!["nope".into()])
        );
        assert_eq!(
            decode("echo", br#"{"addresses":[]}"#, max).unwrap_err(),
            Skip::NoAddress(vec![])
        );
        let some = decode("echo", br#"{"addresses":["vsock:3:80","1.2.3.4:5"]}"#, max).unwrap();
        assert_eq!(some.bad_addresses, ["vsock:3:80"]);
        assert_eq!(some.registration.addresses.len(), 1);
    }
}
