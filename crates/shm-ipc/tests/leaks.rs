//! Thousands of sessions leave no descriptor, mapping or file behind. In a test binary
//! of its own, so no other test opens or maps anything while it counts.

mod common;

use std::path::Path;
use std::time::Duration;

use bytes::Buf;
use common::{Peer, sock_path};
use shm_ipc::{Config, Error, Listener, Session};

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn maps() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count()
}

fn dev_shm() -> usize {
    std::fs::read_dir("/dev/shm").map_or(0, |d| d.count())
}

fn config() -> Config {
    Config::default()
        .region_size(64 << 10)
        .size_classes([(256, 1), (4096, 1)])
        .queue_capacity(16)
}

/// Connect, open a stream each way, exchange a message, close.
async fn one_session(listener: &Listener, path: &Path, i: usize) {
    let (client, server) = tokio::join!(Session::connect(path, config()), listener.accept());
    let (client, server) = (client.unwrap(), server.unwrap());
    let a = client.open_stream().unwrap();
    a.send(&b"ping"[..]).await.unwrap();
    let b = server.accept_stream().await.unwrap().unwrap();
    let mut m = b.recv().await.unwrap().unwrap();
    assert_eq!(m.copy_to_bytes(4), &b"ping"[..]);
    b.send(m).await.unwrap();
    assert!(a.recv().await.unwrap().unwrap().is_empty());
    // Half the time the client ends it, half the time the server.
    if i.is_multiple_of(2) {
        client.close();
    } else {
        server.close();
    }
}

/// A session whose peer process is killed while a message is in flight.
async fn killed_peer(peer_serves: bool) {
    let path = sock_path("leak-kill");
    let (mut peer, session) = if peer_serves {
        let peer = Peer::start("serve", &path, "echo", &["region=65536", "queue=16"]);
        (peer, Session::connect(&path, config()).await.unwrap())
    } else {
        let listener = Listener::bind(&path, config()).unwrap();
        let mut peer = Peer::spawn("connect", &path, "echo", &["region=65536", "queue=16"]);
        let session = listener.accept().await.unwrap();
        peer.ready();
        (peer, session)
    };
    let st = session.open_stream().unwrap();
    st.send(&[7u8; 3000][..]).await.unwrap();
    assert_eq!(st.recv().await.unwrap().unwrap().len(), 3000);
    st.send(&[7u8; 3000][..]).await.unwrap();
    peer.kill();
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match st.recv().await {
                Ok(Some(_)) => continue,
                other => return other,
            }
        }
    });
    assert!(matches!(end.await.unwrap(), Err(Error::PeerClosed)));
    assert_eq!(session.stats().lent, 0);
}

#[test]
fn thousands_of_sessions_leak_nothing() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let path = std::env::temp_dir().join(format!("shm-ipc-leaks-{}", std::process::id()));
        let listener = Listener::bind(&path, config()).unwrap();
        // Warm up: the runtime's own descriptors and mappings exist from here on.
        one_session(&listener, &path, 0).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        let (fds0, maps0, shm0) = (fds(), maps(), dev_shm());
        for i in 0..2000 {
            one_session(&listener, &path, i).await;
        }
        // Peers killed with SIGKILL mid-stream, each side in turn.
        for i in 0..10 {
            killed_peer(i % 2 == 0).await;
        }
        // Aborted reader tasks are dropped by the runtime on its next turns.
        let mut settled = false;
        for _ in 0..200 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if fds() <= fds0 && maps() <= maps0 {
                settled = true;
                break;
            }
        }
        assert!(
            settled,
            "fds {} -> {}, maps {} -> {}",
            fds0,
            fds(),
            maps0,
            maps()
        );
        assert_eq!(dev_shm(), shm0, "nothing in /dev/shm");
        drop(listener);
        assert!(!path.exists());
    });
}
