//! The balancer layer: picks the instance for each attempt of a call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use super::{Discover, Instance, InstanceList, LoadBalance, hash_of};
use crate::client::breaker::{InstanceBreakers, InstancePermit};
use crate::client::{ClientCall, ClientContext, Error};
use crate::clock::{Clock, SystemClock};
use crate::context::Address;
use crate::random::{Xorshift, random_seed};
use crate::service::{Layer, Service};

/// Picks an instance for each attempt: from what the [`Discover`] finds now, by the
/// [`LoadBalance`], skipping the instances this call tried already (unless no other
/// is left) and those whose [instance breaker](InstanceBreakers) is open; puts its
/// address in `cx.rpc.callee.address` for the layers below and the transport, names
/// it in the attempt's error, and tells its breaker how the attempt went.
///
/// An instance that cannot take the attempt is skipped by asking the balancer again
/// (up to 8 times; a call with a hash key asks with keys derived from it), not by
/// copying the list without it, so a pick costs the same in a fleet of 10,000 as in
/// one of 10. When every answer was one to skip, the layer chooses by weight among
/// the instances left itself (a pass over the list: it happens when most instances
/// are tried or open, which in a large fleet is rare).
///
/// When every instance's breaker is open the attempt goes to one of them anyway,
/// picked by weight, without counting it in its breaker (a `warn` line when that
/// starts): an instance breaker moves calls to other instances, and with none left it
/// would stop them all, which turns a server's rate limit, whose refusals open it,
/// into an outage. Envoy's panic threshold and Finagle's balancers do the same. What
/// stops calls to a service that fails as a whole is the service breaker.
pub struct Balance<S, C: Clock = SystemClock> {
    inner: S,
    discover: Arc<dyn Discover>,
    balance: Arc<dyn LoadBalance>,
    breakers: Option<InstanceBreakers<C>>,
    /// Whether the last attempt went to an instance whose breaker is open, every
    /// instance's being open (for the log lines when that starts and ends).
    panicking: Arc<AtomicBool>,
}

impl<S: std::fmt::Debug, C: Clock> std::fmt::Debug for Balance<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Balance")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S: Clone, C: Clock> Clone for Balance<S, C> {
    fn clone(&self) -> Self {
        Balance {
            inner: self.inner.clone(),
            discover: Arc::clone(&self.discover),
            balance: Arc::clone(&self.balance),
            breakers: self.breakers.clone(),
            panicking: Arc::clone(&self.panicking),
        }
    }
}

/// Calls `end` when the attempt is over, however it ends (a dropped attempt too).
struct InFlight<'a> {
    balance: &'a dyn LoadBalance,
    addr: Address,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.balance.end(&self.addr);
    }
}

impl<S, C: Clock> Balance<S, C> {
    /// Sends the attempts of `inner`'s calls to the instances `discover` finds, picked
    /// by `balance`, skipping those whose breaker in `breakers` is open.
    pub fn new(
        inner: S,
        discover: Arc<dyn Discover>,
        balance: Arc<dyn LoadBalance>,
        breakers: Option<InstanceBreakers<C>>,
    ) -> Self {
        Balance {
            inner,
            discover,
            balance,
            breakers,
            panicking: Arc::default(),
        }
    }

    /// The instance for this attempt, and its breaker's permit.
    fn pick(&self, cx: &ClientContext) -> Result<(Address, Option<InstancePermit<C>>), Error> {
        let list = self.discover.list();
        let breakers = self.breakers.as_ref();
        if let Some(b) = breakers {
            b.follow(&list);
        }
        if list.is_empty() {
            return Err(Error::no_instance());
        }
        // The one picked may not take the call (tried already, its breaker open or
        // its trial calls all out): ask again, with another key for a keyed call, a
        // few times before choosing among the others here.
        for n in 0..REPICKS {
            let key = match (n, cx.hash_key) {
                (0, key) => key,
                (n, Some(k)) => Some(hash_of((k, n))),
                (_, None) => None,
            };
            let usable =
                |a: &Address| !cx.avoid.contains(a) && breakers.is_none_or(|b| b.is_available(a));
            let addr = self
                .balance
                .pick_usable(&list, key, &usable)
                .ok_or_else(Error::no_instance)?;
            if cx.avoid.contains(&addr) {
                continue;
            }
            let Some(breakers) = breakers else {
                return Ok((addr, None));
            };
            if let Some(permit) = breakers.allow(&addr) {
                self.calm();
                return Ok((addr, Some(permit.with_deadline(cx.rpc.deadline))));
            }
        }
        self.pick_from_the_rest(&list, cx)
    }

