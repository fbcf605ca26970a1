//! A streaming method behind `POST /{service}/{method}` (see the [gateway
//! docs](super#streams)): requests from an NDJSON body, responses as an NDJSON body
//! written as they come, or one JSON reply for a client stream.
//!
//! Two tasks drive a stream: one sends the body's lines as they arrive (client and
//! bidirectional streams), one takes the responses. Both tell the answer what
//! happened through one bounded channel, so a slow HTTP client holds the responses
//! back (and the stream's flow control with them) instead of queueing them. The
//! answer owns the tasks: when it is done with (sent, or its HTTP client gone), they
//! are aborted, and a stream not yet ended is cancelled with them.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use futures_util::StreamExt;
use thrift_dynamic::StreamingMode;
use thrift_generic::{GenericError, JsonReceiver, JsonSender};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use volo_core::client::ErrorKind;
use volo_core::stream::Metadata;

use super::{Failure, JSON, NDJSON, Shared, failure, judge};

/// The most bytes one line of an NDJSON request body may hold: the limit axum puts
/// on a whole call's body.
const MAX_LINE: usize = 2 * 1024 * 1024;

/// What a stream's tasks tell its answer.
enum Event {
    /// A response, as JSON.
    Response(Bytes),
    /// The stream's end: clean, or why not.
    End(Result<(), Failure>),
}

/// A stream's tasks, aborted when dropped.
struct Tasks(Vec<AbortHandle>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Serves one stream of `method`, a streaming method of `mode`.
pub(super) async fn serve(
    shared: &Shared,
    service: String,
    method: String,
    mode: StreamingMode,
    request: Request,
) -> Response {
    let client = match shared.stream_client(&service) {
        Ok(c) => c,
        Err(f) => return failure(&service, &method, f),
    };
    let header = Metadata::new();
    let (tell, events) = mpsc::channel(16);
    let mut tasks = Vec::new();
    let rx = if mode == StreamingMode::Server {
        // The one request: the whole body, as a call's arguments.
        let body = match Bytes::from_request(request, &()).await {
            Ok(body) => body,
            Err(rejection) => return rejection.into_response(),
        };
        match client.server_stream_json(&method, &header, &body).await {
            Ok(rx) => rx,
            Err(e) => return failure(&service, &method, Failure::Call(e)),
        }
    } else {
        let (tx, rx) = match client.open_json(&method, &header).await {
            Ok(stream) => stream.split(),
            Err(e) => return failure(&service, &method, Failure::Call(e)),
        };
        let pumping = pump(tx, request.into_body(), tell.clone());
        tasks.push(tokio::spawn(pumping).abort_handle());
        rx
    };
    tasks.push(tokio::spawn(receive(rx, tell)).abort_handle());
    let answer = Answer {
        service,
        method,
        events,
        _tasks: Tasks(tasks),
    };
    match mode {
        StreamingMode::Client => answer.one_response().await,
        _ => answer.responses().await,
    }
}

/// Sends the lines of `body` as they come, then ends the requests; tells of a line
/// that is not a request (the answer then ends, and the stream is cancelled).
async fn pump(mut tx: JsonSender, body: Body, tell: mpsc::Sender<Event>) {
    match send_lines(&mut tx, body).await {
        // A failure to end the requests means the stream is over: `receive` says why.
        Ok(()) => drop(tx.close_send().await),
        // A send failed because the stream is over: `receive` says why.
        Err(Failure::Call(_)) => {}
        Err(f) => drop(tell.send(Event::End(Err(f))).await),
    }
}

/// Sends each line of `body` that is not blank as a request, as it comes (the last
/// one without its line end too).
async fn send_lines(tx: &mut JsonSender, body: Body) -> Result<(), Failure> {
    let mut data = body.into_data_stream();
    let mut buf = BytesMut::new();
    let mut number = 0;
    // Bytes of `buf` known to hold no line end.
    let mut scanned = 0;
    loop {
        while let Some(at) = buf[scanned..].iter().position(|&b| b == b'\n') {
            let line = buf.split_to(scanned + at + 1);
            scanned = 0;
            number += 1;
            send_line(tx, number, &line[..line.len() - 1]).await?;
        }
        scanned = buf.len();
        if buf.len() > MAX_LINE {
            return Err(Failure::Body(format!(
                "line {} is longer than {MAX_LINE} bytes",
                number + 1
            )));
        }
        match data.next().await {
            Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
            Some(Err(e)) => return Err(Failure::Body(format!("reading the request body: {e}"))),
            None => break,
        }
    }
    if buf.is_empty() {
        return Ok(());
    }
    send_line(tx, number + 1, &buf).await
}

/// Sends line `number` as a request, unless it is blank.
async fn send_line(tx: &mut JsonSender, number: usize, line: &[u8]) -> Result<(), Failure> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    match tx.send(line).await {
        Ok(()) => Ok(()),
        // Nothing was sent, and the stream goes on: the line is at fault.
        Err(e @ (GenericError::JsonMessage { .. } | GenericError::SecondRequest { .. })) => {
            Err(Failure::Line {
                number,
                error: Box::new(e),
            })
        }
        Err(GenericError::Call(e)) if e.kind() == ErrorKind::Encode => Err(Failure::Line {
            number,
            error: Box::new(GenericError::Call(e)),
        }),
        Err(e) => Err(Failure::Call(e)),
    }
}

