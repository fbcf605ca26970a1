//! A multiplexed server ([`Multiplex`]) end to end: calls routed by their `Service:`
//! prefix, by TTHeader's `isn`, to the default service, or to none; replies under the
//! bare method name; oneway decided by the service routed to. On the connection core
//! (routing is the core's, whatever layout drives it); binding is tested on a socket.

use std::sync::Mutex;

use super::*;
use crate::config::Observability;
use crate::service::layer_fn;

/// What the handlers and the layer saw: (service in the context, method).
type Seen = Arc<Mutex<Vec<(String, String)>>>;

fn seen_in(cx: &ServerContext) -> (String, String) {
    (
        cx.rpc.callee.service.to_string(),
        cx.rpc.method.as_str().to_string(),
    )
}

/// A second service beside [`TestService`] (`Test`), with some of its method names:
/// `echo` answers `other:<text>`; `notify` is NOT oneway here (it answers
/// `other:<text>`); `ping` is oneway. It records what each call's context said.
#[derive(Default)]
struct Other {
    seen: Seen,
}

impl ServiceInfo for Other {
    const NAME: &'static str = "Other";

    fn is_oneway(method: &str) -> bool {
        method == "ping"
    }
}

impl Service<ServerContext, ServerRequest> for Other {
    type Response = Text;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<Text, DispatchError> {
        self.seen.lock().unwrap().push(seen_in(cx));
        let args: Text = req.decode(cx)?;
        let body = args.text.unwrap_or_default();
        match cx.rpc.method.as_str() {
            "echo" | "notify" | "ping" => Ok(text(0, &format!("other:{}", body.as_str()))),
            _ => Err(DispatchError::UnknownMethod),
        }
    }
}

/// A layer that records what each call's context says before the dispatcher runs.
struct Record<S> {
    inner: S,
    seen: Seen,
}

impl<S> Service<ServerContext, ServerRequest> for Record<S>
where
    S: Service<ServerContext, ServerRequest, Error = DispatchError> + Sync,
{
    type Response = S::Response;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<S::Response, DispatchError> {
        self.seen.lock().unwrap().push(seen_in(cx));
        self.inner.call(cx, req).await
    }
}

/// A connection to a test's server, on the connection core.
trait Conn: Read + Write {}

impl<T: Read + Write> Conn for T {}

/// A multiplexed server: `Test` (the default one, when asked) and `Other`, inside a
/// [`Record`] layer. Its connections run on the connection core (see `harness.rs`):
/// routing happens there, whatever drives the connection.
struct MultiplexedServer {
    /// Opens a connection.
    connect: Box<dyn Fn() -> Box<dyn Conn>>,
    /// `Test`'s oneway `notify` calls run.
    notified: Arc<std::sync::atomic::AtomicUsize>,
    /// What `Other` saw.
    other: Seen,
    /// What the layer saw.
    layer: Seen,
    /// What the server counted.
    metrics: crate::metrics::Metrics,
}

impl MultiplexedServer {
    fn connect(&self) -> Box<dyn Conn> {
        (self.connect)()
    }
}

/// Connections of a server running `server`.
fn connections<D, L>(server: Server<D, L>) -> Box<dyn Fn() -> Box<dyn Conn>>
where
    L: crate::service::Layer<deadline::Deadline<D>>,
    L::Service: Dispatch,
{
    let shared = Arc::new(server.into_shared());
    Box::new(move || Box::new(Harness::new(Arc::clone(&shared))))
}

/// Runs `f` against a multiplexed server (with `Test` as the default service when
/// `default` is set).
fn with_multiplexed_server(default: bool, f: impl FnOnce(&MultiplexedServer)) {
    let test = TestService::default();
    let notified = Arc::clone(&test.notified);
    let other = Other::default();
    let other_seen = Arc::clone(&other.seen);
    let layer: Seen = Arc::default();
    let recorded = Arc::clone(&layer);
    let record = layer_fn(move |inner| Record {
        inner,
        seen: Arc::clone(&recorded),
    });
    let metrics = crate::metrics::Metrics::new();
    let config = ServerConfig {
        observability: Observability {
            metrics: Some(metrics.clone()),
            ..Default::default()
        },
        ..ServerConfig::default()
    };
    let connect = if default {
        let services = Multiplex::new().default_service(test).service(other);
        connections(Server::multiplexed(services).layer(record).config(config))
    } else {
        let services = Multiplex::new().service(test).service(other);
        connections(Server::multiplexed(services).layer(record).config(config))
    };
    f(&MultiplexedServer {
        connect,
        notified,
        other: other_seen,
        layer,
        metrics,
    });
}

