//! What the tests share: a server on a loopback port for the length of a test.

use std::future::Future;
use std::io;
use std::time::Duration;

use volo_core::context::Address;
use volo_core::server::{BoundServer, Dispatch};

/// A runtime of two workers.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Any free port of the loopback address.
pub(crate) fn loopback() -> Address {
    "127.0.0.1:0".parse().unwrap()
}

/// Runs `f` with the server `bind` makes serving, given its address, for 30 s at
/// most; then stops the server (20 s at most).
pub(crate) fn served<S, B, F, Fut>(bind: B, f: F)
where
    S: Dispatch,
    B: Future<Output = io::Result<BoundServer<S>>>,
    F: FnOnce(Address) -> Fut,
    Fut: Future<Output = ()>,
{
    runtime().block_on(async {
        let bound = bind.await.unwrap();
        let addr = bound.local_addr().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let done = tokio::spawn(bound.serve_with_shutdown(async {
            let _ = stopped.await;
        }));
        tokio::time::timeout(Duration::from_secs(30), f(addr))
            .await
            .expect("the test ran out of time");
        let _ = stop.send(());
        tokio::time::timeout(Duration::from_secs(20), done)
            .await
            .expect("the server did not stop")
            .unwrap()
            .unwrap();
    });
}
