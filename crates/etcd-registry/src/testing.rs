//! A real etcd for tests and measurements: started on free loopback ports with a
//! fresh data directory, killed (SIGKILL) and removed when dropped, and restartable
//! on the same ports and data (an etcd restart, as a test of riding it out needs).
//!
//! Built with the `testing` feature. It runs the `etcd` binary (`$ETCD_BIN`, else
//! `etcd` on the `PATH`; Debian's `etcd-server` package has it).
//!
//! ```no_run
//! use etcd_registry::testing::Etcd;
//!
//! // None (with a note on stderr) when etcd is not installed, unless `CI` is set.
//! let Some(mut etcd) = Etcd::start() else { return };
//! println!("etcd at {}", etcd.url()); // etcd://127.0.0.1:<port>
//! etcd.restart(); // SIGKILL, then again on the same data
//! ```

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::EtcdConfig;

/// How long etcd may take to answer after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// A running etcd of one test (or one measurement).
#[derive(Debug)]
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
fn free_ports() -> io::Result<(u16, u16)> {
    let a = TcpListener::bind("127.0.0.1:0")?;
    let b = TcpListener::bind("127.0.0.1:0")?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

impl Etcd {
    /// A fresh etcd, answering; `None` (with a note on stderr) when etcd is not
    /// installed, unless `CI` is set, where that panics: a test that needs etcd must
    /// not pass unseen on a machine without it.
    ///
    /// # Panics
    ///
    /// When etcd does not start or answer (see [`try_start`](Self::try_start)).
    pub fn start() -> Option<Etcd> {
        match Etcd::try_start() {
            Ok(etcd) => Some(etcd),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if std::env::var_os("CI").is_some() {
                    panic!("{e}, and CI is set");
                }
                eprintln!("skipped: {e}");
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    /// A fresh etcd, answering; `NotFound` when etcd is not installed, another error
    /// when it does not start or answer within 15 s (with the end of its log).
    pub fn try_start() -> io::Result<Etcd> {
        let bin = find_etcd().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "etcd is not installed (no `etcd` on PATH, no ETCD_BIN)",
            )
        })?;
        static N: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "etcd-registry-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root)?;
        let (client_port, peer_port) = free_ports()?;
        let mut etcd = Etcd {
            bin,
            root,
            client_port,
            peer_port,
            child: None,
        };
        etcd.launch()?;
        Ok(etcd)
    }

    /// `etcd://127.0.0.1:port`, as `echo-server --registry` takes it.
    pub fn url(&self) -> String {
        format!("etcd://{}", self.endpoint())
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
    ///
    /// # Panics
    ///
    /// When it cannot connect.
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
    ///
    /// # Panics
    ///
    /// When it does not start or answer.
    pub fn restart(&mut self) {
        self.kill();
        if let Err(e) = self.launch() {
            panic!("{e}");
        }
    }

    /// Starts etcd and waits until it answers.
    fn launch(&mut self) -> io::Result<()> {
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log_path())?;
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
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        while !self.healthy() {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(io::Error::other(format!(
                    "etcd exited ({status}); log:\n{}",
                    self.log_tail()
                )));
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "etcd did not answer within {START_TIMEOUT:?}; log:\n{}",
                        self.log_tail()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
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
