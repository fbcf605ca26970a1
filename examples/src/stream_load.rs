//! `stream-check --load N`: bidirectional streams kept going through a generated
//! client's stack, and what became of each.
//!
//! [`run`] keeps [`StreamLoad::streams`] `bidi_echo` streams going at once, each on a
//! task of its own, for [`StreamLoad::duration`]: a task opens a stream through the
//! client (discovery, balancing, breakers, the retry of an opening that never left),
//! sends [`StreamLoad::messages`] requests of [`StreamLoad::size`] bytes, each echo
//! awaited and checked before the next request, closes its side, reads the server's
//! clean end, and opens the next stream. A stream under way when the window ends runs
//! to its end (bounded by the client's stream deadline, [`STREAM_DEADLINE`] in
//! `stream-check`).
//!
//! Each stream ends one way ([`Ending`]), counted in the [`LoadReport`] overall and
//! for the instance it was on:
//!
//! - **done**: every echo came back right, then the server's clean end;
//! - **open failure**: the opening returned an error. An opening the stack retried
//!   and then opened elsewhere is no failure: the attempt on the instance that
//!   refused it is an attempt failed, which [`crate::attempts`] counts;
//! - **broken**: the stream's connection failed after it opened
//!   ([`StreamError::Connection`]): its instance was lost under it;
//! - **error**: anything else (a wrong echo, a reset, an error in the trailer, the
//!   deadline).
//!
//! Every stream that did not end done is also told on stderr as it ends:
//! `stream-check: <open_failure|broken|error> instance=<addr> unix_ms=<n>
//! echoes=<n>: <why>` (`instance=none` when no instance was picked).
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use examples::stream::StreamServiceClient;
//! use examples::stream_load::{self, StreamLoad};
//!
//! let client = StreamServiceClient::builder()
//!     .address("127.0.0.1:9001".parse().unwrap())
//!     .build()?;
//! let report = stream_load::run(client, StreamLoad::new(100)).await;
//! println!("{}", report.line()); // streams opened=.. open_failures=.. broken=.. msgs=.. errors=..
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use thrift_wire::Utf8Bytes;
use tokio::time::Instant;
use volo_core::client::{ClientContext, Error, OpenedStream, StreamRequest};
use volo_core::service::Service;
use volo_core::stream::{Metadata, StreamError};

use crate::attempts::{InstanceCounts, unix_ms};
use crate::stream::{Request, StreamServiceClient};

/// Echoes on each stream before it is closed and the next one opened.
pub const MESSAGES: usize = 32;

/// Bytes of each request's `msg`.
pub const SIZE: usize = 1024;

/// The deadline `stream-check` gives each stream (the client's
/// [`ClientStreams::timeout`](volo_core::client::ClientStreams::timeout)): a stream
/// that hangs ends as an error, and the run ends.
pub const STREAM_DEADLINE: Duration = Duration::from_secs(10);

/// What [`run`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLoad {
    /// Streams at once.
    pub streams: usize,
    /// How long new streams are opened.
    pub duration: Duration,
    /// Echoes per stream ([`MESSAGES`] by default).
    pub messages: usize,
    /// Bytes of each request's `msg` ([`SIZE`] by default).
    pub size: usize,
}

impl StreamLoad {
    /// `streams` at once for 10 s, of [`MESSAGES`] echoes of [`SIZE`] bytes each.
    pub fn new(streams: usize) -> Self {
        StreamLoad {
            streams,
            duration: Duration::from_secs(10),
            messages: MESSAGES,
            size: SIZE,
        }
    }

    /// Sets how long new streams are opened.
    pub fn duration(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }
}

/// How one stream ended, with the instance it was on (or the one its opening
/// failed on) and the echoes it got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    /// What became of it.
    pub kind: EndingKind,
    /// Its instance, when one was picked.
    pub instance: Option<String>,
    /// Echoes that came back right.
    pub echoes: u64,
    /// Why, when it did not end done.
    pub why: Option<String>,
}

/// What became of a stream (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndingKind {
    /// Every echo, then the server's clean end.
    Done,
    /// The opening returned an error.
    OpenFailure,
    /// Its connection failed after it opened.
    Broken,
    /// Any other failure.
    Error,
}

impl EndingKind {
    /// How a stream that opened ends when it fails with `e`: broken when its
    /// connection failed, an error otherwise.
    pub fn of(e: &StreamError) -> EndingKind {
        match e {
            StreamError::Connection { .. } => EndingKind::Broken,
            _ => EndingKind::Error,
        }
    }

    /// Its name on stderr.
    pub fn name(self) -> &'static str {
        match self {
            EndingKind::Done => "done",
            EndingKind::OpenFailure => "open_failure",
            EndingKind::Broken => "broken",
            EndingKind::Error => "error",
        }
    }
}

