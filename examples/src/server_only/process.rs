//! The server under test in a process of its own: the hidden `--serve` subcommand that a
//! bench program runs in a copy of itself, and [`ServerProcess`], the bench's handle on
//! that copy.
//!
//! The protocol, one line at a time: the child pins itself to its CPUs, raises its
//! open-files limit and binds, then writes `nofile was=<n> now=<n> hard=<n>` and
//! `listening <ip:port>` on stdout. After that, each `usage` line on its stdin gets a
//! [`ProcessUsage::line`] back; the end of its stdin makes it exit at once. So the
//! child cannot outlive the bench, whichever way the bench ends: its stdin closes with it.

use std::io::{self, BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use volo_core::context::Address;
use volo_core::server::ServerConfig;

use clap::{Parser, ValueEnum};

use super::sys::{self, CpuList, ProcessUsage};
use crate::cli::Usage;
use crate::echo_service::RunningEcho;
use crate::options::{DriverArg, SpinArg};

/// The first argument that makes a program a server child (see [`serve_if_asked`]).
pub const SERVE: &str = "--serve";

/// How long a child may take to bind and say where.
const START_LIMIT: Duration = Duration::from_secs(10);
/// How long a child may take to answer `usage`.
const REPLY_LIMIT: Duration = Duration::from_secs(5);
/// How long a child may take to exit once its stdin is closed.
const STOP_LIMIT: Duration = Duration::from_secs(5);

/// The server a child runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// Ours: `volo_core::server::Server` with the generated `EchoServiceServer` on
    /// netpoll-rs, `ServerConfig::default()` but for the way its reactor polls between
    /// events (adaptive by default).
    Ours {
        /// How the pollers spin between events.
        spin: SpinArg,
        /// The reactor's driver (epoll, or io_uring).
        driver: DriverArg,
    },
    /// Volo's: `volo_peer::serve`, volo-thrift's generated server with its defaults.
    Volo,
    /// Volo's mux server: `volo_peer::serve_mux`, the same server answering the
    /// calls of a connection concurrently (`Server::multiplex(true)`).
    VoloMux,
    /// A Kitex server, or any other EchoService server, run from a command line
    /// ([`ServerProcess::spawn_command`]): not built by this program.
    Kitex,
}

impl ServerKind {
    /// `ours` or `volo`.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Ours { .. } => "ours",
            ServerKind::Volo => "volo",
            ServerKind::VoloMux => "volo-mux",
            ServerKind::Kitex => "kitex",
        }
    }

    /// Ours on epoll with the adaptive spin: the default server.
    pub const OURS: ServerKind = ServerKind::Ours {
        spin: SpinArg::Adaptive,
        driver: DriverArg(netpoll_rs::Driver::Epoll),
    };

    /// `server=<label> spin=<adaptive|fixed|off|n/a>`: the fields that name it in
    /// report lines; ours on io_uring is `ours-uring`.
    pub fn fields(self) -> String {
        let (label, spin) = match self {
            ServerKind::Ours { spin, driver } => (driver.server_label(), spin.name()),
            ServerKind::Volo | ServerKind::VoloMux | ServerKind::Kitex => (self.name(), "n/a"),
        };
        format!("server={label} spin={spin}")
    }
}

/// When the program's first argument is [`SERVE`], runs the server child it asks for
/// (`--serve ours|volo|volo-mux [--addr IP:PORT] [--cpus LIST] [--server-spin
/// adaptive|fixed|off] [--server-io epoll|uring]`) and exits; otherwise returns at
/// once. Bench programs call it first thing in `main`.
pub fn serve_if_asked() {
    if std::env::args().nth(1).as_deref() != Some(SERVE) {
        return;
    }
    let args = ServeArgs::parse();
    let code = match serve(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("server child: {e}");
            1
        }
    };
    std::process::exit(code);
}

/// The server child's command line.
#[derive(Debug, Parser)]
#[command(name = "server child", version)]
struct ServeArgs {
    /// The server to run.
    #[arg(long, value_enum)]
    serve: ServeName,

    /// Where to listen.
    #[arg(long, value_name = "IP:PORT", default_value = "127.0.0.1:0")]
    addr: SocketAddr,

    /// The CPUs to run on (one tokio worker each).
    #[arg(long, value_name = "LIST", default_value = "0")]
    cpus: CpuList,

