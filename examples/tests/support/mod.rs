//! What the tests on real processes share: child processes that cannot outlive the
//! test, `echo-server`s on loopback, and the reading of an `echo-client`'s output.
#![allow(dead_code, unreachable_pub)] // Each test file uses a part.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

pub const SERVER: &str = env!("CARGO_BIN_EXE_echo-server");
pub const CLIENT: &str = env!("CARGO_BIN_EXE_echo-client");

/// The echo-client's unmeasured warm-up before its window.
pub const WARMUP: Duration = Duration::from_secs(1);

/// A child process with its stdout lines on a channel and its stderr kept; killed
/// (SIGKILL) and reaped when dropped, so that none outlives the test, whatever fails.
pub struct Proc {
    pub name: String,
    pub child: Child,
    pub lines: Receiver<String>,
    pub stderr: Arc<Mutex<String>>,
}

impl Proc {
    pub fn spawn(name: &str, program: &str, args: &[String]) -> Proc {
        let mut child = Command::new(program)
            .args(args)
            .env("RPC_PROGRESS", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {program} does not start: {e}"));
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("piped");
        let kept = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                kept.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Proc {
            name: name.to_string(),
            child,
            lines,
            stderr,
        }
    }

    /// The next stdout line, if one comes within `limit`.
    pub fn line(&self, limit: Duration) -> Option<String> {
        self.lines.recv_timeout(limit).ok()
    }

    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn signal(&self, signal: Signal) {
        let pid = i32::try_from(self.child.id()).expect("a pid fits an i32");
        kill(Pid::from_raw(pid), signal).unwrap_or_else(|e| panic!("{}: {signal}: {e}", self.name));
    }

    /// SIGKILL, and reaped.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Its exit status, if it exits within `limit`.
    pub fn wait(&mut self, limit: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An `echo-server` on 127.0.0.1 (`port` 0: any free port) with `extra` arguments,
/// once it says it listens: the process and its port. `None` if it does not (the
/// port is taken).
pub fn try_server(name: &str, port: u16, extra: &[&str]) -> Option<(Proc, u16)> {
    try_listening(name, SERVER, port, extra)
}

/// `program` (a server that prints `<program> listening on <addr>` once bound) on
/// 127.0.0.1:`port` with `extra` arguments, once it says it listens: the process and
/// its port. `None` if it does not (the port is taken).
pub fn try_listening(name: &str, program: &str, port: u16, extra: &[&str]) -> Option<(Proc, u16)> {
    let mut args = vec!["--addr".to_string(), format!("127.0.0.1:{port}")];
    args.extend(extra.iter().map(|a| a.to_string()));
    let server = Proc::spawn(name, program, &args);
    let line = server.line(Duration::from_secs(10))?;
    let (_, bound) = line.split_once(" listening on 127.0.0.1:")?;
    let bound: u16 = bound.trim().parse().ok()?;
    Some((server, bound))
}

pub fn server(name: &str, port: u16, extra: &[&str]) -> (Proc, u16) {
    listening(name, SERVER, port, extra)
}

/// [`try_listening`], tried again for a while when the port is taken.
pub fn listening(name: &str, program: &str, port: u16, extra: &[&str]) -> (Proc, u16) {
    // A port just freed may be taken for a moment by another test's socket.
    for _ in 0..20 {
        if let Some(s) = try_listening(name, program, port, extra) {
            return s;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{name}: {program} does not listen on port {port}");
}

/// `program` (`echo-server`, `stream-server`) on 127.0.0.1 registered in the etcd at
/// `etcd` (`etcd://HOST:PORT`) with a lease of `lease_ttl` seconds: the process, its
/// port, and when it said it listens (Unix ms).
pub fn registered(name: &str, program: &str, etcd: &str, lease_ttl: &str) -> (Proc, u16, u64) {
    let extra = ["--registry", etcd, "--lease-ttl", lease_ttl];
    let (p, port) = listening(name, program, 0, &extra);
    (p, port, examples::attempts::unix_ms())
}

/// When a client's stderr says `addr` was `what` (`added` or `removed`) by the
/// discovery it follows, first (Unix ms): from its lines `<program>: discovered
/// unix_ms=<n> added=<addrs> removed=<addrs> ...`.
pub fn discovered(stderr: &str, program: &str, what: &str, port: u16) -> Option<u64> {
    let addr = format!("127.0.0.1:{port}");
    let prefix = format!("{program}: discovered ");
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .find_map(|l| {
            let f = fields(l);
            let listed = f.get(what)?.split(',').any(|a| a == addr);
            listed.then(|| num(&f, "unix_ms", l))
        })
}

/// Milliseconds from `from` to `to` (negative when `to` came first).
pub fn after(from: u64, to: u64) -> i64 {
    to as i64 - from as i64
}

/// `k=v` pairs of a line.
pub fn fields(line: &str) -> HashMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .collect()
}

pub fn num(fields: &HashMap<&str, &str>, key: &str, line: &str) -> u64 {
    fields
        .get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {key} in {line:?}"))
}

/// One second of a client's `--timeline`.
#[derive(Debug, Clone, Copy)]
pub struct Second {
    pub t: u64,
    pub ok: u64,
    pub errors: u64,
    pub p99_us: u64,
}

/// What one `echo-client` run printed.
#[derive(Debug, Default)]
pub struct ClientRun {
    pub timeline: Vec<Second>,
    /// Per instance (its port): attempts answered, attempts failed.
    pub instances: HashMap<u16, (u64, u64)>,
    pub calls: u64,
    pub ok: u64,
    pub errors: u64,
    pub unfinished: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub qps: u64,
    pub last: String,
    /// Per instance (its port): when its first and last attempts ended (Unix ms).
    pub times: HashMap<u16, (u64, u64)>,
    /// What the client wrote on stderr.
    pub stderr: String,
}

impl ClientRun {
    /// The seconds with errors outside `allowed`.
    pub fn errors_outside(&self, allowed: std::ops::RangeInclusive<u64>) -> Vec<Second> {
        self.timeline
            .iter()
            .filter(|s| s.errors > 0 && !allowed.contains(&s.t))
            .copied()
            .collect()
    }

    /// Prints the timeline on stderr, a line per second after `label`.
    pub fn show_timeline(&self, label: &str) {
        for s in &self.timeline {
            eprintln!(
                "{label} t={} ok={} errors={} p99_us={}",
                s.t, s.ok, s.errors, s.p99_us
            );
        }
    }
}

/// Waits for a client started for `duration` seconds to end, and reads its output.
pub fn finish(mut client: Proc, duration: u64) -> ClientRun {
    // The window, the warm-up, the drain of calls in flight (at most 15 s), margin.
    let limit = Duration::from_secs(duration + 30);
    let status = client.wait(limit);
    let mut lines = Vec::new();
    while let Some(line) = client.line(Duration::from_secs(2)) {
        lines.push(line);
    }
    let Some(status) = status else {
        panic!(
            "{}: still running {limit:?} after it started (a call hangs?): {lines:?} {}",
            client.name,
            client.stderr()
        );
    };
    assert!(
        status.success(),
        "{}: {status}: {lines:?} {}",
        client.name,
        client.stderr()
    );
    let mut run = ClientRun::default();
    for line in &lines {
        let f = fields(line);
        if line.starts_with("t=") {
            run.timeline.push(Second {
                t: num(&f, "t", line),
                ok: num(&f, "ok", line),
                errors: num(&f, "errors", line),
                p99_us: num(&f, "p99_us", line),
            });
        } else if let Some(addr) = f.get("instance") {
            let port = addr
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse().ok())
                .unwrap_or_else(|| panic!("an instance address in {line:?}"));
            let counts = (num(&f, "ok", line), num(&f, "failed", line));
            run.instances.insert(port, counts);
            let times = (
                num(&f, "first_unix_ms", line),
                num(&f, "last_unix_ms", line),
            );
            run.times.insert(port, times);
        } else if line.starts_with("calls=") {
            run.calls = num(&f, "calls", line);
            run.ok = num(&f, "ok", line);
            run.unfinished = num(&f, "unfinished", line);
        }
    }
    let last = lines.last().cloned().unwrap_or_default();
    let keys: Vec<&str> = last
        .split(' ')
        .filter_map(|f| f.split('=').next())
        .collect();
    assert_eq!(
        keys,
        ["qps", "p50_us", "p99_us", "p999_us", "errors"],
        "{}: the last line {last:?}",
        client.name
    );
    let f = fields(&last);
    run.qps = num(&f, "qps", &last);
    run.p50_us = num(&f, "p50_us", &last);
    run.p99_us = num(&f, "p99_us", &last);
    run.p999_us = num(&f, "p999_us", &last);
    run.errors = num(&f, "errors", &last);
    run.last = last;
    run.stderr = client.stderr();
    run
}

/// No call lost: every call made in the window ended, as an answer or an error.
pub fn assert_no_call_lost(phase: &str, run: &ClientRun) {
    assert_eq!(run.unfinished, 0, "{phase}: calls that never ended");
    assert_eq!(
        run.ok + run.errors,
        run.calls,
        "{phase}: answered and failed calls add up to the calls made"
    );
    if !run.timeline.is_empty() {
        let ok: u64 = run.timeline.iter().map(|s| s.ok).sum();
        let errors: u64 = run.timeline.iter().map(|s| s.errors).sum();
        assert_eq!((ok, errors), (run.ok, run.errors), "{phase}: the timeline");
    }
    assert!(
        run.calls > 0 && run.qps > 0,
        "{phase}: no call went through"
    );
}

pub fn sleep_until(at: Instant) {
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
}

/// Seconds since the window of a client started at `started` opened (about).
pub fn window_time(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() - WARMUP.as_secs_f64()
}

/// The names of a `name=value ...` line's fields, in order.
pub fn field_names(line: &str) -> Vec<&str> {
    line.split(' ')
        .map(|f| f.split('=').next().unwrap_or_default())
        .collect()
}

/// What `command` printed, run in a process group of its own; the whole group (an
/// etcd and servers it started too) is killed if it runs past `limit`.
pub fn bounded_output(command: &mut Command, limit: Duration) -> Output {
    let child = command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the program starts");
    let group = Pid::from_raw(child.id() as i32);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(output) => output.expect("the program's output"),
        Err(_) => {
            let _ = killpg(group, Signal::SIGKILL);
            panic!("still running after {limit:?}: killed with its group");
        }
    }
}
