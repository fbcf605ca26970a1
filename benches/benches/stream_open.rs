//! What opening a stream through the client's whole default stack costs against a
//! bare opening: the same bidirectional `bidi_echo` stream of idl/stream.thrift,
//! opened, ended from this side and read to its end, on one mux connection to
//! a server in this process on loopback.
//!
//! - `bare`: `StreamServiceStreamClient` over a `StreamClient` (one address, no stack);
//! - `default stack`: `StreamServiceClient` from the builder, every default layer on
//!   (span, metrics layer, timeout, service breaker, retry, backup, balancing with
//!   instance breakers, the attempt's span), one instance.
//!
//! Run it with `cargo bench -p benches --bench stream_open`. The `default stack` row
//! over the `bare` row is what the stack adds to a stream's opening; the issue's
//! target is at most 1.1x.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use examples::stream::{
    Request, StreamServiceClient, StreamServiceServer, StreamServiceStreamClient,
    StreamServiceStreamServer,
};
use examples::stream_service::Streams;
use volo_core::client::{ClientConfig, ClientContext, DefaultStack};
use volo_core::context::Address;
use volo_core::server::Server;
use volo_core::stream::{Metadata, StreamError};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// One stream's life, as both rows live it: a message each way, then the end.
async fn one_stream(
    s: &mut volo_core::client::ClientStream<Request, examples::stream::Response>,
    m: &Request,
) -> Result<(), StreamError> {
    s.send(m).await?;
    s.recv().await?;
    s.close_send().await?;
    while s.recv().await?.is_some() {}
    Ok(())
}

async fn bare(c: &StreamServiceStreamClient, m: &Request) {
    let mut s = c.bidi_echo().await.expect("open");
    one_stream(&mut s, m).await.expect("a stream");
}

async fn stacked(c: &StreamServiceClient<DefaultStack>, m: &Request) {
    let mut s = c
        .bidi_echo_with(&mut ClientContext::new(), Metadata::new())
        .await
        .expect("open");
    one_stream(&mut s, m).await.expect("a stream");
}

fn stream_open(crit: &mut Criterion) {
    let rt = runtime();
    let (addr, stop) = rt.block_on(async {
        let bound = Server::new(StreamServiceServer::new(Streams))
            .streams(StreamServiceStreamServer::new(Streams))
            .bind(&"127.0.0.1:0".parse().expect("an address"))
            .await
            .expect("bind");
        let addr: Address = bound.local_addr().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(bound.serve_with_shutdown(async {
            let _ = stopped.await;
        }));
        (addr, stop)
    });
    let (direct, stack) = rt.block_on(async {
        let direct = StreamServiceStreamClient::connect(addr.clone(), &ClientConfig::default())
            .expect("a client");
        let stack = StreamServiceClient::builder()
            .address(addr.clone())
            .build()
            .expect("a client");
        (direct, stack)
    });
    let m = Request {
        action: "echo".into(),
        msg: "x".repeat(1024).into(),
        count: 0,
    };
    let mut g = crit.benchmark_group("stream_open");
    g.measurement_time(Duration::from_secs(5));
    g.bench_function("bare", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let t = Instant::now();
                for _ in 0..n {
                    bare(&direct, &m).await;
                }
                t.elapsed()
            })
        })
    });
    g.bench_function("default stack", |b| {
        b.iter_custom(|n| {
            rt.block_on(async {
                let t = Instant::now();
                for _ in 0..n {
                    stacked(&stack, &m).await;
                }
                t.elapsed()
            })
        })
    });
    g.finish();
    drop((direct, stack));
    let _ = stop.send(());
}

criterion_group!(benches, stream_open);
criterion_main!(benches);
