//! `StreamService` from idl/stream.thrift, with the semantics written in the IDL: the
//! ping-pong `echo` and the three streams every streaming example, benchmark and
//! Kitex interop check runs.

use std::time::Duration;

use thrift_wire::Utf8Bytes;
use volo_core::client::{ClientContext, ClientRequest, ClientResponse, Error};
use volo_core::context::ServerContext;
use volo_core::server::{ServerError, StreamContext};
use volo_core::service::Service;
use volo_core::stream::{BizStatus, HandlerError, Metadata, Receiver, Sender, StreamError};

use crate::stream::{
    Request, Response, StreamService, StreamServiceClient, StreamServiceStream,
    StreamServiceStreamClient,
};

/// The header key whose value a stream's server header carries back.
pub const ECHO_KEY: &str = "x-echo";

/// The service (ping-pong and streams alike).
#[derive(Debug, Clone, Copy, Default)]
pub struct Streams;

fn answer(req: &Request) -> Response {
    Response {
        action: req.action.clone(),
        msg: req.msg.clone(),
    }
}

/// The business status a request with action `bizfail` ends its stream with.
pub const BIZ_STATUS: i32 = 1001;

/// The error a request with action `fail` (or `bizfail`) ends its stream with, if
/// it asks for one.
fn failure(req: &Request) -> Option<HandlerError> {
    match req.action.as_str() {
        "fail" => Some(HandlerError::internal(req.msg.to_string())),
        "bizfail" => Some(HandlerError::Biz(BizStatus {
            code: BIZ_STATUS,
            message: req.msg.to_string(),
            extra: None,
        })),
        _ => None,
    }
}

/// Sends back the client's `x-echo`, if any, in the server's header.
fn echo_header(cx: &StreamContext) {
    if let Some(v) = cx.header().get(ECHO_KEY) {
        let mut h = Metadata::new();
        h.insert(ECHO_KEY, v);
        cx.set_header(h);
    }
}

impl StreamService for Streams {
    async fn echo(
        &self,
        _cx: &mut ServerContext,
        req: Request,
    ) -> Result<Response, ServerError<std::convert::Infallible>> {
        Ok(answer(&req))
    }
}

