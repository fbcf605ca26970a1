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
//! 3. The same load with backup requests after a fixed delay has a lower p999 than
//!    without: the tail B makes. (Not the p99: the balancer keeps B's share of the
//!    attempts near 1%, so whether B's 80 ms reach the p99 is a matter of chance.)
//!
//! Every wait has a limit, and every process is killed when the test ends, pass or
//! fail ([`Proc`] kills its child when dropped). Assertions are on counts, ratios and
//! orderings with margins, not on absolute latencies: a debug build on a loaded
//! machine is slow, and slow by varying amounts. The figures are printed on stderr
//! (`cargo test -p examples --test chaos -- --nocapture` shows them).

mod support;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use support::*;

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

    // Phase 3: the same with backup requests. The delay: well past a normal call
    // (eight times the p50 without backups), well short of B's.
    let backup_ms = (plain.p50_us * 8 / 1000).clamp(15, SLOW_US / 1000 / 2);
    let backup = finish(
        client(
            "phase 3",
            &all,
            SHORT,
            &["--backup-ms", &backup_ms.to_string()],
        ),
        SHORT,
    );
    let counts = [pa, pb, pc].map(|p| per_instance(&backup, p).expect("a line per instance"));
    eprintln!(
        "chaos: phase 3 (B slow, backup after {backup_ms} ms) calls={} errors={} A={:?} B={:?} \
         C={:?} (ok, failed); {}",
        backup.calls, backup.errors, counts[0], counts[1], counts[2], backup.last
    );
    eprintln!(
        "chaos: p99 without backup {} us, with backup {} us; p999 {} us and {} us",
        plain.p99_us, backup.p99_us, plain.p999_us, backup.p999_us
    );
    assert_no_call_lost("phase 3", &backup);
    assert_eq!(backup.errors, 0, "phase 3: nothing failed");
    assert!(
        backup.p999_us * 10 < plain.p999_us * 9,
        "phase 3: backup requests after {backup_ms} ms should cut the p999 ({} us without, \
         {} us with)",
        plain.p999_us,
        backup.p999_us
    );
    drop(a);
    eprintln!("chaos: took {:.1} s", began.elapsed().as_secs_f64());
}
