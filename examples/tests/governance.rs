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

/// `echo-server --governance` and `echo-client --governance` follow their keys: the
/// client's calls time out once its `rpc_timeout` key says 30 ms (the server takes
/// 100), and the server refuses calls once its `limit` key says one a second.
#[test]
fn echo_server_and_client_follow_their_governance_keys() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let url = etcd.url();
    let (_server, port) = support::server(
        "echo-server",
        0,
        &["--governance", &url, "--delay-us", "100000"],
    );
    let addr = format!("127.0.0.1:{port}");
    let client = |governed: bool, concurrency: &str| {
        let mut args = vec![
            "--addr",
            &addr,
            "--concurrency",
            concurrency,
            "--duration",
            "1",
        ];
        if governed {
            args.extend(["--governance", &url]);
        }
        let run = bounded_output(
            Command::new(support::CLIENT).args(&args),
            Duration::from_secs(30),
        );
        let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
        let last = stdout.lines().last().unwrap_or_default().to_string();
        let f = support::fields(&last);
        let num = |k: &str| support::num(&f, k, &last);
        (num("qps"), num("errors"), last.clone())
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let put = |key: &str, value: &str| {
        rt.block_on(async {
            let mut raw = etcd.client().await;
            raw.put(key, value, None).await.expect("a put");
        })
    };
    let (qps, errors, line) = client(true, "1");
    assert!(qps > 0 && errors == 0, "no keys yet: {line}");

    put(
        "/KitexConfig/echo-client/EchoService/rpc_timeout",
        r#"{"*": {"rpc_timeout_ms": 30}}"#,
    );
    let (qps, errors, line) = client(true, "1");
    assert!(qps == 0 && errors > 0, "every call timed out: {line}");
    let (qps, errors, line) = client(false, "1");
    assert!(qps > 0 && errors == 0, "another caller's key: {line}");

    put("/KitexConfig/EchoService/limit", r#"{"qps_limit": 1}"#);
    // The server takes the key up as it comes; 8 callers at 100 ms a call ask for 80
    // a second.
    std::thread::sleep(Duration::from_millis(500));
    let (_, errors, line) = client(false, "8");
    assert!(
        errors > 0,
        "the server refused calls over its limit: {line}"
    );
}
