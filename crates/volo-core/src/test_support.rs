//! What the server and client tests share: a small message type, a dispatcher with a
//! method per behaviour, and a server running it on a fresh runtime.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use thrift_wire::{
    ApplicationException, ApplicationExceptionKind, DecodeError, Decoder, Encoder, Message, Sizer,
    TType, Utf8Bytes,
};

use crate::context::{Address, ServerContext};
use crate::server::deadline::Deadline;
use crate::server::{
    Dispatch, DispatchError, LimitConfig, Server, ServerConfig, ServerRequest, ServesStreams,
    ServiceInfo, StreamSupport,
};
use crate::service::{Layer, Service};

/// `struct Text { 1: string text }`: the arguments and (as field 0) the result.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Text {
    pub(crate) id: i16,
    pub(crate) text: Option<Utf8Bytes>,
}

impl Message for Text {
    fn size<S: Sizer>(&self, s: &mut S) -> usize {
        let saved = s.struct_begin();
        let field = self.text.as_ref().map_or(0, |t| {
            s.field_begin_len(TType::Binary, self.id) + s.string_value_len(t)
        });
        field + s.struct_end_len(saved)
    }

    fn encode<E: Encoder>(&self, e: &mut E) {
        let saved = e.write_struct_begin();
        if let Some(t) = &self.text {
            e.write_field_begin(TType::Binary, self.id);
            e.write_string(t);
        }
        e.write_struct_end(saved);
    }

    fn decode<D: Decoder>(d: &mut D) -> Result<Self, DecodeError> {
        let saved = d.read_struct_begin()?;
        let mut out = Text::default();
        loop {
            let f = d.read_field_begin()?;
            match (f.id, f.ty) {
                (_, TType::Stop) => break,
                (id, TType::Binary) => {
                    out.id = id;
                    out.text = Some(d.read_string().map_err(|e| e.push("Text", "text"))?);
                }
                (_, ty) => d.skip(ty)?,
            }
        }
        d.read_struct_end(saved);
        Ok(out)
    }
}

pub(crate) fn text(id: i16, t: &str) -> Text {
    Text {
        id,
        text: Some(Utf8Bytes::from(t.to_string())),
    }
}

/// A message in protocol `P` whose body is the text `t` in field `field` (1 for a
/// call's arguments, 0 for a reply's result).
pub(crate) fn message<P: thrift_wire::Protocol>(
    ty: thrift_wire::MessageType,
    method: &str,
    seq: i32,
    field: i16,
    t: &str,
) -> Vec<u8> {
    let header = thrift_wire::MessageHeader {
        name: Utf8Bytes::from(method.to_string()),
        ty,
        seq_id: seq,
    };
    let mut buf = thrift_wire::LinkBuffer::new();
    let n = thrift_wire::Codec::<P>::new()
        .encode_message(&header, &text(field, t), &mut buf)
        .unwrap();
    buf.next(n).to_vec()
}

/// `msg` after its Framed length.
pub(crate) fn framed(msg: &[u8]) -> Vec<u8> {
    let mut out = (msg.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(msg);
    out
}

/// A framed Binary `echo` of `t` to the server at `addr`, on a plain socket: the
/// text it answers.
pub(crate) fn call_echo(addr: std::net::SocketAddr, t: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("a timeout");
    s.write_all(&framed(&message::<thrift_wire::Binary>(
        thrift_wire::MessageType::Call,
        "echo",
        1,
        1,
        t,
    )))
    .expect("write");
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("a reply");
    let mut reply = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut reply).expect("a reply");
    let (_, answer) = thrift_wire::Codec::<thrift_wire::Binary>::new()
        .decode_message::<Text>(bytes::Bytes::from(reply))
        .expect("a reply message");
    answer.text.unwrap_or_default().to_string()
}

/// Calls in progress, and the most there were at once.
#[derive(Default)]
pub(crate) struct Gauge {
    now: AtomicUsize,
    pub(crate) peak: AtomicUsize,
}

/// How long [`Gauge::reaches`] waits at most.
const GAUGE_LIMIT: Duration = Duration::from_secs(20);

impl Gauge {
    /// Calls in progress now.
    pub(crate) fn now(&self) -> usize {
        self.now.load(Ordering::SeqCst)
    }

