//! Both sides through an etcd restart (SIGKILL, then started again on the same data).

mod support;

use std::time::Duration;

use etcd_client::LeaseTimeToLiveOptions;
use etcd_registry::{EtcdConfig, EtcdDiscover, EtcdRegistry};
use support::{bounded, eventually, put, registration, value};
use volo_core::client::{Discover, Instance};
use volo_core::registry::{Registry, Route};

fn addresses(list: &[Instance]) -> Vec<String> {
    list.iter().map(|i| i.address.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_etcd_restart_the_list_stays_then_catches_up_and_registrations_return() {
    let Some(mut etcd) = support::etcd() else {
        return;
    };
    bounded(60, async {
        // The request timeout stays the testing default (2 s): the delete at the end
        // goes through etcd's disk, which a loaded machine can hold up for a while.
        let config = EtcdConfig {
            lease_ttl: Duration::from_secs(2),
            ..etcd.config()
        };
        let registry = EtcdRegistry::connect(config.clone()).await.unwrap();
        let echo = registration("echo", &["127.0.0.1:9000"], 100);
        registry.register(&echo).await.unwrap();
        let raw = etcd.client().await;
        put(
            &raw,
            "/thrift-rpc/services/echo/127.0.0.1:9001",
            value(&["127.0.0.1:9001"]),
        )
        .await;
        let discover = EtcdDiscover::connect(config, "echo", Route::tcp_only())
            .await
            .unwrap();
        eventually(5, "both listed", || discover.instances().len() == 2).await;
        let before = discover.instances();

        etcd.kill();
        // While etcd is away (longer than the lease TTL), the last list stays.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(addresses(&discover.instances()), addresses(&before));
        assert!(
            discover.stats().watch_restarts >= 1,
            "{:?}",
            discover.stats()
        );

        etcd.restart();
        let mut raw = etcd.client().await;
        put(
            &raw,
            "/thrift-rpc/services/echo/127.0.0.1:9002",
            value(&["127.0.0.1:9002"]),
        )
        .await;
        eventually(10, "the change made after the restart is seen", || {
            addresses(&discover.instances()).contains(&"127.0.0.1:9002".to_string())
        })
        .await;
        assert!(discover.stats().resyncs >= 1, "{:?}", discover.stats());

        // The registration is in etcd under a live lease (kept or granted again) and
        // listed, and stays so past another TTL.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let key = "/thrift-rpc/services/echo/127.0.0.1:9000";
        let answer = raw.get(key, None).await.unwrap();
        let lease = answer.kvs().first().expect("registered").lease();
        let left = raw
            .lease_time_to_live(lease, None::<LeaseTimeToLiveOptions>)
            .await
            .unwrap()
            .ttl();
        assert!(left > 0, "lease {lease} TTL {left}");
        assert_eq!(
            addresses(&discover.instances()),
            ["127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002"]
        );
        registry.deregister(&echo).await.unwrap();
        eventually(5, "deregistered", || discover.instances().len() == 2).await;
    })
    .await;
}
