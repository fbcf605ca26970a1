//! Local first: a set share of the calls to the instances on this host.

use super::derived::{Classify, Derived, Split};
use super::{Instance, InstanceList, LoadBalance, hash_of};
use crate::context::Address;
use crate::random::{Xorshift, random_seed};

/// Sends a set share of the calls to the instances on this host (those reached over
/// a Unix socket or shared memory, [`Instance::is_local`](crate::registry::Instance::is_local)) and the rest to the
/// others, each side picked by the balancer it wraps.
///
/// Discovery decides which instances are local: a registry client lists a
/// co-located instance at its shared-memory or Unix-socket address (see
/// [`Route`](crate::registry::Route)), the others at their TCP addresses.
///
/// - With `share` 1 (the default of [`new`](Self::new)) every call goes to a local
///   instance while one can take it; the remote ones take the calls only when no
///   local instance is listed, or all of them are tried already by this call or have
///   their breakers open (the balancer layer passes only those that may take the
///   call).
/// - With `share` 0.8, 80% of the calls go local, 20% remote: the remote instances
///   stay warm, and a local one that is overloaded sheds a part of the load.
/// - When only one side has instances, that side takes every call.
///
/// The two sides are kept as lists of their own, changed by the steps that change the
/// list given, so a change of one instance costs the same whatever the fleet's size,
/// for this balancer and for the one it wraps.
///
/// A call with a hash key ([`ConsistentHash`](super::ConsistentHash)) picks its side
/// by the key, so the same key keeps going to the same side while both are there.
#[derive(Debug)]
pub struct LocalFirst<B> {
    inner: B,
    /// The share of calls to send local, as a threshold on a uniform `u64`
    /// (`u64::MAX`: all of them).
    threshold: u64,
    rng: Xorshift,
    /// The list split in its two sides.
    sides: Derived<Split<2, Sides>>,
}

/// The sides of a list, `[remote, local]`: an instance is local when it is reached
/// over a Unix socket or shared memory (see
/// [`Instance::is_local`](crate::registry::Instance::is_local)).
#[derive(Debug, Default)]
struct Sides;

impl Classify for Sides {
    fn part(&self, instance: &Instance) -> usize {
        usize::from(matches!(
            instance.address,
            Address::Unix(_) | Address::Shm(_)
        ))
    }
}

impl<B: LoadBalance> LocalFirst<B> {
    /// Every call local while a local instance can take it, picked by `inner`.
    pub fn new(inner: B) -> Self {
        Self::with_share(inner, 1.0)
    }

    /// `share` of the calls (0 to 1; outside that range, the nearer end) to the local
    /// instances, the rest to the others.
    pub fn with_share(inner: B, share: f64) -> Self {
        let share = if share.is_nan() {
            1.0
        } else {
            share.clamp(0.0, 1.0)
        };
        let threshold = if share >= 1.0 {
            u64::MAX
        } else {
            // Exact enough: a share is a setting, not a measurement.
            (share * u64::MAX as f64) as u64
        };
        LocalFirst {
            inner,
            threshold,
            rng: Xorshift::new(random_seed()),
            sides: Derived::default(),
        }
    }

    /// Whether this call goes local (when both sides can take it).
    fn local_turn(&self, key: Option<u64>) -> bool {
        if self.threshold == u64::MAX {
            return true;
        }
        let draw = match key {
            Some(k) => hash_of((k, 0x10CA1_u32)),
            None => self.rng.next(),
        };
        draw < self.threshold
    }
}

impl<B: LoadBalance> LoadBalance for LocalFirst<B> {
    fn pick(&self, list: &InstanceList, key: Option<u64>) -> Option<Address> {
        let side = self.sides.with(list, |sides| {
            if sides.usable.contains(&0) {
                return None;
            }
            Some(sides.lists[usize::from(self.local_turn(key))].clone())
        });
        match side {
            Some(side) => self.inner.pick(&side, key),
            None => self.inner.pick(list, key),
        }
    }

    fn start(&self, addr: &Address) {
        self.inner.start(addr);
    }

