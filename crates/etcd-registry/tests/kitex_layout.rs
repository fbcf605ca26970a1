//! Kitex's registry layout against a real etcd: where and what our registry writes,
//! and what our discovery reads of keys written the way Kitex's registry writes them.
//! (A real Kitex server and client against ours: docs/discovery.md, "Kitex's
//! registry layout".)

mod support;

use etcd_client::GetOptions;
use etcd_registry::{EtcdConfig, EtcdDiscover, EtcdRegistry, KITEX_DEFAULT_WEIGHT};
use support::{bounded, eventually, put, registration};
use volo_core::client::{Discover, Instance};
use volo_core::registry::{Registry, Route};

fn kitex(etcd: &support::Etcd) -> EtcdConfig {
    EtcdConfig {
        timeout: std::time::Duration::from_secs(2),
        ..EtcdConfig::kitex(vec![etcd.endpoint()])
    }
}

fn shown(list: &[Instance]) -> Vec<String> {
    list.iter()
        .map(|i| format!("{}/{}", i.address, i.weight))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_registers_as_kitex_does_and_deregisters() {
    let Some(etcd) = support::etcd() else { return };
    bounded(30, async {
        let raw = etcd.client().await;
        let registry = EtcdRegistry::connect(kitex(&etcd)).await.unwrap();
        // A Unix socket first: Kitex's layout files the TCP address.
        let mut echo = registration(
            "echo",
            &["unix:/run/e.sock", "127.0.0.1:9000"],
            KITEX_DEFAULT_WEIGHT,
        );
        echo.tags.insert("idc".into(), "a".into());
        registry.register(&echo).await.unwrap();

        let key = "kitex/registry-etcd/echo/127.0.0.1:9000";
        let got = raw
            .clone()
            .get(
                "kitex/registry-etcd/",
                Some(GetOptions::new().with_prefix()),
            )
            .await
            .unwrap();
        let kvs: Vec<(&str, &str, bool)> = got
            .kvs()
            .iter()
            .map(|kv| {
                (
                    kv.key_str().unwrap(),
                    kv.value_str().unwrap(),
                    kv.lease() != 0,
                )
            })
            .collect();
        assert_eq!(
            kvs,
            [(
                key,
                r#"{"network":"tcp","address":"127.0.0.1:9000","weight":10,"tags":{"idc":"a"}}"#,
                true
            )]
        );

        // A client in the same layout lists it; so would a Kitex client.
        let discover = EtcdDiscover::connect(kitex(&etcd), "echo", Route::tcp_only())
            .await
            .unwrap();
        assert_eq!(shown(&discover.instances()), ["127.0.0.1:9000/10"]);

        registry.deregister(&echo).await.unwrap();
        assert_eq!(raw.clone().get(key, None).await.unwrap().count(), 0);
        eventually(5, "the instance goes", || discover.instances().is_empty()).await;

        // Nothing a Kitex client could dial: refused, saying why.
        let local = registration("echo", &["unix:/run/e.sock"], 10);
        let err = registry.register(&local).await.unwrap_err();
        assert!(err.to_string().contains("no TCP address"), "{err}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_finds_servers_registered_as_kitex_registers_them() {
    let Some(etcd) = support::etcd() else { return };
    bounded(30, async {
        let raw = etcd.client().await;
        // As a Kitex server writes them (Go's encoding/json, a nil tag map as null),
        // one of another service whose name starts the same, and one of ours.
        for (key, value) in [
            (
                "kitex/registry-etcd/echo/10.0.0.7:8888",
                r#"{"network":"tcp","address":"10.0.0.7:8888","weight":10,"tags":null}"#,
            ),
            (
                "kitex/registry-etcd/echo/10.0.0.8:8888",
                r#"{"network":"tcp","address":"10.0.0.8:8888","weight":0,"tags":{"stage":"b"}}"#,
            ),
            (
                "kitex/registry-etcd/echo2/10.0.0.9:8888",
                r#"{"network":"tcp","address":"10.0.0.9:8888","weight":10,"tags":null}"#,
            ),
            (
                "/thrift-rpc/services/echo/10.0.0.10:9000",
                r#"{"addresses":["10.0.0.10:9000"],"weight":100}"#,
            ),
        ] {
            put(&raw, key, value).await;
        }
        let discover = EtcdDiscover::connect(kitex(&etcd), "echo", Route::tcp_only())
            .await
            .unwrap();
        assert_eq!(
            shown(&discover.instances()),
            ["10.0.0.7:8888/10", "10.0.0.8:8888/10"],
            "echo's two, weight 0 read as Kitex's default"
        );
        let tags = &discover.instances()[1].tags;
        assert_eq!(tags.get("stage").map(String::as_str), Some("b"));

        // A value in our own layout under Kitex's prefix is skipped and counted.
        put(
            &raw,
            "kitex/registry-etcd/echo/10.0.0.11:9000",
            r#"{"addresses":["10.0.0.11:9000"]}"#,
        )
        .await;
        eventually(5, "the bad value is counted", || {
            discover.stats().skipped_values == 1
        })
        .await;
        assert_eq!(discover.instances().len(), 2);
    })
    .await;
}
