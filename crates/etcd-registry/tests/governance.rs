//! Governance keys in config-etcd's layout against a real etcd: values read at the
//! start and as they change, bad ones refused with a log line and the last good one
//! kept, removed ones putting the defaults back. (A client and a server taking them
//! up while they serve: the `governance` example and its test.)

mod support;

use std::time::Duration;

use etcd_registry::{EtcdConfig, GovernanceWatch, KITEX_CONFIG_PREFIX};
use support::{Captured, bounded, eventually, put};
use volo_core::governance::{ClientCategory, ClientGovernance, RetryRule, ServerGovernance};

fn config(etcd: &support::Etcd) -> EtcdConfig {
    EtcdConfig {
        timeout: Duration::from_secs(2),
        ..EtcdConfig::new(vec![etcd.endpoint()])
    }
}

const TIMEOUTS: &str = "/KitexConfig/gateway/echo/rpc_timeout";

// On the current thread, so the watch's task logs to this test's subscriber.
#[tokio::test(flavor = "current_thread")]
async fn a_clients_rules_follow_the_keys() {
    let Some(etcd) = support::etcd() else { return };
    let logs = Captured::default();
    let _logging = tracing::subscriber::set_default(logs.subscriber());
    bounded(30, async {
        let raw = etcd.client().await;
        // There before the watch: applied by the time it is connected.
        put(&raw, TIMEOUTS, r#"{"*": {"rpc_timeout_ms": 800}}"#).await;
        let gov = ClientGovernance::new("echo");
        let _watch = GovernanceWatch::client(
            config(&etcd),
            KITEX_CONFIG_PREFIX,
            "gateway",
            "echo",
            gov.clone(),
        )
        .await
        .unwrap();
        let rpc = |g: &ClientGovernance, m: &str| g.rules().timeouts.get(m).and_then(|r| r.rpc);
        assert_eq!(rpc(&gov, "echo"), Some(Duration::from_millis(800)));

        put(
            &raw,
            "/KitexConfig/gateway/echo/retry",
            r#"{"echo": {"enable": false}}"#,
        )
        .await;
        eventually(10, "the retry rule", || {
            gov.rules().retry.get("echo") == Some(&RetryRule::Off)
        })
        .await;

        // Out of range: refused, logged, the 800 ms kept.
        put(&raw, TIMEOUTS, r#"{"*": {"rpc_timeout_ms": -5}}"#).await;
        eventually(10, "the refusal", || {
            gov.updates(ClientCategory::Timeout).1 == 1
        })
        .await;
        assert_eq!(rpc(&gov, "echo"), Some(Duration::from_millis(800)));
        let text = logs.text();
        assert!(
            text.contains("value refused")
                && text.contains(TIMEOUTS)
                && text.contains("rpc_timeout_ms = -5"),
            "{text}"
        );

        // A good one after it applies.
        put(&raw, TIMEOUTS, r#"{"echo": {"rpc_timeout_ms": 40}}"#).await;
        eventually(10, "the new timeout", || {
            rpc(&gov, "echo") == Some(Duration::from_millis(40))
        })
        .await;
        // A key of someone else's, and a category not built here: nothing changes.
        let version = gov.version();
        put(
            &raw,
            "/KitexConfig/gateway/other/rpc_timeout",
            r#"{"*": {"rpc_timeout_ms": 1}}"#,
        )
        .await;
        put(
            &raw,
            "/KitexConfig/gateway/echo/degradation",
            r#"{"enable": true}"#,
        )
        .await;

        // Removed: the builder's settings again (no rule).
        raw.clone().delete(TIMEOUTS, None).await.unwrap();
        eventually(10, "the defaults", || gov.rules().timeouts.is_empty()).await;
        assert_eq!(
            gov.version(),
            version + 1,
            "only the removal changed the rules"
        );
        assert_eq!(
            gov.updates(ClientCategory::Timeout),
            (3, 1),
            "800, 40, removed; -5"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_servers_limits_follow_their_key() {
    let Some(etcd) = support::etcd() else { return };
    bounded(30, async {
        let raw = etcd.client().await;
        let gov = ServerGovernance::new("echo");
        let _watch = GovernanceWatch::server(config(&etcd), "/KitexConfig", "echo", gov.clone())
            .await
            .unwrap();
        assert_eq!(gov.limit(), None);
        put(
            &raw,
            "/KitexConfig/echo/limit",
            r#"{"connection_limit": 100, "qps_limit": 2000}"#,
        )
        .await;
        eventually(10, "the limits", || {
            gov.limit()
                .is_some_and(|l| l.connections == Some(100) && l.qps == Some(2000))
        })
        .await;
        // Not an object, not UTF-8, over the largest value taken: all refused, and
        // counted.
        put(&raw, "/KitexConfig/echo/limit", "[1]").await;
        put(&raw, "/KitexConfig/echo/limit", vec![0xff, 0xfe]).await;
        let long = format!(r#"{{"qps_limit": 1, "pad": "{}"}}"#, "x".repeat(70_000));
        put(&raw, "/KitexConfig/echo/limit", long).await;
        // A client's key of a caller named like the server is not the server's.
        put(&raw, "/KitexConfig/echo/other/limit", r#"{"qps_limit": 1}"#).await;
        eventually(10, "the refusals", || gov.updates().1 == 3).await;
        assert_eq!(gov.limit().unwrap().qps, Some(2000), "the last good kept");
        raw.clone()
            .delete("/KitexConfig/echo/limit", None)
            .await
            .unwrap();
        eventually(10, "no rule", || gov.limit().is_none()).await;
    })
    .await;
}
