//! A server with a registry: registered once it listens, with every address it
//! listens on; deregistered on shutdown while it still serves, before the drain; a
//! failed registration is its start-up error; a server dropped without a shutdown
//! deregisters all the same.

use std::sync::Mutex;

use super::*;
use crate::registry::{Registration, Registry, RegistryError, RegistryFuture, RegistryInfo};

/// What the fake registry saw.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Register(Registration),
    /// A deregistration, with what held when it came: the calls in progress, and
    /// whether the TCP listener still took connections.
    Deregister {
        service: String,
        in_progress: usize,
        listening: bool,
    },
}

/// A registry that records what it is asked, fails registrations when told to, and
/// looks at the server when asked to deregister.
#[derive(Clone)]
struct FakeRegistry {
    events: Arc<Mutex<Vec<Event>>>,
    fail: bool,
    gauge: Arc<Gauge>,
    /// The server's TCP address, once known.
    tcp: Arc<Mutex<Option<std::net::SocketAddr>>>,
    deregistered: Arc<tokio::sync::Notify>,
}

impl FakeRegistry {
    fn new(gauge: Arc<Gauge>, fail: bool) -> Self {
        FakeRegistry {
            events: Arc::default(),
            fail,
            gauge,
            tcp: Arc::default(),
            deregistered: Arc::default(),
        }
    }

    fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }
}

impl Registry for FakeRegistry {
    fn register<'a>(&'a self, instance: &'a Registration) -> RegistryFuture<'a> {
        Box::pin(async move {
            self.events
                .lock()
                .unwrap()
                .push(Event::Register(instance.clone()));
            if self.fail {
                Err(RegistryError::new("the registry said no"))
            } else {
                Ok(())
            }
        })
    }

    fn deregister<'a>(&'a self, instance: &'a Registration) -> RegistryFuture<'a> {
        Box::pin(async move {
            let tcp = *self.tcp.lock().unwrap();
            let listening = match tcp {
                Some(addr) => tokio::net::TcpStream::connect(addr).await.is_ok(),
                None => false,
            };
            self.events.lock().unwrap().push(Event::Deregister {
                service: instance.service.clone(),
                in_progress: self.gauge.now(),
                listening,
            });
            self.deregistered.notify_one();
            Ok(())
        })
    }
}

fn info() -> RegistryInfo {
    RegistryInfo {
        weight: 30,
        tags: [("zone".to_string(), "z1".to_string())].into(),
        host: Some("host-a".into()),
    }
}

