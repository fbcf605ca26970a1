//! `governance`: a client's timeouts, retries and breaker and a server's limits changed
//! in etcd while both run, in the key layout of Kitex's config-etcd. Built only with
//! the `etcd` feature:
//!
//! ```text
//! cargo run -p examples --features etcd --bin governance
//! ```
//!
//! It starts an etcd on loopback (or uses `--etcd`), an `EchoService` server whose
//! `echo` answers after `--delay` (100 ms), following
//! `/KitexConfig/EchoService/limit`, and a client calling as `governance-example`,
//! following `/KitexConfig/governance-example/EchoService/{rpc_timeout,retry,
//! circuit_break}`. Then it sets the keys one after the other, as an operator would
//! with `etcdctl put`, and makes calls after each, printing one line per step:
//!
//! 1. no keys: a call waits for the slow answer (the client's default timeout, 10 s);
//! 2. `rpc_timeout` `{"echo": {"rpc_timeout_ms": 50}}`: the call times out at 50 ms;
//! 3. the same key set to a bad value: refused (a `warn` line on stderr), the 50 ms
//!    kept;
//! 4. the key deleted: the default again, the call answered;
//! 5. `circuit_break` `{"*": {"enable": true, "err_rate": 0.5, "min_sample": 8}}` with
//!    the 50 ms timeout back and retries off (`retry` `{"*": {"enable": false}}`):
//!    the breaker's window holds the four calls above (two timed out); four more
//!    timeouts make eight calls, six failed, and it opens: the next call fails at
//!    once;
//! 6. the server's `limit` `{"qps_limit": 1}` (the server answering at once now):
//!    of two calls in a row from a second client (the first one's breaker stays open
//!    for 5 s) the second is refused as overloaded.
//!
//! Each line reads `step=<n> <what> result=<ok|timeout|circuit_open|overloaded|...>
//! elapsed_ms=<n>`; then the client's and the server's `rpc_governance_*` metrics.
//! The exit status is 0 when every step saw what it should.

use std::time::{Duration, Instant};

use clap::Parser;
use etcd_client::Client as Etcd;
use etcd_registry::{EtcdConfig, GovernanceWatch, KITEX_CONFIG_PREFIX};
use examples::cli::{Usage, fail};
use examples::echo::{EchoServiceClient, EchoServiceServer, Request};
use examples::echo_service::Echo;
use examples::options::{self, EtcdUrl};
use volo_core::client::{ClientConfig, ErrorKind};
use volo_core::config::Observability;
use volo_core::governance::{ClientCategory, ClientGovernance, ServerGovernance};
use volo_core::metrics::Metrics;
use volo_core::server::{Server, ServerConfig};

/// Governance set in etcd, taken up by a running client and server.
#[derive(Debug, Parser)]
#[command(name = "governance", version)]
struct Cli {
    /// How long `echo` takes to answer before the server's limit step.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    delay: u64,

    /// An etcd to use [default: one started on a free loopback port, which needs the
    /// etcd binary].
    #[arg(long, value_name = "etcd://HOST:PORT[,HOST:PORT...]", value_parser = options::etcd_url)]
    etcd: Option<EtcdUrl>,
}

/// The name the client calls as.
const CALLER: &str = "governance-example";
/// The service.
const SERVICE: &str = "EchoService";

fn main() {
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::stderr)
        .try_init();
    if let Err(e) = run(Cli::parse()) {
        fail("governance", e);
    }
}

fn run(cli: Cli) -> Result<(), Usage> {
    let (endpoints, _etcd) = examples::registry::etcd_or_local(cli.etcd)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("runtime: {e}")))?;
    let ok = rt.block_on(steps(endpoints, Duration::from_millis(cli.delay)))?;
    if !ok {
        return Err(Usage("a step did not see what it should".into()));
    }
    Ok(())
}

/// What a call ended with, as a step line shows it.
fn outcome<T, E: std::fmt::Display>(
    result: &Result<T, volo_core::client::ClientError<E>>,
) -> String {
    use volo_core::client::ClientError;
    match result {
        Ok(_) => "ok".into(),
        Err(ClientError::Rpc(e)) => match e.kind() {
            ErrorKind::Timeout => "timeout".into(),
            ErrorKind::CircuitOpen => "circuit_open".into(),
            ErrorKind::Overloaded => "overloaded".into(),
            other => format!("{other:?}"),
        },
        Err(ClientError::User(e)) => format!("user:{e}"),
    }
}

/// One call through `client`, its line printed; whether it ended as `want`.
async fn one_step(client: &EchoServiceClient, step: usize, what: &str, want: &str) -> bool {
    let start = Instant::now();
    let req = Request {
        action: "echo".into(),
        msg: what.to_string().into(),
    };
    let result = outcome(&client.echo(req).await);
    let ms = start.elapsed().as_millis();
    println!("step={step} {what} result={result} elapsed_ms={ms}");
    result == want
}

