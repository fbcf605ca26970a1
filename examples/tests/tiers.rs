//! Locality tiers with real processes: three `echo-server`s registered in a real etcd
//! with `--tag rack=.. --tag zone=..` (and host identities of other machines), and
//! `echo-client --discover --zone a --rack 1`: its calls stay in its rack while the
//! rack's instance is there, and go to its zone, not the other zone, once that one
//! deregisters.
//!
//! Built only with the `etcd` feature; skipped without an etcd binary unless `CI` is
//! set, when it fails.

mod support;

use std::time::Duration;

use etcd_registry::testing::Etcd;
use nix::sys::signal::Signal;
use support::{CLIENT, Proc, SERVER, fields, listening, num};

/// An echo-server registered in `etcd` from host `host`, rack `rack`, zone `zone`.
fn server(etcd: &str, host: &str, rack: &str, zone: &str) -> (Proc, u16) {
    let rack = format!("rack={rack}");
    let zone = format!("zone={zone}");
    let extra = [
        "--registry",
        etcd,
        "--host-id",
        host,
        "--tag",
        &rack,
        "--tag",
        &zone,
        "--lease-ttl",
        "5",
    ];
    listening(host, SERVER, 0, &extra)
}

/// A second of calls from rack 1 of zone a: the answered calls per port.
fn calls(etcd: &str) -> Vec<(u16, u64)> {
    let args: Vec<String> = [
        "--discover",
        etcd,
        "--zone",
        "a",
        "--rack",
        "1",
        "--concurrency",
        "2",
        "--duration",
        "1",
        "--per-instance",
    ]
    .map(String::from)
    .into();
    let mut client = Proc::spawn("echo-client", CLIENT, &args);
    let status = client
        .wait(Duration::from_secs(30))
        .expect("the client ends");
    assert!(status.success(), "{}", client.stderr());
    let mut out = Vec::new();
    while let Some(line) = client.line(Duration::from_secs(2)) {
        if line.starts_with("instance=") {
            let f = fields(&line);
            let port = f["instance"].rsplit(':').next().unwrap().parse().unwrap();
            out.push((port, num(&f, "ok", &line)));
        }
    }
    out.sort();
    out
}

#[test]
fn calls_stay_in_the_nearest_tier_and_spill_to_the_zone() {
    let Some(etcd) = Etcd::start() else {
        return;
    };
    let url = etcd.url();
    let (mut rack1, p1) = server(&url, "host-a1", "1", "a");
    let (_rack2, p2) = server(&url, "host-a2", "2", "a");
    let (_other, p3) = server(&url, "host-b1", "1", "b");

    let seen = calls(&url);
    let on = |port: u16, seen: &[(u16, u64)]| {
        seen.iter().find(|(p, _)| *p == port).map_or(0, |(_, n)| *n)
    };
    assert!(on(p1, &seen) > 0, "the rack's instance: {seen:?}");
    assert_eq!(
        (on(p2, &seen), on(p3, &seen)),
        (0, 0),
        "nothing beyond the rack while it serves: {seen:?}"
    );

    // The rack's instance deregisters (SIGTERM: a graceful stop).
    rack1.signal(Signal::SIGTERM);
    rack1.wait(Duration::from_secs(20)).expect("it stops");
    let seen = calls(&url);
    assert!(on(p2, &seen) > 0, "the zone's instance: {seen:?}");
    assert_eq!(
        (on(p1, &seen), on(p3, &seen)),
        (0, 0),
        "nothing to the gone one or the other zone: {seen:?}"
    );
}
