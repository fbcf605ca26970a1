//! What the tests that run the programs share: a temporary directory, a child process
//! that is always stopped and waited for, waiting with a deadline, and finding the
//! suite's Python side.
#![allow(dead_code, unreachable_pub)]

use std::fs::File;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(20);

/// A directory of its own under the system's temporary directory, removed on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // Short: a Unix socket path must fit in 108 bytes.
        let dir = std::env::temp_dir().join(format!("tt-{what}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        TempDir(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running program whose output goes to files; stopped (SIGTERM, then SIGKILL) and
/// waited for on drop at the latest.
#[derive(Debug)]
pub struct Proc {
    pub name: String,
    child: Child,
    out: PathBuf,
    status: Option<ExitStatus>,
}

impl Proc {
    /// Starts `cmd`, its stdout and stderr into `<dir>/<name>.log`.
    pub fn spawn(name: &str, mut cmd: Command, dir: &TempDir) -> Result<Proc, String> {
        let out = dir.path(&format!("{name}.log"));
        let file = File::create(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
        let err = file
            .try_clone()
            .map_err(|e| format!("cloning a file handle: {e}"))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting {name} ({cmd:?}): {e}"))?;
        Ok(Proc {
            name: name.to_string(),
            child,
            out,
            status: None,
        })
    }

    /// Whether it ended (and how), without waiting.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Waits for it to end by itself until `limit`; `None` if it did not (it is then
    /// still running).
    pub fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Stops it: SIGTERM, up to `grace` to end, then SIGKILL; always waited for.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if self.exited().is_none() {
            if let Ok(pid) = i32::try_from(self.child.id()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
            }
            if self.wait_for(grace).is_none() {
                self.kill();
            }
        }
        self.status
    }

    /// SIGKILL, and wait.
    fn kill(&mut self) {
        let _ = self.child.kill();
        self.status = self.child.wait().ok();
    }

    /// Everything it wrote so far.
    pub fn output(&self) -> String {
        std::fs::read(&self.out)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Its last `n` lines of output, indented, for a report.
    pub fn tail(&self, n: usize) -> String {
        let out = self.output();
        let lines: Vec<&str> = out.lines().collect();
        let from = lines.len().saturating_sub(n);
        lines[from..]
            .iter()
            .map(|l| format!("    | {l}\n"))
            .collect()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited().is_none() {
            self.kill();
        }
    }
}

/// Waits until the server `proc` wrote its port to `file` (`--port-file`), or ended,
/// or `limit` passed.
pub fn wait_port_file(proc: &mut Proc, file: &Path, limit: Duration) -> Result<u16, String> {
    let deadline = Instant::now() + limit;
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if let Ok(port) = text.trim().parse::<u16>() {
            return Ok(port);
        }
        if let Some(status) = proc.exited() {
            return Err(format!("{} ended before listening ({status})", proc.name));
        }
        if Instant::now() >= deadline {
            return Err(format!("{} did not listen within {limit:?}", proc.name));
        }
        std::thread::sleep(POLL);
    }
}

/// Waits until a connection to the Unix socket at `path` succeeds (the server listens),
/// or the server ended, or `limit` passed. The probe connection is closed at once.
pub fn wait_unix_socket(proc: &mut Proc, path: &Path, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        if UnixStream::connect(path).is_ok() {
            return Ok(());
        }
        if let Some(status) = proc.exited() {
            return Err(format!("{} ended before listening ({status})", proc.name));
        }
        if Instant::now() >= deadline {
            return Err(format!("{} did not listen within {limit:?}", proc.name));
        }
        std::thread::sleep(POLL);
    }
}

/// The suite's Python side: `$THRIFT_XTEST_DIR`, or `shared/xtest` next to the
/// repository.
pub fn xtest_dir() -> PathBuf {
    match std::env::var_os("THRIFT_XTEST_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/xtest");
            dir.canonicalize().unwrap_or(dir)
        }
    }
}

/// The Python interpreter (`$PYTHON`, else `python3`).
pub fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

/// The version of Apache's Python library the suite needs.
pub const PY_THRIFT: &str = "0.25.0";

/// Whether the suite's Python side can run here: its files, python, `thrift` at
/// [`PY_THRIFT`] with its C extension. `Err` says what is missing.
pub fn python_side() -> Result<PathBuf, String> {
    let dir = xtest_dir();
    if !dir.join("py/TestClient.py").is_file() {
        return Err(format!("the suite's Python side in {}", dir.display()));
    }
    let probe = Command::new(python())
        .args([
            "-c",
            "import importlib.metadata as m; import thrift.protocol.fastbinary; \
             print(m.version('thrift'))",
        ])
        .output()
        .map_err(|e| format!("{} ({e})", python()))?;
    let version = String::from_utf8_lossy(&probe.stdout).trim().to_string();
    if !probe.status.success() || version != PY_THRIFT {
        return Err(format!(
            "Python's thrift {PY_THRIFT} with its C extension (found {:?}; \
             `python3 -m pip install thrift=={PY_THRIFT}`)",
            if version.is_empty() {
                String::from_utf8_lossy(&probe.stderr).trim().to_string()
            } else {
                version
            }
        ));
    }
    Ok(dir)
}

/// Whether missing tools fail the test (under CI) rather than skip it.
pub fn required() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// Writes `line` to the real stderr, past the test harness's capture, so a CI log shows
/// the matrix as it runs.
pub fn show(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}
