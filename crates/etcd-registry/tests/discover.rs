//! The client side against a real etcd: the list, its changes, bad content,
//! compaction.

mod support;

use std::time::Duration;

use etcd_client::{CompactionOptions, Txn, TxnOp};
use etcd_registry::{EtcdConfig, EtcdDiscover, EtcdRegistry};
use futures_util::StreamExt;
use support::{Captured, bounded, eventually, put, registration, value};
use volo_core::client::{Change, Changes, Discover, Instance};
use volo_core::registry::{Registration, Registry, Route};

const PREFIX: &str = "/thrift-rpc/services/echo/";

fn echo(port: u16, weight: u32) -> Registration {
    registration("echo", &[&format!("127.0.0.1:{port}")], weight)
}

/// `address/weight` of each instance, in order.
fn shown(list: &[Instance]) -> Vec<String> {
    list.iter()
        .map(|i| format!("{}/{}", i.address, i.weight))
        .collect()
}

async fn next_change(changes: &mut Changes) -> Change {
    tokio::time::timeout(Duration::from_secs(5), changes.next())
        .await
        .expect("a change within 5 s")
        .expect("the stream goes on")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_lists_then_follows_adds_removes_and_reweights() {
    let Some(etcd) = support::etcd() else { return };
    bounded(30, async {
        let registry = EtcdRegistry::connect(etcd.config()).await.unwrap();
        registry.register(&echo(9001, 100)).await.unwrap();
        registry.register(&echo(9002, 100)).await.unwrap();

        let discover = EtcdDiscover::connect(etcd.config(), "echo", Route::tcp_only())
            .await
            .unwrap();
        assert_eq!(
            shown(&discover.instances()),
            ["127.0.0.1:9001/100", "127.0.0.1:9002/100"]
        );
        let mut changes = discover.changes();

        registry.register(&echo(9003, 100)).await.unwrap();
        let c = next_change(&mut changes).await;
        assert_eq!(shown(&c.added), ["127.0.0.1:9003/100"]);
        assert!(c.removed.is_empty() && c.updated.is_empty());
        assert_eq!(discover.instances().len(), 3);

        registry.deregister(&echo(9001, 100)).await.unwrap();
        let c = next_change(&mut changes).await;
        assert_eq!(shown(&c.removed), ["127.0.0.1:9001/100"]);
        assert_eq!(
            shown(&discover.instances()),
            ["127.0.0.1:9002/100", "127.0.0.1:9003/100"]
        );

        // Registering the same instance again with another weight replaces it.
        registry.register(&echo(9002, 30)).await.unwrap();
        let c = next_change(&mut changes).await;
        assert_eq!(shown(&c.updated), ["127.0.0.1:9002/30"]);
        assert!(c.added.is_empty() && c.removed.is_empty());
        assert_eq!(
            shown(&discover.instances()),
            ["127.0.0.1:9002/30", "127.0.0.1:9003/100"]
        );
        let stats = discover.stats();
        assert!(stats.events >= 3, "{stats:?}");
        assert_eq!(stats.resyncs, 0, "{stats:?}");

        // Dropping the discovery stops its task: the change stream ends.
        drop(discover);
        let end = tokio::time::timeout(Duration::from_secs(5), changes.next()).await;
        assert_eq!(end.expect("the stream ends within 5 s"), None);
    })
    .await;
}

// On the current thread, so the discovery's task logs to this test's subscriber.
#[tokio::test]
async fn bad_values_and_instances_over_the_limit_are_logged_skipped_and_counted() {
    let Some(etcd) = support::etcd() else { return };
    let log = Captured::default();
    let _guard = tracing::subscriber::set_default(log.subscriber());
    bounded(30, async {
        let raw = etcd.client().await;
        put(&raw, format!("{PREFIX}a"), value(&["10.0.0.1:80"])).await;
        put(&raw, format!("{PREFIX}b-json"), b"{not json".to_vec()).await;
        put(&raw, format!("{PREFIX}c-address"), value(&["no-port"])).await;
        put(&raw, format!("{PREFIX}d-big"), value(&["10.0.0.4:80"; 20])).await;
        put(&raw, PREFIX.to_string(), value(&["10.0.0.5:80"])).await;
        put(
            &raw,
            format!("{PREFIX}e"),
            value(&["vsock:3:80", "10.0.0.6:80"]),
        )
        .await;

        let config = EtcdConfig {
            max_value_bytes: 200,
            max_instances: 3,
            ..etcd.config()
        };
        let discover = EtcdDiscover::connect(config, "echo", Route::tcp_only())
            .await
            .unwrap();
        assert_eq!(
            shown(&discover.instances()),
            ["10.0.0.1:80/100", "10.0.0.6:80/100"]
        );
        let stats = discover.stats();
        assert_eq!(stats.skipped_values, 4, "{stats:?}");
        assert_eq!(stats.skipped_addresses, 1, "{stats:?}");
        assert_eq!(stats.over_limit, 0, "{stats:?}");
        let text = log.text();
        for (key, why) in [
            ("b-json", "not a registration's JSON"),
            ("c-address", "no address that parses"),
            ("d-big", "over the limit of 200"),
        ] {
            let line = text
                .lines()
                .find(|l| l.contains(&format!("{PREFIX}{key}")))
                .unwrap_or_else(|| panic!("no log line for {key}:\n{text}"));
            assert!(line.contains(why), "{line}");
        }
        assert!(text.contains(&format!("key={PREFIX} ")), "{text}");
        assert!(text.contains("vsock:3:80"), "{text}");

        // Over the limit: the first three by key are listed, the others counted.
        for k in ["f", "g", "h"] {
            put(
                &raw,
                format!("{PREFIX}{k}"),
                value(&[&format!("10.0.1.{}:80", k.as_bytes()[0])]),
            )
            .await;
        }
        eventually(5, "two instances left out", || {
            discover.stats().over_limit == 2
        })
        .await;
        assert_eq!(
            shown(&discover.instances()),
            ["10.0.0.1:80/100", "10.0.0.6:80/100", "10.0.1.102:80/100"]
        );
        assert!(log.text().contains("more instances than the limit"));

        // A bad value arriving by watch replaces the good one it overwrites.
        put(&raw, format!("{PREFIX}a"), b"[]".to_vec()).await;
        eventually(5, "a skipped", || discover.stats().skipped_values == 5).await;
        assert_eq!(
            shown(&discover.instances()),
            ["10.0.0.6:80/100", "10.0.1.102:80/100", "10.0.1.103:80/100"]
        );
        assert_eq!(discover.stats().over_limit, 1);
    })
    .await;
}

/// A fleet's worth of keys: the first read goes a page at a time (47 keys a page
/// with the default largest value), and the watch then changes the list by steps,
/// the same lineage the read started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_service_is_read_in_pages_and_then_changed_by_steps() {
    let Some(etcd) = support::etcd() else { return };
    bounded(60, async {
        let raw = etcd.client().await;
        let key = |i: u32| format!("{PREFIX}{i:05}");
        let addr = |i: u32| format!("10.{}.{}.{}:80", i >> 16, (i >> 8) & 0xff, i & 0xff);
        // 1,200 keys, in transactions of 100 puts.
        for chunk in 0..12u32 {
            let ops: Vec<TxnOp> = (chunk * 100..chunk * 100 + 100)
                .map(|i| TxnOp::put(key(i), value(&[&addr(i)]), None))
                .collect();
            raw.kv_client().txn(Txn::new().and_then(ops)).await.unwrap();
        }
        let discover = EtcdDiscover::connect(etcd.config(), "echo", Route::tcp_only())
            .await
            .unwrap();
        let before = discover.list();
        assert_eq!(before.len(), 1200);
        assert!(before.contains(&addr(0).parse().unwrap()));
        assert!(before.contains(&addr(1199).parse().unwrap()));

        put(&raw, key(5000), value(&[&addr(5000)])).await;
        raw.kv_client().delete(key(7), None).await.unwrap();
        let gone = addr(7).parse().unwrap();
        eventually(5, "one in, one out", || {
            let now = discover.list();
            now.len() == 1200 && !now.contains(&gone)
        })
        .await;
        let after = discover.list();
        assert!(after.contains(&addr(5000).parse().unwrap()));
        assert_eq!(after.lineage(), before.lineage(), "changed, not made again");
        let steps = after.steps_since(before.id()).expect("reached by steps");
        assert_eq!(steps.count(), 2);
        assert_eq!(discover.stats().resyncs, 0);
    })
    .await;
}

