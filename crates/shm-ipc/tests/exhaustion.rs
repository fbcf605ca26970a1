//! Shared memory runs out: the socket fallback keeps each stream's order; the waiting
//! policy waits for slices, or fails with `Exhausted` at its deadline.

mod common;

use std::time::Duration;

use common::{Peer, bytes_of, payload, sock_path};
use shm_ipc::{Config, Error, Exhaustion, Session, Stream};

const LIMIT: Duration = Duration::from_secs(30);

/// Two 4 KiB slices per side.
fn tiny() -> Config {
    Config::default()
        .region_size(8 << 10)
        .size_classes([(4096, 1)])
        .queue_capacity(16)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_keeps_stream_order() {
    let path = sock_path("fallback");
    let _peer = Peer::start(
        "serve",
        &path,
        "echo",
        &["region=8192", "classes=4096:1", "queue=16"],
    );
    let session = std::sync::Arc::new(Session::connect(&path, tiny()).await.unwrap());
    let sizes = [100, 5000, 9000, 3000, 20_000, 1, 4096, 0];
    let mut tasks = Vec::new();
    for s in 0..3u64 {
        let stream = session.open_stream().unwrap();
        let rx = stream.clone();
        // Pipelined: the sender does not wait for echoes, so memory runs out.
        let sender = tokio::spawn(async move {
            for m in 0..60u64 {
                let len = sizes[(m % sizes.len() as u64) as usize];
                stream.send(&payload(len, s * 1000 + m)[..]).await.unwrap();
            }
        });
        let receiver = tokio::spawn(async move {
            for m in 0..60u64 {
                let len = sizes[(m % sizes.len() as u64) as usize];
                let got = bytes_of(rx.recv().await.unwrap().unwrap());
                assert_eq!(got, payload(len, s * 1000 + m), "stream {s} message {m}");
            }
        });
        tasks.push(sender);
        tasks.push(receiver);
    }
    for t in tasks {
        tokio::time::timeout(LIMIT, t).await.unwrap().unwrap();
    }
    let stats = session.stats();
    assert!(stats.socket_sends > 0, "{stats:?}");
    assert!(stats.shm_sends > 0, "{stats:?}");
}

/// `send_with` too: in place when it fits, over the socket when it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_with_falls_back_too() {
    let path = sock_path("fallback-with");
    let _peer = Peer::start("serve", &path, "echo", &[]);
    let session = Session::connect(&path, tiny()).await.unwrap();
    let stream = session.open_stream().unwrap();
    for (i, len) in [3000usize, 20_000, 4096].into_iter().enumerate() {
        let want = payload(len, i as u64);
        stream
            .send_with(len, |at, dst| {
                dst.copy_from_slice(&want[at..at + dst.len()])
            })
            .await
            .unwrap();
        let got = tokio::time::timeout(LIMIT, stream.recv()).await.unwrap();
        assert_eq!(bytes_of(got.unwrap().unwrap()), want);
    }
    let stats = session.stats();
    assert_eq!((stats.shm_sends, stats.socket_sends), (2, 1));
}

/// A session to a peer that holds every message until told (an empty message on the
/// control stream), with the `Wait` policy for `wait`: the session, its data and its
/// control stream.
async fn holding_peer(tag: &str, wait: Duration) -> (Peer, Session, Stream, Stream) {
    let path = sock_path(tag);
    let peer = Peer::start("serve", &path, "hold", &[]);
    let config = tiny().exhaustion(Exhaustion::Wait(wait));
    let session = Session::connect(&path, config).await.unwrap();
    let data = session.open_stream().unwrap();
    let control = session.open_stream().unwrap();
    (peer, session, data, control)
}

/// Tells the holding peer to drop what it holds, and waits for its answer.
async fn flush(control: &Stream) {
    control.send(&[][..]).await.unwrap();
    let ack = tokio::time::timeout(LIMIT, control.recv()).await.unwrap();
    assert!(ack.unwrap().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_policy_waits_then_gives_up() {
    let (_peer, session, data, control) = holding_peer("wait", Duration::from_millis(300)).await;

    // Larger than the whole region: it can never fit.
    assert!(matches!(
        data.send(&payload(9000, 0)[..]).await,
        Err(Error::Exhausted)
    ));
    // The peer holds both slices: the third message waits out its deadline.
    data.send(&payload(4096, 1)[..]).await.unwrap();
    data.send(&payload(4096, 2)[..]).await.unwrap();
    assert!(matches!(
        data.send(&payload(10, 3)[..]).await,
        Err(Error::Exhausted)
    ));
    assert_eq!(session.stats().lent, 2);
    // The peer drops them: the next send goes through.
    flush(&control).await;
    data.send(&payload(4096, 4)[..]).await.unwrap();
    data.send(&payload(4096, 5)[..]).await.unwrap();
    assert_eq!(session.stats().socket_sends, 0);

    // A send that waits is completed when the peer gives slices back: on a session
    // whose sends may wait far longer than the test can be held up before the peer
    // gives them back.
    let (_patient_peer, session, data, control) = holding_peer("wait-long", LIMIT).await;
    data.send(&payload(4096, 4)[..]).await.unwrap();
    data.send(&payload(4096, 5)[..]).await.unwrap();
    let waiting = {
        let data = data.clone();
        tokio::spawn(async move { data.send(&payload(100, 6)[..]).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "nothing was free");
    flush(&control).await;
    tokio::time::timeout(LIMIT, waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(session.stats().socket_sends, 0);
}
