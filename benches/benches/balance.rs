//! What a balancer costs as the fleet grows: one pick among 10, 100, 1,000 and
//! 10,000 instances (`pick`), and a change of one instance's weight followed by the
//! pick that brings the balancer to it (`apply_one_change`: the new version of
//! discovery's list made by one step, and the balancer's state, such as a hash ring,
//! brought up to it). `pick_hot_keys` picks by consistent hash with keys from a hot
//! set of 4,096 rather than from all of 2^64; `pick_ten_weights` picks by weighted
//! round robin among fleets of 10 distinct weights at every size.
//!
//! Run it with `cargo bench -p benches --bench balance`. Issue 44's targets: a pick at
//! 10,000 at most 1.2x a pick at 10, and applying one change at 10,000 at most 2x
//! applying one at 100.

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use volo_core::client::{
    ConsistentHash, Instance, InstanceList, LoadBalance, LocalFirst, PowerOfTwoChoices, RoundRobin,
    Step, WeightedRandom, WeightedRoundRobin,
};
use volo_core::context::Address;

const SIZES: [usize; 4] = [10, 100, 1_000, 10_000];

/// Instance `i` of a fleet, of weight `weight`.
fn instance(i: usize, weight: u32) -> Instance {
    let ip = Ipv4Addr::from(0x0a00_0000 + i as u32);
    let mut inst = Instance::new(Address::Tcp(SocketAddr::from((ip, 9000))));
    inst.weight = weight;
    inst
}

/// `n` instances on distinct TCP addresses, weights 50 to 149 spread alike at every
/// size (the 10 of the smallest fleet are 50, 87, 124, 61... not 50 to 59).
fn fleet(n: usize) -> InstanceList {
    (0..n)
        .map(|i| instance(i, 50 + (i * 37 % 100) as u32))
        .collect()
}

/// Every balancer, by name.
fn balancers() -> Vec<(&'static str, Box<dyn LoadBalance>)> {
    vec![
        ("weighted_random", Box::new(WeightedRandom::with_seed(7))),
        ("round_robin", Box::new(RoundRobin::new())),
        ("weighted_round_robin", Box::new(WeightedRoundRobin::new())),
        ("p2c", Box::new(PowerOfTwoChoices::with_seed(7))),
        ("consistent_hash", Box::new(ConsistentHash::default())),
        (
            "local_first_p2c",
            Box::new(LocalFirst::new(PowerOfTwoChoices::with_seed(7))),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("pick");
    for n in SIZES {
        let list = fleet(n);
        for (name, lb) in balancers() {
            // The first pick builds what the balancer derives from the list.
            lb.pick(&list, Some(1));
            let mut key = 0u64;
            group.bench_with_input(BenchmarkId::new(name, n), &list, |b, list| {
                b.iter(|| {
                    key = key.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    black_box(lb.pick(black_box(list), Some(key)))
                })
            });
        }
    }
    group.finish();

    // Consistent hash with keys from a hot set of 4,096 (the keys of a cache's
    // busiest entries, say) rather than spread over all of 2^64: the points those
    // keys reach stay in the caches whatever the ring's size.
    let mut group = c.benchmark_group("pick_hot_keys");
    let hot: Vec<u64> = (0..4096u64)
        .map(|k| k.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect();
    for n in SIZES {
        let list = fleet(n);
        let lb = ConsistentHash::default();
        lb.pick(&list, Some(1));
        let mut at = 0usize;
        group.bench_with_input(BenchmarkId::new("consistent_hash", n), &list, |b, list| {
            b.iter(|| {
                at = (at + 1) % hot.len();
                black_box(lb.pick(black_box(list), Some(hot[at])))
            })
        });
    }
    group.finish();

    // Weighted round robin's pick costs O(log g) in the number g of distinct weights,
    // not in the number of instances: here every fleet has the 10 weights of the
    // smallest one (50, 87, 124, 61, ...), cycled.
    let mut group = c.benchmark_group("pick_ten_weights");
    for n in SIZES {
        let list: InstanceList = (0..n)
            .map(|i| instance(i, 50 + (i % 10 * 37 % 100) as u32))
            .collect();
        let lb = WeightedRoundRobin::new();
        lb.pick(&list, None);
        group.bench_with_input(
            BenchmarkId::new("weighted_round_robin", n),
            &list,
            |b, list| b.iter(|| black_box(lb.pick(black_box(list), None))),
        );
    }
    group.finish();

    let mut group = c.benchmark_group("apply_one_change");
    for n in SIZES {
        // The list's part alone: its new version made by one step.
        let mut list = fleet(n);
        let mut turn = 0usize;
        group.bench_function(BenchmarkId::new("list_only", n), |b| {
            b.iter(|| {
                turn += 1;
                let weight = 1 + (turn / n % 2) as u32;
                let step = Step::put(instance(turn % n, weight));
                list = list.apply([step]).expect("a change");
                black_box(list.len())
            })
        });
        for (name, lb) in balancers() {
            let mut list = fleet(n);
            lb.pick(&list, Some(1));
            let mut turn = 0usize;
            group.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter(|| {
                    // Each turn reweights the next instance, to 1 or 2 in turn (its
                    // weight before is 50 to 149, or the other of the two): always a
                    // change.
                    turn += 1;
                    let weight = 1 + (turn / n % 2) as u32;
                    let step = Step::put(instance(turn % n, weight));
                    list = list.apply([step]).expect("a change");
                    black_box(lb.pick(&list, Some(turn as u64)))
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = bench
}
criterion_main!(benches);
