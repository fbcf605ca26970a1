//! The `governance` example end to end: a client and a server taking up timeouts, a
//! retry rule, breaker thresholds and a QPS limit from etcd keys in config-etcd's
//! layout while they run, a bad value refused with a log line and the last good one
//! kept. Each step's line is checked, and the values in force in the metrics.
//!
//! Built only with the `etcd` feature; skipped without an etcd binary unless `CI` is
//! set, when it fails.

mod support;

use std::process::Command;
use std::time::Duration;

use etcd_registry::testing::Etcd;
use support::bounded_output;

#[test]
fn governance_set_in_etcd_is_taken_up_while_running() {
    // Only to learn whether etcd is here; the example starts its own.
    let Some(probe) = Etcd::start() else {
        return;
    };
    drop(probe);
    let run = bounded_output(
        &mut Command::new(env!("CARGO_BIN_EXE_governance")),
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    eprintln!("{stderr}{stdout}");
    assert!(run.status.success(), "governance failed:\n{stderr}");
    let result = |what: &str| -> &str {
        stdout
            .lines()
            .find(|l| l.contains(&format!(" {what} ")))
            .and_then(|l| l.split("result=").nth(1))
            .and_then(|r| r.split(' ').next())
            .unwrap_or_else(|| panic!("no line for {what} in {stdout}"))
    };
    for (what, want) in [
        ("no-keys", "ok"),
        ("rpc_timeout=50ms", "timeout"),
        ("bad-value-refused", "timeout"),
        ("rpc_timeout-deleted", "ok"),
        ("breaker-sample-4", "timeout"),
        ("breaker-open", "circuit_open"),
        ("qps_limit=1-first", "ok"),
        ("qps_limit=1-second", "overloaded"),
    ] {
        assert_eq!(result(what), want, "{what}");
    }
    assert!(
        stderr.contains("value refused") && stderr.contains("rpc_timeout_ms"),
        "no log line for the bad value:\n{stderr}"
    );
    for line in [
        r#"client rpc_governance_value{side="client",service="EchoService",method="*",setting="breaker_min_samples"} 8"#,
        r#"client rpc_governance_updates_total{side="client",service="EchoService",category="rpc_timeout",result="refused"} 1"#,
        r#"server rpc_governance_value{side="server",service="EchoService",method="",setting="qps_limit"} 1"#,
    ] {
        assert!(stdout.contains(line), "no {line} in\n{stdout}");
    }
}
