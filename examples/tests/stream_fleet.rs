//! Streams over a fleet that changes, on real processes: a real etcd on 127.0.0.1,
//! `stream-server`s registered in it (`--registry`, a lease of 2 s), and
//! `stream-check --load 100` keeping 100 bidirectional streams going through the
//! generated client, which follows etcd (`--discover`), while one instance dies, one
//! comes and one leaves.
//!
//! One run of 9 s, with its timeline (seconds since the load started):
//! - 2 s: A is killed (SIGKILL). Its open streams break; the openings that pick it
//!   meet a refused connect and are retried on another instance; its breaker keeps
//!   new streams off it; its key goes when its lease ends.
//! - 3.5 s: D starts and registers, and gets streams.
//! - 5.5 s: B stops gracefully (SIGTERM): it deregisters, serves on for its exit wait
//!   (1 s) while the client learns it left, then lets its streams finish and exits.
//!
//! Checked: no opening failed (each refused one was retried elsewhere) and no stream
//! failed but those broken by A's death, all within a second of it; few attempts
//! went to A after its death, all within a second (its breaker), none after it left
//! the client's list, which came within its lease and a margin; D got streams within
//! a second and a half of listening; B had streams in progress when it stopped and
//! broke none, left the list at once, got no opening after that, and exited by
//! itself with status 0; C and D took streams to the end. The figures
//! are printed on stderr (`cargo test -p examples --features etcd --test
//! stream_fleet -- --nocapture`).
//!
//! Built only with the `etcd` feature (`required-features`). Every process is killed
//! when the test ends, pass or fail. Without an etcd binary the test is skipped,
//! unless `CI` is set, when it fails.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use etcd_registry::testing::Etcd;
use examples::attempts::unix_ms;
use nix::sys::signal::Signal;
use support::*;

const STREAM_SERVER: &str = env!("CARGO_BIN_EXE_stream-server");
const STREAM_CHECK: &str = env!("CARGO_BIN_EXE_stream-check");

/// Each server's lease, in seconds.
const LEASE_TTL: &str = "2";

/// How long the load runs, in seconds.
const RUN: u64 = 9;

/// Failed attempts on A after its death, at most: the breaker opens after 10 in a
/// row, and a few more may be under way by then. Without breaker or discovery, a
/// third of the openings would meet it for seconds: thousands.
const MAX_FAILED_ON_DEAD: u64 = 50;

/// A `stream-server` on 127.0.0.1 registered in `etcd`: the process, its port, and
/// when it said it listens (Unix ms).
fn registered(name: &str, etcd: &Etcd) -> (Proc, u16, u64) {
    support::registered(name, STREAM_SERVER, &etcd.url(), LEASE_TTL)
}

/// One instance's line at the end of a load run.
#[derive(Debug, Clone, Copy, Default)]
struct Instance {
    opened: u64,
    broken: u64,
    errors: u64,
    attempts_failed: u64,
    first_unix_ms: u64,
    last_unix_ms: u64,
}

/// What a `stream-check --load` run printed.
#[derive(Debug, Default)]
struct LoadRun {
    /// Its one stdout line, `streams ...`.
    line: String,
    opened: u64,
    open_failures: u64,
    broken: u64,
    msgs: u64,
    errors: u64,
    /// Per instance, by port.
    instances: HashMap<u16, Instance>,
    /// When each broken stream ended (Unix ms), by port.
    broken_at: Vec<(u16, u64)>,
    stderr: String,
}

fn port_of(addr: &str, line: &str) -> u16 {
    addr.rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("an instance address in {line:?}"))
}