/// One instance's streams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InstanceTally {
    /// Streams opened on it.
    pub opened: u64,
    /// Openings that failed on it.
    pub open_failures: u64,
    /// Streams cut by its connection's failure.
    pub broken: u64,
    /// Streams that failed otherwise.
    pub errors: u64,
}

/// What a run did: its streams overall and per instance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Streams opened.
    pub opened: u64,
    /// Openings that returned an error.
    pub open_failures: u64,
    /// Streams cut by a lost instance.
    pub broken: u64,
    /// Echoes that came back right.
    pub msgs: u64,
    /// Streams that failed otherwise.
    pub errors: u64,
    /// Per instance (its address; `none` for openings that picked none).
    pub instances: BTreeMap<String, InstanceTally>,
}

impl LoadReport {
    /// Counts `ending`.
    pub fn record(&mut self, ending: &Ending) {
        let instance = ending.instance.as_deref().unwrap_or("none");
        let tally = self.instances.entry(instance.to_string()).or_default();
        self.msgs += ending.echoes;
        if ending.kind != EndingKind::OpenFailure {
            self.opened += 1;
            tally.opened += 1;
        }
        match ending.kind {
            EndingKind::Done => {}
            EndingKind::OpenFailure => {
                self.open_failures += 1;
                tally.open_failures += 1;
            }
            EndingKind::Broken => {
                self.broken += 1;
                tally.broken += 1;
            }
            EndingKind::Error => {
                self.errors += 1;
                tally.errors += 1;
            }
        }
    }

    /// `streams opened=<n> open_failures=<n> broken=<n> msgs=<n> errors=<n>`.
    pub fn line(&self) -> String {
        format!(
            "streams opened={} open_failures={} broken={} msgs={} errors={}",
            self.opened, self.open_failures, self.broken, self.msgs, self.errors
        )
    }

    /// Whether no opening failed and no stream failed but by a lost instance.
    pub fn passed(&self) -> bool {
        self.open_failures == 0 && self.errors == 0
    }

    /// One line per instance, those `attempts` knows in its order first:
    /// `instance=<addr> opened=<n> open_failures=<n> broken=<n> errors=<n>
    /// attempts_failed=<n> first_unix_ms=<n> last_unix_ms=<n>`, where the attempts are
    /// the openings tried on it (those retried elsewhere included) and the times are
    /// when its first and last attempts ended (0: none).
    pub fn instance_lines(&self, attempts: &InstanceCounts) -> Vec<String> {
        let tried = attempts.snapshot();
        let rest = self
            .instances
            .keys()
            .filter(|a| !tried.iter().any(|(t, _)| t == *a))
            .map(|a| (a.clone(), Default::default()));
        tried
            .clone()
            .into_iter()
            .chain(rest)
            .map(|(addr, c)| {
                let t = self.instances.get(&addr).copied().unwrap_or_default();
                format!(
                    "instance={addr} opened={} open_failures={} broken={} errors={} \
                     attempts_failed={} first_unix_ms={} last_unix_ms={}",
                    t.opened,
                    t.open_failures,
                    t.broken,
                    t.errors,
                    c.failed,
                    c.first_unix_ms,
                    c.last_unix_ms
                )
            })
            .collect()
    }
}

