//! `fleet-sim`: a fleet in a real etcd, followed by many discovering clients while it
//! churns, with calls going on to the instances that are real servers.
//!
//! ```text
//! cargo build --release -p examples --features etcd --bins
//! target/release/fleet-sim --instances 10000 --clients 100 --churn-per-min 10% --duration 60
//! ```
//!
//! What it sets up, on loopback:
//! - a real etcd (started here from the `etcd` binary on the `PATH`, or `--etcd`);
//! - `--instances` instances of `EchoService` in it. `--servers` of them (4) are real
//!   `echo-server` processes that register themselves (weight 100, a lease of
//!   `--lease` seconds kept alive); the others are written here, as a registry
//!   writes them (`EtcdConfig::entry`), under leases this program keeps alive, with
//!   weight 0: listed, followed and balanced over by every client, never called;
//! - `--clients` discovering clients (`EtcdDiscover`, each with its own connection
//!   and watch, and a weighted-random balancer brought to each change as it comes),
//!   on a runtime of their own (threads `fleet-client`), so that their CPU time is
//!   theirs alone;
//! - `--callers` callers calling the real servers through discovery, with the default
//!   client stack (instance breakers, retries), at `--rate` calls a second in all.
//!
//! During `--duration` seconds, `--churn-per-min` instances a minute (a count, or a
//! share of `--instances` such as `10%`) are replaced: a weight-0 instance's key
//! deleted and a new one at a new address put. Each real server is replaced once,
//! spread over the run: every other one stopped gracefully (SIGTERM: it deregisters,
//! then drains), the others killed (SIGKILL: its key goes when its lease ends), and
//! a new `echo-server` started.
//!
//! What it measures: for each change (a key put or deleted), the time from just
//! before it was sent to etcd to the moment the last client's balancer had it
//! (`apply_p50_ms`, `apply_p99_ms`); the clients' CPU per change (their threads'
//! user and system time over changes applied by all, per client); the clients'
//! memory per instance (heap bytes held after every client listed the whole fleet,
//! over instances and clients); and of the calls, those that failed and those sent
//! to an instance whose key had been gone for longer than its lease
//! (`stale_calls`, from the deletions this program watches in etcd).
//!
//! It ends with one line:
//! `fleet instances=.. clients=.. changes=.. apply_p50_ms=.. apply_p99_ms=..
//! client_bytes_per_instance=.. client_cpu_us_per_change=.. calls=.. errors=..
//! stale_calls=..`; the exit status is 0 when every change reached every client.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use alloc_count::{CountingAlloc, live_bytes};
use clap::Parser;
use etcd_client::{EventType, PutOptions, Txn, TxnOp, WatchOptions};
use etcd_registry::testing::Etcd;
use etcd_registry::{EtcdConfig, EtcdDiscover};
use examples::cli::{Usage, fail};
use examples::echo::EchoServiceClient;
use examples::echo_service::EchoCall;
use examples::options::{EtcdUrl, etcd_url};
use futures_util::StreamExt;
use volo_core::client::{ClientCall, ClientContext, Discover, Error, LoadBalance, WeightedRandom};
use volo_core::context::Address;
use volo_core::registry::{Registration, Route};
use volo_core::service::{Layer, Service};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// The service every instance belongs to (the one `echo-server` registers).
const SERVICE: &str = "EchoService";

/// A fleet in a real etcd, followed by many clients while it churns.
#[derive(Parser, Debug)]
#[command(name = "fleet-sim", version)]
struct Cli {
    /// The etcd to use [default: one started here on loopback].
    #[arg(long, value_name = "etcd://HOST:PORT", value_parser = etcd_url)]
    etcd: Option<EtcdUrl>,
    /// Instances of the service, real servers included.
    #[arg(long, default_value = "10000")]
    instances: usize,
    /// Discovering clients.
    #[arg(long, default_value = "100")]
    clients: usize,
    /// Instances replaced a minute: a count, or a share of --instances ("10%").
    #[arg(long, default_value = "10%")]
    churn_per_min: String,
    /// Seconds of churn.
    #[arg(long, default_value = "60")]
    duration: u64,
    /// Real echo-server processes among the instances.
    #[arg(long, default_value = "4")]
    servers: usize,
    /// Callers calling the real servers.
    #[arg(long, default_value = "4")]
    callers: usize,
    /// Calls a second, all callers together.
    #[arg(long, default_value = "1000")]
    rate: u64,
    /// Every registration's lease, in seconds.
    #[arg(long, default_value = "10")]
    lease: u64,
}