/// Waits for a `stream-check --load` run started at `started` to end, and reads its
/// output.
fn finish_load(mut load: Proc, started: Instant) -> LoadRun {
    // The window, the streams under way (each within its 10 s deadline), margin.
    let limit = Duration::from_secs(RUN + 15);
    let status = load.wait(limit.saturating_sub(started.elapsed()));
    let mut lines = Vec::new();
    while let Some(line) = load.line(Duration::from_millis(500)) {
        lines.push(line);
    }
    let stderr = load.stderr();
    let status = status
        .unwrap_or_else(|| panic!("stream-check still runs {limit:?} after it started: {stderr}"));
    assert_eq!(lines.len(), 1, "stdout is one line: {lines:?}\n{stderr}");
    let line = lines.remove(0);
    let keys: Vec<&str> = line
        .split(' ')
        .map(|f| f.split('=').next().unwrap_or(f))
        .collect();
    assert_eq!(
        keys,
        [
            "streams",
            "opened",
            "open_failures",
            "broken",
            "msgs",
            "errors"
        ],
        "{line:?}"
    );
    let f = fields(&line);
    let mut run = LoadRun {
        opened: num(&f, "opened", &line),
        open_failures: num(&f, "open_failures", &line),
        broken: num(&f, "broken", &line),
        msgs: num(&f, "msgs", &line),
        errors: num(&f, "errors", &line),
        line: line.clone(),
        ..LoadRun::default()
    };
    assert!(
        status.success() == (run.open_failures == 0 && run.errors == 0),
        "stream-check exits 0 exactly when nothing but lost instances failed: {status}, {line}"
    );
    for l in stderr.lines() {
        let Some(rest) = l.strip_prefix("stream-check: ") else {
            continue;
        };
        let f = fields(rest);
        if rest.starts_with("instance=") {
            let port = port_of(f["instance"], l);
            let i = Instance {
                opened: num(&f, "opened", l),
                broken: num(&f, "broken", l),
                errors: num(&f, "errors", l),
                attempts_failed: num(&f, "attempts_failed", l),
                first_unix_ms: num(&f, "first_unix_ms", l),
                last_unix_ms: num(&f, "last_unix_ms", l),
            };
            run.instances.insert(port, i);
        } else if rest.starts_with("broken ") {
            run.broken_at
                .push((port_of(f["instance"], l), num(&f, "unix_ms", l)));
        }
    }
    run.stderr = stderr;
    run
}

