//! What each layer of the client stack costs per call, without a network: the same
//! `echo` call through the generated client over a mock transport (it answers every
//! attempt with one prebuilt reply), with no layer, with each governance layer alone,
//! and with the whole default stack (also following a governance with rules for `echo`).
//!
//! Run it with `cargo bench -p benches --bench client_stack`. A row's time less the
//! `bare` row's is that layer's cost per call; the `default stack` row less `bare` is
//! what the builder's stack adds to every call, to set against an RPC's round trip
//! (`rpc-bench` measures that stack end to end).
//!
//! The `balancer_pick` group times one balancer's pick alone, for a hashed key, over
//! a list of three remote and two local instances: the consistent-hash ring, and the
//! same ring inside a local-first split of 50% (each side is a list of its own).

use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use examples::echo::{EchoServiceClient, EchoServiceEchoResult, Request, Response};
use thrift_wire::{Binary, Codec, LinkBuffer, MessageHeader, MessageType, Utf8Bytes};
use volo_core::client::{
    BackupDelay, BackupLayer, BackupPolicy, BalanceLayer, BreakerConfig, Client, ClientContext,
    ClientRequest, ClientResponse, ConsistentHash, Error, Instance, InstanceBreakers, InstanceList,
    LoadBalance, LocalFirst, RetryLayer, RetryPolicy, ServiceBreakerLayer, StaticDiscover,
    TimeoutLayer, WeightedRandom,
};
use volo_core::codec::Protocol;
use volo_core::context::Address;
use volo_core::governance::{BreakerRule, ClientGovernance, MethodRules, RetryRule, TimeoutRule};
use volo_core::service::{Layer, Service};

/// Answers every attempt with the same reply, as a transport with an instant server
/// would, after giving way once (`Pending`, then woken at once): a real transport waits
/// for the network, so the layers above it see a call that is not done on its first
/// poll (a timeout's timer gets registered, for one).
#[derive(Clone)]
struct Mock {
    reply: Bytes,
}

impl Service<ClientContext, ClientRequest> for Mock {
    type Response = ClientResponse;
    type Error = Error;

    async fn call(
        &self,
        _cx: &mut ClientContext,
        req: ClientRequest,
    ) -> Result<ClientResponse, Error> {
        tokio::task::yield_now().await;
        ClientResponse::from_reply(
            self.reply.clone(),
            Protocol::Binary,
            req.method(),
            0,
            1 << 20,
        )
    }
}

fn mock() -> Mock {
    let result = EchoServiceEchoResult {
        success: Some(Response {
            action: Utf8Bytes::from_static("echo"),
            msg: Utf8Bytes::from("x".repeat(1024)),
        }),
    };
    let header = MessageHeader {
        name: Utf8Bytes::from_static("echo"),
        ty: MessageType::Reply,
        seq_id: 0,
    };
    let mut buf = LinkBuffer::new();
    let n = Codec::<Binary>::new()
        .encode_message(&header, &result, &mut buf)
        .expect("encodes");
    Mock { reply: buf.next(n) }
}

fn instances() -> StaticDiscover {
    StaticDiscover::new((1..=3).map(|p| Instance::new(Address::Tcp(([127, 0, 0, 1], p).into()))))
}

/// Times `iters` calls through `client`.
fn run<T>(rt: &tokio::runtime::Runtime, client: &EchoServiceClient<T>, iters: u64) -> Duration
where
    T: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error>,
{
    let req = Request {
        action: Utf8Bytes::from_static("echo"),
        msg: Utf8Bytes::from("x".repeat(1024)),
    };
    rt.block_on(async {
        let start = Instant::now();
        for _ in 0..iters {
            let r = client.echo(req.clone()).await.expect("answered");
            std::hint::black_box(r);
        }
        start.elapsed()
    })
}

fn typed<T>(stack: T) -> EchoServiceClient<T> {
    EchoServiceClient::new(Client::new("EchoService", stack))
}

