//! Host names: resolved on connect and bind, on both transports.

use std::time::Duration;

use super::{ResolveError, TransportKind};
use crate::client::{Client, ClientConfig, ClientContext, ErrorKind};
use crate::config::TransportConfig;
use crate::context::Address;
use crate::server::ServerConfig;
use crate::test_support::*;

fn client(addr: Address, transport: TransportKind) -> Client {
    let config = ClientConfig {
        transport: TransportConfig {
            kind: transport,
            ..Default::default()
        },
        ..ClientConfig::default()
    };
    Client::builder("Test")
        .address(addr)
        .config(config)
        .build()
        .unwrap()
}

/// `localhost:<port>` reaches a server on 127.0.0.1 from both client transports, and
/// a server of either transport binds `localhost:0`.
#[test]
fn localhost_is_resolved_by_clients_and_servers_of_both_transports() {
    run_bounded(Duration::from_secs(60), async {
        for server_kind in [TransportKind::Netpoll, TransportKind::Tokio] {
            let config = ServerConfig {
                transport: TransportConfig {
                    kind: server_kind,
                    ..Default::default()
                },
                ..ServerConfig::default()
            };
            let at: Address = "localhost:0".parse().unwrap();
            let server = start_on(config, &at).await;
            let Address::Tcp(bound) = server.address else {
                panic!("bound to {}", server.address)
            };
            assert!(bound.ip().is_loopback(), "{bound}");
            for client_kind in [TransportKind::Netpoll, TransportKind::Tokio] {
                let at: Address = format!("localhost:{}", bound.port()).parse().unwrap();
                let c = client(at.clone(), client_kind);
                let got = c
                    .call::<Text, Text>(&mut ClientContext::new(), "echo", text(1, "by name"))
                    .await
                    .unwrap_or_else(|e| panic!("{client_kind:?} to {at}: {e}"));
                assert_eq!(got, text(0, "by name"));
            }
            server.stop().await;
        }
    });
}

/// A `.invalid` name (RFC 2606: never resolves, and asks no network) fails a call with
/// a connect error naming the instance, caused by a [`ResolveError`]; and a bind.
#[test]
fn a_name_that_does_not_resolve_is_a_typed_error() {
    run_bounded(Duration::from_secs(60), async {
        let at: Address = "no-such-host.invalid:9".parse().unwrap();
        for kind in [TransportKind::Netpoll, TransportKind::Tokio] {
            let e = client(at.clone(), kind)
                .call::<Text, Text>(&mut ClientContext::new(), "echo", text(1, "x"))
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Connect, "{kind:?}: {e:?}");
            assert_eq!(e.instance(), Some(&at));
            let io = std::error::Error::source(&e)
                .and_then(|s| s.downcast_ref::<std::io::Error>())
                .unwrap_or_else(|| panic!("{kind:?}: {e:?}"));
            assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
            let resolve = io
                .get_ref()
                .and_then(|s| s.downcast_ref::<ResolveError>())
                .unwrap_or_else(|| panic!("{kind:?}: {io:?}"));
            assert_eq!(
                (resolve.name(), resolve.port()),
                ("no-such-host.invalid", 9)
            );

            let config = ServerConfig {
                transport: TransportConfig {
                    kind,
                    ..Default::default()
                },
                ..ServerConfig::default()
            };
            let Err(e) = crate::server::Server::new(TestService::default())
                .config(config)
                .bind(&at)
                .await
            else {
                panic!("{kind:?}: bound to {at}");
            };
            assert!(
                e.get_ref().is_some_and(|s| s.is::<ResolveError>()),
                "{kind:?}: {e:?}"
            );
        }
    });
}

/// A name's addresses are tried in turn: the first refuses, the second is connected
/// to; when all refuse, the last refusal is the error.
#[test]
fn each_address_is_tried_in_turn() {
    run_bounded(Duration::from_secs(60), async {
        let live = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let reactor = netpoll_rs::Reactor::on_runtime(
            &tokio::runtime::Handle::current(),
            netpoll_rs::Config::default(),
        )
        .unwrap();
        for kind in [TransportKind::Netpoll, TransportKind::Tokio] {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            let addrs = vec![dead, live.local_addr().unwrap()];
            let conn = super::connect_tcp(kind, addrs, Some(&reactor), deadline)
                .await
                .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            assert_eq!(
                crate::transport::FrameIo::peer(&conn),
                Some(Address::Tcp(live.local_addr().unwrap())),
                "{kind:?}"
            );
            let Err(e) = super::connect_tcp(kind, vec![dead, dead], Some(&reactor), deadline).await
            else {
                panic!("{kind:?}: connected to a closed port");
            };
            assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{kind:?}");
        }
        reactor.shutdown();
    });
}
