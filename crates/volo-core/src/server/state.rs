//! What every connection of a server shares ([`ServerState`]): the call stack, the
//! services, the config, and the input budget all connections draw on. Its own file
//! so that the connection core and the calls it starts both read it without reading
//! each other.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::ServerConfig;
use super::multiplex::Services;
use super::stack::{Builtins, compose};
use crate::governance::ServerGovernance;
use crate::metrics::ServerConns;

/// What every connection of a server shares.
pub(crate) struct ServerState<D> {
    /// The stack of each call: the built-in layers around the server's own
    /// ([`compose`](super::stack::compose)).
    pub(crate) stack: Arc<Builtins<D>>,
    /// What the IDL says of the service, or of each service of a multiplexed server.
    pub(crate) services: Services,
    pub(crate) config: ServerConfig,
    /// The bytes of frames being read or handled, across connections, against
    /// `config.capacity.max_buffered_input`.
    pub(crate) input_budget: Arc<InputBudget>,
    /// The calls counted for the access log's sampling.
    pub(crate) access: super::trace::AccessCount,
    /// `config.observability.metrics`' per-connection counters, when on.
    pub(crate) counters: Option<ServerConns>,
    /// The handler of streaming connections, if the server serves streams.
    pub(crate) streams: Option<super::Serving>,
    /// The limits set from outside, when the server follows a governance.
    pub(crate) governance: Option<ServerGovernance>,
}

impl<D> ServerState<D> {
    /// What the connections of a server running `dispatch` with `config` share.
    pub(crate) fn new(
        dispatch: D,
        services: Services,
        config: ServerConfig,
        (limit, governance): (super::LimitConfig, Option<ServerGovernance>),
    ) -> Self {
        let counters = config
            .observability
            .metrics
            .as_ref()
            .map(|m| m.server_conns().clone());
        ServerState {
            stack: Arc::new(compose(
                dispatch,
                &config,
                (limit, governance.clone()),
                counters.clone(),
            )),
            governance,
            counters,
            services,
            input_budget: InputBudget::new(config.capacity.max_buffered_input),
            access: super::trace::AccessCount::default(),
            config,
            streams: None,
        }
    }
}

/// The bytes all connections may hold in frames being read or handled, counted in KiB
/// (a frame takes its length rounded up).
#[derive(Debug)]
pub(crate) struct InputBudget {
    left: AtomicUsize,
}

impl InputBudget {
    /// A budget of `max_buffered_input` bytes.
    pub(crate) fn new(max_buffered_input: usize) -> Arc<Self> {
        Arc::new(InputBudget {
            left: AtomicUsize::new(max_buffered_input.div_ceil(1024)),
        })
    }

    /// Takes `units` KiB, or nothing when fewer are left.
    pub(super) fn try_take(self: &Arc<Self>, units: usize) -> Option<Held> {
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(units)
            })
            .ok()?;
        Some(Held {
            budget: Arc::clone(self),
            units,
        })
    }
}

/// KiB of an [`InputBudget`], given back when dropped.
#[derive(Debug)]
pub(crate) struct Held {
    budget: Arc<InputBudget>,
    /// The KiB held.
    pub(super) units: usize,
}

impl Held {
    /// Adds `more`'s share to this one.
    pub(super) fn merge(&mut self, mut more: Held) {
        self.units += std::mem::take(&mut more.units);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.units > 0 {
            self.budget.left.fetch_add(self.units, Ordering::AcqRel);
        }
    }
}
