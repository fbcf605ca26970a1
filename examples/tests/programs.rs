//! The example programs run as a user would run them, each bounded in time.

mod support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;
use volo_core::client::{ClientTimeouts, ConnectionPool};

/// Runs `bin` with `args`, which must succeed; its standard output.
fn run_ok(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).output().expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{bin} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_layer_and_two_hop_examples_check_themselves() {
    let layered = run_ok(env!("CARGO_BIN_EXE_layered"), &[]);
    assert!(
        layered.contains(r#"{"echo": 3, "echo_or_fail": 2}"#),
        "{layered}"
    );
    let one = run_ok(env!("CARGO_BIN_EXE_one-layer"), &[]);
    assert!(
        one.contains("end stream server_echo: ok") && one.contains("end call echo: ok"),
        "{one}"
    );
    let middleware = run_ok(env!("CARGO_BIN_EXE_middleware"), &[]);
    assert!(
        middleware.contains("calls the outer layer saw: 10"),
        "{middleware}"
    );
    let hops = run_ok(env!("CARGO_BIN_EXE_two-hops"), &[]);
    assert!(
        hops.contains("back saw logid=Some(\"L-7\") color=None"),
        "{hops}"
    );
}

/// `echo-server` on a Unix socket, and `echo-client` against it in every framing and
/// protocol, and with `--mux`: each run ends with the documented line and no errors.
#[test]
fn echo_client_loads_echo_server_over_a_unix_socket() {
    echo_programs("unix");
}

/// The same over shared memory (`shm:` addresses).
#[test]
fn echo_client_loads_echo_server_over_shared_memory() {
    echo_programs("shm");
}

/// A fresh directory `tag` and an `echo-server` listening at `scheme:<dir>/echo.sock`
/// (once its first line says so): the directory, the address and the process.
fn start_echo_server(tag: &str, scheme: &str) -> (std::path::PathBuf, String, Child) {
    let dir = std::env::temp_dir().join(format!("echo-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let addr = format!("{scheme}:{}", dir.join("echo.sock").display());
    let (server, line) = spawn_echo_server(&addr, &[], Stdio::inherit());
    assert!(
        line.starts_with(&format!("echo-server listening on {scheme}:")),
        "{line:?}"
    );
    (dir, addr, server)
}

fn echo_programs(scheme: &str) {
    let (dir, addr, mut server) = start_echo_server(&format!("programs-{scheme}"), scheme);
    let load = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_echo-client"))
            .args(["--addr", &addr])
            .args(extra)
            .args(["--concurrency", "4", "--duration", "0.3", "--size", "512"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or_default().to_string();
        assert!(out.status.success(), "{extra:?}: {stdout}");
        let fields: Vec<&str> = last
            .split(' ')
            .map(|f| f.split('=').next().unwrap())
            .collect();
        assert_eq!(
            fields,
            ["qps", "p50_us", "p99_us", "p999_us", "errors"],
            "{extra:?}: {last:?}"
        );
        assert!(
            last.ends_with(" errors=0") && !last.starts_with("qps=0 "),
            "{extra:?}: {last:?}"
        );
    };
    for transport in ["ttheader", "theader", "framed", "buffered"] {
        for protocol in ["binary", "compact", "json"] {
            // Kitex's TTHeader has no protocol id for JSON.
            if (transport, protocol) != ("ttheader", "json") {
                load(&["--transport", transport, "--protocol", protocol]);
            }
        }
    }
    load(&["--transport", "ttheader-framed"]);
    load(&["--transport", "ttheader-framed", "--protocol", "compact"]);
    load(&["--mux"]);
    load(&["--mux", "--transport", "ttheader-framed"]);
    load(&["--mux", "--protocol", "compact", "--io", "tokio"]);
    // The exception path and oneway calls, in a framing with a header and one without.
    for method in ["echo_or_fail", "notify"] {
        load(&["--method", method]);
        load(&["--method", method, "--transport", "buffered"]);
        load(&["--method", method, "--mux"]);
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_echo-client"))
        .args(["--addr", &addr, "--mux", "--transport", "framed"])
        .output()
        .unwrap();
    assert_eq!(
        bad.status.code(),
        Some(2),
        "--mux over Framed is refused, not measured another way"
    );
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first line of `stdout` that starts with `prefix`.
fn line_of<'a>(stdout: &'a str, prefix: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?}: {stdout}"))
}

/// `rpc-bench` over every transport, briefly: a table, then one documented line per
/// transport, each with calls made and no errors.
#[test]
fn rpc_bench_reports_every_transport() {
    let stdout = run_ok(
        env!("CARGO_BIN_EXE_rpc-bench"),
        &["--concurrency", "4", "--duration", "0.3", "--size", "256"],
    );
    for transport in ["tokio", "netpoll", "uds", "shm"] {
        let line = line_of(&stdout, &format!("transport={transport} "));
        assert_eq!(
            support::field_names(line),
            ["transport", "qps", "p50_us", "p99_us", "p999_us", "errors"],
            "{line:?}"
        );
        assert!(
            line.ends_with(" errors=0") && !line.contains(" qps=0 "),
            "{line:?}"
        );
    }
}

/// `rpc-bench --stream`, briefly: the ping-pong line, then one documented line per
/// kind of stream, each with messages and no errors, against `stream-server` in a
/// process of its own.
#[test]
fn rpc_bench_reports_every_kind_of_stream() {
    let stdout = run_ok(
        env!("CARGO_BIN_EXE_rpc-bench"),
        &[
            "--stream",
            "server,client,bidi,bidi-pingpong",
            "--concurrency",
            "4",
            "--duration",
            "0.5",
            "--size",
            "256",
        ],
    );
    for kind in ["pingpong", "server", "client", "bidi", "bidi-pingpong"] {
        let line = line_of(&stdout, &format!("stream={kind} "));
        assert_eq!(
            support::field_names(line),
            [
                "stream",
                "msgs_per_s",
                "p50_us",
                "p99_us",
                "errors",
                "server_cpu_us_per_msg",
                "server_cores",
                "server"
            ],
            "{line:?}"
        );
        assert!(
            line.contains(" errors=0 ")
                && !line.contains(" msgs_per_s=0 ")
                && line.ends_with(" server=ours"),
            "{line:?}"
        );
    }
}

/// `rpc-bench` with `extra` and a brief paired run's settings over `transport`: its
/// output and its `paired` summary line.
fn run_paired(transport: &str, extra: &[&str]) -> (String, String) {
    let mut args = vec!["--transports", transport];
    args.extend_from_slice(extra);
    args.extend(["--concurrency", "4", "--duration", "2", "--size", "256"]);
    let stdout = run_ok(env!("CARGO_BIN_EXE_rpc-bench"), &args);
    let summary = stdout
        .lines()
        .find(|l| l.starts_with(&format!("paired transport={transport} ")))
        .unwrap_or_else(|| panic!("no summary: {stdout}"))
        .to_string();
    (stdout, summary)
}

/// The keys of a `name=value` line after its first word.
fn keys(line: &str) -> Vec<String> {
    line.split(' ')
        .skip(1)
        .map(|f| f.split('=').next().unwrap().to_string())
        .collect()
}

/// The keys of a `paired` summary line comparing `a` and `b`.
fn summary_keys(a: &str, b: &str) -> Vec<String> {
    let (a_qps, b_qps) = (format!("{a}_qps"), format!("{b}_qps"));
    let (a_cpu, b_cpu) = (format!("{a}_cpu_ns"), format!("{b}_cpu_ns"));
    [
        "transport",
        "pairs",
        &a_qps,
        &b_qps,
        "qps_ratio",
        "qps_ratio_se",
        &a_cpu,
        &b_cpu,
    ]
    .map(String::from)
    .to_vec()
}

/// The value of `name` in a `name=value` line.
fn field(line: &str, name: &str) -> f64 {
    line.split(' ')
        .find_map(|f| f.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}: {line}"))
        .parse()
        .unwrap()
}

/// `rpc-bench --stack paired`: a line per pair of slices and the summary line, with
/// both stacks' calls counted.
#[test]
fn rpc_bench_paired_reports_each_pair_and_the_ratio() {
    let (stdout, summary) = run_paired("uds", &["--stack", "paired"]);
    let pairs: Vec<&str> = stdout.lines().filter(|l| l.starts_with("pair ")).collect();
    assert_eq!(pairs.len(), 1, "{stdout}");
    assert_eq!(
        keys(pairs[0]),
        ["transport", "n", "bare_qps", "default_qps"],
        "{stdout}"
    );
    assert_eq!(keys(&summary), summary_keys("bare", "default"), "{summary}");
    assert!(
        field(&summary, "bare_qps") > 0.0 && field(&summary, "default_qps") > 0.0,
        "{summary}"
    );
    assert!(field(&summary, "qps_ratio") > 0.0, "{summary}");
}

/// SIGKILL of an `echo-server` serving over shared memory while callers are busy: every
/// call in flight or made after fails with a transport error within seconds (the
/// client sees the session's socket hang up, not a timeout), ping-pong and mux.
#[test]
fn calls_fail_promptly_when_an_shm_server_is_killed() {
    use examples::echo::{EchoServiceClient, Request};
    use volo_core::client::{ClientConfig, ClientError, ErrorKind};
    use volo_core::context::Address;

    for mux in [false, true] {
        let (dir, addr, mut server) = start_echo_server(&format!("kill-{mux}"), "shm");
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let config = ClientConfig {
                pool: ConnectionPool {
                    mux,
                    ..Default::default()
                },
                timeouts: ClientTimeouts {
                    rpc: Some(std::time::Duration::from_secs(120)),
                    ..Default::default()
                },
                ..ClientConfig::default()
            };
            let address: Address = addr.parse().unwrap();
            let client = EchoServiceClient::builder()
                .address(address)
                .config(config)
                .build()
                .unwrap();
            let req = Request {
                action: "echo".into(),
                msg: "x".repeat(512).into(),
            };
            client.echo(req.clone()).await.unwrap();
            // Calls the callers got answered, all together.
            let answered = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let callers: Vec<_> = (0..20)
                .map(|_| {
                    let client = client.clone();
                    let req = req.clone();
                    let answered = std::sync::Arc::clone(&answered);
                    tokio::spawn(async move {
                        let mut ok = 0u64;
                        loop {
                            match client.echo(req.clone()).await {
                                Ok(_) => {
                                    ok += 1;
                                    answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                }
                                // The session's hang-up fails the calls on it (I/O),
                                // then connects fail, and once ten did in a row the
                                // instance's breaker is open and calls fail at once.
                                Err(ClientError::Rpc(e))
                                    if matches!(
                                        e.kind(),
                                        ErrorKind::Io | ErrorKind::Connect | ErrorKind::CircuitOpen
                                    ) =>
                                {
                                    return (ok, e.to_string());
                                }
                                Err(other) => panic!("not a transport error: {other}"),
                            }
                        }
                    })
                })
                .collect();
            // The callers are busy: calls went through, more are in flight.
            let busy = tokio::time::timeout(std::time::Duration::from_secs(20), async {
                while answered.load(std::sync::atomic::Ordering::Relaxed) < 20 {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            });
            busy.await.expect("the callers' calls are answered");
            server.kill().unwrap();
            let _ = server.wait();
            let ended = tokio::time::timeout(std::time::Duration::from_secs(20), async {
                let mut out = Vec::new();
                for c in callers {
                    out.push(c.await.unwrap());
                }
                out
            })
            .await
            .expect("calls hung after the server was killed");
            assert!(
                ended.iter().map(|(ok, _)| ok).sum::<u64>() > 0,
                "mux={mux}: no call went through before the kill"
            );
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `echo-server --addr <addr>` with `args` and its stderr sent to `stderr`: the
/// process and the first line it printed (which says where it listens, or nothing
/// when it could not).
fn spawn_echo_server(addr: &str, args: &[&str], stderr: Stdio) -> (Child, String) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_echo-server"))
        .args(["--addr", addr])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (server, line)
}

/// `echo-server --addr 127.0.0.1:<port>` (0: any port) with `args` and its stderr
/// sent to `stderr`, once it says it listens: the process and its address.
///
/// A port given by number is tried again for up to two seconds while the server
/// exits without listening: a server killed just before on io_uring keeps its
/// listening socket bound for a few milliseconds after it is reaped (the kernel
/// tears its ring down afterwards; 5-10 ms here), so binding the port at once can
/// fail with "Address already in use".
fn echo_server_on_loopback(port: u16, args: &[&str], stderr: Stdio) -> (Child, SocketAddr) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    // Only the first try gets `stderr` (a pipe is not cloned); later ones inherit it.
    let mut stderr = Some(stderr);
    loop {
        let (mut server, line) = spawn_echo_server(
            &format!("127.0.0.1:{port}"),
            args,
            stderr.take().unwrap_or_else(Stdio::inherit),
        );
        let bound = line
            .trim()
            .strip_prefix("echo-server listening on ")
            .and_then(|a| a.parse().ok());
        if let Some(bound) = bound {
            return (server, bound);
        }
        let _ = server.kill();
        let _ = server.wait();
        if port == 0 || std::time::Instant::now() >= deadline {
            panic!("echo-server on port {port}: {line:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A free loopback port below Linux's ephemeral range (32768 and up by default),
/// which the kernel gives no socket that did not ask for it by number.
fn unassigned_port() -> u16 {
    let start = 20_000 + (std::process::id() % 10_000) as u16;
    (start..32_000)
        .chain(20_000..start)
        .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        .expect("a free port below 32000")
}

/// SIGKILL of an `echo-server` whose client holds idle pooled connections to it, and a
/// new server on the same port: the client's next calls go over new connections, the
/// first attempt of each answered (no retries to hide a failure). The pool must not
/// lend the connections the dead server left, whose end of stream the client's poller
/// has read: a request on one gets no reply.
#[test]
fn idle_connections_to_a_killed_server_are_not_reused() {
    use examples::echo::{EchoServiceClient, Request};
    use volo_core::client::{BreakerConfig, RetryPolicy};
    use volo_core::context::Address;

    // A port below the ephemeral range: no socket of another test running meanwhile
    // can be given it between the kill and the restart (one was, once, under CI).
    let (mut first, bound) = echo_server_on_loopback(unassigned_port(), &[], Stdio::inherit());
    let port = bound.port();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(async {
        EchoServiceClient::builder()
            .address(Address::Tcp(([127, 0, 0, 1], port).into()))
            .retry(RetryPolicy::new().max_retries(0))
            .service_breaker(BreakerConfig::disabled())
            .instance_breaker(None)
            .build()
            .unwrap()
    });
    let req = Request {
        action: "echo".into(),
        msg: "x".repeat(64).into(),
    };
    // Eight calls at once: eight pooled connections, idle once they answered.
    rt.block_on(async {
        let calls: Vec<_> = (0..8)
            .map(|_| {
                let (client, req) = (client.clone(), req.clone());
                tokio::spawn(async move { client.echo(req).await })
            })
            .collect();
        for c in calls {
            c.await.unwrap().expect("the server answers");
        }
    });
    first.kill().unwrap();
    let _ = first.wait();
    let killed = std::time::Instant::now();
    let (mut second, again) = echo_server_on_loopback(port, &[], Stdio::inherit());
    assert_eq!(again.port(), port);
    // Time for the client's poller to read the connections' end of stream, with room
    // for a poller held up on a loaded machine.
    std::thread::sleep(std::time::Duration::from_secs(1).saturating_sub(killed.elapsed()));
    let failed: Vec<String> = rt.block_on(async {
        let mut failed = Vec::new();
        for _ in 0..8 {
            if let Err(e) = client.echo(req.clone()).await {
                failed.push(e.to_string());
            }
        }
        failed
    });
    let _ = second.kill();
    let _ = second.wait();
    assert!(
        failed.is_empty(),
        "calls to the restarted server failed: {failed:?}"
    );
}

/// `n` echo calls to `addr`, each answered within 10 s.
fn echo_calls(addr: std::net::SocketAddr, n: usize) {
    use examples::echo::{EchoServiceClient, Request};
    use thrift_wire::Utf8Bytes;
    use volo_core::context::Address;

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = EchoServiceClient::builder()
            .address(Address::Tcp(addr))
            .build()
            .unwrap();
        for _ in 0..n {
            let req = Request {
                action: Utf8Bytes::from("echo"),
                msg: Utf8Bytes::from("hi"),
            };
            tokio::time::timeout(std::time::Duration::from_secs(10), client.echo(req))
                .await
                .unwrap()
                .unwrap();
        }
    });
}

/// `echo-server --access-log 2`: one line in two calls on stderr, naming the method.
#[test]
fn echo_server_logs_one_call_in_n() {
    use std::io::Read;

    let (mut server, addr) =
        echo_server_on_loopback(0, &["--access-log", "2", "--workers", "3"], Stdio::piped());
    echo_calls(addr, 4);
    let _ = server.kill();
    let _ = server.wait();
    let mut log = String::new();
    server
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    let calls: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("volo_core::access"))
        .collect();
    assert_eq!(calls.len(), 2, "{log}");
    assert!(
        calls
            .iter()
            .all(|l| l.contains("method=echo") && l.contains("status=\"ok\"")),
        "{log}"
    );
    // The sizes chosen at start, with the CPU budget they come from; --workers wins.
    let sized = log
        .lines()
        .find(|l| l.contains("server: netpoll reactor sized"))
        .unwrap_or_else(|| panic!("no sizing line: {log}"));
    assert!(
        sized.contains("runtime_workers=3") && sized.contains("cpus=usable="),
        "{sized}"
    );
}

/// `echo-client --access-log N`: its calls are logged on stderr, from the client's
/// side, each one answered.
#[test]
fn echo_client_logs_its_calls() {
    let (mut server, addr) = echo_server_on_loopback(0, &[], Stdio::inherit());
    let out = Command::new(env!("CARGO_BIN_EXE_echo-client"))
        .args([
            "--addr",
            &addr.to_string(),
            "--concurrency",
            "1",
            "--duration",
            "0.2",
        ])
        .args(["--access-log", "50"])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(out.status.success(), "{out:?}");
    let log = String::from_utf8_lossy(&out.stderr);
    let calls: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("volo_core::access"))
        .collect();
    assert!(!calls.is_empty(), "{log}");
    assert!(
        calls.iter().all(|l| l.contains("side=\"client\"")
            && l.contains("method=echo")
            && l.contains("status=\"ok\"")
            && l.contains("attempts=1")),
        "{log}"
    );
}

/// `echo-server --metrics-addr`: after a known number of calls from this process, a
/// scrape of `/metrics` over a plain socket counts exactly those.
#[test]
fn echo_server_serves_its_metrics() {
    use std::io::{Read, Write};

    let mut server = Command::new(env!("CARGO_BIN_EXE_echo-server"))
        .args(["--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let mut next = || lines.next().unwrap().unwrap();
    let (first, second) = (next(), next());
    let metrics: std::net::SocketAddr = first
        .strip_prefix("echo-server metrics on ")
        .unwrap_or_else(|| panic!("{first:?}"))
        .parse()
        .unwrap();
    let addr: std::net::SocketAddr = second
        .strip_prefix("echo-server listening on ")
        .unwrap_or_else(|| panic!("{second:?}"))
        .parse()
        .unwrap();
    echo_calls(addr, 7);
    let mut s = std::net::TcpStream::connect(metrics).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(
        text.contains(
            "\nrpc_server_requests_total{service=\"EchoService\",method=\"echo\",outcome=\"ok\"} 7\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("\nrpc_server_connections_total 1\n"),
        "{text}"
    );
}

/// `rpc-bench --metrics on,off`: slices alternately on a counting and a plain server
/// and client; the summary gives the ratio. `--metrics-addr` serves the run's metrics.
#[test]
fn rpc_bench_compares_metrics_on_and_off() {
    let extra = ["--metrics", "on,off", "--metrics-addr", "127.0.0.1:0"];
    let (stdout, summary) = run_paired("netpoll", &extra);
    assert!(
        stdout.contains("rpc-bench: metrics at http://127.0.0.1:"),
        "{stdout}"
    );
    assert_eq!(keys(&summary), summary_keys("off", "on"), "{summary}");
    assert!(
        field(&summary, "off_qps") > 0.0 && field(&summary, "on_qps") > 0.0,
        "{summary}"
    );
}

/// Every program, by name and path.
fn programs() -> Vec<(&'static str, &'static str)> {
    let all = vec![
        ("echo-server", env!("CARGO_BIN_EXE_echo-server")),
        ("echo-client", env!("CARGO_BIN_EXE_echo-client")),
        ("rpc-bench", env!("CARGO_BIN_EXE_rpc-bench")),
        ("layered", env!("CARGO_BIN_EXE_layered")),
        ("one-layer", env!("CARGO_BIN_EXE_one-layer")),
        ("two-hops", env!("CARGO_BIN_EXE_two-hops")),
        ("middleware", env!("CARGO_BIN_EXE_middleware")),
        ("wire-dump", env!("CARGO_BIN_EXE_wire-dump")),
        ("stream-server", env!("CARGO_BIN_EXE_stream-server")),
        ("stream-check", env!("CARGO_BIN_EXE_stream-check")),
    ];
    // Built with the `etcd` feature only.
    #[cfg(feature = "etcd")]
    let all = [
        all,
        vec![("local-first", env!("CARGO_BIN_EXE_local-first"))],
    ]
    .concat();
    all
}

/// `bin` run with `args`, its output (it must end by itself: these are refusals and
/// help texts).
fn output(bin: &str, args: &[&str]) -> Output {
    Command::new(bin).args(args).output().expect("runs")
}

/// `wire-dump | head -1`: a reader that stops reading ends the dump quietly (Rust
/// ignores `SIGPIPE`, so each write fails with `EPIPE` instead; `println!` panics on
/// it). The pipe's read end is closed before the program starts, so its first write
/// fails whatever the timing.
#[test]
fn wire_dump_ends_quietly_when_its_reader_is_gone() {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let child = Command::new(env!("CARGO_BIN_EXE_wire-dump"))
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let out = child.wait_with_output().expect("ends");
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_program_has_help_and_version() {
    for (name, bin) in programs() {
        let help = output(bin, &["--help"]);
        let text = String::from_utf8_lossy(&help.stdout);
        assert!(help.status.success(), "{name} --help: {help:?}");
        assert!(
            text.contains(&format!("Usage: {name}")) && text.contains("--version"),
            "{name} --help: {text}"
        );
        let version = output(bin, &["--version"]);
        assert!(version.status.success(), "{name} --version: {version:?}");
        assert_eq!(
            String::from_utf8_lossy(&version.stdout),
            format!("{name} {}\n", env!("CARGO_PKG_VERSION"))
        );
    }
}

/// A refused command line: status 2, and stderr naming each of `names`.
fn refused(bin: &str, args: &[&str], names: &[&str]) {
    let out = output(bin, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    for name in names {
        assert!(
            stderr.contains(name),
            "{args:?} does not name {name}: {stderr}"
        );
    }
}

#[test]
fn a_bad_value_is_refused_naming_its_flag() {
    let client = env!("CARGO_BIN_EXE_echo-client");
    let server = env!("CARGO_BIN_EXE_echo-server");
    let bench = env!("CARGO_BIN_EXE_rpc-bench");
    let addr = ["--addr", "127.0.0.1:1"];
    let with_addr = |more: &[&'static str]| [&addr[..], more].concat();
    refused(
        client,
        &with_addr(&["--concurrency", "x"]),
        &["--concurrency"],
    );
    refused(
        client,
        &with_addr(&["--concurrency", "0"]),
        &["--concurrency"],
    );
    refused(
        client,
        &with_addr(&["--transport", "http"]),
        &["--transport"],
    );
    refused(client, &with_addr(&["--balance", "first"]), &["--balance"]);
    refused(client, &with_addr(&["--duration", "0"]), &["--duration"]);
    refused(client, &with_addr(&["--duration=-1"]), &["--duration"]);
    refused(
        client,
        &with_addr(&["--local-share", "2"]),
        &["--local-share"],
    );
    refused(client, &with_addr(&["--meta", "novalue"]), &["--meta"]);
    refused(client, &with_addr(&["--no-such-flag"]), &["--no-such-flag"]);
    refused(
        client,
        &with_addr(&["--backup-ms", "5", "--no-idempotent"]),
        &["--backup-ms", "--no-idempotent"],
    );
    refused(client, &[], &["--addr", "--discover"]);
    refused(server, &["--addr", "nowhere"], &["--addr"]);
    refused(server, &["--addr", "127.0.0.1:0,"], &["--addr"]);
    refused(server, &with_addr(&["--io", "epoll"]), &["--io"]);
    refused(server, &with_addr(&["--workers", "0"]), &["--workers"]);
    refused(
        server,
        &with_addr(&["--weight", "5"]),
        &["--weight", "--registry"],
    );
    refused(
        server,
        &with_addr(&["--registry-layout", "kitex"]),
        &["--registry-layout", "--registry"],
    );
    for flag in [&["--registry-layout", "kitex"][..], &["--service", "Other"]] {
        refused(client, &with_addr(flag), &[flag[0], "--discover"]);
    }
    refused(
        server,
        &with_addr(&["--registry-layout", "consul"]),
        &["--registry-layout", "native", "kitex"],
    );
    let streams = env!("CARGO_BIN_EXE_stream-server");
    refused(
        streams,
        &with_addr(&["--lease-ttl", "2"]),
        &["--lease-ttl", "--registry"],
    );
    let check = env!("CARGO_BIN_EXE_stream-check");
    refused(check, &[], &["--addr", "--discover"]);
    refused(
        check,
        &["--addr", "127.0.0.1:1,127.0.0.1:2"],
        &["one --addr"],
    );
    refused(
        check,
        &with_addr(&["--deadline-ms", "0"]),
        &["--deadline-ms"],
    );
    refused(
        check,
        &with_addr(&["--load", "4", "--deadline-ms", "100"]),
        &["--load", "--deadline-ms"],
    );
    refused(
        check,
        &with_addr(&["--duration", "3"]),
        &["--duration", "--load"],
    );
    refused(check, &with_addr(&["--load", "0"]), &["--load"]);
    refused(bench, &["--transports", "tokio,ftp"], &["--transports"]);
    refused(bench, &["--concurrency", "1,100"], &["--concurrency"]);
    refused(bench, &["--metrics", "maybe"], &["--metrics"]);
    refused(
        bench,
        &["--server-only", "--pin"],
        &["--pin", "--server-only"],
    );
    refused(bench, &["--rounds", "3"], &["--rounds"]);
    refused(
        bench,
        &["--server-only", "--server-cpus", "x"],
        &["--server-cpus"],
    );
    refused(bench, &["--server-only", "--stack", "paired"], &["--stack"]);
    refused(bench, &["--latency"], &["--latency", "--server-only"]);
    refused(bench, &["--size", "64,1024"], &["--size"]);
    refused(
        bench,
        &["--server-only", "--kitex-server", "true"],
        &["--kitex-server"],
    );
    refused(env!("CARGO_BIN_EXE_wire-dump"), &["a", "b", "c"], &["'c'"]);
    #[cfg(feature = "etcd")]
    refused(
        env!("CARGO_BIN_EXE_local-first"),
        &["--shares", "1,2"],
        &["--shares"],
    );
    #[cfg(feature = "etcd")]
    refused(
        server,
        &with_addr(&["--registry", "http://x:1"]),
        &["--registry"],
    );
}

/// Without the `etcd` feature the etcd flags are there, and refused naming it.
#[cfg(not(feature = "etcd"))]
#[test]
fn etcd_flags_name_the_feature_they_need() {
    let url = "etcd://127.0.0.1:2379";
    refused(
        env!("CARGO_BIN_EXE_echo-server"),
        &["--addr", "127.0.0.1:0", "--registry", url],
        &["--registry", "`etcd` feature"],
    );
    refused(
        env!("CARGO_BIN_EXE_echo-client"),
        &["--discover", url],
        &["--discover", "`etcd` feature"],
    );
    refused(
        env!("CARGO_BIN_EXE_stream-server"),
        &["--addr", "127.0.0.1:0", "--registry", url],
        &["--registry", "`etcd` feature"],
    );
    refused(
        env!("CARGO_BIN_EXE_stream-check"),
        &["--load", "1", "--discover", url],
        &["--discover", "`etcd` feature"],
    );
}

/// The comma-separated values of `key` in a line of `key=value` fields.
fn list<'a>(line: &'a str, key: &str) -> Vec<&'a str> {
    let fields = support::fields(line);
    let value = fields
        .get(key)
        .unwrap_or_else(|| panic!("no {key}: {line}"));
    value.split(',').collect()
}

/// `echo-client --meta a=1 --persistent b=2` over TTHeader to `echo-server
/// --show-metainfo`: the server's line for a call shows both values as they arrived
/// and the backward value its handler set; the client's line shows that value back.
#[test]
fn metainfo_is_shown_on_the_server_and_backward_values_come_back() {
    let (server, port) = support::server("metainfo", 0, &["--show-metainfo"]);
    let out = Command::new(env!("CARGO_BIN_EXE_echo-client"))
        .args([
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--transport",
            "ttheader",
        ])
        .args(["--meta", "a=1", "--persistent", "b=2"])
        .args(["--concurrency", "1", "--duration", "0.2"])
        .env("RPC_PROGRESS", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let backward = stdout
        .lines()
        .find_map(|l| l.strip_prefix("echo-client: backward "))
        .unwrap_or_else(|| panic!("no backward line: {stdout}"));
    assert!(
        backward.split(',').any(|p| p == "srv_back=echo"),
        "{backward}"
    );
    // The warm-up's calls came first: the server's first line is one of the client's.
    let call = server
        .line(Duration::from_secs(10))
        .expect("echo-server printed no call");
    assert!(
        call.starts_with("echo-server: call method=echo seq="),
        "{call}"
    );
    let fields = support::fields(&call);
    assert_eq!(fields.get("transport"), Some(&"ttheader"), "{call}");
    assert_eq!(fields.get("protocol"), Some(&"binary"), "{call}");
    assert!(list(&call, "forward").contains(&"a=1"), "{call}");
    assert!(list(&call, "persistent").contains(&"b=2"), "{call}");
    assert!(!list(&call, "persistent").contains(&"a=1"), "{call}");
    assert!(list(&call, "backward").contains(&"srv_back=echo"), "{call}");
}

/// A short run of `echo-client` against `port` with `args`: its stdout, after
/// checking that it succeeded.
fn client_run(port: u16, args: &[&str]) -> String {
    let addr = format!("127.0.0.1:{port}");
    run_ok(
        env!("CARGO_BIN_EXE_echo-client"),
        &[&["--addr", addr.as_str()][..], args].concat(),
    )
}

/// The `calls=<n> ok=<n> errors=<n> unfinished=<n>` line of a run, as numbers.
fn calls(stdout: &str) -> (u64, u64, u64, u64) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("calls="))
        .unwrap_or_else(|| panic!("no calls line: {stdout}"));
    let f = support::fields(line);
    let n = |k| support::num(&f, k, line);
    (n("calls"), n("ok"), n("errors"), n("unfinished"))
}

/// `echo-client --method` against `echo-server --show-metainfo`: each method reaches
/// the server under its name and every call ends as the method promises (the
/// exception of `echo_or_fail` asked for, the reply otherwise; `notify` written).
#[test]
fn echo_client_calls_each_method() {
    let (server, port) = support::server("methods", 0, &["--show-metainfo"]);
    for method in ["echo", "echo_or_fail", "notify"] {
        let stdout = client_run(
            port,
            &[
                "--method",
                method,
                "--concurrency",
                "2",
                "--duration",
                "0.2",
            ],
        );
        let (total, ok, errors, unfinished) = calls(&stdout);
        assert!(
            total > 1 && ok == total && errors == 0 && unfinished == 0,
            "{method}: {stdout}"
        );
        let mut seen = None;
        while let Some(line) = server.line(Duration::from_secs(5)) {
            let fields = support::fields(&line);
            if fields.get("method") == Some(&method) {
                seen = Some(line);
                break;
            }
        }
        assert!(seen.is_some(), "echo-server saw no {method} call");
    }
}

/// A flag given twice takes its last value; `--meta` given twice sends both.
#[test]
fn a_flag_given_twice_takes_its_last_value() {
    let (server, port) = support::server("twice", 0, &["--show-metainfo"]);
    let out = Command::new(env!("CARGO_BIN_EXE_echo-client"))
        .args(["--addr", &format!("127.0.0.1:{port}")])
        .args(["--concurrency", "1", "--concurrency", "3"])
        .args(["--duration", "5", "--duration", "0.2"])
        .args(["--meta", "a=1", "--meta", "c=3"])
        .env("RPC_PROGRESS", "0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(", 3 callers, "), "{stderr}");
    assert!(stderr.contains(", 0.2 s"), "{stderr}");
    let call = server
        .line(Duration::from_secs(10))
        .expect("echo-server printed no call");
    let forward = list(&call, "forward");
    assert!(
        forward.contains(&"a=1") && forward.contains(&"c=3"),
        "{call}"
    );
}

/// `echo-client --timeout-ms` against a server that answers after 2 s: every call in
/// the window fails at its deadline (the 1.9 s between the two is far beyond any
/// stall), and none is left running.
#[test]
fn echo_client_calls_end_at_their_timeout() {
    let (_server, port) = support::server("timeout", 0, &["--delay-us", "2000000"]);
    let out = Command::new(env!("CARGO_BIN_EXE_echo-client"))
        .args(["--addr", &format!("127.0.0.1:{port}")])
        .args([
            "--timeout-ms",
            "100",
            "--concurrency",
            "2",
            "--duration",
            "0.3",
        ])
        .env("RPC_PROGRESS", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let (total, ok, errors, unfinished) = calls(&stdout);
    assert!(
        total > 0 && ok == 0 && errors == total && unfinished == 0,
        "{stdout}"
    );
}

/// `echo-client --rate RATE --concurrency N --duration SECS` against the server on
/// `port`, without progress lines: whether it succeeded, and its output.
fn open_loop(port: u16, [rate, concurrency, duration]: [&str; 3]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_echo-client"))
        .args(["--addr", &format!("127.0.0.1:{port}")])
        .args(["--rate", rate, "--concurrency", concurrency])
        .args(["--duration", duration])
        .env("RPC_PROGRESS", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.success(), stdout)
}

/// `echo-server --spin`: a server in each way of polling answers an open loop's every
/// call (the fixed spin and no spin are the switches kept beside the adaptive default).
#[test]
fn echo_server_serves_with_each_spin() {
    for spin in ["fixed", "off", "adaptive"] {
        let (_server, port) = support::server(&format!("spin-{spin}"), 0, &["--spin", spin]);
        let (ok, stdout) = open_loop(port, ["200", "2", "0.25"]);
        assert!(ok, "{spin}: {stdout}");
        assert_eq!(calls(&stdout), (50, 50, 0, 0), "{spin}: {stdout}");
    }
}

/// `echo-client --rate`: an open loop makes exactly the calls due in the window (400 a
/// second for half a second), all answered, and ends with the open-loop line.
#[test]
fn echo_client_rate_makes_every_call_due() {
    let (_server, port) = support::server("rate", 0, &[]);
    let (ok, stdout) = open_loop(port, ["400", "4", "0.5"]);
    assert!(ok, "{stdout}");
    assert_eq!(calls(&stdout), (200, 200, 0, 0), "{stdout}");
    let last = stdout.lines().last().unwrap();
    assert_eq!(
        last.split(' ')
            .map(|f| f.split('=').next().unwrap())
            .collect::<Vec<_>>(),
        [
            "rate", "qps", "p50_us", "p99_us", "p999_us", "max_us", "errors", "late"
        ],
        "{stdout}"
    );
    assert_eq!(field(last, "rate"), 400.0, "{stdout}");
}