/// A TTHeader frame around `msg` whose header names the IDL service `isn`.
fn ttheader_isn(seq: i32, msg: &[u8], isn: &str) -> Vec<u8> {
    let mut h = Header::new(seq, Protocol::Binary);
    h.str_kv.push((
        crate::codec::ttheader::str_key::IDL_SERVICE_NAME.into(),
        Utf8Bytes::from(isn.to_string()),
    ));
    let mut frame = BytesMut::new();
    h.write(msg.len(), &mut frame).unwrap();
    frame.put_slice(msg);
    frame.to_vec()
}

/// The message header and answer of a TTHeader reply.
fn read_tt_reply(c: &mut impl Read) -> (MessageHeader, Answer) {
    let reply = Bytes::from(framed(&read_framed(c)));
    let (_, payload) = Header::decode(&reply, &HeaderLimits::default()).unwrap();
    answer::<Binary>(payload.to_vec())
}

fn framed_call(method: &str, seq: i32, t: &str) -> Vec<u8> {
    framed(&call::<Binary>(MessageType::Call, method, seq, t))
}

/// The reply's name, type, sequence id and answer.
fn summary((h, a): (MessageHeader, Answer)) -> (String, MessageType, i32, Answer) {
    (h.name.as_str().to_string(), h.ty, h.seq_id, a)
}

fn ok(name: &str, seq: i32, t: &str) -> (String, MessageType, i32, Answer) {
    (name.into(), MessageType::Reply, seq, Answer::Ok(t.into()))
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(s, m)| (s.to_string(), m.to_string()))
        .collect()
}

#[test]
fn calls_are_routed_by_their_prefix_and_answered_under_the_bare_name() {
    with_multiplexed_server(false, |s| {
        let mut c = s.connect();
        c.write_all(&framed_call("Test:echo", 1, "hi")).unwrap();
        let reply = summary(answer::<Binary>(read_framed(&mut c)));
        assert_eq!(reply, ok("echo", 1, "hi"));
        c.write_all(&framed_call("Other:echo", 2, "hi")).unwrap();
        let reply = summary(answer::<Binary>(read_framed(&mut c)));
        assert_eq!(reply, ok("echo", 2, "other:hi"));
        // In Compact too (on a connection of its own: a connection keeps the framing
        // and protocol it began with).
        let mut c = s.connect();
        let msg = call::<Compact>(MessageType::Call, "Other:echo", 3, "c");
        c.write_all(&framed(&msg)).unwrap();
        let reply = summary(answer::<Compact>(read_framed(&mut c)));
        assert_eq!(reply, ok("echo", 3, "other:c"));
        // The layer and the service see the bare method and the service's name.
        assert_eq!(
            *s.layer.lock().unwrap(),
            pairs(&[("Test", "echo"), ("Other", "echo"), ("Other", "echo")])
        );
        assert_eq!(
            *s.other.lock().unwrap(),
            pairs(&[("Other", "echo"), ("Other", "echo")])
        );
    });
}

