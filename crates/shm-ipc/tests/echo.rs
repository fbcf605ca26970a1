//! Echo across two processes: this test and `shm-peer`.

mod common;

use std::time::Duration;

use common::{Peer, bytes_of, payload, sock_path};
use shm_ipc::{Config, Listener, Session};

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_every_size_over_one_stream() {
    let path = sock_path("echo");
    let _peer = Peer::start("serve", &path, "echo", &[]);
    let session = Session::connect(&path, Config::default()).await.unwrap();
    let stream = session.open_stream().unwrap();
    assert_eq!(stream.id(), None, "no id before the first message");
    let sizes = [
        0,
        1,
        64,
        4 << 10,
        64 << 10,
        1 << 20,
        4 << 20,
        (4 << 20) + 12345,
    ];
    for (i, &len) in sizes.iter().enumerate() {
        let sent = payload(len, i as u64);
        stream.send(&sent[..]).await.unwrap();
        let got = tokio::time::timeout(LIMIT, stream.recv()).await.unwrap();
        let chunks = got.unwrap().expect("an echo").into_chunks();
        assert_eq!(stream.id(), Some(1));
        if len > 1 << 20 {
            assert!(chunks.len() > 1, "a {len}-byte message spans slices");
        }
        assert_eq!(chunks.concat(), sent, "echo of {len} bytes");
    }
    // Written in place, straight into shared slices (several for 2.5 MiB).
    for len in [3, (5 << 20) / 2] {
        let want = payload(len, 99);
        let mut pieces = 0;
        stream
            .send_with(len, |at, dst| {
                pieces += 1;
                dst.copy_from_slice(&want[at..at + dst.len()]);
            })
            .await
            .unwrap();
        assert_eq!(pieces > 1, len > 1 << 20);
        let got = tokio::time::timeout(LIMIT, stream.recv()).await.unwrap();
        assert_eq!(bytes_of(got.unwrap().unwrap()), want);
    }
    stream.close();
    assert!(matches!(stream.recv().await, Err(shm_ipc::Error::Closed)));
    session.close();
    assert!(!session.is_open());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_streams_at_once() {
    let path = sock_path("many");
    let _peer = Peer::start("serve", &path, "echo", &[]);
    let session = std::sync::Arc::new(Session::connect(&path, Config::default()).await.unwrap());
    let mut tasks = Vec::new();
    for s in 0..32u64 {
        let session = session.clone();
        tasks.push(tokio::spawn(async move {
            let stream = session.open_stream().unwrap();
            for m in 0..20u64 {
                let len = [7, 300, 5000, 70_000][(m % 4) as usize];
                let sent = payload(len, s * 1000 + m);
                stream.send(&sent[..]).await.unwrap();
                let msg = stream.recv().await.unwrap().unwrap();
                assert_eq!(bytes_of(msg), sent);
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(LIMIT, t).await.unwrap().unwrap();
    }
}

/// The peer connects to us; we open the streams (even ids) and it echoes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_side_opens_streams() {
    let path = sock_path("server-opens");
    let listener = Listener::bind(&path, Config::default()).unwrap();
    let mut peer = Peer::spawn("connect", &path, "echo", &[]);
    let session = listener.accept().await.unwrap();
    peer.ready();
    let a = session.open_stream().unwrap();
    let b = session.open_stream().unwrap();
    b.send(&b"second"[..]).await.unwrap();
    a.send(&b"first"[..]).await.unwrap();
    // Ids are given in the order streams first send, so the peer sees them grow.
    assert_eq!((b.id(), a.id()), (Some(2), Some(4)));
    assert_eq!(bytes_of(a.recv().await.unwrap().unwrap()), b"first");
    assert_eq!(bytes_of(b.recv().await.unwrap().unwrap()), b"second");
    drop(listener);
    assert!(!path.exists(), "the listener removes its socket file");
}

/// A clean close on one side ends the other's receivers with `None`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_close_ends_streams_with_none() {
    let path = sock_path("clean");
    let listener = Listener::bind(&path, Config::default().region_size(1 << 20)).unwrap();
    let client = tokio::spawn({
        let path = path.clone();
        async move {
            let s = Session::connect(&path, Config::default().region_size(1 << 20))
                .await
                .unwrap();
            let st = s.open_stream().unwrap();
            st.send(&b"last words"[..]).await.unwrap();
            s.close();
        }
    });
    let session = listener.accept().await.unwrap();
    let st = session.accept_stream().await.unwrap().unwrap();
    client.await.unwrap();
    assert_eq!(bytes_of(st.recv().await.unwrap().unwrap()), b"last words");
    assert!(st.recv().await.unwrap().is_none());
    assert!(session.accept_stream().await.unwrap().is_none());
    assert!(session.error().is_none());
}
