//! The value of an instance's key: a [`Registration`] as JSON, written by the
//! registry and read (defensively: it is another process's data) by discovery, in
//! either [layout](Layout).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use volo_core::context::Address;
use volo_core::registry::Registration;

use crate::config::{KITEX_DEFAULT_WEIGHT, Layout};

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

/// The value of Kitex's etcd registry: one address, with the network Go dials it on.
#[derive(Debug, Serialize, Deserialize)]
struct KitexValue {
    /// `tcp` for what we write; `tcp`, `tcp4`, `tcp6` or `unix` read. Missing or
    /// empty: `tcp`.
    #[serde(default)]
    network: String,
    address: String,
    /// Zero or less (or missing): [`KITEX_DEFAULT_WEIGHT`], as Kitex reads it.
    #[serde(default)]
    weight: i64,
    /// Go writes a nil map as `null`.
    #[serde(default)]
    tags: Option<BTreeMap<String, String>>,
}

/// The address `instance` is filed under in `layout`: its first address in ours; in
/// Kitex's, its first TCP address (an IP or a DNS name with a port), the only kind
/// a Kitex client dials from a registry. `None`: it has none.
pub(crate) fn key_address(layout: Layout, instance: &Registration) -> Option<&Address> {
    match layout {
        Layout::Native => instance.addresses.first(),
        Layout::Kitex => instance.addresses.iter().find(|a| a.is_tcp()),
    }
}

/// `instance`'s value in `layout`, where it is filed under `address` (its
/// [`key_address`]).
pub(crate) fn encode(layout: Layout, instance: &Registration, address: &Address) -> Vec<u8> {
    match layout {
        Layout::Native => encode_native(instance),
        Layout::Kitex => {
            let value = KitexValue {
                network: "tcp".to_string(),
                address: address.to_string(),
                weight: i64::from(instance.weight),
                tags: Some(instance.tags.clone()),
            };
            // Strings, a number and a map of strings always serialize.
            serde_json::to_vec(&value).unwrap_or_default()
        }
    }
}

