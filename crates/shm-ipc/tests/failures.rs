//! A peer killed with SIGKILL in the middle of a stream: the survivor sees a typed
//! error promptly, and gets its buffers back.

mod common;

use std::time::Duration;

use common::{Peer, bytes_of, payload, sock_path};
use shm_ipc::{Config, Error, Listener, Session};

/// How long the survivor may take to notice (a bound for the test, not a measurement).
const PROMPT: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_killed_mid_stream() {
    let path = sock_path("kill-server");
    let mut peer = Peer::start("serve", &path, "echo", &[]);
    let session = std::sync::Arc::new(Session::connect(&path, Config::default()).await.unwrap());

    // A stream with traffic in flight, and one with a receiver waiting on nothing.
    let busy = session.open_stream().unwrap();
    let idle = session.open_stream().unwrap();
    idle.send(&b"hello"[..]).await.unwrap();
    assert_eq!(bytes_of(idle.recv().await.unwrap().unwrap()), b"hello");
    let idle_recv = tokio::spawn(async move { idle.recv().await });
    let traffic = tokio::spawn(async move {
        let sent = payload(1 << 20, 1);
        let mut n = 0u64;
        loop {
            if let Err(e) = busy.send(&sent[..]).await {
                return (n, e);
            }
            match busy.recv().await {
                Ok(Some(m)) => assert_eq!(bytes_of(m), sent),
                Ok(None) => panic!("the stream ended cleanly"),
                Err(e) => return (n, e),
            }
            n += 1;
        }
    });
    // Let some round trips happen, then kill the peer while messages are in flight.
    while session.stats().shm_sends < 5 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    peer.kill();

    let (n, e) = tokio::time::timeout(PROMPT, traffic)
        .await
        .unwrap()
        .unwrap();
    assert!(n >= 3);
    assert!(matches!(e, Error::PeerClosed), "{e:?}");
    let e = tokio::time::timeout(PROMPT, idle_recv)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert!(matches!(e, Error::PeerClosed), "{e:?}");
    assert!(!session.is_open());
    assert!(matches!(session.error(), Some(Error::PeerClosed)));
    // Whatever the dead peer held of ours is ours again.
    assert_eq!(session.stats().lent, 0);
    assert!(session.open_stream().is_err());
    let e = std::io::Error::from(e);
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_killed_mid_stream() {
    let path = sock_path("kill-client");
    let listener = Listener::bind(&path, Config::default()).unwrap();
    let mut peer = Peer::spawn("connect", &path, "flood", &[]);
    let session = listener.accept().await.unwrap();
    peer.ready();
    let stream = session.accept_stream().await.unwrap().unwrap();

    // Keep a few of its messages: they stay readable after it dies.
    let mut kept = Vec::new();
    for _ in 0..4 {
        kept.push(stream.recv().await.unwrap().unwrap());
    }
    assert!(session.stats().held >= 4);
    peer.kill();

    let drained = tokio::time::timeout(PROMPT, async {
        loop {
            match stream.recv().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("a killed peer does not close cleanly"),
                Err(e) => return e,
            }
        }
    })
    .await
    .unwrap();
    assert!(matches!(drained, Error::PeerClosed), "{drained:?}");
    assert!(session.accept_stream().await.is_err());
    for m in kept {
        assert_eq!(m.len(), 64 << 10);
        assert!(bytes_of(m).iter().all(|&b| b == 0x5a));
    }
    assert_eq!(session.stats().held, 0);
}