/// Keeps `load.streams` bidirectional streams going through `client` for
/// `load.duration` (see the module docs), and reports.
pub async fn run<T>(client: StreamServiceClient<T>, load: StreamLoad) -> LoadReport
where
    T: Service<ClientContext, StreamRequest, Response = OpenedStream, Error = Error>
        + Send
        + Sync
        + 'static,
{
    let report = Arc::new(Mutex::new(LoadReport::default()));
    let end = Instant::now() + load.duration;
    let body = Utf8Bytes::from("s".repeat(load.size));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..load.streams {
        let (client, body, report) = (client.clone(), body.clone(), Arc::clone(&report));
        tasks.spawn(async move {
            while Instant::now() < end {
                let ending = one_stream(&client, &body, load.messages).await;
                if let Some(why) = &ending.why {
                    eprintln!(
                        "stream-check: {} instance={} unix_ms={} echoes={}: {why}",
                        ending.kind.name(),
                        ending.instance.as_deref().unwrap_or("none"),
                        unix_ms(),
                        ending.echoes
                    );
                }
                report
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .record(&ending);
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        if let Err(e) = done
            && e.is_panic()
        {
            std::panic::resume_unwind(e.into_panic());
        }
    }
    let report = report.lock().unwrap_or_else(PoisonError::into_inner);
    report.clone()
}

/// Opens one stream, echoes `messages` requests of `body` on it, closes it.
async fn one_stream<T>(client: &StreamServiceClient<T>, body: &Utf8Bytes, messages: usize) -> Ending
where
    T: Service<ClientContext, StreamRequest, Response = OpenedStream, Error = Error>,
{
    let mut cx = ClientContext::new();
    let mut stream = match client.bidi_echo_with(&mut cx, Metadata::new()).await {
        Ok(s) => s,
        Err(e) => {
            let instance = match &e {
                StreamError::Open { instance, .. } => instance.as_ref().map(ToString::to_string),
                _ => None,
            };
            return Ending {
                kind: EndingKind::OpenFailure,
                instance,
                echoes: 0,
                why: Some(e.to_string()),
            };
        }
    };
    let instance = cx.rpc.callee.address.as_ref().map(ToString::to_string);
    let mut echoes = 0;
    let failed = |kind, echoes, why: String| Ending {
        kind,
        instance: instance.clone(),
        echoes,
        why: Some(why),
    };
    for i in 0..messages {
        let action = Utf8Bytes::from(i.to_string());
        let req = Request {
            action: action.clone(),
            msg: body.clone(),
            count: 0,
        };
        let echoed = match stream.send(&req).await {
            Ok(()) => stream.recv().await,
            Err(e) => Err(e),
        };
        match echoed {
            Ok(Some(r)) if r.action == action && r.msg == *body => echoes += 1,
            Ok(Some(r)) => {
                let why = format!("echo {i}: action {} and {} bytes", r.action, r.msg.len());
                return failed(EndingKind::Error, echoes, why);
            }
            Ok(None) => {
                let why = format!("the server ended the stream after {i} echoes");
                return failed(EndingKind::Error, echoes, why);
            }
            Err(e) => return failed(EndingKind::of(&e), echoes, e.to_string()),
        }
    }
    let end = match stream.close_send().await {
        Ok(()) => stream.recv().await,
        Err(e) => Err(e),
    };
    match end {
        Ok(None) => Ending {
            kind: EndingKind::Done,
            instance,
            echoes,
            why: None,
        },
        Ok(Some(r)) => failed(
            EndingKind::Error,
            echoes,
            format!("more after the echoes: {r:?}"),
        ),
        Err(e) => failed(EndingKind::of(&e), echoes, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ending(kind: EndingKind, instance: Option<&str>, echoes: u64) -> Ending {
        Ending {
            kind,
            instance: instance.map(str::to_string),
            echoes,
            why: None,
        }
    }

    #[test]
    fn a_connection_failure_is_broken_and_the_rest_errors() {
        let lost = StreamError::Connection {
            kind: std::io::ErrorKind::ConnectionReset,
            message: "reset".into(),
        };
        assert_eq!(EndingKind::of(&lost), EndingKind::Broken);
        for other in [
            StreamError::DeadlineExceeded,
            StreamError::Cancelled("gone".into()),
            StreamError::Refused("full".into()),
        ] {
            assert_eq!(EndingKind::of(&other), EndingKind::Error, "{other:?}");
        }
    }

    #[test]
    fn endings_count_overall_and_per_instance() {
        let (a, b) = ("127.0.0.1:1", "127.0.0.1:2");
        let mut report = LoadReport::default();
        for e in [
            ending(EndingKind::Done, Some(a), 32),
            ending(EndingKind::Broken, Some(a), 5),
            ending(EndingKind::Done, Some(b), 32),
            ending(EndingKind::Error, Some(b), 0),
            ending(EndingKind::OpenFailure, None, 0),
        ] {
            report.record(&e);
        }
        assert_eq!(
            report.line(),
            "streams opened=4 open_failures=1 broken=1 msgs=69 errors=1"
        );
        assert!(!report.passed());
        // The instances the attempts know first, in their order, then the others.
        let known: volo_core::context::Address = b.parse().expect("an address");
        let lines: Vec<String> = report
            .instance_lines(&InstanceCounts::new([&known]))
            .iter()
            .map(|l| {
                l.split(" attempts_failed=")
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        assert_eq!(
            lines,
            [
                "instance=127.0.0.1:2 opened=2 open_failures=0 broken=0 errors=1",
                "instance=127.0.0.1:1 opened=2 open_failures=0 broken=1 errors=0",
                "instance=none opened=0 open_failures=1 broken=0 errors=0",
            ]
        );
    }

    #[test]
    fn a_clean_run_passes_with_streams_broken_by_a_lost_instance() {
        let mut report = LoadReport::default();
        report.record(&ending(EndingKind::Done, Some("127.0.0.1:1"), 32));
        report.record(&ending(EndingKind::Broken, Some("127.0.0.1:2"), 3));
        assert!(report.passed(), "{}", report.line());
    }
}