impl StreamServiceStream for Streams {
    async fn server_echo(
        &self,
        cx: &StreamContext,
        req: Request,
        mut tx: Sender<Response>,
    ) -> Result<(), HandlerError> {
        echo_header(cx);
        let reply = answer(&req);
        for _ in 0..req.count.max(0) {
            if req.action.as_str() == "slow" {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tx.send(&reply).await?;
        }
        match failure(&req) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    async fn client_count(
        &self,
        cx: &StreamContext,
        mut rx: Receiver<Request>,
    ) -> Result<Response, HandlerError> {
        echo_header(cx);
        let mut n = 0u64;
        while let Some(req) = rx.recv().await? {
            if let Some(e) = failure(&req) {
                return Err(e);
            }
            n += 1;
        }
        Ok(Response {
            action: Utf8Bytes::from_static("received"),
            msg: Utf8Bytes::from(n.to_string()),
        })
    }

    async fn bidi_echo(
        &self,
        cx: &StreamContext,
        mut rx: Receiver<Request>,
        mut tx: Sender<Response>,
    ) -> Result<(), HandlerError> {
        echo_header(cx);
        while let Some(req) = rx.recv().await? {
            if let Some(e) = failure(&req) {
                return Err(e);
            }
            tx.send(&answer(&req)).await?;
        }
        Ok(())
    }
}

/// One check of [`check_peer`]: its name, and why it failed.
pub type Check = (&'static str, Result<(), String>);

fn request(action: &str, msg: &str, count: i32) -> Request {
    Request {
        action: Utf8Bytes::from(action.to_owned()),
        msg: Utf8Bytes::from(msg.to_owned()),
        count,
    }
}

/// Why a check failed.
struct Why(String);

impl<E: std::fmt::Display> From<E> for Why {
    fn from(e: E) -> Self {
        Why(e.to_string())
    }
}

fn expect(cond: bool, why: impl FnOnce() -> String) -> Result<(), Why> {
    if cond { Ok(()) } else { Err(Why(why())) }
}

/// Sends `n` requests of `body` on a client stream and closes it: the answer.
async fn count_up(c: &StreamServiceStreamClient, n: i32, body: &str) -> Result<Response, Why> {
    let mut s = c.client_count().await?;
    for i in 0..n {
        s.send(&request("up", body, i)).await?;
    }
    s.close_send().await?;
    let r = s.recv().await?.ok_or("no answer")?;
    let end = s.recv().await?;
    expect(end.is_none(), || format!("more after the answer: {end:?}"))?;
    Ok(r)
}

/// Runs the interop checks of a `StreamService` server (ours or Kitex's): a
/// ping-pong `echo` with `calls`; with `c`, server, client and bidirectional streams,
/// metadata, a cancelled stream, errors in trailers (an exception and a business
/// status); with `slow`, whose streams have a deadline under 500 ms, a passed
/// deadline (a server stream of 5 answers 100 ms apart). A check that does not end
/// is cut by `limit`.
pub async fn check_peer<T>(
    calls: &StreamServiceClient<T>,
    c: &StreamServiceStreamClient,
    slow: &StreamServiceStreamClient,
) -> Vec<Check>
where
    T: Service<ClientContext, ClientRequest, Response = ClientResponse, Error = Error>,
{
    let limit = Duration::from_secs(10);
    let mut out: Vec<Check> = Vec::new();
    macro_rules! check {
        ($name:expr, $body:expr) => {
            let r: Result<(), Why> = match tokio::time::timeout(limit, async { $body }).await {
                Ok(r) => r,
                Err(_) => Err(Why(format!("no end within {limit:?}"))),
            };
            let r = r.map_err(|w| w.0);
            out.push(($name, r));
        };
    }
    check!("pingpong", {
        let r = calls.echo(request("ping", "pong", 0)).await?;
        expect(
            r.action.as_str() == "ping" && r.msg.as_str() == "pong",
            || format!("{r:?}"),
        )
    });
    check!("server_stream", {
        let mut rx = c.server_echo(&request("push", "five", 5)).await?;
        let mut n = 0;
        while let Some(r) = rx.recv().await? {
            expect(
                r.action.as_str() == "push" && r.msg.as_str() == "five",
                || format!("{r:?}"),
            )?;
            n += 1;
        }
        expect(n == 5, || format!("{n} answers"))
    });
    check!("client_stream", {
        let r = count_up(c, 7, "up").await?;
        expect(
            r.action.as_str() == "received" && r.msg.as_str() == "7",
            || format!("{r:?}"),
        )
    });
    check!("client_stream_large", {
        // 1 MiB: past the credit a client may spend before it knows whether the
        // server grants a window (a Kitex server grants none).
        let r = count_up(c, 1024, &"l".repeat(1024)).await?;
        expect(r.msg.as_str() == "1024", || format!("{r:?}"))
    });
    check!("bidi", {
        let (mut tx, mut rx) = c.bidi_echo().await?.split();
        let body = "b".repeat(1024);
        let sending = tokio::spawn(async move {
            for i in 0..100 {
                tx.send(&request(&i.to_string(), &body, 0)).await?;
            }
            tx.close_send().await
        });
        for i in 0..100 {
            let r = rx.recv().await?.ok_or("an early end")?;
            expect(
                r.action.as_str() == i.to_string() && r.msg.len() == 1024,
                || format!("answer {i}: action {} msg {} bytes", r.action, r.msg.len()),
            )?;
        }
        sending.await??;
        let end = rx.recv().await?;
        expect(end.is_none(), || "more after the echoes".into())
    });
    check!("metadata", {
        let mut h = Metadata::new();
        h.insert(ECHO_KEY, "hello");
        let mut s = c.bidi_echo_with(&h).await?;
        s.send(&request("m", "m", 0)).await?;
        s.recv().await?.ok_or("no echo")?;
        let got = s.header().await?;
        s.close_send().await?;
        expect(got.get(ECHO_KEY) == Some("hello"), || {
            format!("the server's header: {got:?}")
        })
    });
    check!("cancel", {
        let mut s = c.bidi_echo().await?;
        s.send(&request("c", "c", 0)).await?;
        s.recv().await?.ok_or("no echo")?;
        // Dropped mid-stream: an rst. The next stream on the connection still works.
        drop(s);
        let mut next = c.bidi_echo().await?;
        next.send(&request("n", "n", 0)).await?;
        let r = next.recv().await?.ok_or("no echo")?;
        next.close_send().await?;
        expect(r.msg.as_str() == "n", || format!("{r:?}"))
    });
    check!("trailer_error", {
        let mut s = c.bidi_echo().await?;
        s.send(&request("fail", "boom", 0)).await?;
        match s.recv().await {
            Err(StreamError::Application(e)) if e.message.contains("boom") => Ok(()),
            other => Err(Why(format!("{other:?}"))),
        }
    });
    check!("trailer_bizerror", {
        let mut s = c.bidi_echo().await?;
        s.send(&request("bizfail", "biz boom", 0)).await?;
        match s.recv().await {
            Err(StreamError::Biz(b)) if b.code == BIZ_STATUS && b.message == "biz boom" => Ok(()),
            other => Err(Why(format!("{other:?}"))),
        }
    });
    check!("server_stream_fail", {
        let mut rx = c.server_echo(&request("fail", "late", 2)).await?;
        let mut n = 0;
        let end = loop {
            match rx.recv().await {
                Ok(Some(_)) => n += 1,
                other => break other,
            }
        };
        match end {
            Err(StreamError::Application(e)) if n == 2 && e.message.contains("late") => Ok(()),
            other => Err(Why(format!("{n} answers, then {other:?}"))),
        }
    });
    check!("client_stream_fail", {
        let mut s = c.client_count().await?;
        s.send(&request("up", "1", 0)).await?;
        s.send(&request("fail", "no count", 0)).await?;
        match s.recv().await {
            Err(StreamError::Application(e)) if e.message.contains("no count") => Ok(()),
            other => Err(Why(format!("{other:?}"))),
        }
    });
    check!("deadline", {
        let mut rx = slow.server_echo(&request("slow", "z", 5)).await?;
        let end = loop {
            match rx.recv().await {
                Ok(Some(_)) => {}
                other => break other,
            }
        };
        expect(end == Err(StreamError::DeadlineExceeded), || {
            format!("{end:?}")
        })
    });
    out
}