    /// How our server's pollers spin between events.
    #[arg(long, value_enum, default_value = "adaptive")]
    server_spin: SpinArg,

    /// Our server's reactor driver.
    #[arg(long, value_enum, default_value = "epoll")]
    server_io: DriverArg,
}

/// `--serve`'s names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ServeName {
    /// Ours.
    Ours,
    /// Volo's.
    Volo,
    /// Volo's mux server.
    VoloMux,
}

/// The child: pinned, bound, answering `usage` until its stdin ends.
fn serve(args: ServeArgs) -> Result<(), Usage> {
    let (addr, cpus) = (args.addr, args.cpus.0);
    let failed = |what: &str, e: io::Error| Usage(format!("{what}: {e}"));
    // Before any thread starts, so that every thread of the process inherits it.
    sys::pin(&cpus).map_err(|e| failed("--cpus", e))?;
    let nofile = sys::raise_nofile().map_err(|e| failed("RLIMIT_NOFILE", e))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cpus.len())
        .thread_name("server")
        .enable_all()
        .build()
        .map_err(|e| failed("runtime", e))?;
    // Held until the process exits.
    let (bound, _ours, _volo) = match args.serve {
        ServeName::Ours => {
            let mut config = ServerConfig::default();
            args.server_spin.apply(&mut config.transport.reactor);
            config.transport.reactor.driver = args.server_io.0;
            let server = RunningEcho::start_with(&rt, config, &Address::Tcp(addr))
                .map_err(|e| failed("binding", e))?;
            let Address::Tcp(bound) = server.addr else {
                return Err(Usage(format!("bound {} for a TCP address", server.addr)));
            };
            (bound, Some(server), None)
        }
        ServeName::Volo | ServeName::VoloMux => {
            let server = if args.serve == ServeName::Volo {
                rt.block_on(volo_peer::serve(addr))
            } else {
                rt.block_on(volo_peer::serve_mux(addr))
            }
            .map_err(|e| failed("binding", e))?;
            (server.local_addr(), None, Some(server))
        }
    };
    println!("nofile {}", nofile.fields());
    println!("listening {bound}");
    for line in io::stdin().lock().lines() {
        let line = line.map_err(|e| failed("stdin", e))?;
        match line.trim() {
            "usage" => {
                let usage = ProcessUsage::of_self().map_err(|e| failed("usage", e))?;
                println!("{}", usage.line());
            }
            "" => {}
            other => println!("error unknown command {other:?}"),
        }
    }
    // The bench is done with it (or gone): no graceful stop, nothing to wait for.
    std::process::exit(0)
}

/// A server child, from the bench's side. Dropping it kills the child (`SIGKILL`) if it
/// still runs and reaps it; [`stop`](Self::stop) ends it gently.
#[derive(Debug)]
pub struct ServerProcess {
    kind: ServerKind,
    /// Run from a command line ([`spawn_command`](Self::spawn_command)): it speaks no
    /// protocol, its usage is read from `/proc`.
    external: bool,
    child: Child,
    stdin: Option<ChildStdin>,
    /// The child's stdout, line by line, from a thread that reads it.
    lines: Receiver<String>,
    addr: SocketAddr,
    nofile: String,
}

