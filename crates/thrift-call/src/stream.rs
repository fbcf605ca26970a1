//! A stream of a streaming method (see the [crate docs](crate#streams)): requests in,
//! one JSON object a line, and responses out, one a line, as they come.

use std::io::{self, BufRead};
use std::pin::pin;
use std::time::Duration;

use thrift_dynamic::{Descriptor, StreamingMode};
use thrift_generic::{GenericError, GenericStreamClient, JsonReceiver, JsonSender};
use tokio::sync::mpsc;
use volo_core::client::{Client, ClientConfig, RetryPolicy};
use volo_core::context::{Address, PREFIX_TRANSIENT};
use volo_core::stream::Metadata;

use crate::call::{Failed, print};
use crate::failure::Failure;

/// Where the requests of a client or bidirectional stream come from.
pub(crate) enum Requests {
    /// The JSON argument's lines.
    Given(Vec<u8>),
    /// stdin's lines, read as they come.
    Stdin,
}

/// One stream, everything about it settled.
pub(crate) struct StreamCall {
    pub(crate) desc: Descriptor,
    /// As the user spelled it (bare or qualified).
    pub(crate) service: String,
    /// Its name in the IDL, as the server is told it.
    pub(crate) bare_service: String,
    pub(crate) method: String,
    pub(crate) mode: StreamingMode,
    pub(crate) addr: Address,
    pub(crate) config: ClientConfig,
    /// The stream's deadline, from its opening.
    pub(crate) timeout: Duration,
    pub(crate) meta: Vec<(String, String)>,
    /// A server stream's one request (the JSON argument, or all of stdin).
    pub(crate) request: Vec<u8>,
    pub(crate) requests: Requests,
}

impl StreamCall {
    /// Runs the stream to its end (inside the runtime: the client's transport needs
    /// it), printing each response as it comes.
    pub(crate) async fn run(self) -> Result<(), Failed> {
        // Opened through the client stack as a call is made (made once: a failure is
        // shown as it happened).
        let stack = Client::builder(self.bare_service)
            .address(self.addr)
            .config(self.config)
            .retry(RetryPolicy::new().max_retries(0))
            .build()
            .map_err(|e| Failed::Judged(Failure::usage(format!("making the client: {e}"))))?;
        let client = GenericStreamClient::from_client(stack, self.desc, &self.service)?
            .with_timeout(self.timeout);
        let mut header = Metadata::new();
        for (k, v) in self.meta {
            header.insert(format!("{PREFIX_TRANSIENT}{k}"), v);
        }
        if self.mode == StreamingMode::Server {
            let rx = client
                .server_stream_json(&self.method, &header, &self.request)
                .await?;
            return print_responses(rx).await;
        }
        let (tx, rx) = client.open_json(&self.method, &header).await?.split();
        let lines = match self.requests {
            Requests::Given(text) => Lines::given(text),
            Requests::Stdin => Lines::stdin(),
        };
        let mut receiving = pin!(print_responses(rx));
        let sending = send_lines(tx, lines);
        tokio::select! {
            // The stream ended (cleanly or not): the requests left are not read.
            received = &mut receiving => received,
            sent = sending => match sent {
                // All sent: the responses still to come.
                Ok(()) => receiving.await,
                Err(Failed::Call(e)) => match receiving.await {
                    // A send fails once the stream is over: its end says why.
                    Err(end) => Err(end),
                    Ok(()) => Err(Failed::Call(e)),
                },
                // A line that is not a request: the stream is cancelled.
                Err(judged) => Err(judged),
            },
        }
    }
}

/// Prints each response on a line of its own as it comes, until the stream ends.
async fn print_responses(mut rx: JsonReceiver) -> Result<(), Failed> {
    while let Some(json) = rx.recv().await? {
        print(&json).map_err(Failed::Judged)?;
    }
    Ok(())
}

/// Sends each line that is not blank as a request, as it is read; ends the requests
/// at the end of the input. A line that does not fit is a failure that names it.
async fn send_lines(mut tx: JsonSender, mut lines: Lines) -> Result<(), Failed> {
    let mut number = 0;
    while let Some(line) = lines.next().await {
        number += 1;
        let line = line.map_err(|e| {
            Failed::Judged(Failure::usage(format!(
                "reading the requests from stdin: {e}"
            )))
        })?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match tx.send(&line).await {
            Ok(()) => {}
            Err(e @ (GenericError::JsonMessage { .. } | GenericError::SecondRequest { .. })) => {
                let mut failure = Failure::from_call(e);
                failure.message = format!("line {number}: {}", failure.message);
                return Err(Failed::Judged(failure));
            }
            Err(e) => return Err(Failed::Call(e)),
        }
    }
    tx.close_send().await.map_err(Failed::Call)
}

/// The input's lines, each with its line end.
enum Lines {
    Given(std::vec::IntoIter<Vec<u8>>),
    Stdin(mpsc::Receiver<io::Result<Vec<u8>>>),
}

impl Lines {
    fn given(text: Vec<u8>) -> Lines {
        let lines: Vec<Vec<u8>> = text.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        Lines::Given(lines.into_iter())
    }

    /// stdin's lines, read on a thread of their own: a read that blocks (a terminal
    /// no one types into) holds no runtime thread, and does not keep the program
    /// from exiting once the stream is over.
    fn stdin() -> Lines {
        let (tx, rx) = mpsc::channel(16);
        let spawned = std::thread::Builder::new()
            .name("stdin".into())
            .spawn(move || {
                let mut stdin = io::stdin().lock();
                loop {
                    let mut line = Vec::new();
                    let read = match stdin.read_until(b'\n', &mut line) {
                        Ok(0) => break,
                        Ok(_) => Ok(line),
                        Err(e) => Err(e),
                    };
                    let failed = read.is_err();
                    if tx.blocking_send(read).is_err() || failed {
                        break;
                    }
                }
            });
        if let Err(e) = spawned {
            let (tx, rx) = mpsc::channel(1);
            let _ = tx.try_send(Err(e));
            return Lines::Stdin(rx);
        }
        Lines::Stdin(rx)
    }

    async fn next(&mut self) -> Option<io::Result<Vec<u8>>> {
        match self {
            Lines::Given(lines) => lines.next().map(Ok),
            Lines::Stdin(rx) => rx.recv().await,
        }
    }
}
