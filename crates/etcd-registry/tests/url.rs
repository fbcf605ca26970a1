//! `parse_url`: the forms taken and the ones refused.

use etcd_registry::{UrlError, parse_url};

#[test]
fn parse_url_takes_etcd_urls_with_one_or_more_endpoints() {
    let ok = |url: &str| parse_url(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    assert_eq!(ok("etcd://127.0.0.1:2379"), ["127.0.0.1:2379"]);
    assert_eq!(
        ok("etcd://10.0.0.1:2379,10.0.0.2:2379,etcd-3.prod.local:2380"),
        ["10.0.0.1:2379", "10.0.0.2:2379", "etcd-3.prod.local:2380"]
    );
    assert_eq!(ok("etcd://[::1]:2379"), ["[::1]:2379"]);
    assert_eq!(ok("etcd://localhost:2379"), ["localhost:2379"]);
    // Schemes are case-insensitive (RFC 3986).
    assert_eq!(ok("ETCD://127.0.0.1:2379"), ["127.0.0.1:2379"]);
}

#[test]
fn parse_url_refuses_everything_else_with_a_typed_error() {
    for url in [
        "",
        "etcd:/127.0.0.1:2379",
        "http://127.0.0.1:2379",
        "127.0.0.1:2379",
        "etcd",
        "étcd://127.0.0.1:2379",
    ] {
        assert!(
            matches!(parse_url(url), Err(UrlError::Scheme { .. })),
            "{url:?}: {:?}",
            parse_url(url)
        );
    }
    for url in ["etcd://", "etcd://a:1,", "etcd://,a:1", "etcd://a:1,,b:2"] {
        assert!(
            matches!(parse_url(url), Err(UrlError::EmptyEndpoint { .. })),
            "{url:?}: {:?}",
            parse_url(url)
        );
    }
    for (url, endpoint) in [
        ("etcd://127.0.0.1", "127.0.0.1"),
        ("etcd://127.0.0.1:", "127.0.0.1:"),
        ("etcd://127.0.0.1:0", "127.0.0.1:0"),
        ("etcd://127.0.0.1:65536", "127.0.0.1:65536"),
        ("etcd://127.0.0.1:2379/", "127.0.0.1:2379/"),
        ("etcd://127.0.0.1:2379/v3", "127.0.0.1:2379/v3"),
        ("etcd://127.0.0.1:2379?x=1", "127.0.0.1:2379?x=1"),
        ("etcd://user@127.0.0.1:2379", "user@127.0.0.1:2379"),
        ("etcd://a:1, b:2", " b:2"),
        ("etcd://::1:2379", "::1:2379"),
        ("etcd://unix:/run/etcd.sock", "unix:/run/etcd.sock"),
        ("etcd://shm:/x:1", "shm:/x:1"),
        ("etcd://bad_host-:2379", "bad_host-:2379"),
    ] {
        assert_eq!(
            parse_url(url),
            Err(UrlError::Endpoint {
                endpoint: endpoint.to_string()
            }),
            "{url:?}"
        );
    }
    let err = parse_url("http://x:1").unwrap_err();
    assert!(err.to_string().contains("etcd://host:port"), "{err}");
}
