//! Calls ready at the same moment on a mux connection go out in one write:
//! each caller leaves its request in the output, and the connection's flusher, which
//! yields first, sends them together. A call alone on its connection (no other waits
//! for a reply) has nobody to share a write with and sends its own at once. A test
//! binary of its own: it counts the process's socket writes
//! (`netpoll_rs::io_counts`), which no other test may add to.

use std::time::Duration;

use thrift_wire::fixtures::echo::Request as Text;
use volo_core::client::{Client, ClientConfig, ClientContext, ConnectionPool};
use volo_core::context::Address;

fn text(t: &str) -> Text {
    Text {
        action: "echo".into(),
        msg: t.to_string().into(),
    }
}

/// Whole frames (a 4-byte length first) at the start of `buf`: how many, and their
/// bytes.
fn frames(buf: &[u8]) -> (usize, usize) {
    let (mut at, mut n) = (0, 0);
    while buf.len() >= at + 4 {
        let len = u32::from_be_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
        if buf.len() < at + 4 + len {
            break;
        }
        at += 4 + len;
        n += 1;
    }
    (n, at)
}

/// On a current-thread runtime the 50 callers all run before the flusher does: the
/// first, alone on the connection, sends its request at once; the other 49 leave
/// theirs in one write (and all reach a server that reads them). Each caller flushing
/// its own request would make 50; no caller sending its own, 1.
#[test]
fn mux_calls_ready_together_share_one_write() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (warmed, warm) = tokio::sync::oneshot::channel();
        // Reads the oneway call that opens the connection, then 50 requests, and
        // hangs up without answering.
        let server = tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = vec![0u8; 1 << 16];
            let mut warmed = Some(warmed);
            let mut seen = 0;
            while seen < 51 {
                let n = s.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the client hung up");
                buf.extend_from_slice(&chunk[..n]);
                let (got, used) = frames(&buf);
                buf.drain(..used);
                seen += got;
                if seen >= 1
                    && let Some(w) = warmed.take()
                {
                    w.send(()).unwrap();
                }
            }
        });
        let config = ClientConfig {
            pool: ConnectionPool {
                mux: true,
                mux_per_instance: 1,
                ..Default::default()
            },
            ..ClientConfig::default()
        };
        let client = Client::builder("Test")
            .address(Address::Tcp(addr))
            .config(config)
            .build()
            .unwrap();
        // A oneway call flushes itself: it opens the connection.
        client
            .oneway(&mut ClientContext::new(), "note", text("open"))
            .await
            .unwrap();
        warm.await.unwrap();
        let before = netpoll_rs::io_counts().writes;
        let calls: Vec<_> = (0..50)
            .map(|i| {
                let client = client.clone();
                tokio::spawn(async move {
                    client
                        .call::<Text, Text>(&mut ClientContext::new(), "echo", text(&i.to_string()))
                        .await
                })
            })
            .collect();
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the server read the 50 requests")
            .unwrap();
        let writes = netpoll_rs::io_counts().writes - before;
        // The first call found the connection without calls waiting and sent its own
        // request; the 49 behind it, each with calls waiting, share the flusher's write.
        assert_eq!(writes, 2, "50 requests ready together took {writes} writes");
        // The server hung up without answering: every call fails, none hangs.
        for call in calls {
            let ended = tokio::time::timeout(Duration::from_secs(10), call).await;
            assert!(ended.expect("the call ended").unwrap().is_err());
        }
    });
}
