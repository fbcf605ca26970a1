//! A scripted stand-in for the stack below the retry and backup layers, for their
//! tests: it picks an instance as the balancer would (the first one not tried yet),
//! records what each attempt saw, and answers each attempt as its script says, at
//! once, when a [`ManualClock`] reaches a time, when a [`Notify`] fires, or never.
//! Tests poll the layers' futures by hand, so nothing runs unless the test moves it.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use thrift_wire::{ApplicationException, ApplicationExceptionKind};
use tokio::sync::Notify;

use super::retry::RETRY_KEY;
use super::{ClientContext, ClientRequest, ClientResponse, Error};
use crate::clock::{Clock, ManualClock};
use crate::context::Address;
use crate::service::Service;
use crate::test_support::Text;

/// When an attempt answers.
#[derive(Debug, Clone)]
pub(crate) enum Wait {
    /// At once.
    Now,
    /// When the clock has moved this far from the attempt's start.
    For(Duration),
    /// When the `Notify` is notified.
    On(Arc<Notify>),
    /// Never (until dropped).
    Forever,
}

/// How an attempt answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    /// Connecting failed: the request never left.
    Connect,
    /// The connection failed after the request was written.
    Io,
    /// The attempt timed out (the server may have run it).
    Timeout,
    /// The server answered with an exception (not retryable).
    Application,
    /// A server shutting down refused the call unrun.
    Closing,
}

/// One attempt's script line.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub(crate) wait: Wait,
    pub(crate) outcome: Outcome,
}

pub(crate) fn now(outcome: Outcome) -> Step {
    Step {
        wait: Wait::Now,
        outcome,
    }
}

pub(crate) fn after(d: Duration, outcome: Outcome) -> Step {
    Step {
        wait: Wait::For(d),
        outcome,
    }
}

/// What one attempt saw when it started.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) attempt: u32,
    pub(crate) avoid: Vec<Address>,
    pub(crate) instance: Address,
    /// The persistent [`RETRY_KEY`] value.
    pub(crate) mark: Option<String>,
    pub(crate) started: Instant,
}

/// The scripted service; clones share the script and the records.
#[derive(Debug, Clone)]
pub(crate) struct Mock {
    state: Arc<State>,
    clock: ManualClock,
}

#[derive(Debug)]
struct State {
    instances: Vec<Address>,
    script: Mutex<VecDeque<Step>>,
    /// The answer once the script is used up.
    otherwise: Step,
    seen: Mutex<Vec<Seen>>,
    cancelled: AtomicUsize,
}

pub(crate) fn addr(i: usize) -> Address {
    format!("127.0.0.{}:9000", i + 1).parse().unwrap()
}

impl Mock {
    /// Three instances; attempts follow `script`, then answer as `otherwise`.
    pub(crate) fn new(clock: &ManualClock, script: Vec<Step>, otherwise: Step) -> Self {
        Mock {
            state: Arc::new(State {
                instances: (0..3).map(addr).collect(),
                script: Mutex::new(script.into()),
                otherwise,
                seen: Mutex::new(Vec::new()),
                cancelled: AtomicUsize::new(0),
            }),
            clock: clock.clone(),
        }
    }

    /// Adds a line at the end of the script.
    pub(crate) fn push(&self, step: Step) {
        self.state
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(step);
    }

    /// The attempts so far.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.state
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn attempts(&self) -> usize {
        self.seen().len()
    }

    /// Attempts dropped before they answered.
    pub(crate) fn cancelled(&self) -> usize {
        self.state.cancelled.load(Ordering::Relaxed)
    }
}

/// Counts the attempt as cancelled if it is dropped before it answers.
struct DropGuard<'a> {
    state: &'a State,
    answered: bool,
}

impl Drop for DropGuard<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.state.cancelled.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Service<ClientContext, ClientRequest> for Mock {
    type Response = ClientResponse;
    type Error = Error;

    async fn call(
        &self,
        cx: &mut ClientContext,
        _req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        let state = &*self.state;
        let step = state
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
            .unwrap_or_else(|| state.otherwise.clone());
        let instance = state
            .instances
            .iter()
            .find(|a| !cx.tried().contains(a))
            .unwrap_or(&state.instances[0])
            .clone();
        cx.rpc.callee.address = Some(instance.clone());
        if let Some(picks) = &cx.picks {
            picks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(instance.clone());
        }
        let started = self.clock.now();
        state
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Seen {
                attempt: cx.attempt,
                avoid: cx.tried().to_vec(),
                instance: instance.clone(),
                mark: cx.metainfo.persistent(RETRY_KEY).map(str::to_owned),
                started,
            });
        let mut guard = DropGuard {
            state,
            answered: false,
        };
        match step.wait {
            Wait::Now => {}
            Wait::For(d) => self.clock.sleep_until(started + d).await,
            Wait::On(n) => n.notified().await,
            Wait::Forever => std::future::pending::<()>().await,
        }
        guard.answered = true;
        let refused = || io::Error::from(io::ErrorKind::ConnectionRefused);
        match step.outcome {
            Outcome::Ok => Ok(ClientResponse::none()),
            Outcome::Connect => Err(Error::connect(instance, refused())),
            Outcome::Io => {
                Err(Error::io(io::ErrorKind::ConnectionReset.into()).with_instance(instance))
            }
            Outcome::Timeout => {
                Err(Error::timeout(Duration::from_millis(100)).with_instance(instance))
            }
            Outcome::Application => Err(Error::application(ApplicationException::new(
                ApplicationExceptionKind::InternalError,
                "boom",
            ))
            .with_instance(instance)),
            Outcome::Closing => {
                Err(Error::application(crate::refusal::closing()).with_instance(instance))
            }
        }
    }
}

/// A call of `method`.
pub(crate) fn request(method: &'static str) -> ClientRequest {
    ClientRequest::new(method, Text::default())
}

/// Polls `f` once: its output if it is done.
pub(crate) fn poll<F: Future + Unpin>(f: &mut F) -> Option<F::Output> {
    f.now_or_never()
}
