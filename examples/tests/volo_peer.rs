//! Our client against Volo's mux server (`volo_peer::serve_mux`), the `volo-mux`
//! server of `rpc-bench --server-only --mux`: calls made together on one mux
//! connection each get their own answer, matched by TTHeader sequence id. Loopback
//! only, bounded in time.

use std::time::Duration;

use examples::echo::{EchoServiceClient, Request};
use thrift_wire::Utf8Bytes;
use volo_core::client::{ClientConfig, ConnectionPool, WireFormat};
use volo_core::codec::{Framing, Protocol};
use volo_core::context::Address;

#[test]
fn our_mux_calls_each_get_their_answer_from_volos_mux_server() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let server = volo_peer::serve_mux("127.0.0.1:0".parse().unwrap())
            .await
            .expect("bind 127.0.0.1:0");
        let config = ClientConfig {
            format: WireFormat {
                framing: Framing::TTHeader,
                ttheader_framed: true,
                protocol: Protocol::Binary,
                ..Default::default()
            },
            pool: ConnectionPool {
                mux: true,
                mux_per_instance: 1,
                ..Default::default()
            },
            ..ClientConfig::default()
        };
        let client = EchoServiceClient::builder()
            .address(Address::Tcp(server.local_addr()))
            .config(config)
            .build()
            .expect("client");
        let calls: Vec<_> = (0..200)
            .map(|i| {
                let client = client.clone();
                tokio::spawn(async move {
                    let msg = format!("call {i} {}", "x".repeat(i * 7));
                    let r = client
                        .echo(Request {
                            action: Utf8Bytes::from(format!("echo {i}")),
                            msg: Utf8Bytes::from(msg.clone()),
                        })
                        .await
                        .unwrap_or_else(|e| panic!("call {i}: {e}"));
                    assert_eq!(r.action.as_str(), format!("echo {i}"));
                    assert_eq!(r.msg.as_str(), msg, "call {i} got another call's answer");
                })
            })
            .collect();
        for call in calls {
            tokio::time::timeout(Duration::from_secs(30), call)
                .await
                .expect("a call ended in time")
                .unwrap();
        }
        drop(client);
        let _ = tokio::time::timeout(Duration::from_secs(30), server.stop()).await;
    });
}