#[test]
fn unprefixed_calls_go_by_the_isn_key_else_to_the_default_service() {
    with_multiplexed_server(true, |s| {
        let mut c = s.connect();
        let echo = |seq, t| call::<Binary>(MessageType::Call, "echo", seq, t);
        // No prefix, no isn: the default service.
        c.write_all(&framed(&echo(1, "plain"))).unwrap();
        let reply = summary(answer::<Binary>(read_framed(&mut c)));
        assert_eq!(reply, ok("echo", 1, "plain"));
        // TTHeader's isn names the service.
        let mut c = s.connect();
        c.write_all(&ttheader_isn(2, &echo(2, "by isn"), "Other"))
            .unwrap();
        assert_eq!(
            summary(read_tt_reply(&mut c)),
            ok("echo", 2, "other:by isn")
        );
        c.write_all(&ttheader_isn(3, &echo(3, "by isn"), "Test"))
            .unwrap();
        assert_eq!(summary(read_tt_reply(&mut c)), ok("echo", 3, "by isn"));
        // An isn that names no service is passed over: the default takes the call.
        c.write_all(&ttheader_isn(4, &echo(4, "lost"), "Nope"))
            .unwrap();
        assert_eq!(summary(read_tt_reply(&mut c)), ok("echo", 4, "lost"));
        // The prefix comes first.
        let prefixed = call::<Binary>(MessageType::Call, "Test:echo", 5, "prefix");
        c.write_all(&ttheader_isn(5, &prefixed, "Other")).unwrap();
        assert_eq!(summary(read_tt_reply(&mut c)), ok("echo", 5, "prefix"));
        assert_eq!(
            *s.layer.lock().unwrap(),
            pairs(&[
                ("Test", "echo"),
                ("Other", "echo"),
                ("Test", "echo"),
                ("Test", "echo"),
                ("Test", "echo")
            ])
        );
    });
}

#[test]
fn a_call_to_no_service_is_unknown_method_and_the_connection_lives_on() {
    with_multiplexed_server(false, |s| {
        let mut c = s.connect();
        let unknown = |reply: (MessageHeader, Answer)| {
            let (name, ty, seq, a) = summary(reply);
            let Answer::Exception(kind, message) = a else {
                panic!("{name} {seq}: an answer, not an exception")
            };
            assert_eq!(
                (ty, kind),
                (
                    MessageType::Exception,
                    ApplicationExceptionKind::UnknownMethod
                )
            );
            (name, seq, message)
        };
        c.write_all(&framed_call("Nope:echo", 1, "x")).unwrap();
        let (name, seq, message) = unknown(answer::<Binary>(read_framed(&mut c)));
        assert_eq!(
            (name.as_str(), seq),
            ("echo", 1),
            "answered under the bare name"
        );
        assert!(message.contains("unknown service Nope"), "{message}");
        // Without a prefix and without a default service.
        c.write_all(&framed_call("echo", 2, "x")).unwrap();
        let (name, seq, message) = unknown(answer::<Binary>(read_framed(&mut c)));
        assert_eq!((name.as_str(), seq), ("echo", 2));
        assert!(message.contains("no default service"), "{message}");
        // An isn of no service, no default either.
        let mut tt = s.connect();
        let msg = call::<Binary>(MessageType::Call, "echo", 3, "x");
        tt.write_all(&ttheader_isn(3, &msg, "Nope")).unwrap();
        let (_, seq, message) = unknown(read_tt_reply(&mut tt));
        assert_eq!(seq, 3);
        assert!(
            message.contains("unknown service Nope (TTHeader isn)"),
            "{message}"
        );
        // A ONEWAY message to no service is not answered; the next call's reply is the
        // next thing read, and it is routed as usual.
        let lost = call::<Binary>(MessageType::Oneway, "Nope:ping", 4, "x");
        let mut bytes = framed(&lost);
        bytes.extend(framed_call("Other:echo", 5, "still here"));
        c.write_all(&bytes).unwrap();
        let reply = summary(answer::<Binary>(read_framed(&mut c)));
        assert_eq!(reply, ok("echo", 5, "other:still here"));
        // Only the routed call reached the layer.
        assert_eq!(*s.layer.lock().unwrap(), pairs(&[("Other", "echo")]));
        // The four unrouted ones are counted as such, and only the routed one is a
        // call of a service.
        let text = s.metrics.encode();
        let at = |series: &str| crate::metrics::tests::sample(&text, series);
        assert_eq!(at("rpc_server_unrouted_requests_total"), Some(4.0));
        let routed = r#"rpc_server_requests_total{service="Other",method="echo",outcome="ok"}"#;
        assert_eq!(at(routed), Some(1.0));
        assert_eq!(text.matches("rpc_server_requests_total{").count(), 1);
    });
}