/// The instances replaced a minute that `spec` ("250" or "10%") asks of a fleet of
/// `instances`.
fn churn_per_min(spec: &str, instances: usize) -> Result<u64, Usage> {
    let bad = || {
        Usage(format!(
            "--churn-per-min {spec}: a count or a share such as 10%"
        ))
    };
    match spec.strip_suffix('%') {
        Some(share) => {
            let share: f64 = share.parse().map_err(|_| bad())?;
            if !(0.0..=100.0).contains(&share) {
                return Err(bad());
            }
            Ok((instances as f64 * share / 100.0).round() as u64)
        }
        None => spec.parse().map_err(|_| bad()),
    }
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        fail("fleet-sim", e);
    }
}

fn run(cli: Cli) -> Result<(), Usage> {
    if cli.servers == 0 || cli.servers > cli.instances || cli.clients == 0 {
        return Err(Usage(
            "--servers must be 1 to --instances, --clients at least 1".into(),
        ));
    }
    let churn = churn_per_min(&cli.churn_per_min, cli.instances)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("runtime: {e}")))?;
    if runtime.block_on(simulate(cli, churn))? {
        Ok(())
    } else {
        Err(Usage("some changes did not reach every client".into()))
    }
}

/// When changes were made, and how many clients have applied each.
#[derive(Default)]
struct Ledger {
    /// By (address, whether it was added).
    pending: HashMap<(Address, bool), Pending>,
    /// Times from each change to the last client's applying it, of the changes done.
    done: Vec<Duration>,
    /// How many clients must apply each.
    clients: usize,
}

/// A change not yet applied by every client.
#[derive(Default)]
struct Pending {
    /// When it was made in etcd: just before this program sent it, or (for what the
    /// real servers do themselves) when this program's own watch saw it; `None`
    /// until then.
    made: Option<Instant>,
    applied: usize,
    last: Option<Instant>,
}

impl Ledger {
    /// A change this program is about to send.
    fn sent(&mut self, address: Address, added: bool) {
        let p = self.pending.entry((address, added)).or_default();
        p.made = Some(Instant::now());
    }

    /// A change a server makes itself, timed when etcd's watch shows it.
    fn expect(&mut self, address: Address, added: bool) {
        self.pending.entry((address, added)).or_default();
    }

    /// This program's watch saw `key` in etcd: the time of a change it expects.
    fn seen(&mut self, key: (Address, bool)) {
        if let Some(p) = self.pending.get_mut(&key)
            && p.made.is_none()
        {
            p.made = Some(Instant::now());
            self.settle(&key);
        }
    }

    /// A client applied these.
    fn applied(&mut self, changes: impl Iterator<Item = (Address, bool)>) {
        let now = Instant::now();
        for key in changes {
            if let Some(p) = self.pending.get_mut(&key) {
                p.applied += 1;
                p.last = Some(now);
                self.settle(&key);
            }
        }
    }

