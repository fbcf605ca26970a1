//! Churn under a registry, on real processes: a real etcd on 127.0.0.1, `echo-server`s
//! that register in it (`--registry`), and an `echo-client` at 50 callers that follows
//! it (`--discover`), while instances die, come and go, and etcd itself restarts.
//!
//! One run of 16 s, with its timeline (seconds of the client's window):
//! - 3 s: A is killed (SIGKILL). Its calls in flight fail and are retried on the
//!   others; its breaker keeps new calls off it; its key goes when its lease (2 s)
//!   ends.
//! - 5 s: D starts. It gets calls within a second of listening (its registration
//!   follows the listen by a few milliseconds, the client's watch by a few more).
//! - 7 s: etcd is killed (SIGKILL); 9.5 s: started again on its data. Meanwhile the
//!   client keeps calling the instances it knew, without an error.
//! - 11.5 s: E starts, after the restart: the client's watch came back (a resync) and
//!   E gets calls within a second too.
//! - 13.5 s: B stops gracefully (SIGTERM): it deregisters, serves on for its exit
//!   wait (1 s) while the client learns it left, then drains: no call fails, and B
//!   exits on its own.
//!
//! Checked: no call lost (every call made ended, answered or failed); errors only in
//! the seconds right after A's kill; A removed from the client's list within its lease
//! and a margin; D and E called within a second of listening; no error while etcd is
//! away; the instances that stayed (C, D) served to the end; B removed at its
//! shutdown. The figures are printed on stderr (`cargo test -p examples --features
//! etcd --test churn -- --nocapture`).
//!
//! Built only with the `etcd` feature (`required-features`). Every process is killed
//! when the test ends, pass or fail. Without an etcd binary the test is skipped,
//! unless `CI` is set, when it fails.

mod support;

use std::time::{Duration, Instant};

use etcd_registry::testing::Etcd;
use examples::attempts::unix_ms;
use nix::sys::signal::Signal;
use support::*;

/// Each server's lease, in seconds.
const LEASE_TTL: &str = "2";

/// An `echo-server` on 127.0.0.1 registered in `etcd`: the process, its port, and
/// when it said it listens (Unix ms).
fn registered(name: &str, etcd: &Etcd) -> (Proc, u16, u64) {
    support::registered(name, SERVER, &etcd.url(), LEASE_TTL)
}

