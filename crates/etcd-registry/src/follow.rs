//! Following a range of keys for ever, as discovery and governance both do: read it,
//! watch it from the revision after the read, and when the watch stops (etcd down,
//! the revision compacted) keep what was read, wait, and read again.

use std::future::Future;
use std::time::Duration;

use etcd_client::{Client, WatchOptions, WatchResponse};

use crate::etcd::{EtcdError, timed};
use crate::timing::backoff;

/// Why a watch stopped.
pub(crate) enum End {
    /// etcd compacted the revision it was at.
    Compacted(i64),
    /// The follower asked to read the keys again.
    Untracked,
    /// It failed or ended.
    Broken(String),
}

/// What is followed, and what is done with what is read.
pub(crate) trait Follow: Send + 'static {
    /// Who follows, for the log lines: `etcd discovery`.
    const WHAT: &'static str;

    /// The prefix of the keys followed.
    fn keys(&self) -> &str;

    /// The client to watch with, and the bound on opening a watch.
    fn client(&self) -> (&Client, Duration);

    /// Reads the keys and takes them; the revision read at.
    fn read(&mut self) -> impl Future<Output = Result<i64, EtcdError>> + Send;

    /// Takes one answer of the watch; `Some` stops it.
    fn answer(&mut self, answer: &WatchResponse) -> Option<End>;

    /// Counts how a watch ended, and each read after one (for stats).
    fn ended(&mut self, _end: &End) {}

    /// Counts a read after a watch ended.
    fn read_again(&mut self) {}
}

/// Follows `f`'s keys from revision `start` on, for ever.
pub(crate) async fn run<F: Follow>(mut f: F, mut start: i64) {
    let mut failures = 0u32;
    // Whether the last word logged was that the watch broke.
    let mut down = false;
    loop {
        let end = watch(&mut f, start, &mut failures).await;
        f.ended(&end);
        match end {
            End::Compacted(compacted) => tracing::warn!(
                keys = f.keys(),
                start,
                compacted,
                "{}: watch revision compacted; reading the keys again",
                F::WHAT
            ),
            End::Untracked => tracing::debug!(
                keys = f.keys(),
                "{}: a key was deleted while others were not followed; reading the keys again",
                F::WHAT
            ),
            End::Broken(error) => {
                broke::<F>(f.keys(), &error, &mut down);
                failures = failures.saturating_add(1);
                tokio::time::sleep(backoff(failures)).await;
            }
        }
        start = loop {
            match f.read().await {
                Ok(revision) => break revision + 1,
                Err(error) => {
                    broke::<F>(f.keys(), &error.to_string(), &mut down);
                    failures = failures.saturating_add(1);
                    tokio::time::sleep(backoff(failures)).await;
                }
            }
        };
        f.read_again();
        if std::mem::take(&mut down) {
            tracing::info!(
                keys = f.keys(),
                "{}: etcd answers again; keys read again",
                F::WHAT
            );
        }
    }
}

/// Logs that the watch broke, once until it works again.
fn broke<F: Follow>(keys: &str, error: &str, down: &mut bool) {
    if std::mem::replace(down, true) {
        tracing::debug!(keys, error, "{}: retry failed", F::WHAT);
    } else {
        tracing::warn!(
            keys,
            error,
            "{}: watch broke; keeping what was read and reconnecting",
            F::WHAT
        );
    }
}

/// Watches from `start` until the watch stops; `failures` is reset once it is
/// established.
async fn watch<F: Follow>(f: &mut F, start: i64, failures: &mut u32) -> End {
    let (client, timeout) = f.client();
    let mut client = client.watch_client();
    let options = WatchOptions::new().with_prefix().with_start_revision(start);
    let opened = timed(timeout, client.watch(f.keys(), Some(options))).await;
    let mut stream = match opened {
        Ok(stream) => stream,
        Err(error) => return End::Broken(error.to_string()),
    };
    loop {
        let answer = match stream.message().await {
            Ok(Some(answer)) => answer,
            Ok(None) => return End::Broken("the watch stream ended".to_string()),
            Err(error) => return End::Broken(error.to_string()),
        };
        if answer.compact_revision() > 0 {
            return End::Compacted(answer.compact_revision());
        }
        if answer.canceled() {
            return End::Broken(format!("watch canceled: {}", answer.cancel_reason()));
        }
        if answer.created() {
            *failures = 0;
        }
        if let Some(end) = f.answer(&answer) {
            return end;
        }
    }
}
