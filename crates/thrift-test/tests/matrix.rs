//! The cross-language matrix against the suite's Python side (`shared/xtest`), both
//! ways: our `thrift-test-server` with Apache's `TestClient.py`, and Apache's
//! `TestServer.py` (`TSimpleServer`, as the suite's `tests.json` runs it) with our
//! `thrift-test-client`, over {buffered, framed} x every protocol both speak x {ip,
//! domain, ip-ssl (binary and compact)}.
//!
//! One line per combination (`server=.. client=.. transport=.. protocol=.. socket=..
//! result=pass|fail`, the protocol as `server:client` where the two names differ) and
//! a count at the end; any failure fails the test, with the tail of both programs'
//! output. Servers listen on 127.0.0.1 (port 0, the bound port read from
//! `--port-file`) or on a Unix socket in a temporary directory; every process is
//! stopped and waited for; each combination is bounded in time; two run at a time.
//!
//! `THRIFT_XTEST_FILTER=text` runs only the combinations whose line contains `text`
//! (e.g. `socket=domain`). Skipped, with a message, when python3 with thrift 0.25.0 or
//! the suite's files are missing, unless `CI` is set (then it fails).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use support::{Proc, TempDir};

/// How long a server may take to listen.
const START_LIMIT: Duration = Duration::from_secs(15);
/// How long a client run may take (Apache's runner gives Python's client 15 s).
const RUN_LIMIT: Duration = Duration::from_secs(30);
/// How long a stopped server may take to end before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// Combinations run at once.
const PARALLEL: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// This crate's programs.
    Rs,
    /// Apache's Python programs.
    Py,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Rs => "rs",
            Side::Py => "py",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Socket {
    Ip,
    Domain,
    IpSsl,
}

impl Socket {
    fn name(self) -> &'static str {
        match self {
            Socket::Ip => "ip",
            Socket::Domain => "domain",
            Socket::IpSsl => "ip-ssl",
        }
    }
}

#[derive(Debug, Clone)]
struct Combo {
    server: Side,
    client: Side,
    transport: &'static str,
    server_protocol: &'static str,
    client_protocol: &'static str,
    socket: Socket,
}

impl Combo {
    fn line(&self) -> String {
        let protocol = if self.server_protocol == self.client_protocol {
            self.server_protocol.to_string()
        } else {
            format!("{}:{}", self.server_protocol, self.client_protocol)
        };
        format!(
            "server={} client={} transport={} protocol={protocol} socket={}",
            self.server.name(),
            self.client.name(),
            self.transport,
            self.socket.name()
        )
    }
}

/// Protocols both sides speak, as (server's name, client's name): the Python client's
/// C-accelerated variants speak the bytes of binary and compact.
const RS_SERVER_PY_CLIENT: [(&str, &str); 12] = [
    ("binary", "binary"),
    ("binary", "accel"),
    ("compact", "compact"),
    ("compact", "accelc"),
    ("json", "json"),
    ("header", "header"),
    ("multi", "multi"),
    ("multi", "multia"),
    ("multic", "multic"),
    ("multic", "multiac"),
    ("multij", "multij"),
    ("multih", "multih"),
];

const PY_SERVER_RS_CLIENT: [&str; 8] = [
    "binary", "compact", "json", "header", "multi", "multic", "multij", "multih",
];

/// Every combination of the matrix.
fn combos() -> Vec<Combo> {
    let mut out = Vec::new();
    for transport in ["buffered", "framed"] {
        for socket in [Socket::Ip, Socket::Domain, Socket::IpSsl] {
            let tls_ok = |p: &str| socket != Socket::IpSsl || p == "binary" || p == "compact";
            for (sp, cp) in RS_SERVER_PY_CLIENT {
                if tls_ok(cp) {
                    out.push(Combo {
                        server: Side::Rs,
                        client: Side::Py,
                        transport,
                        server_protocol: sp,
                        client_protocol: cp,
                        socket,
                    });
                }
            }
            for p in PY_SERVER_RS_CLIENT {
                if tls_ok(p) {
                    out.push(Combo {
                        server: Side::Py,
                        client: Side::Rs,
                        transport,
                        server_protocol: p,
                        client_protocol: p,
                        socket,
                    });
                }
            }
        }
    }
    out
}

/// Where things are.
#[derive(Debug)]
struct Env {
    xtest: PathBuf,
    server: PathBuf,
    client: PathBuf,
    /// The keys our client presents to Apache's TLS server (see [`client_keys`]).
    client_keys: Option<TempDir>,
}

impl Env {
    fn py_dir(&self) -> PathBuf {
        self.xtest.join("py")
    }

    fn keys(&self) -> PathBuf {
        self.xtest.join("keys")
    }
}