    fn end(&self, addr: &Address) {
        self.inner.end(addr);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::client::balance::{ConsistentHash, PowerOfTwoChoices, Step, WeightedRandom};

    fn tcp(port: u16) -> Instance {
        Instance::new(Address::Tcp(([10, 0, 0, 1], port).into()))
    }

    fn shm(name: &str) -> Instance {
        Instance::new(Address::Shm(Arc::from(Path::new(name))))
    }

    fn unix(name: &str) -> Instance {
        Instance::new(Address::Unix(Arc::from(Path::new(name))))
    }

    /// How many of `n` picks went to each index of `list`.
    fn counts(lb: &impl LoadBalance, list: &[Instance], n: usize) -> Vec<usize> {
        crate::client::balance::tests::counts(lb, &InstanceList::new(list.to_vec()), n)
    }

    #[test]
    fn all_local_while_a_local_instance_is_listed() {
        let lb = LocalFirst::new(WeightedRandom::with_seed(3));
        let list = [tcp(1), shm("/a"), tcp(2), unix("/b")];
        let c = counts(&lb, &list, 4000);
        assert_eq!(c[0] + c[2], 0, "{c:?}");
        assert!(c[1] > 1500 && c[3] > 1500, "both local ones used: {c:?}");
    }

    #[test]
    fn remote_ones_take_the_calls_when_no_local_one_is_left() {
        let lb = LocalFirst::new(WeightedRandom::with_seed(3));
        // The local one tried already, or its breaker open: the layer passes the rest.
        let list = [tcp(1), tcp(2)];
        let c = counts(&lb, &list, 2000);
        assert!(c[0] > 800 && c[1] > 800, "{c:?}");
        // A local one of weight 0 takes nothing.
        let zero = Instance {
            weight: 0,
            ..shm("/a")
        };
        let c = counts(&lb, &[tcp(1), zero], 100);
        assert_eq!(c, [100, 0]);
    }

    #[test]
    fn a_share_splits_the_calls_between_the_sides() {
        let lb = LocalFirst::with_share(WeightedRandom::with_seed(9), 0.8);
        let list = [tcp(1), shm("/a"), tcp(2)];
        let c = counts(&lb, &list, 20_000);
        let local = c[1] as f64 / 20_000.0;
        assert!((0.78..0.82).contains(&local), "{c:?}");
        assert!(
            c[0] > 1500 && c[2] > 1500,
            "the remote share is spread: {c:?}"
        );

        let none = LocalFirst::with_share(WeightedRandom::with_seed(9), 0.0);
        assert_eq!(counts(&none, &list, 1000)[1], 0);
        let nan = LocalFirst::with_share(WeightedRandom::with_seed(9), f64::NAN);
        assert_eq!(counts(&nan, &list, 1000)[1], 1000);
    }

    #[test]
    fn a_key_keeps_its_side_and_its_instance() {
        let lb = LocalFirst::with_share(ConsistentHash::default(), 0.5);
        let list = InstanceList::new([tcp(1), shm("/a"), tcp(2), unix("/b")]);
        let mut local = 0;
        for k in 0..1000 {
            let first = lb.pick(&list, Some(k)).unwrap();
            assert_eq!(lb.pick(&list, Some(k)).as_ref(), Some(&first), "key {k}");
            local += usize::from(matches!(first, Address::Unix(_) | Address::Shm(_)));
        }
        assert!((400..600).contains(&local), "{local} of 1000 keys local");
    }

    #[test]
    fn load_counts_reach_the_wrapped_balancer() {
        let lb = LocalFirst::new(PowerOfTwoChoices::with_seed(1));
        let list = InstanceList::new([shm("/a"), shm("/b"), tcp(1)]);
        // Calls in flight on /a: the two local ones are compared, /b wins.
        for _ in 0..5 {
            lb.start(&shm("/a").address);
        }
        for _ in 0..50 {
            assert_eq!(lb.pick(&list, None), Some(shm("/b").address));
        }
        for _ in 0..5 {
            lb.end(&shm("/a").address);
        }
    }

    #[test]
    fn the_sides_follow_the_list_by_steps() {
        let lb = LocalFirst::new(WeightedRandom::with_seed(5));
        let list = InstanceList::new([tcp(1), tcp(2)]);
        assert_eq!(counts_of(&lb, &list, 100).iter().sum::<usize>(), 100);
        // A local instance comes: every call goes to it.
        let with_local = list.apply([Step::put(shm("/a"))]).unwrap();
        assert_eq!(counts_of(&lb, &with_local, 100), [0, 0, 100]);
        // Its weight goes to 0: the remote ones take the calls again.
        let zero = Instance {
            weight: 0,
            ..shm("/a")
        };
        let drained = with_local.apply([Step::put(zero)]).unwrap();
        assert_eq!(counts_of(&lb, &drained, 100)[2], 0);
        // Another local one, and the first back: both local ones share the calls.
        let back = drained
            .apply([Step::put(unix("/b")), Step::put(shm("/a"))])
            .unwrap();
        let c = counts_of(&lb, &back, 1000);
        assert_eq!(c[0] + c[1], 0, "{c:?}");
        assert!(c[2] > 300 && c[3] > 300, "{c:?}");
        lb.sides.with(&back, |s| assert_eq!(s.usable, [2, 2]));
    }

    fn counts_of(lb: &impl LoadBalance, list: &InstanceList, n: usize) -> Vec<usize> {
        crate::client::balance::tests::counts(lb, list, n)
    }
}