/// A service with more keys than discovery keeps (four per instance listed, at least
/// 16): a read stops there, later keys are not followed, and the deletion of a kept
/// key makes discovery read the service again, so an unfollowed key takes its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_beyond_the_bound_are_not_followed_until_a_kept_one_goes() {
    let Some(etcd) = support::etcd() else { return };
    bounded(30, async {
        let raw = etcd.client().await;
        // 16 keys with no address a TCP client can use, then two instances.
        for i in 0..16 {
            put(
                &raw,
                format!("{PREFIX}a{i:02}"),
                value(&["unix:/only/local"]),
            )
            .await;
        }
        put(&raw, format!("{PREFIX}b1"), value(&["10.0.0.1:80"])).await;
        let config = EtcdConfig {
            max_instances: 1,
            ..etcd.config()
        };
        let discover = EtcdDiscover::connect(config, "echo", Route::tcp_only())
            .await
            .unwrap();
        assert!(
            discover.instances().is_empty(),
            "b1 is past the 16 keys read"
        );
        assert_eq!(discover.stats().keys_dropped, 1);
        put(&raw, format!("{PREFIX}b2"), value(&["10.0.0.2:80"])).await;
        eventually(5, "b2 dropped", || discover.stats().keys_dropped == 2).await;
        assert!(discover.instances().is_empty());

        // A kept key goes: the service is read again, and b1 is in.
        raw.clone()
            .delete(format!("{PREFIX}a00"), None)
            .await
            .unwrap();
        eventually(5, "b1 listed", || discover.instances().len() == 1).await;
        assert_eq!(shown(&discover.instances()), ["10.0.0.1:80/100"]);
        assert!(discover.stats().resyncs >= 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_on_a_compacted_revision_reads_the_service_again() {
    let Some(etcd) = support::etcd() else { return };
    bounded(30, async {
        let mut raw = etcd.client().await;
        let first = raw
            .put(format!("{PREFIX}a"), value(&["10.0.0.1:80"]), None)
            .await
            .unwrap();
        let old = first.header().unwrap().revision();
        put(&raw, format!("{PREFIX}b"), value(&["10.0.0.2:80"])).await;
        raw.delete(format!("{PREFIX}a"), None).await.unwrap();
        let last = raw
            .put(format!("{PREFIX}c"), value(&["10.0.0.3:80"]), None)
            .await
            .unwrap();
        let now = last.header().unwrap().revision();
        raw.compact(now, Some(CompactionOptions::new().with_physical()))
            .await
            .unwrap();

        // The watch starts at a revision etcd no longer has.
        let discover =
            EtcdDiscover::connect_watching_from(etcd.config(), "echo", Route::tcp_only(), old)
                .await
                .unwrap();
        eventually(5, "a resync after the compaction", || {
            discover.stats().resyncs == 1
        })
        .await;
        let stats = discover.stats();
        assert_eq!(stats.compactions, 1, "{stats:?}");
        assert_eq!(stats.watch_restarts, 0, "{stats:?}");
        assert_eq!(
            shown(&discover.instances()),
            ["10.0.0.2:80/100", "10.0.0.3:80/100"]
        );

        // The new watch follows changes.
        put(&raw, format!("{PREFIX}d"), value(&["10.0.0.4:80"])).await;
        raw.delete(format!("{PREFIX}b"), None).await.unwrap();
        eventually(5, "d added and b removed", || {
            shown(&discover.instances()) == ["10.0.0.3:80/100", "10.0.0.4:80/100"]
        })
        .await;
        assert_eq!(discover.stats().resyncs, 1);
    })
    .await;
}
