//! A client bound to a service of a multiplexed server: what it writes (against a fake
//! server that records each request and answers under the name it is told), and calls
//! through this crate's multiplexed server.

use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use thrift_wire::{Binary, Codec, Decoder, LinkBuffer, Message, MessageHeader, MessageType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::client::{ClientTimeouts, WireFormat};
use crate::codec::ttheader::{Header, HeaderLimits, str_key};
use crate::server::{Multiplex, Server};

/// One request as the fake server read it.
#[derive(Debug, Clone)]
struct Seen {
    name: String,
    ty: MessageType,
    /// TTHeader's `isn`, and its `TO_METHOD`.
    isn: Option<String>,
    to_method: Option<String>,
    /// Every int key of its TTHeader, in order (not compared by `==`: the routing
    /// tests compare the fields above, one test the keys).
    ints: Vec<(u16, String)>,
}

impl PartialEq for Seen {
    fn eq(&self, other: &Seen) -> bool {
        (&self.name, self.ty, &self.isn, &self.to_method)
            == (&other.name, other.ty, &other.isn, &other.to_method)
    }
}

/// A server that records every request and answers each call with a reply whose
/// message name is the call's text argument (so a test picks the name it gets back),
/// framed as `framing` (Framed or TTHeader), in Binary.
async fn fake_server(framing: Framing) -> (Address, Arc<Mutex<Vec<Seen>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = Address::Tcp(listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let record = Arc::clone(&record);
            tokio::spawn(async move {
                loop {
                    let mut len = [0u8; 4];
                    if sock.read_exact(&mut len).await.is_err() {
                        return;
                    }
                    let mut frame = len.to_vec();
                    frame.resize(4 + u32::from_be_bytes(len) as usize, 0);
                    sock.read_exact(&mut frame[4..]).await.unwrap();
                    let frame = Bytes::from(frame);
                    let (tt, msg) = match framing {
                        Framing::TTHeader => {
                            let (h, payload) =
                                Header::decode(&frame, &HeaderLimits::default()).unwrap();
                            (Some(h), payload)
                        }
                        _ => (None, frame.slice(4..)),
                    };
                    let mut d = Codec::<Binary>::new().decoder(msg).unwrap();
                    let header = d.read_message_begin().unwrap();
                    let args = Text::decode(&mut d).unwrap();
                    record.lock().unwrap().push(Seen {
                        name: header.name.as_str().to_string(),
                        ty: header.ty,
                        isn: tt
                            .as_ref()
                            .and_then(|h| h.str_value(str_key::IDL_SERVICE_NAME))
                            .map(str::to_string),
                        to_method: tt
                            .as_ref()
                            .and_then(|h| h.int_value(crate::codec::ttheader::int_key::TO_METHOD))
                            .map(str::to_string),
                        ints: tt
                            .iter()
                            .flat_map(|h| h.int_kv.iter())
                            .map(|(k, v)| (k, v.to_string()))
                            .collect(),
                    });
                    if header.ty == MessageType::Oneway {
                        continue;
                    }
                    let reply = MessageHeader {
                        name: args.text.clone().unwrap_or_default(),
                        ty: MessageType::Reply,
                        seq_id: header.seq_id,
                    };
                    let mut buf = LinkBuffer::new();
                    let n = Codec::<Binary>::new()
                        .encode_message(&reply, &text(0, "answer"), &mut buf)
                        .unwrap();
                    let body = buf.next(n);
                    let mut out = BytesMut::new();
                    match framing {
                        Framing::TTHeader => Header::new(header.seq_id, Protocol::Binary)
                            .write(body.len(), &mut out)
                            .unwrap(),
                        _ => out.put_u32(body.len() as u32),
                    }
                    out.put_slice(&body);
                    if sock.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

fn client_of(addr: Address, framing: Framing, bound: Option<&'static str>) -> Client {
    let builder = Client::builder("Calculator")
        .address(addr)
        .config(ClientConfig {
            format: WireFormat {
                framing,
                ..Default::default()
            },
            ..ClientConfig::default()
        });
    match bound {
        Some(name) => builder.multiplexed_service(name).build().unwrap(),
        None => builder.build().unwrap(),
    }
}

/// Calls `echo`, asking the fake server to answer under `reply_name`.
async fn echo_answered_as(client: &Client, reply_name: &str) -> Result<Text, Error> {
    let mut cx = ClientContext::new();
    client
        .call::<Text, Text>(&mut cx, "echo", text(1, reply_name))
        .await
}

fn seen(name: &str, ty: MessageType, isn: Option<&str>, to_method: Option<&str>) -> Seen {
    Seen {
        name: name.into(),
        ty,
        isn: isn.map(Into::into),
        ints: Vec::new(),
        to_method: to_method.map(Into::into),
    }
}

#[test]
fn a_bound_client_sends_prefixed_names_and_takes_the_bare_one_back() {
    runtime().block_on(async {
        let (addr, requests) = fake_server(Framing::Framed).await;
        let client = client_of(addr, Framing::Framed, Some("Calc"));
        assert_eq!(client.multiplexed_service(), Some("Calc"));
        let mut cx = ClientContext::new();
        // Apache's multiplexed servers answer under the bare name; the prefixed one is
        // accepted too.
        for reply_name in ["echo", "Calc:echo", "echo"] {
            let got = echo_answered_as(&client, reply_name).await;
            assert_eq!(
                got.unwrap(),
                text(0, "answer"),
                "a reply named {reply_name}"
            );
        }
        client
            .oneway(&mut cx, "notify", text(1, "-"))
            .await
            .unwrap();
        // A reply under any other name is not this call's.
        for wrong in ["add", "Other:echo", "Calc:add", "calc:echo"] {
            let e = echo_answered_as(&client, wrong).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Protocol, "{wrong}: {e}");
            assert!(
                e.to_string()
                    .contains(&format!("the reply is for {wrong}, the call was Calc:echo")),
                "{e}"
            );
        }
        let call = |name| seen(name, MessageType::Call, None, None);
        let mut want = vec![call("Calc:echo"); 3];
        want.push(seen("Calc:notify", MessageType::Oneway, None, None));
        want.extend(vec![call("Calc:echo"); 4]);
        assert_eq!(*requests.lock().unwrap(), want);
        // A clone shares the binding; the context names the bare method.
        assert_eq!(client.clone().multiplexed_service(), Some("Calc"));
        assert_eq!(cx.rpc.method.as_str(), "notify");
    });
}

/// With TTHeader a client names the callee's IDL service in `isn` (as Kitex's does),
/// and keeps the bare method in `TO_METHOD`; a bound one prefixes the message's name,
/// an unbound one does not, and rejects a reply under a prefixed name.
#[test]
fn over_ttheader_a_bound_client_sends_the_isn_key() {
    runtime().block_on(async {
        let (addr, requests) = fake_server(Framing::TTHeader).await;
        let bound = client_of(addr.clone(), Framing::TTHeader, Some("Calc"));
        echo_answered_as(&bound, "echo").await.unwrap();
        let plain = client_of(addr, Framing::TTHeader, None);
        assert_eq!(plain.multiplexed_service(), None);
        echo_answered_as(&plain, "echo").await.unwrap();
        let e = echo_answered_as(&plain, "Calc:echo").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Protocol, "{e}");
        assert_eq!(
            *requests.lock().unwrap(),
            [
                seen(
                    "Calc:echo",
                    MessageType::Call,
                    Some("Calculator"),
                    Some("echo")
                ),
                seen("echo", MessageType::Call, Some("Calculator"), Some("echo")),
                seen("echo", MessageType::Call, Some("Calculator"), Some("echo")),
            ]
        );
    });
}

/// The int keys of a TTHeader request are those Kitex's client sends (its TTHeader
/// handler), with the values it gives them: a oneway call says so in `MSG_TYPE`, the
/// connect timeout and the time left go in milliseconds, an unknown caller is sent
/// empty.
#[test]
fn over_ttheader_a_request_carries_the_int_keys_of_kitex() {
    use crate::codec::ttheader::int_key::*;
    runtime().block_on(async {
        let (addr, requests) = fake_server(Framing::TTHeader).await;
        let client = Client::builder("Calculator")
            .address(addr)
            .config(ClientConfig {
                timeouts: ClientTimeouts {
                    connect: Duration::from_millis(750),
                    ..Default::default()
                },
                caller: "front".into(),
                ..ClientConfig::default()
            })
            .build()
            .unwrap();
        let mut cx = ClientContext::new();
        cx.timeout = Some(Duration::from_secs(30));
        client
            .call::<Text, Text>(&mut cx, "echo", text(1, "echo"))
            .await
            .unwrap();
        client
            .oneway::<Text>(&mut ClientContext::new(), "notify", text(1, "n"))
            .await
            .unwrap();
        // The oneway call is done once sent: wait for the server to have read it.
        let give_up = std::time::Instant::now() + Duration::from_secs(10);
        while requests.lock().unwrap().len() < 2 && std::time::Instant::now() < give_up {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let seen = requests.lock().unwrap().clone();
        assert_eq!(seen.len(), 2, "{seen:?}");
        let keys = |i: usize| -> Vec<(u16, String)> {
            let mut ints = seen[i].ints.clone();
            ints.sort();
            ints
        };
        let [call, oneway] = [keys(0), keys(1)];
        let without_timeout: Vec<_> = call
            .iter()
            .filter(|(k, _)| *k != RPC_TIMEOUT)
            .cloned()
            .collect();
        let want = |ty: &str, method: &str| {
            let mut want = vec![
                (TRANSPORT_TYPE, "unframed".to_string()),
                (FROM_SERVICE, "front".into()),
                (TO_SERVICE, "Calculator".into()),
                (TO_METHOD, method.into()),
                (CONNECT_TIMEOUT, "750".into()),
                (FROM_METHOD, String::new()),
                (MSG_TYPE, ty.into()),
            ];
            want.sort();
            want
        };
        assert_eq!(without_timeout, want("1", "echo"));
        let left: u64 = call
            .iter()
            .find(|(k, _)| *k == RPC_TIMEOUT)
            .map(|(_, v)| v.parse().unwrap())
            .expect("the time left is sent");
        assert!((1..=30_000).contains(&left), "{left}");
        // No timeout given to the oneway call: the client's 10 s.
        let oneway_left: u64 = oneway
            .iter()
            .find(|(k, _)| *k == RPC_TIMEOUT)
            .map(|(_, v)| v.parse().unwrap())
            .expect("the time left is sent");
        // Read on the coarse clock, which may lag a tick: within 1% of 10 s.
        assert!((9_000..=10_100).contains(&oneway_left), "{oneway_left}");
        let oneway: Vec<_> = oneway
            .into_iter()
            .filter(|(k, _)| *k != RPC_TIMEOUT)
            .collect();
        assert_eq!(oneway, want("4", "notify"));
        assert_eq!(seen[1].isn.as_deref(), Some("Calculator"));
    });
}

/// Bound clients against this crate's multiplexed server: `Test` under two names, no
/// default. Each name reaches the service; a name the server does not have gets
/// `UNKNOWN_METHOD`, and so does an unbound client, except over TTHeader, whose `isn`
/// routes it. Over every framing.
#[test]
fn bound_clients_reach_their_service_on_a_multiplexed_server() {
    for framing in [Framing::TTHeader, Framing::Framed, Framing::Buffered] {
        runtime().block_on(async {
            let services = Multiplex::new()
                .service(TestService::default())
                .service_as("Again", TestService::default());
            let bound = Server::multiplexed(services)
                .bind(&"127.0.0.1:0".parse().unwrap())
                .await
                .unwrap();
            let addr = bound.local_addr().clone();
            let serving = tokio::spawn(bound.serve());
            let config = ClientConfig {
                format: WireFormat {
                    framing,
                    ..Default::default()
                },
                ..ClientConfig::default()
            };
            let client = |name: Option<&'static str>| {
                let b = Client::builder("Test")
                    .address(addr.clone())
                    .config(config.clone());
                match name {
                    Some(name) => b.multiplexed_service(name).build().unwrap(),
                    None => b.build().unwrap(),
                }
            };
            for name in ["Test", "Again"] {
                let got = echo(&client(Some(name)), &mut ClientContext::new(), name).await;
                assert_eq!(got.unwrap(), text(0, name), "{framing:?}");
            }
            // Unbound, over TTHeader the client still names its IDL service in `isn`,
            // by which the server routes it (as Kitex's client and server do).
            let unbound = echo(&client(None), &mut ClientContext::new(), "isn").await;
            if framing == Framing::TTHeader {
                assert_eq!(unbound.unwrap(), text(0, "isn"));
            } else {
                let e = unbound.unwrap_err();
                let ex = e.application_exception().unwrap_or_else(|| panic!("{e}"));
                assert!(
                    ex.message.as_str().contains("no default service"),
                    "{framing:?}: {ex:?}"
                );
            }
            for (c, why) in [(client(Some("Nope")), "unknown service Nope")] {
                let e = echo(&c, &mut ClientContext::new(), "x").await.unwrap_err();
                let ex = e.application_exception().unwrap_or_else(|| panic!("{e}"));
                assert_eq!(
                    ex.kind,
                    ApplicationExceptionKind::UnknownMethod,
                    "{framing:?}"
                );
                assert!(ex.message.as_str().contains(why), "{framing:?}: {ex:?}");
            }
            serving.abort();
        });
    }
}
