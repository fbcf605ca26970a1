//! Locality tiers: the same host first, then the same rack, the same zone, anywhere;
//! a tier's calls spill to the next in proportion to what it cannot take.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::metrics::counter::Counter;

use super::derived::{Classify, Derived, InFlight, Split};
use super::{Instance, InstanceList, LoadBalance};
use crate::context::Address;
use crate::metrics::Metrics;
use crate::registry::{Locality, Tier};

/// Prefers the instances nearest this client: those on its host (or reached over a
/// Unix socket or shared memory), then those in its rack, then in its zone, then any
/// ([`Locality::tier_of`]); within a tier the balancer it wraps picks.
///
/// A tier takes every call while its instances can: the wrapped balancer picks one
/// of the tier; when that instance cannot take the call (the balancer layer's
/// instance breaker is open on it, this call tried it already, or it has
/// [`max_in_flight`](Self::max_in_flight) calls in flight), the call goes on to the
/// next tier. So a tier spills in proportion to what it cannot take: with half of a
/// rack's weight ejected by breakers, about half of its calls go to the zone, and
/// none while it is whole. Instances of weight 0 take nothing; an empty tier is
/// skipped. When no tier has an instance that can take the call, the nearest pick is
/// returned and the balancer layer chooses among the rest.
///
/// The tiers are kept as lists of their own, changed by the steps that change the
/// list given (a change of one instance costs the same whatever the fleet's size).
/// [`calls`](Self::calls) counts the calls sent to each tier.
#[derive(Debug)]
pub struct Tiered<B> {
    inner: B,
    here: Locality,
    max_in_flight: Option<usize>,
    in_flight: InFlight,
    calls: [AtomicU64; 4],
    /// The metrics' counters of the same, when given.
    metrics: Option<[Counter; 4]>,
    tiers: Derived<Split<4, Tiers>>,
}

/// The tiers of a list seen from `here` (the client's locality), nearest first.
#[derive(Debug)]
struct Tiers {
    here: Locality,
}

impl Classify for Tiers {
    fn part(&self, instance: &Instance) -> usize {
        self.here.tier_of(instance) as usize
    }
}

impl<B: LoadBalance> Tiered<B> {
    /// Tiers seen from `here`, each picked by `inner`, spilling only for instances
    /// that cannot take a call.
    pub fn new(inner: B, here: Locality) -> Self {
        Tiered {
            inner,
            here,
            max_in_flight: None,
            in_flight: InFlight::default(),
            calls: Default::default(),
            metrics: None,
            tiers: Derived::default(),
        }
    }

    /// Also spills from an instance with `n` calls in flight from this client (its
    /// attempts, counted by the balancer layer's `start` and `end`): a tier that is
    /// overloaded passes the excess on.
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = Some(n.max(1));
        self
    }

    /// Also counts the calls per tier in `metrics`, as `rpc_client_tier_calls_total`
    /// of `service`.
    pub fn with_metrics(mut self, metrics: &Metrics, service: &str) -> Self {
        self.metrics = Some(metrics.tier_calls(service));
        self
    }

    fn count(&self, at: usize) {
        self.calls[at].fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &self.metrics {
            m[at].inc();
        }
    }

    /// Calls sent to each tier so far, nearest first (`host`, `rack`, `zone`, `any`).
    pub fn calls(&self) -> [(Tier, u64); 4] {
        Tier::ALL.map(|t| (t, self.calls[t as usize].load(Ordering::Relaxed)))
    }

    fn overloaded(&self, addr: &Address, list: &InstanceList) -> bool {
        let Some(max) = self.max_in_flight else {
            return false;
        };
        let [n] = self.in_flight.loads([addr], list);
        n >= max
    }

    /// The tier lists of `list`.
    fn tiers(&self, list: &InstanceList) -> ([InstanceList; 4], [u64; 4]) {
        self.tiers.with_by(
            list,
            |l| {
                let here = self.here.clone();
                Split::of(l, Tiers { here })
            },
            |t| (t.lists.clone(), t.weight),
        )
    }
}