/// A keys directory for our client against Apache's `TestServer.py --ssl`: the suite's
/// `CA.pem` (to trust the server), and a client certificate issued by the suite's
/// `client.crt` (with its `client.key`) that names 127.0.0.1 in a subjectAltName.
///
/// Why: thrift 0.25's `TSSLServerSocket` requires the client certificate to verify
/// against `keys/client.pem` (the suite's `client.crt`) *and* to list the address the
/// client connects from among its IP subjectAltNames. The suite's `client.crt`, an X.509
/// v1 certificate, has no subjectAltName, so `TestServer.py` refuses every client that
/// presents it, Apache's own `TestClient.py` included. A certificate signed by
/// `client.key` passes both checks of the unmodified server (OpenSSL takes a
/// self-signed v1 certificate for an authority). Made with the `openssl` command.
fn client_keys(suite_keys: &Path) -> Result<TempDir, String> {
    let dir = TempDir::new("keys");
    std::fs::copy(suite_keys.join("CA.pem"), dir.path("CA.pem")).map_err(|e| e.to_string())?;
    std::fs::write(
        dir.path("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nbasicConstraints=CA:FALSE\n",
    )
    .map_err(|e| e.to_string())?;
    let openssl = |args: &[&std::ffi::OsStr]| -> Result<(), String> {
        let out = Command::new("openssl")
            .args(args)
            .output()
            .map_err(|e| format!("the openssl command: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    let p = |name: &str| dir.path(name).into_os_string();
    let k = |name: &str| suite_keys.join(name).into_os_string();
    openssl(&[
        "req".as_ref(),
        "-new".as_ref(),
        "-newkey".as_ref(),
        "rsa:2048".as_ref(),
        "-nodes".as_ref(),
        "-subj".as_ref(),
        "/OU=Apache Thrift/CN=localhost".as_ref(),
        "-keyout".as_ref(),
        &p("client.key"),
        "-out".as_ref(),
        &p("client.csr"),
    ])?;
    openssl(&[
        "x509".as_ref(),
        "-req".as_ref(),
        "-in".as_ref(),
        &p("client.csr"),
        "-CA".as_ref(),
        &k("client.crt"),
        "-CAkey".as_ref(),
        &k("client.key"),
        "-set_serial".as_ref(),
        "2".as_ref(),
        "-days".as_ref(),
        "2".as_ref(),
        "-extfile".as_ref(),
        &p("ext.cnf"),
        "-out".as_ref(),
        &p("client.crt"),
    ])?;
    Ok(dir)
}

/// The arguments both programs of a combination take, with `protocol` for this one.
fn suite_args(c: &Combo, protocol: &str) -> Vec<String> {
    let mut args = vec![
        format!("--transport={}", c.transport),
        format!("--protocol={protocol}"),
    ];
    if c.socket == Socket::IpSsl {
        args.push("--ssl".into());
    }
    args
}

fn server_command(env: &Env, c: &Combo, dir: &TempDir) -> Command {
    let mut args = suite_args(c, c.server_protocol);
    match c.socket {
        Socket::Domain => args.push(format!("--domain-socket={}", dir.path("sock").display())),
        Socket::Ip | Socket::IpSsl => {
            args.push("--port=0".into());
            args.push(format!("--port-file={}", dir.path("port").display()));
        }
    }
    match c.server {
        Side::Rs => {
            if c.socket == Socket::IpSsl {
                args.push(format!("--keys-dir={}", env.keys().display()));
            }
            let mut cmd = Command::new(&env.server);
            cmd.args(args);
            cmd
        }
        Side::Py => {
            let mut cmd = Command::new(support::python());
            cmd.current_dir(env.py_dir())
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py_server.py"))
                .arg("TestServer.py")
                .arg("--genpydir=gen-py")
                .args(args)
                .arg("TSimpleServer");
            cmd
        }
    }
}

fn client_command(env: &Env, c: &Combo, dir: &TempDir, port: Option<u16>) -> Command {
    let mut args = suite_args(c, c.client_protocol);
    match (c.socket, port) {
        (Socket::Domain, _) => args.push(format!("--domain-socket={}", dir.path("sock").display())),
        (_, Some(port)) => args.push(format!("--port={port}")),
        (_, None) => unreachable!("a TCP combination has its port"),
    }
    match c.client {
        Side::Rs => {
            if c.socket == Socket::IpSsl {
                // Against our server, the suite's keys as they are; against Apache's,
                // a client certificate it can accept (see `client_keys`).
                let keys = match (c.server, &env.client_keys) {
                    (Side::Py, Some(dir)) => dir.0.clone(),
                    _ => env.keys(),
                };
                args.push(format!("--keys-dir={}", keys.display()));
            }
            let mut cmd = Command::new(&env.client);
            cmd.args(args);
            cmd
        }
        Side::Py => {
            let mut cmd = Command::new(support::python());
            cmd.current_dir(env.py_dir())
                .arg("TestClient.py")
                .arg("--genpydir=gen-py")
                .arg("--host=localhost")
                .args(args);
            cmd
        }
    }
}

/// Runs one combination: `Ok` when the client passed every check, else what went
/// wrong with the tail of each program's output.
fn run(env: &Env, c: &Combo) -> Result<(), String> {
    let dir = TempDir::new("x");
    let mut server = Proc::spawn("server", server_command(env, c, &dir), &dir)?;
    let port = match c.socket {
        Socket::Domain => {
            support::wait_unix_socket(&mut server, &dir.path("sock"), START_LIMIT).map(|()| None)
        }
        Socket::Ip | Socket::IpSsl => {
            support::wait_port_file(&mut server, &dir.path("port"), START_LIMIT).map(Some)
        }
    };
    let port = match port {
        Ok(p) => p,
        Err(e) => {
            server.stop(STOP_GRACE);
            return Err(format!("{e}\n  server output:\n{}", server.tail(12)));
        }
    };
    let mut client = Proc::spawn("client", client_command(env, c, &dir, port), &dir)?;
    let outcome = match client.wait_for(RUN_LIMIT) {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err(format!("the client failed ({s})")),
        None => Err(format!("the client did not finish within {RUN_LIMIT:?}")),
    };
    client.stop(STOP_GRACE);
    let server_status = server.stop(STOP_GRACE);
    outcome.map_err(|e| {
        format!(
            "{e}\n  client output:\n{}  server output (ended: {}):\n{}",
            client.tail(16),
            server_status.map_or_else(|| "unknown".into(), |s| s.to_string()),
            server.tail(12)
        )
    })
}

#[test]
fn the_matrix_against_apache_s_python_side_passes() {
    let xtest = match support::python_side() {
        Ok(dir) => dir,
        Err(missing) if support::required() => {
            panic!("the matrix needs {missing}; CI is set, so this is a failure")
        }
        Err(missing) => {
            eprintln!("skipped: the matrix needs {missing}");
            return;
        }
    };
    let client_keys = client_keys(&xtest.join("keys"))
        .unwrap_or_else(|e| panic!("a client certificate for Apache's TLS server: {e}"));
    let env = Env {
        xtest,
        server: PathBuf::from(env!("CARGO_BIN_EXE_thrift-test-server")),
        client: PathBuf::from(env!("CARGO_BIN_EXE_thrift-test-client")),
        client_keys: Some(client_keys),
    };
    let filter = std::env::var("THRIFT_XTEST_FILTER").unwrap_or_default();
    let todo: Vec<Combo> = combos()
        .into_iter()
        .filter(|c| c.line().contains(&filter))
        .collect();
    assert!(!todo.is_empty(), "no combination matches {filter:?}");
    let started = Instant::now();
    let next = Mutex::new(todo.iter());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLEL {
            s.spawn(|| {
                loop {
                    let Some(c) = next.lock().unwrap().next() else {
                        return;
                    };
                    let result = run(&env, c);
                    let verdict = if result.is_ok() { "pass" } else { "fail" };
                    support::show(&format!("{} result={verdict}", c.line()));
                    if let Err(why) = result {
                        support::show(&format!("  {}", why.trim_end()));
                        failures.lock().unwrap().push(c.line());
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    let summary = format!(
        "matrix: {} passed, {} failed, of {} combinations, in {:.0?}",
        todo.len() - failures.len(),
        failures.len(),
        todo.len(),
        started.elapsed()
    );
    support::show(&summary);
    assert!(
        failures.is_empty(),
        "{summary}; failed:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_matrix_holds_every_combination_the_issue_names() {
    let all = combos();
    let count = |server: Side, socket: Socket| {
        all.iter()
            .filter(|c| c.server == server && c.socket == socket)
            .count()
    };
    // Our server, Python's client: 12 protocols (4 accelerated) x 2 transports.
    assert_eq!(count(Side::Rs, Socket::Ip), 24);
    assert_eq!(count(Side::Rs, Socket::Domain), 24);
    assert_eq!(count(Side::Rs, Socket::IpSsl), 4, "binary and compact only");
    // Python's server, our client: 8 protocols x 2 transports.
    assert_eq!(count(Side::Py, Socket::Ip), 16);
    assert_eq!(count(Side::Py, Socket::Domain), 16);
    assert_eq!(count(Side::Py, Socket::IpSsl), 4);
    let lines: std::collections::BTreeSet<String> = all.iter().map(Combo::line).collect();
    assert_eq!(lines.len(), all.len(), "each combination once");
}