    /// An instance of `list` by weight among those whose breakers let the attempt
    /// through and this call has not tried (or, when it tried all of them, among the
    /// tried ones: another try at one is the least bad choice).
    #[cold]
    fn pick_from_the_rest(
        &self,
        list: &InstanceList,
        cx: &ClientContext,
    ) -> Result<(Address, Option<InstancePermit<C>>), Error> {
        let breakers = self.breakers.as_ref();
        let listed = || list.in_order().into_iter().filter(|i| i.weight > 0);
        let usable = listed()
            .filter(|i| breakers.is_none_or(|b| b.is_available(&i.address)))
            .collect();
        let mut left = untried_first(usable, cx);
        let rng = Xorshift::new(random_seed());
        while let Some(at) = by_weight(&left, &rng) {
            let addr = left[at].address.clone();
            let Some(breakers) = breakers else {
                return Ok((addr, None));
            };
            match breakers.allow(&addr) {
                Some(permit) => {
                    self.calm();
                    return Ok((addr, Some(permit.with_deadline(cx.rpc.deadline))));
                }
                None => {
                    left.swap_remove(at);
                }
            }
        }
        if breakers.is_none() {
            return Err(Error::no_instance());
        }
        // Every instance's breaker is open (or its trial slots taken): the attempt
        // goes to one anyway, by weight (an untried one if any), without a permit.
        let left = untried_first(listed().collect(), cx);
        let at = by_weight(&left, &rng).ok_or_else(Error::no_instance)?;
        if !self.panicking.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                instances = list.len(),
                "every instance's breaker is open: calls go to them anyway until one closes"
            );
        }
        Ok((left[at].address.clone(), None))
    }
}

impl<S, C: Clock> Balance<S, C> {
    /// An instance's breaker let an attempt through: no longer panicking.
    fn calm(&self) {
        if self.panicking.load(Ordering::Relaxed) && self.panicking.swap(false, Ordering::Relaxed) {
            tracing::info!("an instance's breaker lets calls through again");
        }
    }
}

/// Those of `instances` this call has not tried, or all of them when it tried every
/// one (another try at one is the least bad choice).
fn untried_first<'a>(
    instances: Vec<&'a Arc<Instance>>,
    cx: &ClientContext,
) -> Vec<&'a Arc<Instance>> {
    if instances.iter().all(|i| cx.avoid.contains(&i.address)) {
        return instances;
    }
    instances
        .into_iter()
        .filter(|i| !cx.avoid.contains(&i.address))
        .collect()
}

/// The index of one of `instances` drawn in proportion to weight; `None` when their
/// weights add up to 0.
fn by_weight(instances: &[&Arc<Instance>], rng: &Xorshift) -> Option<usize> {
    let total: u64 = instances.iter().map(|i| u64::from(i.weight)).sum();
    if total == 0 {
        return None;
    }
    let mut r = rng.next() % total;
    instances.iter().position(|i| {
        let here = r < u64::from(i.weight);
        r = r.saturating_sub(u64::from(i.weight));
        here
    })
}

/// How many times the layer asks the balancer for another instance when the one
/// picked cannot take the call, before choosing among the rest itself.
const REPICKS: u64 = 8;

impl<S, C, R> Service<ClientContext, R> for Balance<S, C>
where
    R: ClientCall,
    S::Response: Send,
    S: Service<ClientContext, R, Error = Error> + Sync,
    C: Clock,
{
    type Response = S::Response;
    type Error = Error;

    async fn call(&self, cx: &mut ClientContext, req: R) -> Result<S::Response, Error> {
        let (addr, permit) = self.pick(cx)?;
        if let Some(picks) = &cx.picks {
            picks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(addr.clone());
        }
        cx.rpc.callee.address = Some(addr.clone());
        self.balance.start(&addr);
        let _in_flight = InFlight {
            balance: &*self.balance,
            addr: addr.clone(),
        };
        let out = self.inner.call(cx, req).await.map_err(|e| {
            if e.instance().is_none() {
                e.with_instance(addr)
            } else {
                e
            }
        });
        if let Some(permit) = permit {
            permit.record_result(&out);
        }
        out
    }
}

/// Wraps a service in a [`Balance`].
#[derive(Clone)]
pub struct BalanceLayer<C: Clock = SystemClock> {
    discover: Arc<dyn Discover>,
    balance: Arc<dyn LoadBalance>,
    breakers: Option<InstanceBreakers<C>>,
}

impl<C: Clock> std::fmt::Debug for BalanceLayer<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BalanceLayer").finish_non_exhaustive()
    }
}