impl<B: LoadBalance> LoadBalance for Tiered<B> {
    fn pick(&self, list: &InstanceList, key: Option<u64>) -> Option<Address> {
        self.pick_usable(list, key, &|_| true)
    }

    fn pick_usable(
        &self,
        list: &InstanceList,
        key: Option<u64>,
        usable: &dyn Fn(&Address) -> bool,
    ) -> Option<Address> {
        let (lists, weight) = self.tiers(list);
        let mut nearest = None;
        for t in Tier::ALL {
            let at = t as usize;
            if weight[at] == 0 {
                continue;
            }
            let Some(addr) = self.inner.pick_usable(&lists[at], key, usable) else {
                continue;
            };
            if usable(&addr) && !self.overloaded(&addr, list) {
                self.count(at);
                return Some(addr);
            }
            nearest.get_or_insert((at, addr));
        }
        let (at, addr) = nearest?;
        self.count(at);
        Some(addr)
    }

    fn start(&self, addr: &Address) {
        self.inner.start(addr);
        if self.max_in_flight.is_some() {
            self.in_flight.start(addr);
        }
    }

    fn end(&self, addr: &Address) {
        self.inner.end(addr);
        self.in_flight.end(addr);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;

    use super::*;
    use crate::client::balance::{Step, WeightedRandom};

    /// A fleet of 3 zones x 4 racks x 2 hosts, 2 instances a host (96), each of
    /// weight 100; instance `(z, r, h, k)` on 10.z.(r*2+h).k:80.
    fn fleet() -> InstanceList {
        let mut all = Vec::new();
        for z in 0..3u8 {
            for r in 0..4u8 {
                for h in 0..2u8 {
                    for k in 0..2u8 {
                        let ip = [10, z, r * 2 + h, k];
                        let mut i = Instance::new(Address::Tcp((ip, 80).into()));
                        i.locality = locality(z, r, h);
                        all.push(i);
                    }
                }
            }
        }
        InstanceList::new(all)
    }

    fn locality(z: u8, r: u8, h: u8) -> Locality {
        Locality {
            host: Some(Arc::from(format!("z{z}r{r}h{h}"))),
            rack: Some(Arc::from(format!("r{r}"))),
            zone: Some(Arc::from(format!("z{z}"))),
        }
    }

    fn addr(z: u8, r: u8, h: u8, k: u8) -> Address {
        Address::Tcp(([10, z, r * 2 + h, k], 80).into())
    }

    /// The share of `n` picks per tier, from a client on host 0 of rack 0, zone 0,
    /// with the instances in `down` unusable.
    fn shares(lb: &Tiered<WeightedRandom>, list: &InstanceList, down: &[Address]) -> [f64; 4] {
        let down: HashSet<&Address> = down.iter().collect();
        let before = lb.calls().map(|(_, n)| n);
        let n = 20_000;
        for _ in 0..n {
            let got = lb
                .pick_usable(list, None, &|a| !down.contains(a))
                .expect("a pick");
            assert!(!down.contains(&got), "picked {got}, which is down");
        }
        let after = lb.calls().map(|(_, n)| n);
        [0, 1, 2, 3].map(|t| (after[t] - before[t]) as f64 / n as f64)
    }

    fn near(got: f64, want: f64) -> bool {
        (got - want).abs() < 0.03
    }

    #[test]
    fn the_nearest_tier_takes_the_calls_and_spills_in_proportion() {
        let lb = Tiered::new(WeightedRandom::with_seed(3), locality(0, 0, 0));
        let list = fleet();
        assert_eq!(shares(&lb, &list, &[]), [1.0, 0.0, 0.0, 0.0]);
        // One of the host's two instances ejected: half its calls go to the rack.
        let s = shares(&lb, &list, &[addr(0, 0, 0, 0)]);
        assert!(near(s[0], 0.5) && near(s[1], 0.5), "{s:?}");
        // The host gone: the rack's other host takes everything.
        let host = [addr(0, 0, 0, 0), addr(0, 0, 0, 1)];
        assert_eq!(shares(&lb, &list, &host), [0.0, 1.0, 0.0, 0.0]);
        // The host, and one of the rack's other two: the rack takes half.
        let more = [host[0].clone(), host[1].clone(), addr(0, 0, 1, 0)];
        let s = shares(&lb, &list, &more);
        assert!(near(s[1], 0.5) && near(s[2], 0.5), "{s:?}");
        // The whole rack down: the zone (its 3 other racks) takes everything.
        let rack: Vec<Address> = (0..2)
            .flat_map(|h| (0..2).map(move |k| addr(0, 0, h, k)))
            .collect();
        assert_eq!(shares(&lb, &list, &rack), [0.0, 0.0, 1.0, 0.0]);
        // The whole zone down: the other zones.
        let zone: Vec<Address> = (0..4)
            .flat_map(|r| (0..2).flat_map(move |h| (0..2).map(move |k| addr(0, r, h, k))))
            .collect();
        assert_eq!(shares(&lb, &list, &zone), [0.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn calls_per_tier_are_in_the_metrics() {
        let metrics = Metrics::new();
        let lb = Tiered::new(WeightedRandom::with_seed(9), locality(0, 0, 0))
            .with_metrics(&metrics, "echo");
        let list = fleet();
        shares(&lb, &list, &[addr(0, 0, 0, 0), addr(0, 0, 0, 1)]);
        let text = metrics.encode();
        let sample = |tier: &str| {
            crate::metrics::tests::sample(
                &text,
                &format!("rpc_client_tier_calls_total{{service=\"echo\",tier=\"{tier}\"}}"),
            )
        };
        assert_eq!(sample("rack"), Some(20_000.0), "{text}");
        assert_eq!(sample("host"), Some(0.0), "{text}");
    }

    #[test]
    fn an_overloaded_instance_passes_its_calls_on() {
        let lb = Tiered::new(WeightedRandom::with_seed(5), locality(0, 0, 0)).max_in_flight(2);
        let list = fleet();
        let busy = addr(0, 0, 0, 1);
        lb.start(&busy);
        assert_eq!(shares(&lb, &list, &[])[0], 1.0, "one in flight of two");
        lb.start(&busy);
        let s = shares(&lb, &list, &[]);
        assert!(near(s[0], 0.5) && near(s[1], 0.5), "{s:?}");
        lb.end(&busy);
        assert_eq!(shares(&lb, &list, &[])[0], 1.0);
    }

    #[test]
    fn tiers_follow_the_list_by_steps_and_an_unknown_locality_is_any() {
        let lb = Tiered::new(WeightedRandom::with_seed(7), locality(0, 0, 0));
        let list = fleet();
        // The host's instances leave: the rack takes the calls.
        let without = list
            .apply([
                Step::Remove(addr(0, 0, 0, 0)),
                Step::Remove(addr(0, 0, 0, 1)),
            ])
            .unwrap();
        assert_eq!(shares(&lb, &without, &[]), [0.0, 1.0, 0.0, 0.0]);
        // One comes back on this host, of weight 0: it takes nothing.
        let mut zero = Instance::new(addr(0, 0, 0, 0));
        zero.locality = locality(0, 0, 0);
        zero.weight = 0;
        let back = without.apply([Step::put(zero.clone())]).unwrap();
        assert_eq!(shares(&lb, &back, &[]), [0.0, 1.0, 0.0, 0.0]);
        zero.weight = 100;
        let weighted = back.apply([Step::put(zero)]).unwrap();
        assert_eq!(shares(&lb, &weighted, &[]), [1.0, 0.0, 0.0, 0.0]);
        assert_eq!(lb.tiers(&weighted).1, [100, 200, 1200, 3200]);
        // A client that does not know where it runs: every instance is `any`.
        let nowhere = Tiered::new(WeightedRandom::with_seed(7), Locality::default());
        assert_eq!(shares(&nowhere, &list, &[]), [0.0, 0.0, 0.0, 1.0]);
    }
}
