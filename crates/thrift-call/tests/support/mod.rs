//! What the tests of the binary share: running it, and a server on loopback for it
//! to call, each bounded in time.

use std::future::Future;
use std::io;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use volo_core::context::Address;
use volo_core::server::{BoundServer, Dispatch};

/// How long one run of the binary may take before it is killed.
pub(crate) const RUN_LIMIT: Duration = Duration::from_secs(30);

/// What a run of the binary did.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) status: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Run {
    /// Asserts a failure with `status` and one `thrift-call: ` line on stderr holding
    /// `words`.
    pub(crate) fn failed(&self, status: i32, words: &str) {
        assert_eq!(self.status, status, "{self:?}");
        assert!(
            self.stderr.starts_with("thrift-call: ") && self.stderr.lines().count() == 1,
            "not one line: {self:?}"
        );
        assert!(self.stderr.contains(words), "no {words:?}: {self:?}");
    }

    /// Asserts a reply: status 0, `json` and a newline on stdout, nothing on stderr.
    pub(crate) fn replied(&self, json: &str) {
        assert_eq!(
            (self.status, self.stdout.as_str(), self.stderr.as_str()),
            (0, format!("{json}\n").as_str(), ""),
        );
    }
}

/// The binary started with `args`, its stdin, stdout and stderr piped; killed when
/// dropped.
pub(crate) fn spawn(args: &[&str]) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_thrift-call"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Runs the binary with `args` and `stdin`; killed when it runs longer than
/// [`RUN_LIMIT`].
pub(crate) async fn thrift_call(args: &[&str], stdin: &str) -> Run {
    let mut child = spawn(args);
    let mut input = child.stdin.take().unwrap();
    // A run that does not read stdin may close it first: that is no failure here.
    let _ = input.write_all(stdin.as_bytes()).await;
    drop(input);
    let out = tokio::time::timeout(RUN_LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("thrift-call {args:?} ran longer than {RUN_LIMIT:?}"))
        .unwrap();
    Run {
        status: out.status.code().expect("killed by a signal"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `f` with no server.
pub(crate) fn offline<Fut: Future<Output = ()>>(f: impl FnOnce() -> Fut) {
    runtime().block_on(f());
}

/// Runs `f` with the server `bind` makes serving, given its address as the command
/// line spells it; then stops the server, all bounded in time.
pub(crate) fn served<S, B, F, Fut>(bind: B, f: F)
where
    S: Dispatch,
    B: Future<Output = io::Result<BoundServer<S>>>,
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    runtime().block_on(async {
        let bound = bind.await.unwrap();
        let addr = match bound.local_addr() {
            Address::Unix(path) => path.display().to_string(),
            other => other.to_string(),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let done = tokio::spawn(bound.serve_with_shutdown(async {
            let _ = stopped.await;
        }));
        f(addr).await;
        let _ = stop.send(());
        tokio::time::timeout(Duration::from_secs(20), done)
            .await
            .expect("the server did not stop")
            .unwrap()
            .unwrap();
    });
}

pub(crate) fn loopback() -> Address {
    "127.0.0.1:0".parse().unwrap()
}

/// A loopback port that nothing listens on: one that was bound, then let go.
pub(crate) fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr.to_string()
}
