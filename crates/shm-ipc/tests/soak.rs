//! Soak: many streams of mixed sizes against a peer process with a small region, so
//! shared memory and the socket fallback alternate all the time; every echo checked.
//! Ignored by default: `cargo test -p shm-ipc --test soak -- --ignored`
//! (`SHM_SOAK_SECS`, default 30).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Peer, bytes_of, payload, sock_path};
use shm_ipc::{Config, Session};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "soak: run on purpose"]
async fn mixed_traffic_for_a_while() {
    let secs = std::env::var("SHM_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let until = Instant::now() + Duration::from_secs(secs);
    let path = sock_path("soak");
    let _peer = Peer::start("serve", &path, "echo", &["region=1048576", "queue=64"]);
    let config = Config::default().region_size(1 << 20).queue_capacity(64);
    let session = Arc::new(Session::connect(&path, config).await.unwrap());
    let mut tasks = Vec::new();
    for s in 0..16u64 {
        let session = session.clone();
        tasks.push(tokio::spawn(async move {
            let mut m = 0u64;
            while Instant::now() < until {
                // A new stream now and then: opening and closing are part of the soak.
                let stream = session.open_stream().unwrap();
                for _ in 0..50 {
                    let len = [0, 1, 200, 3000, 70_000, 300_000, 1_500_000][(m % 7) as usize];
                    let want = payload(len, s << 32 | m);
                    // Pipelined by two: memory runs out on both sides.
                    stream.send(&want[..]).await.unwrap();
                    stream.send(&want[..]).await.unwrap();
                    for _ in 0..2 {
                        assert_eq!(bytes_of(stream.recv().await.unwrap().unwrap()), want);
                    }
                    m += 1;
                }
                stream.close();
            }
            m
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    let stats = session.stats();
    assert!(
        total > 0 && stats.socket_sends > 0 && stats.shm_sends > 0,
        "{stats:?}"
    );
    assert!(session.is_open());
}
