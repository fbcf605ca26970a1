//! Chaos on real processes: three `echo-server`s on 127.0.0.1 and `echo-client`s
//! loading them while one is killed, restarted on its port, and another made slow.
//!
//! What it shows, with the client's default stack (p2c balancing, `echo` idempotent,
//! instance breakers, retries):
//!
//! 1. One run of 14 s over the three instances with its timeline: server A is killed
//!    (SIGKILL) at about 3.5 s, restarted on the same port at 7.5 s, and server B made
//!    slow (SIGUSR1: each `echo` then waits 80 ms) at 10.5 s. No call is lost (every
//!    call made ended as an answer or an error), errors are few and only in the
//!    seconds right after the kill, none anywhere else, and A is back in the rotation
//!    once its breaker lets trial calls through. (The few errors: the calls in flight
//!    on A when it dies all fail at once, and the retry budget holds 10 retries.)
//! 2. While B is slow and A is back: B gets fewer attempts than each healthy instance.
//!
//! And, on two other instances, one stalled (each `echo` waits 2 s) and one healthy,
//! eight calls at once balanced round robin: with backup requests on, every call is
//! answered by the healthy instance, the stalled one's attempts all cancelled; with
//! them off, the calls sent to the stalled instance wait its answer out. These are
//! counts and outcomes, not latencies: a backup after 50 ms has nearly 2 s to win, a
//! margin no thread held up on a loaded machine eats.
//!
//! Every wait has a limit, and every process is killed when the test ends, pass or
//! fail ([`Proc`] kills its child when dropped). Assertions are on counts, ratios and
//! orderings with margins, not on latencies: a debug build on a loaded machine is
//! slow, and slow by varying amounts. The figures are printed on stderr (`cargo test
//! -p examples --test chaos -- --nocapture` shows them).
//!
//! What backup requests do to the tail latency is a measurement, not a test: run
//! three `echo-server`s, one with `--delay-us 80000`, and `echo-client --addr A,B,C
//! --duration 10` against them with and without `--backup-ms 20`; compare the
//! `p999_us` of the last lines.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use examples::attempts::{Counts, InstanceCounts};
use examples::echo::{EchoServiceClient, Request};
use nix::sys::signal::Signal;
use support::*;
use volo_core::client::{BackupDelay, BackupPolicy, RoundRobin};
use volo_core::context::Address;

/// What `echo` waits on B once it is slow, in microseconds.
const SLOW_US: u64 = 80_000;
/// The callers of every client run.
const CONCURRENCY: &str = "50";