impl BalanceLayer {
    /// Instances from `discover`, picked by `balance`, with no breakers.
    pub fn new(discover: impl Discover, balance: impl LoadBalance) -> Self {
        BalanceLayer {
            discover: Arc::new(discover),
            balance: Arc::new(balance),
            breakers: None,
        }
    }
}

impl<C: Clock> BalanceLayer<C> {
    /// The same, skipping instances whose breaker in `breakers` is open.
    pub fn with_breakers<C2: Clock>(self, breakers: InstanceBreakers<C2>) -> BalanceLayer<C2> {
        BalanceLayer {
            discover: self.discover,
            balance: self.balance,
            breakers: Some(breakers),
        }
    }

    /// The same, from shared parts.
    pub(crate) fn from_parts(
        discover: Arc<dyn Discover>,
        balance: Arc<dyn LoadBalance>,
        breakers: Option<InstanceBreakers<C>>,
    ) -> Self {
        BalanceLayer {
            discover,
            balance,
            breakers,
        }
    }
}

impl<S, C: Clock> Layer<S> for BalanceLayer<C> {
    type Service = Balance<S, C>;

    fn layer(self, inner: S) -> Balance<S, C> {
        Balance::new(inner, self.discover, self.balance, self.breakers)
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::Mutex;
    use std::time::Duration;

    use futures_util::FutureExt;

    use super::*;
    use crate::client::breaker::{BreakerConfig, BreakerState};
    use crate::client::{ClientRequest, ClientResponse, ErrorKind};
    use crate::client::{RoundRobin, StaticDiscover};
    use crate::clock::ManualClock;
    use crate::service::service_fn;

    fn addr(port: u16) -> Address {
        Address::Tcp(([127, 0, 0, 1], port).into())
    }

    fn req() -> ClientRequest {
        ClientRequest::new("m", thrift_wire::fixtures::echo::Request::default())
    }

    /// A transport where instance 1 refuses every connect and the others answer;
    /// records where each attempt went.
    fn half_dead(
        log: Arc<Mutex<Vec<Address>>>,
    ) -> impl Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error> + Sync
    {
        service_fn(move |cx: &mut ClientContext, _req: ClientRequest| {
            let to = cx.rpc.callee.address.clone().expect("an instance");
            log.lock().unwrap().push(to.clone());
            async move {
                if to == addr(1) {
                    Err(Error::connect(
                        to,
                        std::io::ErrorKind::ConnectionRefused.into(),
                    ))
                } else {
                    Ok(ClientResponse::none())
                }
            }
        })
    }

    fn now<F: Future>(f: F) -> F::Output {
        f.now_or_never().expect("the mock does not wait")
    }

    #[test]
    fn an_open_instance_breaker_sends_calls_elsewhere_until_it_half_opens() {
        let clock = ManualClock::new();
        let breakers = InstanceBreakers::with_clock(BreakerConfig::instance(), clock.clone());
        let log = Arc::new(Mutex::new(Vec::new()));
        let svc = BalanceLayer::new(
            StaticDiscover::new([Instance::new(addr(1)), Instance::new(addr(2))]),
            RoundRobin::new(),
        )
        .with_breakers(breakers.clone())
        .layer(half_dead(Arc::clone(&log)));
        // Round robin alternates until instance 1 has failed ten times in a row.
        let mut failures = 0;
        for _ in 0..40 {
            if now(svc.call(&mut ClientContext::new(), req())).is_err() {
                failures += 1;
            }
        }
        assert_eq!(failures, 10, "ejected after ten failures in a row");
        assert_eq!(breakers.state(&addr(1)), BreakerState::Open);
        let to_dead = |log: &Mutex<Vec<Address>>| {
            log.lock()
                .unwrap()
                .iter()
                .filter(|a| **a == addr(1))
                .count()
        };
        assert_eq!(to_dead(&log), 10, "nothing more went to the open instance");
        // After the open time, a trial call goes to it again.
        clock.advance(BreakerConfig::instance().open_for + Duration::from_millis(1));
        for _ in 0..4 {
            let _ = now(svc.call(&mut ClientContext::new(), req()));
        }
        assert!(
            to_dead(&log) > 10,
            "a trial call went to the half-open instance"
        );
        assert_eq!(
            breakers.state(&addr(1)),
            BreakerState::Open,
            "and it failed"
        );
    }

    #[test]
    fn with_every_instance_open_calls_still_go_out_and_tried_ones_are_avoided() {
        let clock = ManualClock::new();
        let breakers = InstanceBreakers::with_clock(BreakerConfig::instance(), clock.clone());
        let log = Arc::new(Mutex::new(Vec::new()));
        let only_dead = BalanceLayer::new(
            StaticDiscover::new([Instance::new(addr(1))]),
            RoundRobin::new(),
        )
        .with_breakers(breakers.clone())
        .layer(half_dead(Arc::clone(&log)));
        for _ in 0..10 {
            assert!(now(only_dead.call(&mut ClientContext::new(), req())).is_err());
        }
        assert_eq!(breakers.state(&addr(1)), BreakerState::Open);
        // Its breaker open and no other instance: the call goes to it all the same
        // (and fails as the instance fails, not as a breaker refuses).
        let e = now(only_dead.call(&mut ClientContext::new(), req())).unwrap_err();
        assert!(
            !e.is_circuit_open() && e.kind() == ErrorKind::Connect,
            "{e}"
        );
        assert_eq!(log.lock().unwrap().len(), 11, "the open one was called");

        // Without breakers: a call that tried instance 2 goes to 3, not 2 again.
        let log = Arc::new(Mutex::new(Vec::new()));
        let plain = BalanceLayer::new(
            StaticDiscover::new([Instance::new(addr(2)), Instance::new(addr(3))]),
            RoundRobin::new(),
        )
        .layer(half_dead(Arc::clone(&log)));
        for _ in 0..4 {
            let mut cx = ClientContext::new();
            cx.mark_tried(addr(2));
            now(plain.call(&mut cx, req())).unwrap();
        }
        assert!(log.lock().unwrap().iter().all(|a| *a == addr(3)));
    }

    /// A single instance behind a rate limit: it refuses two calls of three for load,
    /// which opens its breaker; calls go on reaching it, and what the limit lets
    /// through is answered, rather than nothing while the breaker is open.
    #[test]
    fn a_single_instance_refusing_for_load_keeps_answering_what_it_takes() {
        let clock = ManualClock::new();
        let breakers = InstanceBreakers::with_clock(BreakerConfig::instance(), clock.clone());
        let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let limited = {
            let n = Arc::clone(&n);
            service_fn(move |_cx: &mut ClientContext, _req: ClientRequest| {
                let k = n.fetch_add(1, Ordering::Relaxed);
                async move {
                    if k.is_multiple_of(3) {
                        Ok(ClientResponse::none())
                    } else {
                        Err(Error::new(ErrorKind::Overloaded, "over the QPS limit"))
                    }
                }
            })
        };
        let svc = BalanceLayer::new(
            StaticDiscover::new([Instance::new(addr(1))]),
            RoundRobin::new(),
        )
        .with_breakers(breakers.clone())
        .layer(limited);
        let answered = (0..300)
            .filter(|_| now(svc.call(&mut ClientContext::new(), req())).is_ok())
            .count();
        assert_eq!(breakers.state(&addr(1)), BreakerState::Open);
        assert_eq!(n.load(Ordering::Relaxed), 300, "every call reached it");
        assert_eq!(answered, 100, "a third answered");
    }

    #[test]
    fn a_tiered_balancer_spills_from_an_instance_whose_breaker_opened() {
        use crate::client::{Locality, Tier, Tiered, WeightedRandom};
        let clock = ManualClock::new();
        let breakers = InstanceBreakers::with_clock(BreakerConfig::instance(), clock.clone());
        let here = Locality {
            host: Some("h1".into()),
            rack: Some("r1".into()),
            zone: Some("z1".into()),
        };
        let on = |port, host: &str| Instance {
            locality: Locality {
                host: Some(host.into()),
                ..here.clone()
            },
            ..Instance::new(addr(port))
        };
        // Instance 1, on this host, refuses every connect; 2 is in the same rack.
        let tiered = Arc::new(Tiered::new(WeightedRandom::with_seed(1), here.clone()));
        let log = Arc::new(Mutex::new(Vec::new()));
        let svc = BalanceLayer::from_parts(
            Arc::new(StaticDiscover::new([on(1, "h1"), on(2, "h2")])),
            Arc::clone(&tiered) as Arc<dyn LoadBalance>,
            Some(breakers.clone()),
        )
        .layer(half_dead(Arc::clone(&log)));
        for _ in 0..10 {
            assert!(now(svc.call(&mut ClientContext::new(), req())).is_err());
        }
        assert_eq!(breakers.state(&addr(1)), BreakerState::Open);
        for _ in 0..20 {
            now(svc.call(&mut ClientContext::new(), req())).unwrap();
        }
        assert_eq!(
            tiered.calls(),
            [
                (Tier::Host, 10),
                (Tier::Rack, 20),
                (Tier::Zone, 0),
                (Tier::Any, 0)
            ]
        );
        assert_eq!(
            log.lock()
                .unwrap()
                .iter()
                .filter(|a| **a == addr(2))
                .count(),
            20
        );
    }
}