fn encode_native(instance: &Registration) -> Vec<u8> {
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

/// The registration of `service` in `bytes`, written in `layout`: at most `max`
/// bytes of JSON with at least one address that parses. Addresses that do not are
/// left out and reported (a newer server may register a kind of address this client
/// does not know; its other addresses still serve).
pub(crate) fn decode(
    layout: Layout,
    service: &str,
    bytes: &[u8],
    max: usize,
) -> Result<Decoded, Skip> {
    if bytes.len() > max {
        return Err(Skip::TooLarge {
            len: bytes.len(),
            max,
        });
    }
    match layout {
        Layout::Native => decode_native(service, bytes),
        Layout::Kitex => decode_kitex(service, bytes),
    }
}

fn decode_native(service: &str, bytes: &[u8]) -> Result<Decoded, Skip> {
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

/// A Kitex value: its one address, on a network Go dials (`tcp`, `tcp4`, `tcp6`:
/// `host:port`; `unix`: a socket path). Kitex reads a weight of zero or less as its
/// default, and so does this.
fn decode_kitex(service: &str, bytes: &[u8]) -> Result<Decoded, Skip> {
    let value: KitexValue = serde_json::from_slice(bytes).map_err(|e| Skip::Json(e.to_string()))?;
    let parsed = match value.network.as_str() {
        "" | "tcp" | "tcp4" | "tcp6" => value
            .address
            .parse::<Address>()
            .ok()
            .filter(Address::is_tcp),
        "unix" => format!("unix:{}", value.address).parse::<Address>().ok(),
        _ => None,
    };
    let Some(address) = parsed else {
        return Err(Skip::NoAddress(vec![format!(
            "{}:{}",
            value.network, value.address
        )]));
    };
    let weight = if value.weight <= 0 {
        KITEX_DEFAULT_WEIGHT
    } else {
        u32::try_from(value.weight).unwrap_or(u32::MAX)
    };
    Ok(Decoded {
        registration: Registration {
            service: service.to_string(),
            addresses: vec![address],
            weight,
            tags: value.tags.unwrap_or_default(),
            host: None,
        },
        bad_addresses: Vec::new(),
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
        let r = reg();
        let bytes = encode(Layout::Native, &r, &r.addresses[0]);
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            r#"{"addresses":["127.0.0.1:9000","unix:/run/x.sock","shm:/run/x.shm"],"weight":70,"tags":{"k":"v"},"host":null}"#
        );
        let back = decode(Layout::Native, "echo", &bytes, 1 << 16).unwrap();
        assert_eq!(back.registration, reg());
        assert!(back.bad_addresses.is_empty());
    }

    #[test]
    fn missing_fields_take_defaults_and_unknown_ones_are_ignored() {
        let d = decode(
            Layout::Native,
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
            decode(Layout::Native, "echo", &[b' '; 65], max),
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
                matches!(decode(Layout::Native, "echo", bad, max), Err(Skip::Json(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            decode(Layout::Native, "echo", br#"{"addresses":["nope"]}"#, max).unwrap_err(),
            Skip::NoAddress(vec!["nope".into()])
        );
        assert_eq!(
            decode(Layout::Native, "echo", br#"{"addresses":[]}"#, max).unwrap_err(),
            Skip::NoAddress(vec![])
        );
        let some = decode(
            Layout::Native,
            "echo",
            br#"{"addresses":["vsock:3:80","1.2.3.4:5"]}"#,
            max,
        )
        .unwrap();
        assert_eq!(some.bad_addresses, ["vsock:3:80"]);
        assert_eq!(some.registration.addresses.len(), 1);
    }

    #[test]
    fn the_kitex_value_is_kitexs_json_under_the_first_tcp_address() {
        let mut r = reg();
        r.addresses.reverse(); // shm, unix, then TCP: the TCP one is filed
        r.weight = 10;
        let at = key_address(Layout::Kitex, &r).unwrap();
        assert_eq!(at.to_string(), "127.0.0.1:9000");
        let bytes = encode(Layout::Kitex, &r, at);
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            r#"{"network":"tcp","address":"127.0.0.1:9000","weight":10,"tags":{"k":"v"}}"#
        );
        let back = decode(Layout::Kitex, "echo", &bytes, 1024)
            .unwrap()
            .registration;
        assert_eq!(back.addresses, std::slice::from_ref(at));
        assert_eq!((back.weight, &back.tags, &back.host), (10, &r.tags, &None));
        // Only Unix sockets and shared memory: nothing a Kitex client could dial.
        r.addresses.retain(|a| !matches!(a, Address::Tcp(_)));
        assert_eq!(key_address(Layout::Kitex, &r), None);
        assert!(key_address(Layout::Native, &r).is_some());
    }

    #[test]
    fn kitex_values_are_read_as_kitex_reads_them() {
        let read = |json: &str| decode(Layout::Kitex, "echo", json.as_bytes(), 1024);
        // What a Kitex server writes (Go writes a nil map as null).
        let d = read(r#"{"network":"tcp","address":"10.0.0.7:8888","weight":10,"tags":null}"#)
            .unwrap()
            .registration;
        assert_eq!(d.addresses, ["10.0.0.7:8888".parse::<Address>().unwrap()]);
        assert_eq!(d.weight, 10);
        assert!(d.tags.is_empty());
        // A weight of zero or less, or none, is Kitex's default; a huge one is capped.
        for (json, weight) in [
            (r#"{"network":"tcp","address":"h.local:1","weight":0}"#, 10),
            (
                r#"{"network":"tcp4","address":"1.2.3.4:1","weight":-5}"#,
                10,
            ),
            (r#"{"address":"[::1]:1"}"#, 10),
            (
                r#"{"network":"tcp6","address":"[::1]:1","weight":99999999999}"#,
                u32::MAX,
            ),
        ] {
            assert_eq!(read(json).unwrap().registration.weight, weight, "{json}");
        }
        let unix = read(r#"{"network":"unix","address":"/run/e.sock"}"#).unwrap();
        assert_eq!(
            unix.registration.addresses[0].to_string(),
            "unix:/run/e.sock"
        );
        // Networks Go has but we do not dial, addresses that are not host:port, and
        // values that are not the JSON.
        for bad in [
            r#"{"network":"udp","address":"1.2.3.4:5"}"#,
            r#"{"network":"tcp","address":"nope"}"#,
            r#"{"network":"tcp","address":"unix:/x"}"#,
        ] {
            assert!(matches!(read(bad), Err(Skip::NoAddress(_))), "{bad}");
        }
        for bad in [
            r#"{"network":"tcp"}"#,
            r#"{"address":5}"#,
            "[]",
            r#"{"address":"a:1","tags":{"k":1}}"#,
        ] {
            assert!(matches!(read(bad), Err(Skip::Json(_))), "{bad}");
        }
        assert!(matches!(
            decode(Layout::Kitex, "echo", &[b' '; 65], 64),
            Err(Skip::TooLarge { .. })
        ));
    }
}
