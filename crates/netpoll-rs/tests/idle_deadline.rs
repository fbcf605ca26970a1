//! A poller whose connections have deadlines far off, or had one that fired and set no
//! other, blocks until the earliest (or for ever): no periodic wake, on a thread of its
//! own or as a task of a runtime. Its own file, so its process holds no other reactor
//! and the `netpoll-*` threads are this test's.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use netpoll_rs::{Config, Handler, Io, Reactor};

/// Sets one deadline `after` from its first call; counts its timer's calls.
struct ArmOnce {
    after: Option<Duration>,
    fired: Arc<AtomicUsize>,
}

impl Handler for ArmOnce {
    fn on_input(&mut self, io: &mut Io<'_>) {
        if let Some(after) = self.after.take() {
            let at = io.now() + after;
            io.wake_at(Some(at));
        }
    }

    fn on_timer(&mut self, _io: &mut Io<'_>) {
        self.fired.fetch_add(1, Ordering::Relaxed);
    }
}

/// Two idle connections on `reactor`: one whose deadline is an hour away, one whose
/// deadline fired after 20 ms.
async fn idle_with_deadlines(reactor: &Reactor, face: &str) {
    let listener = reactor.listen_tcp("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let fired = Arc::new(AtomicUsize::new(0));
    let mut peers = Vec::new();
    for after in [Duration::from_secs(3600), Duration::from_millis(20)] {
        peers.push(std::net::TcpStream::connect(addr).unwrap());
        let conn = within(10, "accept", listener.accept()).await.unwrap();
        let handle = conn.inline_handle();
        conn.serve_inline(ArmOnce {
            after: Some(after),
            fired: Arc::clone(&fired),
        });
        assert!(handle.resume());
    }
    wait_until(10, "the near deadline fires", || {
        fired.load(Ordering::Relaxed) == 1
    })
    .await;
    assert_pollers_idle(face).await;
    assert_eq!(fired.load(Ordering::Relaxed), 1, "the far one did not fire");
}

#[test]
fn a_poller_waits_for_its_deadlines_without_waking_in_between() {
    let config = Config {
        pollers: 1,
        ..Config::default()
    };
    let threads = reactor(config.clone());
    run(30, idle_with_deadlines(&threads, "poller thread"));
    threads.shutdown();

    // The poller as the only task of a runtime whose one worker is named `netpoll-rt`.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("netpoll-rt")
        .enable_all()
        .build()
        .unwrap();
    let tasks = Reactor::on_runtime(rt.handle(), config).unwrap();
    run(30, idle_with_deadlines(&tasks, "poller task"));
    tasks.shutdown();
}
