//! The balancer layer: picks the instance for each attempt of a call.

use std::sync::{Arc, PoisonError};

use super::{Discover, Instance, LoadBalance};
use crate::client::{ClientContext, ClientRequest, ClientResponse, Error};
use crate::context::Address;
use crate::service::{Layer, Service};

/// Picks an instance for each attempt: from what the [`Discover`] finds now, less the
/// instances this call tried already (unless no other is left), by the
/// [`LoadBalance`]; puts its address in `cx.rpc.callee.address` for the layers below
/// and the transport, and names it in the attempt's error.
pub struct Balance<S> {
    inner: S,
    discover: Arc<dyn Discover>,
    balance: Arc<dyn LoadBalance>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for Balance<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Balance")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S: Clone> Clone for Balance<S> {
    fn clone(&self) -> Self {
        Balance {
            inner: self.inner.clone(),
            discover: Arc::clone(&self.discover),
            balance: Arc::clone(&self.balance),
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

impl<S> Balance<S> {
    /// Sends the attempts of `inner`'s calls to the instances `discover` finds, picked
    /// by `balance`.
    pub fn new(inner: S, discover: Arc<dyn Discover>, balance: Arc<dyn LoadBalance>) -> Self {
        Balance {
            inner,
            discover,
            balance,
        }
    }

    /// The instance for this attempt.
    fn pick(&self, cx: &ClientContext) -> Result<Address, Error> {
        let all = self.discover.instances();
        let fresh: Vec<Instance>;
        let list = if cx.avoid.is_empty() {
            &all
        } else {
            fresh = all
                .iter()
                .filter(|i| !cx.avoid.contains(&i.address))
                .cloned()
                .collect();
            // Every instance tried: the least bad choice is another try at one.
            if fresh.is_empty() { &all } else { &fresh }
        };
        let i = self
            .balance
            .pick(list, cx.hash_key)
            .ok_or_else(Error::no_instance)?;
        Ok(list[i].address.clone())
    }
}

impl<S> Service<ClientContext, ClientRequest> for Balance<S>
where
    S: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error> + Sync,
{
    type Response = ClientResponse;
    type Error = Error;

    async fn call(
        &self,
        cx: &mut ClientContext,
        req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        let addr = self.pick(cx)?;
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
        self.inner.call(cx, req).await.map_err(|e| {
            if e.instance().is_none() {
                e.with_instance(addr)
            } else {
                e
            }
        })
    }
}

/// Wraps a service in a [`Balance`].
#[derive(Clone)]
pub struct BalanceLayer {
    discover: Arc<dyn Discover>,
    balance: Arc<dyn LoadBalance>,
}

impl std::fmt::Debug for BalanceLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BalanceLayer").finish_non_exhaustive()
    }
}

impl BalanceLayer {
    /// Instances from `discover`, picked by `balance`.
    pub fn new(discover: impl Discover, balance: impl LoadBalance) -> Self {
        BalanceLayer {
            discover: Arc::new(discover),
            balance: Arc::new(balance),
        }
    }

    /// The same, from shared parts.
    pub(crate) fn from_parts(discover: Arc<dyn Discover>, balance: Arc<dyn LoadBalance>) -> Self {
        BalanceLayer { discover, balance }
    }
}

impl<S> Layer<S> for BalanceLayer {
    type Service = Balance<S>;

    fn layer(self, inner: S) -> Balance<S> {
        Balance::new(inner, self.discover, self.balance)
    }
}