#[test]
fn streams_survive_an_instance_killed_one_added_and_one_stopped() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let began = Instant::now();
    let (mut a, pa, _) = registered("A", &etcd);
    let (mut b, pb, _) = registered("B", &etcd);
    let (_c, pc, _) = registered("C", &etcd);
    eprintln!("stream_fleet: etcd {} A={pa} B={pb} C={pc}", etcd.url());

    let args: Vec<String> = [
        "--discover",
        &etcd.url(),
        "--load",
        "100",
        "--duration",
        &RUN.to_string(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let started = Instant::now();
    let load = Proc::spawn("stream-check", STREAM_CHECK, &args);
    let at = |s: f64| started + Duration::from_secs_f64(s);
    let since = || started.elapsed().as_secs_f64();

    sleep_until(at(2.0));
    let killed_a = unix_ms();
    a.kill();
    eprintln!("stream_fleet: A killed at {:.2} s", since());

    sleep_until(at(3.5));
    let (_d, pd, listening_d) = registered("D", &etcd);
    eprintln!("stream_fleet: D={pd} listening at {:.2} s", since());

    sleep_until(at(5.5));
    b.signal(Signal::SIGTERM);
    let stopped_b = unix_ms();
    eprintln!("stream_fleet: B stopped at {:.2} s", since());
    // B exits by itself: the exit wait, then the drain of the streams in progress.
    let b_exit = b.wait(Duration::from_secs(12));
    eprintln!(
        "stream_fleet: B exited {} ms after its SIGTERM: {b_exit:?}",
        after(stopped_b, unix_ms())
    );

    let run = finish_load(load, started);
    for line in run.stderr.lines().filter(|l| l.contains("discovered")) {
        eprintln!("stream_fleet: {line}");
    }
    let named = [("A", pa), ("B", pb), ("C", pc), ("D", pd)];
    for (name, port) in named {
        eprintln!("stream_fleet: {name} {:?}", run.instances.get(&port));
    }
    eprintln!("stream_fleet: {}", run.line);

    // Nothing lost: no opening failed, no stream failed but those A's death broke.
    assert!(
        run.opened > 0 && run.msgs > 0,
        "no stream went through: {}",
        run.line
    );
    assert_eq!(run.open_failures, 0, "openings failed: {}", run.stderr);
    assert_eq!(run.errors, 0, "streams failed: {}", run.stderr);
    let per_instance: u64 = run.instances.values().map(|i| i.broken).sum();
    assert_eq!(
        per_instance, run.broken,
        "every broken stream has its instance"
    );

    // A: its streams broke when it died, and only then.
    for (name, port) in [("B", pb), ("C", pc), ("D", pd)] {
        let i = run.instances.get(&port).copied().unwrap_or_default();
        let lines: Vec<&str> = run
            .stderr
            .lines()
            .filter(|l| l.contains(&format!("instance=127.0.0.1:{port} ")))
            .collect();
        assert_eq!(i.broken, 0, "{name} lost streams: {i:?} {lines:#?}");
    }
    for &(port, when) in &run.broken_at {
        let late = after(killed_a, when);
        assert!(
            port == pa && (0..1_000).contains(&late),
            "a stream broken on {port} {late} ms after A's kill"
        );
    }
    // A: out of the list within its lease and a margin for etcd's lease checks; few
    // attempts met it dead, none after it left the list.
    let removed_a = discovered(&run.stderr, "stream-check", "removed", pa).expect("A removed");
    let gone = after(killed_a, removed_a);
    let ia = run.instances.get(&pa).copied().unwrap_or_default();
    eprintln!(
        "stream_fleet: A broke {} streams, failed {} attempts, the last {} ms after its \
         kill; removed from the list {gone} ms after its kill",
        ia.broken,
        ia.attempts_failed,
        after(killed_a, ia.last_unix_ms)
    );
    assert!(
        (0..=5_000).contains(&gone),
        "A removed {gone} ms after its kill"
    );
    assert!(
        ia.attempts_failed <= MAX_FAILED_ON_DEAD,
        "{} attempts failed on A after its kill",
        ia.attempts_failed
    );
    // Its breaker, not only the list, kept the openings off it: they stopped well
    // before it left the list.
    let last = after(killed_a, ia.last_unix_ms);
    assert!(last < 1_000, "A tried {last} ms after its kill");
    // (The list's change and the attempts are stamped by different tasks.)
    assert!(
        after(removed_a, ia.last_unix_ms) < 100,
        "A tried {} ms after it left the list",
        after(removed_a, ia.last_unix_ms)
    );

    // D: streams within a second and a half of listening.
    let id = run.instances.get(&pd).copied().unwrap_or_default();
    let first = after(listening_d, id.first_unix_ms);
    eprintln!(
        "stream_fleet: D opened {} streams, the first {first} ms after it listened",
        id.opened
    );
    assert!(
        id.opened > 0 && (0..1_500).contains(&first),
        "D's first stream {first} ms after it listened: {id:?}"
    );

    // B: left the list at once, broke nothing, got no stream after it left, and
    // exited by itself.
    let removed_b = discovered(&run.stderr, "stream-check", "removed", pb).expect("B removed");
    let ib = run.instances.get(&pb).copied().unwrap_or_default();
    let gone = after(stopped_b, removed_b);
    eprintln!(
        "stream_fleet: B removed from the list {gone} ms after its SIGTERM; its last \
         opening {} ms after",
        after(stopped_b, ib.last_unix_ms)
    );
    assert!(
        (0..1_000).contains(&gone),
        "B removed {gone} ms after SIGTERM: it did not deregister at once"
    );
    assert!(
        (ib.broken, ib.errors, ib.attempts_failed) == (0, 0, 0),
        "B's stop failed streams: {ib:?}"
    );
    // It had streams in progress when it stopped (each lasts about 100 ms): they
    // finished in its drain.
    let before = after(ib.last_unix_ms, stopped_b);
    assert!(
        before < 200,
        "B's last opening {before} ms before its SIGTERM"
    );
    assert!(
        after(removed_b, ib.last_unix_ms) < 250,
        "B got an opening {} ms after it left the list",
        after(removed_b, ib.last_unix_ms)
    );
    assert!(
        b_exit.is_some_and(|s| s.success()),
        "B did not exit cleanly after SIGTERM: {b_exit:?}"
    );

    // The new streams went to C and D, to the end.
    let end = run
        .instances
        .values()
        .map(|i| i.last_unix_ms)
        .max()
        .unwrap_or(0);
    for (name, port) in [("C", pc), ("D", pd)] {
        let last = run.instances.get(&port).map_or(0, |i| i.last_unix_ms);
        assert!(
            after(last, end) < 1_000,
            "{name} stopped getting streams {} ms before the end",
            after(last, end)
        );
    }
    let took = began.elapsed();
    eprintln!("stream_fleet: took {:.1} s", took.as_secs_f64());
    assert!(took < Duration::from_secs(60), "took {took:?}");
}