fn layers(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let mut g = c.benchmark_group("client_stack");
    g.measurement_time(Duration::from_secs(3));

    // The mock alone needs an address in the context, as the balancer would put there.
    let bare = typed(Addressed { inner: mock() });
    g.bench_function("bare", |b| b.iter_custom(|n| run(&rt, &bare, n)));

    let balance = typed(BalanceLayer::new(instances(), WeightedRandom::with_seed(1)).layer(mock()));
    g.bench_function("balance", |b| b.iter_custom(|n| run(&rt, &balance, n)));

    let breakers = typed(
        BalanceLayer::new(instances(), WeightedRandom::with_seed(1))
            .with_breakers(InstanceBreakers::new(BreakerConfig::instance()))
            .layer(mock()),
    );
    g.bench_function("balance + instance breakers", |b| {
        b.iter_custom(|n| run(&rt, &breakers, n))
    });

    let service_breaker = typed(
        ServiceBreakerLayer::new(BreakerConfig::service()).layer(Addressed { inner: mock() }),
    );
    g.bench_function("service breaker", |b| {
        b.iter_custom(|n| run(&rt, &service_breaker, n))
    });

    let timeout =
        typed(TimeoutLayer::new(Some(Duration::from_secs(10))).layer(Addressed { inner: mock() }));
    g.bench_function("timeout", |b| b.iter_custom(|n| run(&rt, &timeout, n)));

    let retry = typed(
        RetryLayer::new(RetryPolicy::default().idempotent(["echo"]))
            .layer(Addressed { inner: mock() }),
    );
    g.bench_function("retry", |b| b.iter_custom(|n| run(&rt, &retry, n)));

    // Backups on for `echo`, with a delay no call reaches: the cost of arming one.
    let backup = typed(
        BackupLayer::new(
            BackupPolicy::new(BackupDelay::Fixed(Duration::from_secs(1))).idempotent(["echo"]),
        )
        .layer(Addressed { inner: mock() }),
    );
    g.bench_function("backup", |b| b.iter_custom(|n| run(&rt, &backup, n)));

    let default = rt.block_on(async {
        EchoServiceClient::builder()
            .discover(instances())
            .build_on(mock())
            .expect("a client")
    });
    g.bench_function("default stack", |b| {
        b.iter_custom(|n| run(&rt, &default, n))
    });

    // The same stack following a governance with a rule of each kind for `echo` (and
    // a breaker rule for the rest): what reading rules on each call costs.
    let governance = ClientGovernance::new("EchoService");
    governance.set_timeouts(MethodRules::new().method(
        "echo",
        TimeoutRule {
            rpc: Some(Duration::from_secs(10)),
            connect: None,
        },
    ));
    governance.set_retry(MethodRules::new().method(
        "echo",
        RetryRule::Failure {
            max_retries: 2,
            max_duration: None,
            backoff: None,
            chain_stop: true,
        },
    ));
    governance.set_breaker(MethodRules::new().any(BreakerRule {
        enabled: true,
        error_rate: 0.5,
        min_samples: 200,
    }));
    let governed = rt.block_on(async {
        EchoServiceClient::builder()
            .discover(instances())
            .governance(governance)
            .build_on(mock())
            .expect("a client")
    });
    g.bench_function("default stack, governed", |b| {
        b.iter_custom(|n| run(&rt, &governed, n))
    });
    g.finish();
}

/// Puts a fixed instance in the context, for stacks without a balancer.
#[derive(Clone)]
struct Addressed<S> {
    inner: S,
}

impl<S> Service<ClientContext, ClientRequest> for Addressed<S>
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
        cx.rpc.callee.address = Some(Address::Tcp(([127, 0, 0, 1], 1).into()));
        self.inner.call(cx, req).await
    }
}

fn picks(c: &mut Criterion) {
    let mut list: Vec<Instance> = (1..=3)
        .map(|p| Instance::new(Address::Tcp(([127, 0, 0, 1], p).into())))
        .collect();
    for name in ["/tmp/a.sock", "/tmp/b.sock"] {
        list.push(Instance::new(Address::Unix(
            std::path::Path::new(name).into(),
        )));
    }
    let list = InstanceList::new(list);
    let mut g = c.benchmark_group("balancer_pick");
    g.measurement_time(Duration::from_secs(3));
    let mut key = 0u64;
    let ring = ConsistentHash::default();
    g.bench_function("consistent hash", |b| {
        b.iter(|| {
            key = key.wrapping_add(1);
            ring.pick(&list, Some(key))
        })
    });
    let split = LocalFirst::with_share(ConsistentHash::default(), 0.5);
    g.bench_function("local first 50% over consistent hash", |b| {
        b.iter(|| {
            key = key.wrapping_add(1);
            split.pick(&list, Some(key))
        })
    });
    g.finish();
}

criterion_group!(benches, layers, picks);
criterion_main!(benches);
