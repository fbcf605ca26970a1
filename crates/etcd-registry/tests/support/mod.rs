//! What the tests share: a real etcd (the crate's `testing` module), values as
//! servers write them, logs captured.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use etcd_registry::testing::Etcd;
use volo_core::registry::Registration;

/// A fresh etcd for one test, with the test's logs shown (see [`Etcd::start`]).
pub fn etcd() -> Option<Etcd> {
    init_tracing();
    Etcd::start()
}

/// An instance of `service` at `addresses`, weighing `weight`, without tags or host.
pub fn registration(service: &str, addresses: &[&str], weight: u32) -> Registration {
    Registration {
        service: service.into(),
        addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
        weight,
        tags: Default::default(),
        host: None,
    }
}

/// A value for `addresses`, as a server writes it (weight 100).
pub fn value(addresses: &[&str]) -> Vec<u8> {
    let quoted: Vec<String> = addresses.iter().map(|a| format!("{a:?}")).collect();
    format!(r#"{{"addresses":[{}],"weight":100}}"#, quoted.join(",")).into_bytes()
}

/// Puts `value` at `key` (without a lease), as another process could.
pub async fn put(raw: &etcd_client::Client, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
    raw.clone().put(key, value, None).await.expect("a put");
}

/// Logs to the test's output (once per test binary).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_test_writer()
        .try_init();
}

/// `test`, failing if it takes longer than `secs`.
pub async fn bounded<T>(secs: u64, test: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), test)
        .await
        .unwrap_or_else(|_| panic!("the test did not finish within {secs} s"))
}

/// Waits until `ready()` holds, checking every 20 ms; fails after `secs` naming `what`.
pub async fn eventually(secs: u64, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ready() {
        assert!(Instant::now() < deadline, "not within {secs} s: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A tracing writer that keeps what is written, to check what was logged.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// A subscriber writing here, for `tracing::subscriber::set_default`.
    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync + use<> {
        let me = self.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || me.clone())
            .finish()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
