//! A real etcd for the tests: started on free local ports in a fresh directory,
//! killed (SIGKILL) and removed on drop, restartable on the same ports and data.

#![allow(dead_code, unreachable_pub)]

use std::fs::File;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_registry::EtcdConfig;
use volo_core::registry::Registration;

/// How long etcd may take to answer after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// A running etcd of one test.
pub struct Etcd {
    bin: PathBuf,
    root: PathBuf,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// The etcd binary: `$ETCD_BIN`, else `etcd` on the `PATH`.
fn find_etcd() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("ETCD_BIN") {
        return Some(PathBuf::from(bin)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("etcd"))
        .find(|p| p.is_file())
}

/// Two free local ports (held together while chosen, so they differ).
fn free_ports() -> (u16, u16) {
    let a = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    let b = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    )
}

impl Etcd {
    /// A fresh etcd, answering; `None` (with a note) when etcd is not installed,
    /// unless `CI` is set, where that fails the test.
    pub fn start() -> Option<Etcd> {
        init_tracing();
        let Some(bin) = find_etcd() else {
            if std::env::var_os("CI").is_some() {
                panic!("etcd is not installed (no `etcd` on PATH, no ETCD_BIN) and CI is set");
            }
            eprintln!("skipped: etcd is not installed (no `etcd` on PATH, no ETCD_BIN)");
            return None;
        };
        static N: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "etcd-registry-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("create the test directory");
        let (client_port, peer_port) = free_ports();
        let mut etcd = Etcd {
            bin,
            root,
            client_port,
            peer_port,
            child: None,
        };
        etcd.launch();
        Some(etcd)
    }

    /// `127.0.0.1:port`, as the config takes it.
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// The defaults, with this etcd and a short timeout.
    pub fn config(&self) -> EtcdConfig {
        EtcdConfig {
            timeout: Duration::from_secs(2),
            ..EtcdConfig::new(vec![self.endpoint()])
        }
    }

    /// A plain etcd client, to look at and change what the code under test sees.
    pub async fn client(&self) -> etcd_client::Client {
        etcd_client::Client::connect([self.endpoint()], None)
            .await
            .expect("an etcd client")
    }

    /// SIGKILLs etcd and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same ports and data, and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    fn launch(&mut self) {
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open the etcd log");
        let child = Command::new(&self.bin)
            .arg("--name=default")
            .arg(format!("--data-dir={}", self.root.join("data").display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=default={peer}"))
            .arg("--logger=zap")
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the etcd log"))
            .stderr(log)
            .spawn()
            .expect("start etcd");
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        while !self.healthy() {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("etcd exited ({status}); log:\n{}", self.log_tail());
            }
            assert!(
                Instant::now() < deadline,
                "etcd did not answer within {START_TIMEOUT:?}; log:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_path(&self) -> PathBuf {
        self.root.join("etcd.log")
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let start = log.len().saturating_sub(4000);
        log.get(start..).unwrap_or(&log).to_string()
    }

    /// Whether `/health` says it has a leader.
    fn healthy(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.client_port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
        if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer.contains(r#""health":"true""#)
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.root
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// An instance of `service` at `addresses`, weighing `weight`, without tags or host.
pub fn registration(service: &str, addresses: &[&str], weight: u32) -> Registration {
    Registration {
        service: service.into(),
        addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
        weight,
        tags: Default::default(),
        host: None,
    }
}

/// A value for `addresses`, as a server writes it (weight 100).
pub fn value(addresses: &[&str]) -> Vec<u8> {
    let quoted: Vec<String> = addresses.iter().map(|a| format!("{a:?}")).collect();
    format!(r#"{{"addresses":[{}],"weight":100}}"#, quoted.join(",")).into_bytes()
}

/// Puts `value` at `key` (without a lease), as another process could.
pub async fn put(raw: &etcd_client::Client, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
    raw.clone().put(key, value, None).await.expect("a put");
}

/// Logs to the test's output (once per test binary).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_test_writer()
        .try_init();
}

/// `test`, failing if it takes longer than `secs`.
pub async fn bounded<T>(secs: u64, test: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), test)
        .await
        .unwrap_or_else(|_| panic!("the test did not finish within {secs} s"))
}

/// Waits until `ready()` holds, checking every 20 ms; fails after `secs` naming `what`.
pub async fn eventually(secs: u64, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ready() {
        assert!(Instant::now() < deadline, "not within {secs} s: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A tracing writer that keeps what is written, to check what was logged.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// A subscriber writing here, for `tracing::subscriber::set_default`.
    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync + use<> {
        let me = self.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || me.clone())
            .finish()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
