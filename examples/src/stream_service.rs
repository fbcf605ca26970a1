//! `StreamService` from idl/stream.thrift, with the semantics written in the IDL: the
//! ping-pong `echo` and the three streams every streaming example, benchmark and
//! Kitex interop check runs.

use std::time::Duration;

use thrift_codec::Utf8Bytes;
use volo_core::context::ServerContext;
use volo_core::server::{ServerError, StreamContext};
use volo_core::stream::{HandlerError, Metadata, Receiver, Sender};

use crate::stream::{Request, Response, StreamService, StreamServiceStream};

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

/// The error a request with action `fail` ends its stream with.
fn failed(req: &Request) -> HandlerError {
    HandlerError::internal(req.msg.to_string())
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
        if req.action.as_str() == "fail" {
            return Err(failed(&req));
        }
        Ok(())
    }

    async fn client_count(
        &self,
        cx: &StreamContext,
        mut rx: Receiver<Request>,
    ) -> Result<Response, HandlerError> {
        echo_header(cx);
        let mut n = 0u64;
        while let Some(req) = rx.recv().await? {
            if req.action.as_str() == "fail" {
                return Err(failed(&req));
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
            if req.action.as_str() == "fail" {
                return Err(failed(&req));
            }
            tx.send(&answer(&req)).await?;
        }
        Ok(())
    }
}