impl ServerProcess {
    /// Runs `exe --serve <kind> --addr 127.0.0.1:0 --cpus <cpus>` (`exe` must call
    /// [`serve_if_asked`]) and waits, at most 10 s, until it listens.
    pub fn spawn(exe: &Path, kind: ServerKind, cpus: &[usize]) -> io::Result<ServerProcess> {
        let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
        let mut cmd = Command::new(exe);
        cmd.args([SERVE, kind.name(), "--addr", "127.0.0.1:0", "--cpus"])
            .arg(list.join(","));
        if let ServerKind::Ours { spin, driver } = kind {
            cmd.args(["--server-spin", spin.name(), "--server-io", driver.name()]);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", exe.display())))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let (tx, lines) = channel();
        let mut process = ServerProcess {
            kind,
            external: false,
            child,
            stdin,
            lines,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            nofile: String::new(),
        };
        // From here on, an early return drops `process`, which kills the child.
        let stdout = stdout.ok_or_else(|| io::Error::other("no stdout pipe"))?;
        std::thread::Builder::new()
            .name("server-stdout".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })?;
        let deadline = Instant::now() + START_LIMIT;
        loop {
            let line = process.next_line(deadline)?;
            if let Some(nofile) = line.strip_prefix("nofile ") {
                process.nofile = nofile.to_string();
            } else if let Some(addr) = line.strip_prefix("listening ") {
                process.addr = addr.trim().parse().map_err(|e| {
                    io::Error::new(io::ErrorKind::InvalidData, format!("{line:?}: {e}"))
                })?;
                return Ok(process);
            } else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("server child said {line:?} before listening"),
                ));
            }
        }
    }

    /// A child for `kind`: [`ServerKind::Kitex`] run from its command line `kitex`
    /// ([`spawn_command`](Self::spawn_command)), any other from `exe`
    /// ([`spawn`](Self::spawn)).
    pub fn spawn_kind(
        exe: &Path,
        kind: ServerKind,
        kitex: Option<&str>,
        cpus: &[usize],
    ) -> io::Result<ServerProcess> {
        match (kind, kitex) {
            (ServerKind::Kitex, Some(command)) => ServerProcess::spawn_command(command, kind, cpus),
            _ => ServerProcess::spawn(exe, kind, cpus),
        }
    }

    /// Runs `command` (through `sh -c`, with `{addr}` replaced by a free loopback
    /// address, or `--addr ADDR` appended when it has no `{addr}`) on `cpus`, as a
    /// server of `kind`, and waits, at most 10 s, until that address takes
    /// connections. Its stdout is discarded, its stderr is this program's. Its usage
    /// is read from `/proc` ([`ProcessUsage::of_pid`]); [`stop`](Self::stop) kills it.
    pub fn spawn_command(
        command: &str,
        kind: ServerKind,
        cpus: &[usize],
    ) -> io::Result<ServerProcess> {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let line = if command.contains("{addr}") {
            command.replace("{addr}", &addr.to_string())
        } else {
            format!("{command} --addr {addr}")
        };
        // The child inherits the affinity of the thread that starts it.
        let child = sys::on_cpus(cpus, || {
            Command::new("sh")
                .arg("-c")
                .arg(format!("exec {line}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| io::Error::new(e.kind(), format!("{line}: {e}")))
        })?;
        let (_, lines) = channel();
        let mut process = ServerProcess {
            kind,
            external: true,
            child,
            stdin: None,
            lines,
            addr,
            nofile: String::from("-"),
        };
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                return Ok(process);
            }
            if let Some(status) = process.child.try_wait()? {
                return Err(io::Error::other(format!("{line}: ended with {status}")));
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{line}: not listening on {addr} after {START_LIMIT:?}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Which server it runs.
    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its open-files limit, as `was=<n> now=<n> hard=<n>` (see [`sys::NoFile`]).
    pub fn nofile(&self) -> &str {
        &self.nofile
    }

    /// Asks for its [`ProcessUsage`] now; at most 5 s.
    pub fn usage(&mut self) -> io::Result<ProcessUsage> {
        if self.external {
            return ProcessUsage::of_pid(self.child.id());
        }
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| io::Error::other("the server child's stdin is closed"))?;
        stdin.write_all(b"usage\n")?;
        stdin.flush()?;
        let line = self.next_line(Instant::now() + REPLY_LIMIT)?;
        ProcessUsage::parse(&line).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("server child answered {line:?} to usage"),
            )
        })
    }

    /// Closes its stdin and waits, at most 5 s, for it to exit (then kills it). One run
    /// from a command line is killed at once.
    pub fn stop(mut self) -> io::Result<()> {
        if self.external {
            self.child.kill()?;
            self.child.wait()?;
            return Ok(());
        }
        drop(self.stdin.take());
        let deadline = Instant::now() + STOP_LIMIT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return if status.success() {
                    Ok(())
                } else {
                    Err(io::Error::other(format!(
                        "server child ended with {status}"
                    )))
                };
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "server child still running 5 s after its stdin closed; killed",
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn next_line(&self, deadline: Instant) -> io::Result<String> {
        let wait = deadline.saturating_duration_since(Instant::now());
        self.lines.recv_timeout(wait).map_err(|e| match e {
            RecvTimeoutError::Timeout => io::Error::new(
                io::ErrorKind::TimedOut,
                format!("server child ({}) silent for {wait:?}", self.kind.name()),
            ),
            RecvTimeoutError::Disconnected => io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("server child ({}) ended", self.kind.name()),
            ),
        })
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