    /// Moves `key` to the done ones once made and applied by every client.
    fn settle(&mut self, key: &(Address, bool)) {
        let Some(p) = self.pending.get(key) else {
            return;
        };
        if let (Some(made), Some(last)) = (p.made, p.last)
            && p.applied >= self.clients
        {
            self.done.push(last.saturating_duration_since(made));
            self.pending.remove(key);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A weight-0 instance `n` (never called: no server behind its address).
fn ghost(n: u64) -> Registration {
    let ip = std::net::Ipv4Addr::from(0x0a00_0000 + n as u32);
    let mut r = Registration::new(SERVICE, vec![Address::Tcp((ip, 9000).into())]);
    r.weight = 0;
    r.tags.insert("zone".into(), format!("z{}", n % 3));
    r
}

async fn simulate(cli: Cli, churn: u64) -> Result<bool, Usage> {
    let fail = |what: &str| {
        let what = what.to_string();
        move |e: etcd_client::Error| Usage(format!("{what}: {e}"))
    };
    // etcd: the one given, or one started here (kept until the end).
    let (_own, endpoints, url) = match &cli.etcd {
        Some(u) => (None, u.endpoints.clone(), u.url.clone()),
        None => {
            let etcd = Etcd::try_start().map_err(|e| Usage(format!("starting etcd: {e}")))?;
            let endpoint = etcd.endpoint();
            let url = etcd.url();
            (Some(etcd), vec![endpoint], url)
        }
    };
    let config = EtcdConfig {
        lease_ttl: Duration::from_secs(cli.lease),
        ..EtcdConfig::new(endpoints.clone())
    };
    let etcd = etcd_client::Client::connect(&endpoints, None)
        .await
        .map_err(fail("etcd"))?;

    // The weight-0 instances, under leases kept alive here (one per 1,000).
    let ghosts = (cli.instances - cli.servers) as u64;
    let mut leases = Vec::new();
    let lease_of = |n: u64, leases: &[i64]| leases[(n / 1000) as usize % leases.len()];
    for _ in 0..ghosts.div_ceil(1000).max(1) {
        let lease = etcd
            .lease_client()
            .grant(cli.lease as i64, None)
            .await
            .map_err(fail("lease"))?;
        leases.push(lease.id());
    }
    let started_fill = Instant::now();
    let mut ops = Vec::new();
    for n in 0..ghosts {
        let (key, value) = config.entry(&ghost(n)).map_err(|e| Usage(e.to_string()))?;
        let lease = lease_of(n, &leases);
        ops.push(TxnOp::put(
            key,
            value,
            Some(PutOptions::new().with_lease(lease)),
        ));
        if ops.len() == 100 || n + 1 == ghosts {
            let batch = std::mem::take(&mut ops);
            etcd.kv_client()
                .txn(Txn::new().and_then(batch))
                .await
                .map_err(fail("filling etcd"))?;
        }
    }
    eprintln!(
        "fleet-sim: {ghosts} weight-0 instances written in {} ms",
        started_fill.elapsed().as_millis()
    );
    let keepalive = tokio::spawn(keep_leases(etcd.clone(), leases.clone(), cli.lease));

    // The real servers.
    let server_bin = sibling("echo-server")?;
    let mut first_servers = Vec::new();
    for _ in 0..cli.servers {
        first_servers.push(Server::start(&server_bin, &url, cli.lease)?);
    }
    let servers = Arc::new(Mutex::new(first_servers));
    let ledger = Arc::new(Mutex::new(Ledger {
        clients: cli.clients,
        ..Ledger::default()
    }));

    // Deletions under the service, as etcd tells them: for the stale-call check.
    let deleted: Arc<Mutex<HashMap<Address, Instant>>> = Arc::default();
    let prefix = config.entry(&ghost(0)).map_err(|e| Usage(e.to_string()))?.0;
    let prefix = prefix[..prefix.rfind('/').unwrap_or(0) + 1].to_string();
    let watcher = tokio::spawn(watch_events(
        etcd.clone(),
        prefix.clone(),
        Arc::clone(&deleted),
        Arc::clone(&ledger),
    ));

    // The clients, on their own runtime.
    let clients_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("fleet-client")
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("runtime: {e}")))?;
    let before = live_bytes();
    let started_clients = Instant::now();
    // Connected together, as clients of a fleet start.
    let connecting: Vec<_> = (0..cli.clients)
        .map(|_| {
            let config = config.clone();
            clients_rt.spawn(async move {
                EtcdDiscover::connect(config, SERVICE, Route::tcp_only()).await
            })
        })
        .collect();
    let mut discovers = Vec::new();
    for c in connecting {
        let d = c
            .await
            .map_err(|e| Usage(format!("client: {e}")))?
            .map_err(|e| Usage(format!("client: {e}")))?;
        discovers.push(Arc::new(d));
    }
    let balancers: Vec<Arc<WeightedRandom>> = (0..cli.clients)
        .map(|_| Arc::new(WeightedRandom::default()))
        .collect();
    wait_until(Duration::from_secs(120), || {
        discovers.iter().all(|d| d.list().len() == cli.instances)
    })
    .await
    .map_err(|_| Usage("the clients did not list the whole fleet in 120 s".into()))?;
    for (d, b) in discovers.iter().zip(&balancers) {
        // Each balancer derives its state of the whole list now.
        b.pick(&d.list(), None);
    }
    let held = live_bytes().saturating_sub(before);
    let per_instance = held / (cli.clients * cli.instances) as u64;
    eprintln!(
        "fleet-sim: {} clients listed {} instances in {} ms, holding {} MB ({per_instance} \
         bytes an instance a client)",
        cli.clients,
        cli.instances,
        started_clients.elapsed().as_millis(),
        held >> 20
    );
    for (d, b) in discovers.iter().zip(&balancers) {
        let mut changes = d.changes();
        let (b, ledger) = (Arc::clone(b), Arc::clone(&ledger));
        clients_rt.spawn(async move {
            while let Some(c) = changes.next().await {
                // The balancer brought to the new version, as a call's pick would.
                b.pick(&c.list, None);
                let added = c.added.iter().map(|i| (i.address.clone(), true));
                let removed = c.removed.iter().map(|i| (i.address.clone(), false));
                lock(&ledger).applied(added.chain(removed));
            }
        });
    }
    let cpu_before = thread_cpu("fleet-client");

    // The callers.
    let calls = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let stale = Arc::new(AtomicU64::new(0));
    let stop_at = Instant::now() + Duration::from_secs(cli.duration);
    let lease = Duration::from_secs(cli.lease);
    let mut callers = Vec::new();
    for _ in 0..cli.callers {
        let discover = EtcdDiscover::connect(config.clone(), SERVICE, Route::tcp_only())
            .await
            .map_err(|e| Usage(format!("caller: {e}")))?;
        let client = EchoServiceClient::builder()
            .discover(discover)
            .idempotent(["echo"])
            .layer_inner(StaleLayer {
                deleted: Arc::clone(&deleted),
                lease,
                stale: Arc::clone(&stale),
            })
            .build()
            .map_err(|e| Usage(format!("caller: {e}")))?;
        let call = EchoCall::new(client, 64);
        let (calls, errors) = (Arc::clone(&calls), Arc::clone(&errors));
        let every = Duration::from_secs_f64(cli.callers as f64 / cli.rate.max(1) as f64);
        callers.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while Instant::now() < stop_at {
                tick.tick().await;
                calls.fetch_add(1, Ordering::Relaxed);
                if !call.call().await {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }

    // The churn.
    let started = Instant::now();
    let every = Duration::from_secs_f64(60.0 / churn.max(1) as f64);
    let mut next_ghost = ghosts;
    let mut oldest = 0u64;
    let mut sent = 0u64;
    let mut replaced_servers = 0usize;
    let mut replacing = Vec::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while Instant::now() < stop_at {
        tick.tick().await;
        let elapsed = started.elapsed().as_secs_f64() / cli.duration as f64;
        // Each real server replaced once, spread over the run, on a thread of its
        // own (a graceful stop waits for the process to drain and exit).
        if replaced_servers < cli.servers
            && elapsed >= (replaced_servers as f64 + 0.5) / cli.servers as f64
        {
            let graceful = replaced_servers.is_multiple_of(2);
            let (bin, url, lease) = (server_bin.clone(), url.clone(), cli.lease);
            let (ledger, servers) = (Arc::clone(&ledger), Arc::clone(&servers));
            replacing.push(tokio::task::spawn_blocking(move || {
                let mut old = lock(&servers).remove(0);
                lock(&ledger).expect(old.address.clone(), false);
                old.stop(graceful);
                let new = Server::start_expected(&bin, &url, lease, &ledger)?;
                lock(&servers).push(new);
                Ok::<(), Usage>(())
            }));
            replaced_servers += 1;
            sent += 2;
            continue;
        }
        if churn == 0 || ghosts == 0 {
            continue;
        }
        // A weight-0 instance replaced: the oldest key deleted, a new one put.
        let (old_key, _) = config
            .entry(&ghost(oldest))
            .map_err(|e| Usage(e.to_string()))?;
        let fresh = ghost(next_ghost);
        let (new_key, value) = config.entry(&fresh).map_err(|e| Usage(e.to_string()))?;
        {
            let mut l = lock(&ledger);
            l.sent(ghost(oldest).addresses[0].clone(), false);
            l.sent(fresh.addresses[0].clone(), true);
        }
        etcd.kv_client()
            .delete(old_key, None)
            .await
            .map_err(fail("churn"))?;
        let lease = lease_of(next_ghost, &leases);
        etcd.kv_client()
            .put(new_key, value, Some(PutOptions::new().with_lease(lease)))
            .await
            .map_err(fail("churn"))?;
        oldest += 1;
        next_ghost += 1;
        sent += 2;
    }
    for c in callers {
        let _ = c.await;
    }
    for r in replacing {
        r.await
            .map_err(|e| Usage(format!("replacing a server: {e}")))??;
    }
    // The last changes: every client has them within the wait, or they count as lost.
    let _ = wait_until(Duration::from_secs(cli.lease + 10), || {
        lock(&ledger).pending.is_empty()
    })
    .await;
    let cpu = thread_cpu("fleet-client").saturating_sub(cpu_before);
    let (done, lost, p50, p99) = {
        let mut l = lock(&ledger);
        l.done.sort();
        let q = |q: f64| {
            l.done
                .get(((l.done.len() as f64 * q) as usize).min(l.done.len().saturating_sub(1)))
                .map_or(0.0, |d| d.as_secs_f64() * 1e3)
        };
        (l.done.len(), l.pending.len(), q(0.50), q(0.99))
    };
    for lost in lock(&ledger).pending.keys().take(5) {
        eprintln!("fleet-sim: not applied by every client: {lost:?}");
    }
    let cpu_per_change = if done == 0 {
        0.0
    } else {
        cpu.as_secs_f64() * 1e6 / (done * cli.clients) as f64
    };
    println!(
        "fleet instances={} clients={} changes={done} apply_p50_ms={p50:.1} \
         apply_p99_ms={p99:.1} client_bytes_per_instance={per_instance} \
         client_cpu_us_per_change={cpu_per_change:.1} calls={} errors={} stale_calls={}",
        cli.instances,
        cli.clients,
        calls.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
        stale.load(Ordering::Relaxed),
    );
    eprintln!("fleet-sim: {sent} changes sent, {lost} not applied by every client");
    for s in lock(&servers).iter_mut() {
        s.stop(false);
    }
    keepalive.abort();
    watcher.abort();
    drop(discovers);
    clients_rt.shutdown_background();
    Ok(lost == 0 && done > 0)
}

/// A program built beside this one.
fn sibling(name: &str) -> Result<PathBuf, Usage> {
    let me = std::env::current_exe().map_err(|e| Usage(format!("this program's path: {e}")))?;
    let path = me.with_file_name(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Usage(format!(
            "{} not found: build it too (cargo build --release -p examples --features etcd \
             --bins)",
            path.display()
        )))
    }
}

/// An `echo-server` process registered in etcd.
struct Server {
    child: Child,
    address: Address,
}

impl Server {
    /// Starts one on a free loopback port, registered with a lease of `lease` seconds.
    fn start(bin: &PathBuf, etcd: &str, lease: u64) -> Result<Server, Usage> {
        Server::start_on(bin, etcd, lease, 0)
    }

    /// Starts one whose registration `ledger` expects: on a port chosen first (and
    /// expected before the server can register), another if that one is taken.
    fn start_expected(
        bin: &PathBuf,
        etcd: &str,
        lease: u64,
        ledger: &Mutex<Ledger>,
    ) -> Result<Server, Usage> {
        let mut last = None;
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| Usage(format!("a free port: {e}")))?
                .port();
            let address = Address::Tcp(([127, 0, 0, 1], port).into());
            lock(ledger).expect(address.clone(), true);
            match Server::start_on(bin, etcd, lease, port) {
                Ok(s) => return Ok(s),
                Err(e) => {
                    lock(ledger).pending.remove(&(address, true));
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| Usage("no server started".into())))
    }

    fn start_on(bin: &PathBuf, etcd: &str, lease: u64, port: u16) -> Result<Server, Usage> {
        use std::io::BufRead;
        let at = format!("127.0.0.1:{port}");
        let mut child = Command::new(bin)
            .args(["--addr", &at, "--registry", etcd])
            .args(["--lease-ttl", &lease.to_string()])
            .env("RPC_PROGRESS", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Usage(format!("{}: {e}", bin.display())))?;
        let stdout = child.stdout.take().expect("piped");
        let mut lines = std::io::BufReader::new(stdout).lines();
        let line = lines.next().and_then(Result::ok).unwrap_or_default();
        let Some((_, bound)) = line.split_once(" listening on ") else {
            let _ = child.kill();
            return Err(Usage(format!(
                "echo-server said {line:?}, not where it listens"
            )));
        };
        let address: Address = bound
            .trim()
            .parse()
            .map_err(|e| Usage(format!("echo-server listens on {bound:?}: {e}")))?;
        // Keep reading its output, so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Ok(Server { child, address })
    }

    /// SIGTERM (it deregisters and drains; waited for) or SIGKILL.
    fn stop(&mut self, graceful: bool) {
        if graceful {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            for _ in 0..100 {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Keeps `leases` alive, a keepalive every third of `ttl` seconds.
async fn keep_leases(etcd: etcd_client::Client, leases: Vec<i64>, ttl: u64) {
    let mut keepers = Vec::new();
    for id in leases {
        if let Ok(k) = etcd.lease_client().keep_alive(id).await {
            keepers.push(k);
        }
    }
    let mut tick = tokio::time::interval(Duration::from_secs_f64(ttl as f64 / 3.0));
    loop {
        tick.tick().await;
        for (keeper, stream) in &mut keepers {
            if keeper.keep_alive().await.is_ok() {
                let _ = stream.message().await;
            }
        }
    }
}

/// Watches the keys under `prefix`: records when each is deleted (by its address),
/// and tells `ledger` when it sees a change it expects.
async fn watch_events(
    etcd: etcd_client::Client,
    prefix: String,
    deleted: Arc<Mutex<HashMap<Address, Instant>>>,
    ledger: Arc<Mutex<Ledger>>,
) {
    let Ok(mut stream) = etcd
        .watch_client()
        .watch(prefix.as_str(), Some(WatchOptions::new().with_prefix()))
        .await
    else {
        eprintln!("fleet-sim: no watch of etcd: stale calls and server changes not timed");
        return;
    };
    while let Ok(Some(answer)) = stream.message().await {
        let now = Instant::now();
        for event in answer.events() {
            let Some(kv) = event.kv() else { continue };
            let address = std::str::from_utf8(kv.key())
                .ok()
                .and_then(|k| k.strip_prefix(prefix.as_str()))
                .and_then(|a| a.parse::<Address>().ok());
            let Some(a) = address else { continue };
            let added = event.event_type() == EventType::Put;
            if !added {
                lock(&deleted).insert(a.clone(), now);
            }
            lock(&ledger).seen((a, added));
        }
    }
}

/// Waits until `ready`, checking every 10 ms; `Err` after `limit`.
async fn wait_until(limit: Duration, mut ready: impl FnMut() -> bool) -> Result<(), ()> {
    let end = Instant::now() + limit;
    while !ready() {
        if Instant::now() > end {
            return Err(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// User and system time of this process's threads named `name` (Linux,
/// `/proc/self/task/*/stat`; the clock tick taken as 100 Hz, as on every Linux this
/// runs on).
fn thread_cpu(name: &str) -> Duration {
    let mut ticks = 0u64;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ...`: the name is between the first '(' and last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with(name) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        // utime and stime are fields 14 and 15 of the line, 12 and 13 after `)`.
        let field = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        ticks += field(11) + field(12);
    }
    Duration::from_millis(ticks * 10)
}

/// Counts attempts sent to an instance whose key had been gone for longer than its
/// lease when the attempt started.
#[derive(Clone)]
struct StaleLayer {
    deleted: Arc<Mutex<HashMap<Address, Instant>>>,
    lease: Duration,
    stale: Arc<AtomicU64>,
}

impl<S> Layer<S> for StaleLayer {
    type Service = Stale<S>;

    fn layer(self, inner: S) -> Stale<S> {
        Stale { inner, check: self }
    }
}

struct Stale<S> {
    inner: S,
    check: StaleLayer,
}

impl<S, R> Service<ClientContext, R> for Stale<S>
where
    R: ClientCall,
    S: Service<ClientContext, R, Error = Error> + Sync,
    S::Response: Send,
{
    type Response = S::Response;
    type Error = Error;

    async fn call(&self, cx: &mut ClientContext, req: R) -> Result<S::Response, Error> {
        if let Some(addr) = &cx.rpc.callee.address {
            let gone = lock(&self.check.deleted).get(addr).copied();
            if gone.is_some_and(|at| at.elapsed() > self.check.lease) {
                self.check.stale.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.inner.call(cx, req).await
    }
}