/// Starts an `echo-client` over `addrs` for `duration` seconds.
fn client(name: &str, addrs: &[u16], duration: u64, extra: &[&str]) -> Proc {
    let list: Vec<String> = addrs.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let mut args: Vec<String> = [
        "--addr",
        &list.join(","),
        "--concurrency",
        CONCURRENCY,
        "--duration",
        &duration.to_string(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    args.extend(extra.iter().map(|a| a.to_string()));
    Proc::spawn(name, CLIENT, &args)
}

#[test]
fn kill_restart_and_slow_instances_under_load() {
    let began = Instant::now();
    let (mut a, pa) = server("A", 0, &[]);
    let slow = SLOW_US.to_string();
    let (b, pb) = server("B", 0, &["--delay-us", &slow, "--delay-on-usr1"]);
    let (_c, pc) = server("C", 0, &[]);
    let all = [pa, pb, pc];
    eprintln!("chaos: A=127.0.0.1:{pa} B=127.0.0.1:{pb} C=127.0.0.1:{pc}");

    // Phase 1: kill A, restart it, slow B down, under one run with a timeline.
    const RUN: u64 = 14;
    let (kill_at, restart_at, slow_at) = (3.5, 7.5, 10.5);
    let started = Instant::now();
    let load = client("phase 1", &all, RUN, &["--timeline"]);
    // The window opens after the warm-up (and the client's start, a little more).
    let window = |s: f64| started + WARMUP + Duration::from_secs_f64(s);
    sleep_until(window(kill_at));
    a.kill();
    eprintln!("chaos: A killed at {:.2} s", window_time(started));
    sleep_until(window(restart_at));
    let (a, pa2) = server("A again", pa, &[]);
    assert_eq!(pa2, pa);
    eprintln!("chaos: A restarted at {:.2} s", window_time(started));
    sleep_until(window(slow_at));
    b.signal(Signal::SIGUSR1);
    let said = b.line(Duration::from_secs(5));
    assert_eq!(
        said,
        Some(format!("echo-server delay {SLOW_US} us")),
        "B slow"
    );
    eprintln!("chaos: B slow at {:.2} s", window_time(started));
    let run = finish(load, RUN);
    run.show_timeline("chaos: phase 1");
    let per_instance = |run: &ClientRun, port: u16| run.instances.get(&port).copied();
    eprintln!(
        "chaos: phase 1 calls={} ok={} errors={} unfinished={} A={:?} B={:?} C={:?} (ok, failed)",
        run.calls,
        run.ok,
        run.errors,
        run.unfinished,
        per_instance(&run, pa),
        per_instance(&run, pb),
        per_instance(&run, pc),
    );
    eprintln!("chaos: phase 1 {}", run.last);
    assert_no_call_lost("phase 1", &run);
    assert_eq!(run.timeline.len() as u64, RUN, "one line per second");
    assert!(
        run.errors <= 50,
        "phase 1: {} calls failed; a fault should cost a handful",
        run.errors
    );
    // Errors only right after the kill (a second of slack each side for where the
    // window really started); none at the restart, the slow-down, or anywhere else.
    let k = kill_at as u64;
    let near_kill = (k - 1)..=(k + 2);
    let stray = run.errors_outside(near_kill.clone());
    assert!(
        stray.is_empty(),
        "phase 1: errors away from the kill (seconds {near_kill:?}): {stray:?}"
    );
    let (a_ok, a_failed) = per_instance(&run, pa).expect("A's line");
    let (c_ok, _) = per_instance(&run, pc).expect("C's line");
    assert!(
        a_failed > 0,
        "phase 1: no attempt on A failed: was it killed?"
    );
    // A served before the kill (4.5 s with the warm-up) and again once its breaker
    // let trial calls through (5 s after the kill, A restarted by then) to the end
    // (5.5 s), while C served all along, half the calls while A was out: A about 0.6
    // of C. Had A not come back, about 0.2.
    assert!(
        a_ok * 5 > c_ok * 2,
        "phase 1: A answered {a_ok} attempts, C {c_ok}: A is not back after its restart"
    );

    // Phase 2: B slow, A back. The balancer sends B less than each healthy one.
    const SHORT: u64 = 3;
    let plain = finish(client("phase 2", &all, SHORT, &[]), SHORT);
    let counts = [pa, pb, pc].map(|p| per_instance(&plain, p).expect("a line per instance"));
    eprintln!(
        "chaos: phase 2 (B slow) calls={} errors={} A={:?} B={:?} C={:?} (ok, failed); {}",
        plain.calls, plain.errors, counts[0], counts[1], counts[2], plain.last
    );
    assert_no_call_lost("phase 2", &plain);
    assert_eq!(plain.errors, 0, "phase 2: nothing failed");
    let (ok_a, ok_b, ok_c) = (counts[0].0, counts[1].0, counts[2].0);
    assert!(
        ok_b * 2 < ok_a.min(ok_c),
        "phase 2: the slow B answered {ok_b} attempts, A {ok_a}, C {ok_c}: \
         B should get far fewer"
    );

    drop(a);
    eprintln!("chaos: took {:.1} s", began.elapsed().as_secs_f64());
}

/// What `echo` waits on the stalled instance of the backup test.
const STALL: Duration = Duration::from_secs(2);
/// The backup test's calls, sent at once.
const CALLS: usize = 8;

/// `CALLS` echo calls at once to the instances on `ports`, balanced round robin, with
/// backup requests after `backup` when given: each instance's attempts, and how long
/// each call took.
fn calls_at_once(ports: &[u16], backup: Option<Duration>) -> (HashMap<u16, Counts>, Vec<Duration>) {
    let addrs: Vec<Address> = ports
        .iter()
        .map(|p| Address::Tcp(([127, 0, 0, 1], *p).into()))
        .collect();
    let counts = InstanceCounts::new(&addrs);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let took = rt.block_on(async {
        let mut builder = EchoServiceClient::builder()
            .addresses(addrs.clone())
            .load_balance(RoundRobin::new())
            .layer_inner(counts.layer())
            .idempotent(["echo"]);
        if let Some(delay) = backup {
            // A backup for every call if need be, not the default tenth of them.
            let policy = BackupPolicy::new(BackupDelay::Fixed(delay)).budget_ratio(1.0);
            builder = builder.backup(policy);
        }
        let client = builder.build().unwrap();
        let calls: Vec<_> = (0..CALLS)
            .map(|i| {
                let client = client.clone();
                tokio::spawn(async move {
                    let msg = format!("call {i}");
                    let req = Request {
                        action: "echo".into(),
                        msg: msg.clone().into(),
                    };
                    let started = Instant::now();
                    let got = client.echo(req).await;
                    let took = started.elapsed();
                    let got = got.unwrap_or_else(|e| panic!("call {i}: {e}"));
                    assert_eq!(got.msg.as_str(), msg);
                    took
                })
            })
            .collect();
        let mut took = Vec::new();
        for call in calls {
            took.push(call.await.unwrap());
        }
        took
    });
    let by_port = counts
        .snapshot()
        .into_iter()
        .map(|(addr, c)| {
            let port = addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok());
            (port.unwrap_or_else(|| panic!("an address {addr:?}")), c)
        })
        .collect();
    (by_port, took)
}

/// Backup requests against a stalled instance, by counts: with them on, the backup
/// to the healthy instance answers every call sent first to the stalled one; with them
/// off, those calls wait the stall out.
#[test]
fn a_backup_request_answers_for_a_stalled_instance() {
    let stall_us = STALL.as_micros().to_string();
    let (_stalled, ps) = server("stalled", 0, &["--delay-us", &stall_us]);
    let (_healthy, ph) = server("healthy", 0, &[]);

    let (counts, took) = calls_at_once(&[ps, ph], Some(Duration::from_millis(50)));
    let (s, h) = (counts[&ps], counts[&ph]);
    eprintln!("chaos: backups on: stalled {s:?}, healthy {h:?}, calls took {took:?}");
    assert!(
        s.cancelled > 0,
        "backups on: no call went to the stalled instance first ({s:?})"
    );
    assert_eq!(
        (s.ok, s.failed),
        (0, 0),
        "backups on: the stalled instance answered first, or failed ({s:?})"
    );
    assert_eq!(
        (h.ok, h.failed),
        (CALLS as u64, 0),
        "backups on: the healthy instance answered every call ({h:?})"
    );

    let (counts, took) = calls_at_once(&[ps, ph], None);
    let (s, h) = (counts[&ps], counts[&ph]);
    eprintln!("chaos: backups off: stalled {s:?}, healthy {h:?}, calls took {took:?}");
    assert!(
        s.ok > 0 && s.cancelled == 0 && s.failed == 0,
        "backups off: the calls sent to the stalled instance are answered there ({s:?})"
    );
    assert_eq!(s.ok + h.ok, CALLS as u64, "backups off: one attempt a call");
    let waited = took.iter().filter(|t| **t >= STALL).count() as u64;
    assert!(
        waited >= s.ok,
        "backups off: {} calls answered by the stalled instance, {waited} waited {STALL:?}",
        s.ok
    );
}