/// Whether a call is answered is decided by the service it is routed to: `notify` is
/// oneway in `Test` and answered in `Other`, `ping` is oneway in `Other`. Sent as CALL
/// messages (as Apache's Go library sends oneway calls), through the prefix, the
/// default service and TTHeader's isn, the oneway ones get no reply: the replies that
/// come are those of the calls that are answered, in order.
#[test]
fn a_oneway_method_of_the_routed_service_gets_no_reply_whatever_the_message_type() {
    with_multiplexed_server(true, |s| {
        for wire in wires() {
            let mut c = s.connect();
            let before = s.notified.load(Ordering::SeqCst);
            let sent = [
                ("Test:notify", "e1"),
                ("notify", "e2"),
                ("Other:ping", "p"),
                ("Other:notify", "answered"),
                ("Test:notify", "e3"),
                ("Test:echo", "after"),
            ];
            let mut bytes = Vec::new();
            for (seq, (method, t)) in (1..).zip(sent) {
                let msg = call::<Binary>(MessageType::Call, method, seq, t);
                bytes.extend((wire.frame)(seq, &msg));
            }
            c.write_all(&bytes).unwrap();
            assert_eq!(
                (wire.read)(&mut c),
                (4, Answer::Ok("other:answered".into())),
                "{}: the first reply is Other's notify",
                wire.name
            );
            assert_eq!(
                (wire.read)(&mut c),
                (6, Answer::Ok("after".into())),
                "{}: the second is the echo behind the last oneway",
                wire.name
            );
            // Nothing else came: the next reply is the next call's.
            let msg = call::<Binary>(MessageType::Call, "Other:echo", 7, "again");
            c.write_all(&(wire.frame)(7, &msg)).unwrap();
            assert_eq!(
                (wire.read)(&mut c),
                (7, Answer::Ok("other:again".into())),
                "{}",
                wire.name
            );
            // A Framed connection runs its calls in order: the oneways ran before the
            // echo behind them.
            if wire.name == "Framed" {
                assert_eq!(s.notified.load(Ordering::SeqCst) - before, 3);
            }
        }
        // Through TTHeader's isn as well: `ping` routed to Other by its isn.
        let mut c = s.connect();
        let ping = call::<Binary>(MessageType::Call, "ping", 1, "p");
        let echo = call::<Binary>(MessageType::Call, "echo", 2, "then");
        let mut bytes = ttheader_isn(1, &ping, "Other");
        bytes.extend(ttheader_isn(2, &echo, "Other"));
        c.write_all(&bytes).unwrap();
        assert_eq!(summary(read_tt_reply(&mut c)), ok("echo", 2, "other:then"));
    });
}

#[test]
fn a_multiplexed_server_with_services_it_cannot_route_does_not_bind() {
    runtime().block_on(async {
        let addr: Address = "127.0.0.1:0".parse().unwrap();
        fn refused<T>(r: std::io::Result<T>) -> String {
            match r {
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => e.to_string(),
                Err(e) => panic!("another error: {e}"),
                Ok(_) => panic!("it bound"),
            }
        }
        let e = refused(Server::multiplexed(Multiplex::new()).bind(&addr).await);
        assert!(e.contains("at least one service"), "{e}");
        let twice = Multiplex::new()
            .service(TestService::default())
            .service_as("Test", Other::default());
        let e = refused(Server::multiplexed(twice).bind(&addr).await);
        assert!(e.contains("two services are registered as \"Test\""), "{e}");
        let defaults = Multiplex::new()
            .default_service(TestService::default())
            .default_service(Other::default());
        let e = refused(Server::multiplexed(defaults).bind(&addr).await);
        assert!(e.contains("one default service at most"), "{e}");
        for bad in ["", "A:B"] {
            let services = Multiplex::new().service_as(bad, Other::default());
            let e = refused(Server::multiplexed(services).bind(&addr).await);
            assert!(e.contains("cannot be a service name"), "{e}");
        }
        // The names, in the order they were added.
        let services = Multiplex::new()
            .service(TestService::default())
            .service_as("Second", Other::default());
        assert_eq!(services.names().collect::<Vec<_>>(), ["Test", "Second"]);
    });
}