#[test]
fn instances_and_etcd_come_and_go_under_load() {
    let Some(mut etcd) = Etcd::start() else {
        return;
    };
    let began = Instant::now();
    let (mut a, pa, _) = registered("A", &etcd);
    let (mut b, pb, _) = registered("B", &etcd);
    let (_c, pc, _) = registered("C", &etcd);
    eprintln!("churn: etcd {} A={pa} B={pb} C={pc}", etcd.url());

    const RUN: u64 = 16;
    let started = Instant::now();
    let args: Vec<String> = [
        "--discover",
        &etcd.url(),
        "--concurrency",
        "50",
        "--duration",
        &RUN.to_string(),
        "--timeline",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let load = Proc::spawn("client", CLIENT, &args);
    let window = |s: f64| started + WARMUP + Duration::from_secs_f64(s);

    sleep_until(window(3.0));
    a.kill();
    let killed_a = unix_ms();
    eprintln!("churn: A killed at {:.2} s", window_time(started));

    sleep_until(window(5.0));
    let (_d, pd, listening_d) = registered("D", &etcd);
    eprintln!("churn: D={pd} listening at {:.2} s", window_time(started));

    sleep_until(window(7.0));
    etcd.kill();
    let etcd_down = window_time(started);
    eprintln!("churn: etcd killed at {etcd_down:.2} s");
    sleep_until(window(9.5));
    etcd.restart();
    let etcd_up = window_time(started);
    eprintln!("churn: etcd back at {etcd_up:.2} s");

    sleep_until(window(11.5));
    let (_e, pe, listening_e) = registered("E", &etcd);
    eprintln!("churn: E={pe} listening at {:.2} s", window_time(started));

    sleep_until(window(13.5));
    b.signal(Signal::SIGTERM);
    let stopped_b = unix_ms();
    eprintln!("churn: B stopped at {:.2} s", window_time(started));

    // B exits by itself: exit wait, then drain (calls in hand answered, the linger).
    let b_exit = b.wait(Duration::from_secs(30));
    let b_took = after(stopped_b, unix_ms());
    eprintln!("churn: B exited {b_took} ms after its SIGTERM: {b_exit:?}");
    assert!(
        b_exit.is_some_and(|s| s.success()),
        "B did not exit cleanly after SIGTERM: {b_exit:?}"
    );

    let run = finish(load, RUN);
    run.show_timeline("churn:");
    for line in run.stderr.lines().filter(|l| l.contains("discovered")) {
        eprintln!("churn: {line}");
    }
    let ports = [("A", pa), ("B", pb), ("C", pc), ("D", pd), ("E", pe)];
    for (name, port) in ports {
        eprintln!(
            "churn: {name} (ok, failed)={:?} (first, last unix ms)={:?}",
            run.instances.get(&port),
            run.times.get(&port)
        );
    }
    eprintln!("churn: {}", run.last);

    assert_no_call_lost("churn", &run);
    let (b_ok, b_failed) = run.instances.get(&pb).copied().unwrap_or_default();
    eprintln!("churn: B answered {b_ok} calls, failed {b_failed}");
    // B's stop lost nothing: errors only around A's kill (below), none at B's.
    assert_eq!(run.timeline.len() as u64, RUN, "one line per second");
    // Errors only right after A's kill (a second of slack each side for where the
    // window really started).
    let stray = run.errors_outside(2..=5);
    assert!(stray.is_empty(), "errors away from A's kill: {stray:?}");
    assert!(run.errors <= 50, "{} calls failed", run.errors);

    // A: out of the list within its lease, and a margin for etcd's lease checks.
    let removed_a = discovered(&run.stderr, "echo-client", "removed", pa).expect("A removed");
    let gone = after(killed_a, removed_a);
    eprintln!("churn: A removed from the list {gone} ms after its kill");
    assert!(
        (0..=5_000).contains(&gone),
        "A removed {gone} ms after its kill"
    );
    let (_, last_a) = run.times[&pa];
    eprintln!(
        "churn: A's last attempt ended {} ms after its kill",
        after(killed_a, last_a)
    );

    // D and E: called within a second of listening.
    for (name, port, listening) in [("D", pd, listening_d), ("E", pe, listening_e)] {
        let added = discovered(&run.stderr, "echo-client", "added", port)
            .unwrap_or_else(|| panic!("{name} never added"));
        let (first, _) = run.times[&port];
        let (in_list, called) = (after(listening, added), after(listening, first));
        eprintln!("churn: {name} listed {in_list} ms and called {called} ms after it listened");
        assert!(
            called <= 1_000,
            "{name} called {called} ms after it listened"
        );
    }

    // etcd away: calls went on, and nothing failed (the seconds it was down, whole).
    let away = (etcd_down.ceil() as u64)..(etcd_up.floor() as u64);
    for s in run.timeline.iter().filter(|s| away.contains(&s.t)) {
        assert!(s.ok > 0 && s.errors == 0, "while etcd was away: {s:?}");
    }

    // B: removed when it stopped, as it deregistered before its drain.
    let removed_b = discovered(&run.stderr, "echo-client", "removed", pb).expect("B removed");
    let gone = after(stopped_b, removed_b);
    eprintln!("churn: B removed from the list {gone} ms after its SIGTERM");
    assert!(
        (0..1_000).contains(&gone),
        "B removed {gone} ms after SIGTERM: it did not deregister at once"
    );

    // C and D served to the end, across the etcd restart.
    let end = run.times.values().map(|&(_, last)| last).max().unwrap_or(0);
    for (name, port) in [("C", pc), ("D", pd)] {
        let (_, last) = run.times[&port];
        assert!(
            after(last, end) < 1_000,
            "{name} stopped getting calls {} ms before the end",
            after(last, end)
        );
    }
    eprintln!("churn: took {:.1} s", began.elapsed().as_secs_f64());
}