async fn steps(endpoints: Vec<String>, delay: Duration) -> Result<bool, Usage> {
    let etcd_err = |e: &dyn std::fmt::Display| Usage(format!("etcd: {e}"));
    let config = EtcdConfig::new(endpoints.clone());
    let mut raw = Etcd::connect(&endpoints, None)
        .await
        .map_err(|e| etcd_err(&e))?;
    let key = |category: &str| format!("{KITEX_CONFIG_PREFIX}/{CALLER}/{SERVICE}/{category}");
    let limit_key = format!("{KITEX_CONFIG_PREFIX}/{SERVICE}/limit");

    // The server, following its limit key.
    let server_metrics = Metrics::new();
    let server_gov = ServerGovernance::new(SERVICE);
    let _server_watch = GovernanceWatch::server(
        config.clone(),
        KITEX_CONFIG_PREFIX,
        SERVICE,
        server_gov.clone(),
    )
    .await
    .map_err(|e| etcd_err(&e))?;
    let echo = Echo::default();
    echo.set_delay(delay);
    let server = Server::new(EchoServiceServer::new(echo.clone()))
        .config(ServerConfig {
            observability: Observability {
                metrics: Some(server_metrics.clone()),
                ..Observability::default()
            },
            ..ServerConfig::default()
        })
        .governance(server_gov.clone())
        .bind(&"127.0.0.1:0".parse().expect("an address"))
        .await
        .map_err(|e| Usage(format!("server: {e}")))?;
    let addr = server.local_addr().clone();
    let addr_again = addr.clone();
    let serving = tokio::spawn(server.serve());

    // The client, following its keys.
    let client_metrics = Metrics::new();
    let gov = ClientGovernance::new(SERVICE);
    let _client_watch =
        GovernanceWatch::client(config, KITEX_CONFIG_PREFIX, CALLER, SERVICE, gov.clone())
            .await
            .map_err(|e| etcd_err(&e))?;
    let client = EchoServiceClient::builder()
        .address(addr_again)
        .config(ClientConfig {
            observability: Observability {
                metrics: Some(client_metrics.clone()),
                ..Observability::default()
            },
            ..ClientConfig::default()
        })
        .governance(gov.clone())
        .build()
        .map_err(|e| Usage(format!("client: {e}")))?;

    let mut all_ok = true;
    // Waits until `count` (a handle's version, or its count of refused values) has
    // gone `n` past `from`: the handle has taken up the watch events.
    async fn changed(count: impl Fn() -> u64, from: u64, n: u64) -> Result<(), Usage> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while count() < from + n {
            if Instant::now() > deadline {
                return Err(Usage(
                    "a change in etcd was not taken up within 10 s".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }
    let put = async |raw: &mut Etcd, key: &str, value: &str| {
        raw.put(key, value, None)
            .await
            .map(drop)
            .map_err(|e| etcd_err(&e))
    };

    all_ok &= one_step(&client, 1, "no-keys", "ok").await;

    let v = gov.version();
    put(
        &mut raw,
        &key("rpc_timeout"),
        r#"{"echo": {"rpc_timeout_ms": 50}}"#,
    )
    .await?;
    changed(|| gov.version(), v, 1).await?;
    all_ok &= one_step(&client, 2, "rpc_timeout=50ms", "timeout").await;

    let refused = gov.updates(ClientCategory::Timeout).1;
    put(
        &mut raw,
        &key("rpc_timeout"),
        r#"{"echo": {"rpc_timeout_ms": "soon"}}"#,
    )
    .await?;
    let refusals = || gov.updates(ClientCategory::Timeout).1;
    changed(refusals, refused, 1).await?;
    all_ok &= one_step(&client, 3, "bad-value-refused", "timeout").await;

    let v = gov.version();
    raw.delete(key("rpc_timeout"), None)
        .await
        .map_err(|e| etcd_err(&e))?;
    changed(|| gov.version(), v, 1).await?;
    all_ok &= one_step(&client, 4, "rpc_timeout-deleted", "ok").await;

    let v = gov.version();
    put(&mut raw, &key("retry"), r#"{"*": {"enable": false}}"#).await?;
    put(
        &mut raw,
        &key("circuit_break"),
        r#"{"*": {"enable": true, "err_rate": 0.5, "min_sample": 8}}"#,
    )
    .await?;
    put(
        &mut raw,
        &key("rpc_timeout"),
        r#"{"*": {"rpc_timeout_ms": 50}}"#,
    )
    .await?;
    changed(|| gov.version(), v, 3).await?;
    for i in 1..=4 {
        all_ok &= one_step(&client, 5, &format!("breaker-sample-{i}"), "timeout").await;
    }
    all_ok &= one_step(&client, 5, "breaker-open", "circuit_open").await;

    echo.set_delay(Duration::ZERO);
    let v = server_gov.version();
    put(&mut raw, &limit_key, r#"{"qps_limit": 1}"#).await?;
    changed(|| server_gov.version(), v, 1).await?;
    // The first client's breaker is open for 5 s: a second client, without rules.
    let other = EchoServiceClient::builder()
        .address(addr)
        .build()
        .map_err(|e| Usage(format!("client: {e}")))?;
    all_ok &= one_step(&other, 6, "qps_limit=1-first", "ok").await;
    all_ok &= one_step(&other, 6, "qps_limit=1-second", "overloaded").await;

    for (side, metrics) in [("client", &client_metrics), ("server", &server_metrics)] {
        for line in metrics.encode().lines() {
            if line.starts_with("rpc_governance") {
                println!("{side} {line}");
            }
        }
    }
    serving.abort();
    Ok(all_ok)
}