/// Takes the responses, and tells of each and of the end.
async fn receive(mut rx: JsonReceiver, tell: mpsc::Sender<Event>) {
    loop {
        let event = match rx.recv().await {
            Ok(Some(json)) => Event::Response(json),
            Ok(None) => Event::End(Ok(())),
            Err(e) => Event::End(Err(Failure::Call(e))),
        };
        let end = matches!(event, Event::End(_));
        if tell.send(event).await.is_err() || end {
            return;
        }
    }
}

/// The answer of one stream, from what its tasks tell.
struct Answer {
    service: String,
    method: String,
    events: mpsc::Receiver<Event>,
    _tasks: Tasks,
}

impl Answer {
    /// A client stream's answer: its one response as JSON, once the stream ended
    /// cleanly; a failure's answer otherwise.
    async fn one_response(mut self) -> Response {
        let mut response = None;
        loop {
            match self.events.recv().await {
                Some(Event::Response(json)) => {
                    response.get_or_insert(json);
                }
                Some(Event::End(Ok(()))) | None => break,
                Some(Event::End(Err(f))) => return failure(&self.service, &self.method, f),
            }
        }
        match response {
            Some(json) => (StatusCode::OK, [(CONTENT_TYPE, JSON)], json).into_response(),
            None => {
                let e = GenericError::MissingResult(self.method.clone());
                failure(&self.service, &self.method, Failure::Call(e))
            }
        }
    }

    /// A server or bidirectional stream's answer: NDJSON, a line a response as it
    /// comes, once the first one came; a failure's answer if the stream failed
    /// before, a last line with the failure's error object if after.
    async fn responses(mut self) -> Response {
        let first = match self.events.recv().await {
            Some(Event::Response(json)) => json,
            Some(Event::End(Ok(()))) | None => return ndjson(Body::empty()),
            Some(Event::End(Err(f))) => return failure(&self.service, &self.method, f),
        };
        let rest = futures_util::stream::unfold(Some(self), |answer| async move {
            let mut answer = answer?;
            match answer.events.recv().await {
                Some(Event::Response(json)) => Some((line(&json), Some(answer))),
                Some(Event::End(Ok(()))) | None => None,
                Some(Event::End(Err(f))) => {
                    let error = judge(&answer.service, &answer.method, f);
                    Some((line(&error.body), None))
                }
            }
        });
        let lines = futures_util::stream::once(async move { line(&first) }).chain(rest);
        ndjson(Body::from_stream(lines.map(Ok::<_, Infallible>)))
    }
}

/// `json` and a line end, one chunk of the answer.
fn line(json: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 1);
    out.extend_from_slice(json);
    out.push(b'\n');
    Bytes::from(out)
}

/// A 200 answer of NDJSON.
fn ndjson(body: Body) -> Response {
    (StatusCode::OK, [(CONTENT_TYPE, NDJSON)], body).into_response()
}