    /// Waits until `n` calls are in progress, looking every millisecond; fails after
    /// 20 s. For a test that must act while calls are surely running, however long
    /// the machine takes to get them there.
    pub(crate) async fn reaches(&self, n: usize) {
        let give_up = tokio::time::Instant::now() + GAUGE_LIMIT;
        while self.now() != n {
            assert!(
                tokio::time::Instant::now() < give_up,
                "{} calls in progress after {GAUGE_LIMIT:?}, not {n}",
                self.now()
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Counts one call in progress while alive.
struct InFlight<'a>(&'a Gauge);

impl<'a> InFlight<'a> {
    fn enter(gauge: &'a Gauge) -> Self {
        let now = gauge.now.fetch_add(1, Ordering::SeqCst) + 1;
        gauge.peak.fetch_max(now, Ordering::SeqCst);
        InFlight(gauge)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Permits for the calls of `wait`, which the test hands out.
pub(crate) struct Gate(pub(crate) Arc<tokio::sync::Semaphore>);

impl Default for Gate {
    fn default() -> Self {
        Gate(Arc::new(tokio::sync::Semaphore::new(0)))
    }
}

/// Methods: `echo` (answers its text), `panic`, `fail` (an application error),
/// `slow` (sleeps 300 ms first), `hang` (never answers), `wait` (answers once the
/// test opens its [`Gate`] for it: no clock, no runtime needed), `notify` (oneway: counts, and
/// fails when its text is `fail`). It sends back the persistent value `logid` as the
/// backward value `seen`, and counts the calls in progress.
#[derive(Default)]
pub(crate) struct TestService {
    pub(crate) notified: Arc<AtomicUsize>,
    /// Every peer address that called.
    pub(crate) peers: Arc<Mutex<HashSet<String>>>,
    /// Calls in progress.
    pub(crate) gauge: Arc<Gauge>,
    /// What `wait` waits for.
    pub(crate) gate: Gate,
}

impl ServiceInfo for TestService {
    const NAME: &'static str = "Test";

    fn is_oneway(method: &str) -> bool {
        method == "notify"
    }
}

impl Service<ServerContext, ServerRequest> for TestService {
    type Response = Text;
    type Error = DispatchError;

    async fn call(
        &self,
        cx: &mut ServerContext,
        req: ServerRequest,
    ) -> Result<Text, DispatchError> {
        let _in_flight = InFlight::enter(&self.gauge);
        if let Some(peer) = cx.peer() {
            self.peers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(peer.to_string());
        }
        let args: Text = req.decode(cx)?;
        let body = args.text.unwrap_or_default();
        if let Some(logid) = cx.metainfo.persistent("logid") {
            let logid = logid.to_string();
            cx.metainfo.set_backward("seen", logid);
        }
        // A header (THeader info) the caller asks to have sent back, renamed.
        if let Some(v) = cx.metainfo.header("echo-me") {
            let v = v.to_string();
            cx.metainfo.set_header("echoed", v);
        }
        let reply = Text {
            id: 0,
            text: Some(body.clone()),
        };
        match cx.rpc.method.as_str() {
            "echo" => Ok(reply),
            "slow" => {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok(reply)
            }
            "hang" => std::future::pending().await,
            "wait" => {
                let permit = self.gate.0.acquire().await;
                permit.map_err(|_| DispatchError::UnknownMethod)?.forget();
                Ok(reply)
            }
            "panic" => panic!("the handler gave up on {}", body.as_str()),
            "fail" => Err(failed_on_purpose()),
            "notify" => {
                self.notified.fetch_add(1, Ordering::SeqCst);
                if body.as_str() == "fail" {
                    return Err(failed_on_purpose());
                }
                Ok(Text::default())
            }
            _ => Err(DispatchError::UnknownMethod),
        }
    }
}

fn failed_on_purpose() -> DispatchError {
    DispatchError::Application(ApplicationException::new(
        ApplicationExceptionKind::InternalError,
        "failed on purpose",
    ))
}

pub(crate) struct Running {
    /// The TCP address, or for another kind of address 0.0.0.0:0.
    pub(crate) addr: std::net::SocketAddr,
    /// The address it listens on, of any kind.
    pub(crate) address: Address,
    pub(crate) notified: Arc<AtomicUsize>,
    pub(crate) peers: Arc<Mutex<HashSet<String>>>,
    /// The service's calls in progress.
    pub(crate) gauge: Arc<Gauge>,
    /// What the service's `wait` calls wait for: a permit per call to answer.
    pub(crate) gate: Arc<tokio::sync::Semaphore>,
    pub(crate) stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub(crate) done: tokio::task::JoinHandle<std::io::Result<()>>,
}

pub(crate) async fn start(config: ServerConfig) -> Running {
    start_on(config, &"127.0.0.1:0".parse().unwrap()).await
}

pub(crate) async fn start_on(config: ServerConfig, at: &Address) -> Running {
    start_limited(config, LimitConfig::default(), at).await
}

/// A server with `config` and the limiter `limit` listening on `at`.
async fn start_limited(config: ServerConfig, limit: LimitConfig, at: &Address) -> Running {
    start_with(config, at, |s| s.limit(limit)).await
}

/// A server with `config` listening on `at`, set up further by `more` (which may
/// make it serve streams).
pub(crate) async fn start_with<L, St>(
    config: ServerConfig,
    at: &Address,
    more: impl FnOnce(Server<TestService>) -> Server<TestService, L, St>,
) -> Running
where
    St: StreamSupport<TestService> + ServesStreams<L::Service>,
    L: Layer<Deadline<St::Bottom>>,
    L::Service: Dispatch,
{
    let notified = Arc::new(AtomicUsize::new(0));
    let peers = Arc::new(Mutex::new(HashSet::new()));
    let gauge = Arc::new(Gauge::default());
    let gate = Gate::default();
    let opener = Arc::clone(&gate.0);
    let server = Server::new(TestService {
        notified: Arc::clone(&notified),
        peers: Arc::clone(&peers),
        gauge: Arc::clone(&gauge),
        gate,
    })
    .config(config);
    let bound = more(server).bind(at).await.expect("bind");
    let address = bound.local_addr().clone();
    let addr = match &address {
        Address::Tcp(a) => *a,
        _ => std::net::SocketAddr::from(([0, 0, 0, 0], 0)),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let done = tokio::spawn(bound.serve_with_shutdown(async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        address,
        notified,
        peers,
        gauge,
        gate: opener,
        stop: Some(stop),
        done,
    }
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The server layouts a test should pass in: `config`, and on netpoll-rs `config` with
/// calls started on the poller and with a task per connection.
pub(crate) fn layouts(config: ServerConfig) -> Vec<ServerConfig> {
    if config.transport.kind != crate::transport::TransportKind::Netpoll {
        return vec![config];
    }
    [true, false]
        .map(|inline_dispatch| ServerConfig {
            inline_dispatch,
            ..config.clone()
        })
        .into()
}

/// Runs `f` with a server, in a blocking thread (the client is plain std), bounded in
/// time: once for each of the server's [`layouts`].
pub(crate) fn with_server(config: ServerConfig, f: impl Fn(&Running) + Clone + Send + 'static) {
    with_limited_server(config, LimitConfig::default(), f);
}

/// [`with_server`], the server refusing calls over `limit` ([`Server::limit`]).
pub(crate) fn with_limited_server(
    config: ServerConfig,
    limit: LimitConfig,
    f: impl Fn(&Running) + Clone + Send + 'static,
) {
    for config in layouts(config) {
        with_server_once(config, limit.clone(), f.clone());
    }
}

fn with_server_once(
    config: ServerConfig,
    limit: LimitConfig,
    f: impl FnOnce(&Running) + Send + 'static,
) {
    runtime().block_on(async {
        let running = start_limited(config, limit, &"127.0.0.1:0".parse().unwrap()).await;
        let running = tokio::time::timeout(Duration::from_secs(60), async move {
            tokio::task::spawn_blocking(move || {
                f(&running);
                running
            })
            .await
            .expect("the client side panicked")
        })
        .await
        .expect("the test ran out of time");
        running.stop().await;
    });
}

impl Running {
    /// Shuts the server down and waits for it to end, for 20 s at most.
    pub(crate) async fn stop(mut self) {
        let _ = self.stop.take().map(|s| s.send(()));
        tokio::time::timeout(Duration::from_secs(20), &mut self.done)
            .await
            .expect("the server did not stop")
            .unwrap()
            .unwrap();
    }
}

/// Runs `f` on a fresh [`runtime`], for `limit` at most.
pub(crate) fn run_bounded(limit: Duration, f: impl std::future::Future<Output = ()>) {
    runtime().block_on(async {
        tokio::time::timeout(limit, f)
            .await
            .expect("the test ran out of time");
    });
}

/// What `tracing` has logged in this test process: a global subscriber (the server
/// logs from its own threads) that writes every line here, installed once.
pub(crate) fn captured_log() -> &'static std::sync::Mutex<Vec<u8>> {
    static LOG: std::sync::OnceLock<std::sync::Mutex<Vec<u8>>> = std::sync::OnceLock::new();
    static INSTALL: std::sync::Once = std::sync::Once::new();
    struct Capture;
    impl std::io::Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let log = LOG.get_or_init(Default::default);
            log.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    INSTALL.call_once(|| {
        // Plain text: other crates of the workspace turn on the `ansi` feature.
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(|| Capture)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    });
    LOG.get_or_init(Default::default)
}

/// Hex with spaces and `|` as separators, for vectors laid out field by field.
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let digits: String = s.chars().filter(char::is_ascii_hexdigit).collect();
    assert_eq!(digits.len() % 2, 0, "odd hex digits in {s:?}");
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap())
        .collect()
}
