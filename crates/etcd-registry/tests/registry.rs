//! The server side against a real etcd: keys, values, leases, keepalives.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{GetOptions, LeaseTimeToLiveOptions};
use etcd_registry::{EtcdConfig, EtcdRegistry};
use support::bounded;
use volo_core::registry::{Registration, Registry};

fn registration(service: &str, addresses: &[&str]) -> Registration {
    Registration {
        service: service.into(),
        addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
        weight: 100,
        tags: BTreeMap::from([("k".to_string(), "v".to_string())]),
        host: Some("h1".into()),
    }
}

/// The value and lease of `key`, if it exists.
async fn read(client: &mut etcd_client::Client, key: &str) -> Option<(String, i64)> {
    let answer = client.get(key, None).await.unwrap();
    answer
        .kvs()
        .first()
        .map(|kv| (kv.value_str().unwrap().to_string(), kv.lease()))
}

/// The TTL etcd has left on `lease` (-1: no such lease).
async fn ttl(client: &mut etcd_client::Client, lease: i64) -> i64 {
    client
        .lease_time_to_live(lease, None::<LeaseTimeToLiveOptions>)
        .await
        .unwrap()
        .ttl()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_puts_the_value_under_a_lease_and_deregister_removes_both() {
    let Some(etcd) = support::etcd() else { return };
    bounded(30, async {
        let mut raw = etcd.client().await;
        let registry = EtcdRegistry::connect(etcd.config()).await.unwrap();
        let echo = registration("echo", &["127.0.0.1:9000", "unix:/run/x.sock", "shm:/run/x.shm"]);
        registry.register(&echo).await.unwrap();

        let key = "/thrift-rpc/services/echo/127.0.0.1:9000";
        let (value, lease) = read(&mut raw, key).await.expect("the key is there");
        assert_eq!(
            value,
            r#"{"addresses":["127.0.0.1:9000","unix:/run/x.sock","shm:/run/x.shm"],"weight":100,"tags":{"k":"v"},"host":"h1"}"#
        );
        assert_ne!(lease, 0, "the key has a lease");
        let left = ttl(&mut raw, lease).await;
        assert!((1..=10).contains(&left), "lease TTL {left}");

        // Two instances of one service and another service, from the same registry.
        let echo2 = registration("echo", &["127.0.0.1:9001"]);
        let ping = registration("ping", &["127.0.0.1:9002"]);
        registry.register(&echo2).await.unwrap();
        registry.register(&ping).await.unwrap();
        let all = raw
            .get("/thrift-rpc/services/", Some(GetOptions::new().with_prefix()))
            .await
            .unwrap();
        let keys: Vec<&str> = all.kvs().iter().map(|kv| kv.key_str().unwrap()).collect();
        assert_eq!(
            keys,
            [
                key,
                "/thrift-rpc/services/echo/127.0.0.1:9001",
                "/thrift-rpc/services/ping/127.0.0.1:9002"
            ]
        );
        let leases: std::collections::HashSet<i64> =
            all.kvs().iter().map(|kv| kv.lease()).collect();
        assert_eq!(leases.len(), 3, "one lease per registration");

        registry.deregister(&echo).await.unwrap();
        assert_eq!(read(&mut raw, key).await, None, "the key is deleted");
        assert_eq!(ttl(&mut raw, lease).await, -1, "the lease is revoked");
        // The others stay.
        assert!(read(&mut raw, "/thrift-rpc/services/echo/127.0.0.1:9001").await.is_some());
        assert!(read(&mut raw, "/thrift-rpc/services/ping/127.0.0.1:9002").await.is_some());

        // Refused: nothing etcd could file, or nothing discovery would read.
        let no_address = registration("echo", &[]);
        assert!(registry.register(&no_address).await.is_err());
        let bad_name = registration("a/b", &["127.0.0.1:1"]);
        assert!(registry.register(&bad_name).await.is_err());
        let small = EtcdRegistry::connect(EtcdConfig {
            max_value_bytes: 16,
            ..etcd.config()
        })
        .await
        .unwrap();
        let err = small.register(&ping).await.unwrap_err();
        assert!(err.to_string().contains("max_value_bytes"), "{err}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_outlives_its_ttl_and_comes_back_after_its_lease_is_revoked() {
    let Some(etcd) = support::etcd() else { return };
    bounded(30, async {
        let mut raw = etcd.client().await;
        let config = EtcdConfig {
            lease_ttl: Duration::from_secs(1),
            ..etcd.config()
        };
        let registry = EtcdRegistry::connect(config).await.unwrap();
        let echo = registration("echo", &["127.0.0.1:9000"]);
        registry.register(&echo).await.unwrap();
        let key = "/thrift-rpc/services/echo/127.0.0.1:9000";
        let (_, lease) = read(&mut raw, key).await.unwrap();

        // Three TTLs later it is still there, on the same lease: keepalives work.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(read(&mut raw, key).await.map(|(_, l)| l), Some(lease));

        // Someone revokes the lease: the key goes, and comes back under a new one.
        raw.lease_revoke(lease).await.unwrap();
        assert_eq!(read(&mut raw, key).await, None);
        let mut again = None;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while again.is_none() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            again = read(&mut raw, key).await;
        }
        let (value, new_lease) = again.expect("registered again within 5 s");
        assert_ne!(new_lease, lease);
        assert!(value.contains("127.0.0.1:9000"));
        assert!(ttl(&mut raw, new_lease).await > 0);

        registry.deregister(&echo).await.unwrap();
        assert_eq!(read(&mut raw, key).await, None);
    })
    .await;
}

#[tokio::test]
async fn connecting_to_an_etcd_nobody_answers_at_fails_within_the_timeout() {
    support::init_tracing();
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = EtcdConfig {
        timeout: Duration::from_millis(300),
        ..EtcdConfig::new(vec![format!("127.0.0.1:{port}")])
    };
    let started = std::time::Instant::now();
    let err = EtcdRegistry::connect(config.clone()).await.unwrap_err();
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    let err = etcd_registry::EtcdDiscover::connect(
        config,
        "echo",
        volo_core::registry::Route::tcp_only(),
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}