/// A server of [`TestService`] on TCP and a Unix socket, with `registry`.
async fn bound(
    registry: FakeRegistry,
    gauge: Arc<Gauge>,
    gate: Gate,
    dir: &std::path::Path,
) -> BoundServer<deadline::Deadline<TestService>> {
    let service = TestService {
        gauge,
        gate,
        ..TestService::default()
    };
    let unix: Address = format!("unix:{}", dir.join("s.sock").display())
        .parse()
        .unwrap();
    let tcp: Address = "127.0.0.1:0".parse().unwrap();
    let bound = Server::new(service)
        .registry(registry.clone(), info())
        .bind_all(&[tcp, unix])
        .await
        .unwrap();
    if let Address::Tcp(a) = bound.local_addr() {
        *registry.tcp.lock().unwrap() = Some(*a);
    }
    bound
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("registry-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_server_registers_all_its_addresses_and_deregisters_before_it_drains() {
    let dir = temp_dir("order");
    runtime().block_on(async {
        let gauge = Arc::new(Gauge::default());
        let registry = FakeRegistry::new(Arc::clone(&gauge), false);
        let gate = Gate::default();
        let open = Arc::clone(&gate.0);
        let bound = bound(registry.clone(), Arc::clone(&gauge), gate, &dir).await;
        let addrs: Vec<Address> = bound.local_addrs().cloned().collect();
        assert_eq!(addrs.len(), 2);
        let Address::Tcp(tcp) = addrs[0] else {
            panic!("{addrs:?}")
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let done = tokio::spawn(bound.serve_with_shutdown(async {
            let _ = stopped.await;
        }));

        // Both addresses serve.
        let unix = dir.join("s.sock");
        let (over_tcp, over_unix) = tokio::task::spawn_blocking(move || {
            let mut t = connect(tcp);
            t.write_all(&framed(&call::<Binary>(
                MessageType::Call,
                "echo",
                1,
                "tcp",
            )))
            .unwrap();
            let mut u = std::os::unix::net::UnixStream::connect(&unix).unwrap();
            u.write_all(&framed(&call::<Binary>(
                MessageType::Call,
                "echo",
                2,
                "unix",
            )))
            .unwrap();
            (
                answer::<Binary>(read_framed(&mut t)).1,
                answer::<Binary>(read_framed(&mut u)).1,
            )
        })
        .await
        .unwrap();
        assert_eq!(over_tcp, Answer::Ok("tcp".into()));
        assert_eq!(over_unix, Answer::Ok("unix".into()));
        assert_eq!(
            registry.events(),
            [Event::Register(Registration {
                service: "Test".into(),
                addresses: addrs.clone(),
                weight: 30,
                tags: info().tags,
                host: Some("host-a".into()),
            })]
        );

        // A call in progress when the shutdown comes.
        let waiting = tokio::task::spawn_blocking(move || {
            let mut c = connect(tcp);
            c.write_all(&framed(&call::<Binary>(
                MessageType::Call,
                "wait",
                3,
                "late",
            )))
            .unwrap();
            answer::<Binary>(read_framed(&mut c)).1
        });
        while gauge.now() == 0 {
            tokio::task::yield_now().await;
        }
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(20), registry.deregistered.notified())
            .await
            .expect("deregistered");
        open.add_permits(1);
        let late = tokio::time::timeout(Duration::from_secs(20), waiting)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(late, Answer::Ok("late".into()), "answered in the drain");
        tokio::time::timeout(Duration::from_secs(20), done)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(
            registry.events()[1],
            Event::Deregister {
                service: "Test".into(),
                in_progress: 1,
                listening: true,
            },
            "deregistered while still serving, before the drain"
        );
        assert!(TcpStream::connect(tcp).is_err(), "then the listener closed");
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failed_registration_is_the_servers_start_up_error() {
    let dir = temp_dir("fail");
    runtime().block_on(async {
        let gauge = Arc::new(Gauge::default());
        let registry = FakeRegistry::new(Arc::clone(&gauge), true);
        let bound = bound(registry.clone(), gauge, Gate::default(), &dir).await;
        let Address::Tcp(tcp) = *bound.local_addr() else {
            panic!()
        };
        let err = tokio::time::timeout(Duration::from_secs(20), bound.serve())
            .await
            .expect("serve ends")
            .expect_err("a failed registration");
        assert_eq!(err.kind(), std::io::ErrorKind::Other);
        assert!(err.to_string().contains("the registry said no"), "{err}");
        assert!(TcpStream::connect(tcp).is_err(), "the listener is closed");
        assert!(matches!(registry.events()[..], [Event::Register(_)]));
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_server_dropped_without_a_shutdown_deregisters_in_a_task() {
    let dir = temp_dir("drop");
    runtime().block_on(async {
        let gauge = Arc::new(Gauge::default());
        let registry = FakeRegistry::new(Arc::clone(&gauge), false);
        let bound = bound(registry.clone(), gauge, Gate::default(), &dir).await;
        let serving = tokio::spawn(bound.serve());
        while registry.events().is_empty() {
            tokio::task::yield_now().await;
        }
        serving.abort();
        let _ = serving.await;
        tokio::time::timeout(Duration::from_secs(20), registry.deregistered.notified())
            .await
            .expect("deregistered after the drop");
        assert!(matches!(
            registry.events()[..],
            [Event::Register(_), Event::Deregister { .. }]
        ));
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_server_with_no_address_is_refused() {
    runtime().block_on(async {
        let err = Server::new(TestService::default())
            .bind_all(&[])
            .await
            .expect_err("no address");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    });
}
